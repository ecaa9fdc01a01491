"""The detailed results page: one self-contained HTML file (inline CSS, inline SVG charts, no network).

`render_report(details, config)` turns the details.json content into the page: every number
and chart comes from `details` (its "extras" hold the charts' reduced data, already computed
and coarsened by scoring so that nothing shown reveals a label, see scoring.disclosure), the
config only gives the coefficients the page prints. Nothing is computed here and nothing is
read but the templates: a missing set, KPI, list or extras part is shown as absent; a chart
that cannot be drawn shows why instead of failing the scoring.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from challenge_welding.contract.checked import plain
from challenge_welding.contract.names import KPI_KEYS, OOD_SETS, SET_NAMES
from challenge_welding.contract.registry import BY_KEY, KPI_BY_KEY, KPIS, kpi_criteria
from challenge_welding.report import charts
from challenge_welding.report.analyses_view import analyses_context

TEMPLATES = Path(__file__).parent / "templates"

KPI_LABELS = {k.key: k.label for k in KPIS}


def render_report(details: dict, config) -> str:
    """The detailed results page as one HTML string; ``config``: the validated config the score used."""
    details = details or {}
    return environment().get_template("report.html.j2").render(**build_context(details, config))


def environment() -> jinja2.Environment:
    """The one template environment of the pages (this one and report.leaderboard's): the
    package's templates/, autoescaped, with the number filters."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["f"] = fmt
    env.filters["pct"] = pct
    env.filters["param"] = param
    env.filters["formula"] = formula_markup
    return env


def build_context(details: dict, config) -> dict:
    problems: list[str] = []

    def chart(name, fn, *args, **kw):
        # A chart must never cost the participant their scores: show the reason instead.
        try:
            svg = fn(*args, **kw).replace('role="img"', f'role="img" aria-label="{name} chart"', 1)
            # its own box: on a narrow screen the chart keeps a legible width and scrolls sideways
            return charts_markup(f'<div class="chartbox">{svg}</div>')
        except Exception as exc:  # reported on the page and in its warnings
            problems.append(f"chart '{name}' could not be drawn: {type(exc).__name__}: {exc}")
            return charts_markup(f'<p class="absent">chart unavailable: {type(exc).__name__}</p>')

    extras = details.get("extras") or {}
    perf_extras = (extras.get("sets") or {}).get(extras.get("primary_set", "performance"))
    kpis = details.get("kpis") or {}
    reliability = extras.get("reliability") or {}
    ctx = {
        "title": "Detailed results",
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "score": details.get("score", (details.get("scores") or {}).get("score")),
        "score_ci": details.get("score_ci"),
        "warnings": list(details.get("warnings") or []),
        "kpi_rows": _kpi_rows(kpis, details.get("scores") or {}, details.get("criteria_ci") or {}, config),
        "final_weights": config.final_weights,
        "bootstrap": config.extras.bootstrap,
        "rescaling_betas": (config.rescaling.beta1, config.rescaling.beta2),
        "set_rows": _set_rows(details.get("sets") or {}),
        "cost_matrix": config.cost,
        "seam_weights": config.seam_weights,
        "default_seam_weight": config.default_seam_weight,
        "time": details.get("time") or {},
        "reliability": reliability,
        "robustness": details.get("robustness") or {},
        "rob_weights": config.kpis.robustness.weights,
        "min_samples": config.disclosure.min_samples,
        "extras": extras,
        "perf_extras": perf_extras,
        "undefined_cases": list(details.get("undefined_cases") or []) + [
            c for e in (extras.get("sets") or {}).values() for c in e.get("undefined_cases") or []] + [
            {"metric": "trust opinion, retention", "set": s, "case": "set empty once OOD-labelled rows are left out",
             "resolution": "not reported for this set"} for s in extras.get("skipped") or []],
        "metric_card": details.get("metric_card") or {},
        "sandbox": details.get("sandbox"),
        "points": details.get("shortfall"),
        "config_json": json.dumps(plain(details.get("config") or config), indent=1, sort_keys=False),
    }
    rocs = {name: (extras.get("roc") or {}).get(name) for name in OOD_SETS}
    ctx["rocs"] = rocs
    ctx["charts"] = {
        "kpis": chart("kpis", charts.kpi_chart, kpis, KPI_LABELS),
        "reliability": chart("reliability", charts.reliability_chart, reliability,
                             config.disclosure.min_samples),
        "robustness": chart("robustness", charts.robustness_chart, ctx["robustness"],
                            min_samples=ctx["min_samples"]),
        "roc": chart("roc", charts.roc_chart, rocs, ctx["min_samples"]),
        "drift": chart("drift", charts.drift_chart, extras.get("drift")),
        "retention": chart("retention", charts.retention_chart, perf_extras["retention"], perf_extras.get("n"),
                           ctx["min_samples"]) if perf_extras else None,
        "trust": chart("trust", charts.trust_chart, perf_extras["trust"]) if perf_extras else None,
    }
    ctx["extras_metrics"] = _extras_metrics(extras)
    ctx.update(analyses_context(details, chart))  # issue 20: the analyses section (templates/analyses.html.j2)
    ctx["warnings"] += problems
    return ctx


def charts_markup(svg: str):
    return Markup(svg)


# ---------------------------------------------------------------- formatting

def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def fmt(x, digits: int = 3, scale: float = 1.0) -> str:
    """A number for the page; None/NaN/inf -> 'n/a', big numbers with thousands separators."""
    if isinstance(x, bool) or not _finite(x):
        return "n/a" if not isinstance(x, str) else x
    v = float(x) * scale
    if float(x) == int(float(x)) and abs(v) >= 1000 and scale == 1.0:
        return f"{int(v):,}".replace(",", "\u202f")
    return f"{v:.{digits}f}"


def param(v, depth: int = 0) -> str:
    """A metric-card parameter in plain words: 'key value' lists, nested ones in brackets, no Python repr."""
    if isinstance(v, dict):
        inner = ", ".join(f"{k} {param(x, depth + 1)}" for k, x in v.items())
        return f"({inner})" if depth else inner
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(param(x, depth + 1) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "n/a" if v is None else str(v)


def pct(x) -> str:
    """A share as a percentage with one decimal ("5.2 %", "95 %"); 'n/a' when undefined."""
    return (fmt(x, 1, scale=100).removesuffix(".0") + " %") if _finite(x) else "n/a"


# ---------------------------------------------------------------- sections

def _rescaling_text(kpi: dict, betas) -> str:
    b1, b2 = betas if betas and None not in betas else ("β1", "β2")
    a1, a2 = kpi.get("alpha1"), kpi.get("alpha2")
    kind = kpi.get("rescaling") or "unscaled"
    if kind == "three-piece":
        return (f"piecewise linear through (0, 0), (α1 = {fmt(a1)}, {b1}), (α2 = {fmt(a2)}, {b2}) "
                f"and (1, 1), clipped to [0, 1]; α1 = raw KPI of 'full UNKNOWN', α2 = raw KPI of 'good'")
    if kind == "two-piece":
        return (f"α1 = {fmt(a1)} ≤ 0, first piece dropped: piecewise linear through (0, 0), "
                f"(α2 = {fmt(a2)}, {b2}) and (1, 1), clipped to [0, 1]")
    if a1 is None or a2 is None:
        return "unscaled: breakpoints not calibrated, rescaled = raw"
    return (f"unscaled: α1 = {fmt(a1)}, α2 = {fmt(a2)} (α2 ≤ α1 or α2 ≥ 1: no increasing map), "
            f"rescaled = raw")


def _rescaling_plain(kpi: dict, betas) -> str:
    """One plain-language line: what a rescaled value means against the two virtual references."""
    b1, b2 = betas
    a1, a2 = kpi.get("alpha1"), kpi.get("alpha2")
    kind = kpi.get("rescaling") or "unscaled"
    good = f"{fmt(b2, 1)} = as good as the 'good' reference (raw {fmt(a2)})"
    if kind == "three-piece":
        return (f"Rescaled {fmt(b1, 1)} = as good as 'full UNKNOWN' (raw {fmt(a1)}), {good}, 1 = perfect.")
    if kind == "two-piece":
        return f"Rescaled 0 = raw 0, {good}, 1 = perfect ('full UNKNOWN' scores raw {fmt(a1)} here)."
    return "Rescaled = raw: no reference solution to compare with on this KPI."


OPERATORS = frozenset("+-−·×/=≤≥<>;,")


def formula_markup(text: str):
    """A formula that wraps only after an operator (+, -, ·, /, =, ...), never inside a term.

    Every space not following an operator becomes a no-break space; the page's CSS keeps
    words whole (no break-all), so the browser breaks lines only at those spaces.
    """
    words = str(text).split(" ")
    out = [str(escape(words[0]))]
    for prev, word in zip(words, words[1:]):
        out.append(" " if prev[-1:] in OPERATORS else "\u00a0")
        out.append(str(escape(word)))
    return Markup("".join(out))


def _kpi_rows(kpis: dict, scores: dict, criteria_ci: dict, config) -> list[dict]:
    betas = (config.rescaling.beta1, config.rescaling.beta2)
    weights = config.final_weights
    rows = []
    for key in KPI_KEYS:
        kpi = kpis.get(key) or {}
        crit_values = kpi.get("criteria") or {}
        criteria = []
        for ck in kpi_criteria(key):
            c = BY_KEY[ck]
            criteria.append({"key": ck, "label": c.label, "meaning": c.meaning, "better": c.better,
                             "value": crit_values.get(ck, scores.get(ck)), "ci": criteria_ci.get(ck)})
        rows.append({"key": key, "label": KPI_BY_KEY[key].label, "set": KPI_BY_KEY[key].sets, "present": bool(kpi),
                     "raw": kpi.get("raw"), "rescaled": kpi.get("rescaled", scores.get(key)),
                     "ci": kpi.get("ci"), "raw_ci": kpi.get("raw_ci"), "weight": kpi.get("weight", weights.get(key)),
                     "rescaling": _rescaling_text(kpi, betas), "rescaling_kind": kpi.get("rescaling"),
                     "rescaling_plain": _rescaling_plain(kpi, betas),
                     "formula": KPI_BY_KEY[key].formula(config), "criteria": criteria})
    return rows


def _set_rows(sets: dict) -> list[dict]:
    rows = []
    for name in list(SET_NAMES) + [s for s in sets if s not in SET_NAMES]:
        s = sets.get(name)
        if s is None:
            rows.append({"name": name, "present": False})
            continue
        n, n_ko = s.get("n") or 0, s.get("n_KO") or 0
        cost, ideal, human = s.get("cost"), s.get("cost_ideal"), s.get("cost_human")
        rows.append({"name": name, "present": True, "n": n, "n_KO": n_ko, "n_OK": s.get("n_OK"),
                     "ko_share": n_ko / n if n else None, "n_ood": s.get("n_ood"),
                     "confusion": s.get("confusion") or {}, "cost": cost, "cost_soft": s.get("cost_soft"),
                     "cost_ideal": ideal, "cost_human": human, "op": s.get("op"), "cost_subset": s.get("cost_subset"),
                     "sha256": s.get("sha256"), "reference_sha256": s.get("reference_sha256")})
    return rows


def _extras_metrics(extras: dict) -> list[dict]:
    """Metric-card rows for what is reported beyond the score."""
    p = (extras or {}).get("parameters") or {}
    if not p:
        return []
    return [
        {"name": "Trust opinion (subjective logic)", "set": "every set, OOD rows excluded",
         "formula": "per class c: bins of p_c/(p_KO+p_OK) (0.5 when both 0); r = t_i, s = |t_i - n_i RP_i|; "
                    "b = r/(W+r+s), d = s/(W+r+s), u = W/(W+r+s), P = b + a u",
         "parameters": {"bins": p.get("trust_bins"), "W": p.get("trust_prior_weight"),
                        "representative": "bin centre", "base rate": p.get("trust_base_rate"),
                        "fusion": p.get("trust_fusion")}},
        {"name": "Error-retention curve, R-AUC (Shifts)", "set": "every set, OOD rows excluded",
         "formula": "uncertainty 1 - max(p_KO, p_OK); rejected samples take the oracle answer; "
                    "curve = sum of retained errors / N; R-AUC = area over retention [0, 1]",
         "parameters": {"errors": "misclassification (UNKNOWN = error); excess cost / (C(human) - C(ideal))",
                        "ties": p.get("retention_ties"), "area": p.get("retention_area"),
                        "points on page": p.get("retention_points")}},
    ]
