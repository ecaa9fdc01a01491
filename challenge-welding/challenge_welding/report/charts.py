"""Charts of the detailed results page, drawn with matplotlib and returned as inline SVG text.

Figures are built with `matplotlib.figure.Figure` (no pyplot: no global state, no GUI
backend). Text stays text (svg.fonttype none: small files, the browser's sans-serif), ids
are salted with a constant so the same inputs give the same page, and the SVG metadata
block and namespace URLs are dropped so the page references nothing outside itself.
Every function takes already-reduced data (curves of a few hundred points at most).
"""

from __future__ import annotations

import io
import re

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure

from challenge_welding.contract.names import OOD_SETS

KO_COLOUR, OK_COLOUR = "#c0392b", "#2471a3"
GREY, GREEN, ORANGE, PURPLE = "#7f8c8d", "#229954", "#d68910", "#7d3c98"
SET_COLOURS = {"ood_real": "#2471a3", "ood_synthetic": "#d68910", "drift": "#7d3c98"}
RC = {"svg.fonttype": "none", "svg.hashsalt": "challenge-welding", "font.size": 9,
      "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False,
      "axes.grid": True, "grid.alpha": 0.3, "axes.titlesize": 10}


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, left: float = 0.75,
               bottom: float = 0.55, top: float = 0.35, right: float = 0.15, wspace: float = 0.3,
               hspace: float = 0.55, **kw):
    """A figure with fixed margins in inches: constrained layout would double the page's drawing time."""
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=wspace, hspace=hspace)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes.ravel()


def to_svg(fig) -> str:
    """The figure as an <svg> element sized to its container (no XML prolog, no metadata)."""
    buf = io.StringIO()
    with rc_context(RC):
        fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    svg = svg[svg.find("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg, count=3)
    # responsive: keep the viewBox, let CSS decide the width
    svg = re.sub(r'<svg([^>]*?)\swidth="[^"]*"\s+height="[^"]*"', r'<svg\1', svg, count=1)
    return svg.replace("<svg", '<svg class="chart" role="img"', 1)


def _note(ax, text: str):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color=GREY, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


# A drawn curve agrees with the number printed beside it when the area under what is drawn is within
# this much of it: AUROC units for a ROC curve, a share of the curve's end value for a retention curve
# (whose areas live in [0, end]). Beyond it the legend prints the drawn area too; a curve reduced to its
# two end points (fewer than two publication steps) is not drawn at all ("too few images to draw").
ROC_TOL = 0.02
RETENTION_TOL = 0.05


def drawn_area(x, y) -> float:
    """Trapezoid area under the polyline drawn through (x, y), NaN points skipped."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    return float(np.trapezoid(y[ok], x[ok])) if ok.sum() >= 2 else float("nan")


def too_few(ax, n, min_samples: int, printed: str, need: str | None = None):
    """The panel of a curve that the publication step reduces to its end points: why nothing is drawn.

    ``need``: what is missing; by default a curve's two published steps of ``min_samples`` images.
    """
    need = need or f"a curve needs\ntwo steps of {min_samples} images"  # short lines: the panel is 3 in wide
    count = f"{n} images; " if n is not None else ""
    _note(ax, f"too few images to draw:\n{count}{need}\n{printed} (computed on all images)")
    for spine in ax.spines.values():  # an empty frame would read as a curve at 0
        spine.set_visible(False)


def kpi_chart(kpis: dict, labels: dict) -> str:
    """Per KPI, two bars on one scale: rescaled (with its 95 % interval) and, thin below it, raw.

    Two bars rather than a raw marker over the rescaled bar: the rescaling moves a value far
    (raw 0.63 can become 0.90), and a marker away from its bar read as an error. The values are
    written at the right of each row, raw -> rescaled.
    """
    with rc_context(RC):
        keys = [k for k in labels if k in kpis]
        fig, (ax,) = new_figure(10, 0.46 * max(len(keys), 1) + 1.0, left=1.3, right=1.6, top=0.4)
        if not keys:
            _note(ax, "no KPI in details")
            return to_svg(fig)
        ypos = np.arange(len(keys))[::-1].astype(float)
        resc = np.array([_num(kpis[k].get("rescaled")) for k in keys])
        raw = np.array([_num(kpis[k].get("raw")) for k in keys])
        ax.barh(ypos + 0.12, np.nan_to_num(resc), color="#5dade2", height=0.42, label="rescaled (scored)")
        ax.barh(ypos - 0.24, np.nan_to_num(raw), color="#d5d8dc", edgecolor="#7f8c8d", height=0.18,
                label="raw (before rescaling)")
        for y, k, r, v in zip(ypos, keys, raw, resc):
            ci = kpis[k].get("ci")
            if ci and len(ci) == 2 and None not in ci:
                ax.plot(ci, [y + 0.12, y + 0.12], color="#1b2631", lw=1.5)
                ax.plot(ci, [y + 0.12, y + 0.12], "|", color="#1b2631", ms=8)
            ax.text(1.04, y, f"raw {_fmt(r)} → {_fmt(v)}", va="center", ha="left", fontsize=8,
                    transform=ax.get_yaxis_transform(), clip_on=False)
        ax.set_yticks(ypos, [labels[k] for k in keys])
        ax.set_xlim(0, 1.02)
        ax.set_xlabel("KPI (0 = worst, 1 = best)")
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)
        return to_svg(fig)


def reliability_chart(subsets: dict, min_samples: int = 25) -> str:
    """Reliability diagrams: accuracy against mean confidence per bin, one panel per subset.

    A bin whose accuracy is withheld (fewer than ``min_samples`` images, scoring.disclosure) is a
    grey hatched bar labelled with its count, so that a panel of small bins does not look empty.
    """
    with rc_context(RC):
        fig, axes = new_figure(10, 3.4, 1, max(len(subsets), 1))
        if not subsets:
            _note(axes[0], "performance set absent")
            return to_svg(fig)
        for ax, (title, rel) in zip(axes, subsets.items()):
            edges = np.asarray(rel["edges"])
            width = edges[1] - edges[0]
            centres = edges[:-1] + width / 2
            acc = np.asarray(rel["accuracy"], float)
            conf = np.asarray(rel["confidence"], float)
            ax.bar(centres, np.nan_to_num(acc), width=width * 0.9, color="#85c1e9", edgecolor="#2471a3",
                   label="accuracy")
            ok = ~np.isnan(conf)
            ax.plot(conf[ok], acc[ok], "o", color=KO_COLOUR, ms=4, label="(confidence, accuracy)")
            ax.plot([0, 1], [0, 1], "--", color=GREY, lw=1, label="perfect calibration")
            hidden = np.array([bool(n) and a is None for n, a in zip(rel["count"], rel["accuracy"])])
            if hidden.any():
                ax.bar(centres[hidden], np.ones(hidden.sum()), width=width * 0.9, color="#f2f3f4",
                       edgecolor="#bdc3c7", hatch="//", label=f"n < {min_samples}: hidden")
            for c, n, h in zip(centres, rel["count"], hidden):
                if n:
                    ax.text(c, 1.02, f"n={n}", ha="center", va="bottom", fontsize=7,
                            color=GREY if h else "#1b2631")
            filled = np.asarray(rel["count"]) > 0
            if filled.any() and hidden[filled].all():
                ax.text(0.5, 0.5, f"every bin holds fewer than {min_samples} images:\naccuracy hidden, counts shown",
                        ha="center", va="center", transform=ax.transAxes, color="#5d6d7e", fontsize=8,
                        bbox={"facecolor": "white", "edgecolor": "#d5dbdb"})
            ece = rel.get("ece")
            ece_txt = "n/a" if ece is None or not np.isfinite(ece) else f"{ece:.3f}"
            ax.set_title(f"{title} (n = {rel['n']}, ECE = {ece_txt})")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.12)
            ax.set_xlabel("top-label confidence")
            ax.set_ylabel("accuracy")
        axes[0].legend(loc="upper left", fontsize=7)
        return to_svg(fig)


def robustness_chart(robustness: dict, order=("blur", "luminance", "rotation", "translation"),
                     min_samples: int = 25) -> str:
    """ML against perturbation level, one panel per perturbation type.

    A level whose ML is withheld (fewer than ``min_samples`` images, scoring.disclosure) is a grey
    cross on the axis, not a point at 0; with fewer than two levels shown the panel says so. The
    title's r uses every level: with every level shown it is the drawn area over the axis length.
    """
    with rc_context(RC):
        fig, axes = new_figure(10, 5.2, 2, 2)
        for ax, kind in zip(axes, order):
            data = robustness.get(kind) or {}
            levels = np.asarray(data.get("levels") or [], float)
            ml = np.array([np.nan if v is None else v for v in data.get("ml") or []], float)
            r = _num(data.get("r"))
            title = f"{kind}: r = {r:.3f}" if np.isfinite(r) else kind
            ax.set_title(title)
            if len(levels) == 0:
                _note(ax, f"no '{kind}' rows in the robustness set")
                continue
            shown = np.isfinite(ml)
            if shown.sum() < 2:
                too_few(ax, None, min_samples, f"r = {_fmt(r)}",
                        f"two levels of {min_samples} images\nor more are needed")
                continue
            ax.patch.set_gid(f"robustness-{kind}-axes")
            ax.fill_between(levels, np.ma.masked_invalid(ml), color="#aed6f1", alpha=0.6)
            ax.plot(levels, ml, "o-", color="#1f618d", ms=3, gid=f"robustness-{kind}-curve")
            if not shown.all():
                ax.plot(levels[~shown], np.zeros((~shown).sum()), "x", color=GREY, ms=6, clip_on=False,
                        label=f"level of < {min_samples} images: hidden")
                ax.legend(loc="lower left", fontsize=7)
                ax.set_title(f"{title} (all levels)")
            ax.set_ylim(0, 1.05)
            ax.set_xlabel("level (0 = clean)")
            ax.set_ylabel("ML (F-beta of KO)")
        return to_svg(fig)


def roc_chart(rocs: dict, min_samples: int = 25) -> str:
    """ROC curves of the OOD score against the OOD label, one panel per set.

    The curve is published in steps of at least ``min_samples`` images; the AUROC uses all of
    them. A curve left with its two end points only (a set of fewer than two steps) is the chance
    diagonal whatever the AUROC: it is not drawn then (unless the AUROC is the diagonal's, 0.5);
    a coarser curve whose area differs from the AUROC by more than ROC_TOL has that area in its legend.
    """
    with rc_context(RC):
        fig, axes = new_figure(10, 3.4, 1, 3)
        for ax, name in zip(axes, OOD_SETS):
            roc = rocs.get(name)
            ax.set_title(name)
            if roc is None:
                _note(ax, "set absent")
                continue
            if roc.get("note"):
                _note(ax, roc["note"])
                continue
            auroc, area = _num(roc.get("auroc")), drawn_area(roc["fpr"], roc["tpr"])
            off = not abs(area - auroc) <= ROC_TOL
            if off and len(roc["fpr"]) <= 2:
                too_few(ax, roc.get("n"), min_samples, f"AUROC = {_fmt(auroc)}")
                continue
            label = f"AUROC = {_fmt(auroc)}"
            if off:
                label += f"\ndrawn in steps of ≥ {min_samples} images:\narea {_fmt(area)}"
            ax.patch.set_gid(f"roc-{name}-axes")
            ax.plot(roc["fpr"], roc["tpr"], color=SET_COLOURS[name], lw=1.8, label=label, gid=f"roc-{name}-curve")
            ax.plot([0, 1], [0, 1], "--", color=GREY, lw=1, gid=f"roc-{name}-chance")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.01)
            ax.set_aspect("equal")
            ax.set_xlabel("false positive rate")
            ax.set_ylabel("true positive rate")
            ax.legend(loc="lower right", fontsize=8)
        return to_svg(fig)


def drift_chart(drift: dict | None) -> str:
    """OOD score along the drift sequence in bins of consecutive positions: median score and share labelled OOD."""
    with rc_context(RC):
        fig, (ax,) = new_figure(10, 3.0, right=0.75)
        if not drift or not drift.get("n"):
            _note(ax, "drift set absent")
            return to_svg(fig)
        start, end = np.asarray(drift["start"], float), np.asarray(drift["end"], float)
        centre, width = (start + end) / 2, end - start + 1
        share = ax.twinx()
        share.bar(centre, drift["share"], width=width * 0.95, color="#f5b7b1", alpha=0.6, label="share labelled OOD")
        share.set_ylim(0, 1.05)
        share.set_ylabel("share labelled OOD")
        share.grid(False)
        ax.set_zorder(share.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.plot(centre, drift["median"], "o-", color=KO_COLOUR, lw=1.6, ms=4,
                label=f"median OOD score per bin (>= {min(drift['n'])} images)")
        ax.set_xlabel("position in the sequence")
        ax.set_ylabel("OOD score")
        handles = ax.get_legend_handles_labels()[0] + share.get_legend_handles_labels()[0]
        ax.legend(handles=handles, loc="upper left", fontsize=7)
        return to_svg(fig)


def retention_chart(retention: dict, n: int | None = None, min_samples: int = 25) -> str:
    """Error-retention curves (uncertainty order, random, oracle), one panel per error.

    The curves are published at steps of at least ``min_samples`` images; the R-AUC values use
    every image. A curve left with its two end points (fewer than two steps) is the random line
    whatever its R-AUC: the panel then says so instead; a coarser curve whose area differs from its
    R-AUC by more than RETENTION_TOL of the curve's end value has that area in its legend.
    """
    titles = {"misclassification": "misclassification rate", "excess_cost": "excess cost"}
    with rc_context(RC):
        fig, axes = new_figure(10, 3.5, 1, 2)
        for ax, key in zip(axes, titles):
            res = retention.get(key)
            ax.set_title(titles[key])
            if not res or not res["curve"]["retention"]:
                _note(ax, "no sample")
                continue
            end = res["mean_error"] or 0.0
            tol = RETENTION_TOL * max(abs(end), 1e-12)
            curves = {"curve": "r_auc", "oracle_curve": "oracle_r_auc"}
            area = {c: drawn_area(res[c]["retention"], res[c]["value"]) for c in curves}
            off = {c: not abs(area[c] - _num(res[a])) <= tol for c, a in curves.items()}
            if any(off[c] and len(res[c]["retention"]) <= 2 for c in curves):
                too_few(ax, n, min_samples, f"R-AUC {_fmt(res['r_auc'])}, oracle {_fmt(res['oracle_r_auc'])}")
                continue

            def label(text, c):
                return f"{text} ({_fmt(res[curves[c]])}" + (f"; drawn steps {_fmt(area[c])})" if off[c] else ")")

            ax.patch.set_gid(f"retention-{key}-axes")
            ax.plot(res["curve"]["retention"], res["curve"]["value"], color="#1f618d", lw=1.8,
                    label=label("by uncertainty, R-AUC", "curve"), gid=f"retention-{key}-curve")
            ax.plot([0, 1], [0, end], "--", color=GREY, lw=1.2,
                    label=f"random order ({_fmt(res['random_r_auc'])})", gid=f"retention-{key}-random")
            ax.plot(res["oracle_curve"]["retention"], res["oracle_curve"]["value"], ":", color=GREEN, lw=1.8,
                    label=label("oracle", "oracle_curve"), gid=f"retention-{key}-oracle")
            ax.set_xlim(0, 1)
            ax.set_xlabel("retention fraction (most certain kept)")
            unit = res.get("unit", "")
            ax.set_ylabel("mean error over all N" + (f" ({unit} units)" if key == "excess_cost" else ""))
            ax.legend(loc="upper left", fontsize=7)
        return to_svg(fig)


def trust_chart(trust: dict) -> str:
    """Belief / disbelief / uncertainty per probability bin for each class, and the fused opinions."""
    with rc_context(RC):
        fig, axes = new_figure(10, 3.3, 1, 3, gridspec_kw={"width_ratios": [3, 3, 1.6]})
        colours = {"b": GREEN, "d": KO_COLOUR, "u": "#bdc3c7"}
        names = {"b": "belief", "d": "disbelief", "u": "uncertainty"}
        for ax, cls in zip(axes, ("KO", "OK")):
            bins = trust["classes"][cls]["bins"]
            x = np.array([b["rp"] for b in bins])
            bottom = np.zeros(len(bins))
            for k in "bdu":  # a bin below the disclosure minimum has no opinion shown (None): no bar
                v = np.array([0.0 if b[k] is None else b[k] for b in bins])
                ax.bar(x, v, bottom=bottom, width=0.09, color=colours[k], label=names[k])
                bottom += v
            for xi, b in zip(x, bins):
                ax.text(xi, 1.02, str(b["n"]), ha="center", va="bottom", fontsize=6, color=GREY)
            ax.set_title(f"class {cls}: bins of p_{cls} / (p_KO + p_OK)")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.1)
            ax.set_xlabel(f"binary probability of {cls}")
        axes[0].set_ylabel("opinion mass")
        axes[0].legend(loc="lower left", fontsize=7)
        ax = axes[2]
        fused = [trust["classes"]["KO"]["opinion"], trust["classes"]["OK"]["opinion"], trust["model"]]
        bottom = np.zeros(3)
        for k in "bdu":
            v = np.array([o[k] for o in fused])
            ax.bar([0, 1, 2], v, bottom=bottom, width=0.6, color=colours[k])
            bottom += v
        ax.plot([0, 1, 2], [o["P"] for o in fused], "D", color="#1b2631", ms=5, label="projected P")
        ax.set_xticks([0, 1, 2], ["KO", "OK", "model"])
        ax.set_ylim(0, 1.1)
        ax.set_title("fused (◆ projected P)")  # a title, not a legend box over the bars
        return to_svg(fig)


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _fmt(x, digits: int = 3) -> str:
    v = _num(x)
    return "n/a" if not np.isfinite(v) else f"{v:.{digits}f}"


GROUP_COLOURS = ("#1f618d", "#c0392b", "#229954", "#d68910", "#7d3c98", "#17a589", "#884ea0", "#566573")


def rank_interval_chart(rows: list[dict], level: float = 0.95) -> str:
    """The leaderboard's rank intervals: one whisker per submission (lo..hi), a dot at its rank.

    ``rows``: ranked submissions in rank order, each {"name", "rank", "lo", "hi", "group"}. The
    colour is the first letter of the group (submissions sharing a letter are not distinguishable);
    the letters are written at the right of each whisker.
    """
    with rc_context(RC):
        n = len(rows)
        fig, (ax,) = new_figure(10, 0.32 * max(n, 1) + 1.1, left=2.4, right=0.9, top=0.45)
        if not rows:
            _note(ax, "no ranked submission")
            return to_svg(fig)
        letters = sorted({r["group"][:1] for r in rows if r["group"]})
        colours = {g: GROUP_COLOURS[i % len(GROUP_COLOURS)] for i, g in enumerate(letters)}
        y = np.arange(n)[::-1].astype(float)
        for yi, r in zip(y, rows):
            c = colours.get(r["group"][:1], GREY)
            ax.plot([r["lo"], r["hi"]], [yi, yi], color=c, lw=2.2, solid_capstyle="butt", gid=f"rank-{r['name']}")
            ax.plot([r["lo"], r["hi"]], [yi, yi], "|", color=c, ms=9)
            ax.plot([r["rank"]], [yi], "o", color=c, ms=6)
            ax.text(n + 0.6, yi, r["group"], va="center", ha="left", color=c, fontsize=9, fontweight="bold",
                    clip_on=False)
        ax.set_yticks(y, [r["name"] for r in rows])
        ax.set_xlim(0.5, n + 0.5)
        ax.set_xticks(np.arange(1, n + 1))
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlabel("rank (1 = best)")
        ax.grid(axis="y", visible=False)
        ax.set_title(f"{100 * level:g} % rank interval over the bootstrap resamples (dot: the rank on the full sets; "
                     "letter and colour: the group)", fontsize=9, loc="left")
        return to_svg(fig)
