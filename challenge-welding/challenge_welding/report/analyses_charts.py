"""Charts of the analyses section (issue 20): cost-coverage, breaking-point ladders, drift timeline.

Same conventions as report.charts (matplotlib Figure, inline SVG); every function draws
already-reduced data from details["analyses"] and computes nothing.
"""

from __future__ import annotations

import numpy as np
from matplotlib import rc_context

from .charts import GREEN, GREY, KO_COLOUR, ORANGE, RC, _note, new_figure, to_svg


def cost_coverage_chart(cc: dict) -> str:
    """Cheapest mean cost at each coverage, the component's operating point and the best thresholds."""
    with rc_context(RC):
        fig, (ax,) = new_figure(10, 3.2)
        if not cc or not cc.get("available"):
            _note(ax, (cc or {}).get("reason") or "not available")
            return to_svg(fig)
        curve = cc["curve"]
        ax.step(curve["coverage"], curve["cost"], where="post", color="#1f618d", lw=1.8,
                label="cheapest thresholds on p_KO at coverage ≥ c")
        ax.axhline(cc["cost_human"], ls="--", color=GREY, lw=1, label="human only (all UNKNOWN)")
        ax.axhline(cc["cost_ideal"], ls=":", color=GREEN, lw=1.2, label="ideal (true class)")
        op, best = cc["operating_point"], cc["best"]
        ax.plot([op["coverage"]], [op["cost"]], "o", color=KO_COLOUR, ms=7, label="the component's answers")
        ax.plot([best["coverage"]], [best["cost"]], "D", color=ORANGE, ms=6, label="best thresholds")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(0, max(cc["cost_human"], op["cost"]) * 1.1)
        ax.set_xlabel("coverage (share not handed over to the operator)")
        ax.set_ylabel("mean cost per image")
        ax.legend(loc="center left", fontsize=7)
        return to_svg(fig)


def breaking_chart(bp: dict) -> str:
    """Precision per level, one panel per ladder: the limit (performance precision - margin) and the break."""
    ladders = (bp or {}).get("ladders") or {}
    with rc_context(RC):
        cols = 3
        rows = max(1, -(-len(ladders) // cols))
        fig, axes = new_figure(10, 2.4 * rows, rows, cols, hspace=0.8)
        if not ladders:
            _note(axes[0], "no perturbation ladder")
        limit = (bp or {}).get("reference_precision", 0) - (bp or {}).get("margin", 0)
        for ax, (name, lad) in zip(axes, ladders.items()):
            x = np.abs(np.asarray(lad["levels"], float))
            y = np.array([np.nan if v is None else v for v in lad["precision"]], float)
            ax.plot(x, y, "o-", color="#1f618d", lw=1.5, ms=4)
            ax.axhline(bp["reference_precision"], color=GREEN, lw=1, ls=":")
            ax.axhline(limit, color=KO_COLOUR, lw=1, ls="--")
            if lad["break_level"] is not None:
                ax.axvline(abs(lad["break_level"]), color=KO_COLOUR, lw=1.2, alpha=0.5)
            title = f"{name}: breaks at {lad['break_level']:g}" if lad["break_level"] is not None else \
                f"{name}: holds"
            ax.set_title(title)
            ax.set_ylim(0, 1.05)
            ax.set_xlabel("|level|")
            ax.set_ylabel("precision (KO)")
        for ax in axes[len(ladders):]:
            ax.set_visible(False) if ladders else None
        return to_svg(fig)


def drift_timeline_chart(dd: dict) -> str:
    """Median OOD score per bin along the sequence, the alarm threshold and the onset."""
    with rc_context(RC):
        fig, (ax,) = new_figure(10, 3.0)
        tl = (dd or {}).get("timeline")
        if not tl or not tl.get("n"):
            _note(ax, (dd or {}).get("undefined") or "drift set absent")
            return to_svg(fig)
        start, end = np.asarray(tl["start"], float), np.asarray(tl["end"], float)
        ax.step(np.r_[start, end[-1] + 1], np.r_[tl["median"], tl["median"][-1]], where="post", color=KO_COLOUR,
                lw=1.6, label=f"median OOD score per bin (≥ {min(tl['n'])} images)")
        if dd.get("threshold") is not None:
            ax.axhline(dd["threshold"], color="#1f618d", ls="--", lw=1.2,
                       label=f"alarm threshold ({100 * dd['far']:g} % false alarms before the onset)")
        if dd.get("onset") is not None:
            ax.axvline(dd["onset"], color=GREY, lw=1.5, label="drift onset (rounded down)")
            if dd.get("delay") is not None:
                ax.axvline(dd["onset"] + dd["delay"], color=GREEN, lw=1.2, ls=":", label="first alarm after it")
        ax.set_xlabel("position in the sequence")
        ax.set_ylabel("OOD score")
        ax.legend(loc="upper left", fontsize=7)
        return to_svg(fig)
