"""Where the points went: each KPI's loss in score points and the criterion that cost it most.

Pure functions over numbers already scored (details["kpis"], the criteria of scores.json) and
the config's coefficients; the results page draws the result (details["shortfall"]).

- A KPI's loss is ``100 w_k (1 - I_k)`` with ``w_k`` its final weight and ``I_k`` its rescaled
  value, so the losses sum to ``100 sum_k w_k - score = 100 - score`` (the weights sum to 1).
  A KPI that is absent or not a finite number counts as 0 (what the score gives it).
- Within a KPI, a criterion's *recovery* is the points gained if that criterion alone were
  perfect (OP 0, ML 1, time 0, UOP 1, ECE 0, r 1, AUROC 1) and the others kept: its raw KPI is
  recomputed by the score's own formulas (scoring.kpis) and rescaled with the KPI's own
  breakpoints (scoring.rescale). The criterion that cost most is the one with the largest
  recovery. Undefined case: when no criterion alone recovers anything (a product such as
  I_U = clip(UOP) clip(1 - 2 ECE) held at 0 by both factors), the one whose imperfection alone
  would cost most (every other criterion perfect) is named instead. Recoveries do not add up to
  the KPI's loss (the formulas are not additive): each is "what fixing this one would give".
"""

from __future__ import annotations

import math

from challenge_welding.contract.names import KPI_KEYS
from challenge_welding.contract.registry import BY_KEY, KPI_BY_KEY, ROBUSTNESS_KEYS, kpi_criteria
from challenge_welding.scoring.kpis import raw_kpis
from challenge_welding.scoring.rescale import rescale

# The value of each criterion at which it costs nothing.
PERFECT = {"op": 0.0, "ml": 1.0, "time_p95": 0.0, "uop": 1.0, "ucalib_ko": 0.0, "ucalib_ok": 0.0,
           "r_blur": 1.0, "r_lum": 1.0, "r_rot": 1.0, "r_trans": 1.0, "ood_syn": 1.0, "ood_real": 1.0,
           "op_g": 0.0, "ml_g": 1.0, "op_d": 0.0, "ood_d": 1.0}
OOD_FIX = "return a higher OOD score on unusual images (e.g. a distance to the training images' features)"
AXIS_WORDS = {"blur": "blurred", "luminance": "darker or brighter", "rotation": "rotated",
              "translation": "shifted"}


def _finite(x) -> bool:
    try:
        return x is not None and not isinstance(x, bool) and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def where_points_went(kpis: dict, criteria: dict, config, present_axes=None) -> list[dict]:
    """One row per KPI, biggest loss first (ties in registry order).

    ``kpis``: details["kpis"] ({kpi: {"rescaled", "alpha1", "alpha2", ...}}); ``criteria``:
    {criterion key: value} (scores.json); ``present_axes``: the perturbation types of the
    robustness set (details["robustness"] keys; None = those with a finite r_x). Each row:
    kpi, label, weight, rescaled, got (points), max (points), loss (points), and when the KPI
    lost anything: worst (criterion key), worst_label, worst_value, recovery (points if that
    criterion were perfect), sentence.
    """
    weights = config.final_weights
    crit = {k: float(v) for k, v in (criteria or {}).items() if _finite(v)}
    axes = [x for x in (present_axes if present_axes is not None else ROBUSTNESS_KEYS)
            if ROBUSTNESS_KEYS.get(x) in crit]
    rows = []
    for order, key in enumerate(KPI_KEYS):
        k = (kpis or {}).get(key) or {}
        w = float(weights[key])
        resc = float(k["rescaled"]) if _finite(k.get("rescaled")) else None
        got = 100.0 * w * (resc or 0.0)
        row = {"kpi": key, "label": KPI_BY_KEY[key].label, "weight": w, "rescaled": resc,
               "got": got, "max": 100.0 * w, "loss": 100.0 * w - got, "order": order}
        if resc is None:
            row["sentence"] = (f"{row['label']} {_pts(0.0)}/{_pts(row['max'])}: not measured "
                               f"(the {KPI_BY_KEY[key].sets} set gave no value), so the KPI scores 0")
        elif row["loss"] > 1e-9:
            row.update(_worst(key, k, crit, axes, w, resc, config))
            row["sentence"] = _sentence(row, config)
        else:
            row["sentence"] = f"{row['label']} {_pts(got)}/{_pts(row['max'])}: nothing lost"
        rows.append(row)
    rows.sort(key=lambda r: (-round(r["loss"], 9), r["order"]))
    for r in rows:
        del r["order"]
    return rows


def _kpi_points(key, values, axes, k, w, config) -> float:
    """Points of KPI ``key`` with the criteria ``values`` (the score's formulas and breakpoints)."""
    r = {x: values.get(ROBUSTNESS_KEYS[x], 1.0) for x in axes}
    full = {c: values.get(c, PERFECT[c]) for c in PERFECT}
    raw = float(raw_kpis(full, r, config)[key])
    a = config.rescaling.alpha[key]
    return 100.0 * w * float(rescale(raw, k.get("alpha1", a.alpha1), k.get("alpha2", a.alpha2),
                                     config.rescaling.beta1, config.rescaling.beta2))


def _worst(key, k, crit, axes, w, resc, config) -> dict:
    own = [c for c in kpi_criteria(key) if c in crit
           and (BY_KEY[c].axis is None or BY_KEY[c].axis in axes)]
    if not own:
        return {}
    now = 100.0 * w * resc
    base = {c: crit[c] for c in own}
    recovery = {c: _kpi_points(key, {**base, c: PERFECT[c]}, axes, k, w, config) - now for c in own}
    perfect = {c: PERFECT[c] for c in own}
    alone = {c: 100.0 * w - _kpi_points(key, {**perfect, c: crit[c]}, axes, k, w, config) for c in own}
    # largest recovery; when none recovers anything, the largest cost alone (module docstring)
    worst = max(own, key=lambda c: (round(max(recovery[c], 0.0), 9), round(alone[c], 9)))
    also = sorted((c for c in own if c != worst and alone[c] >= 0.05), key=lambda c: -alone[c])
    return {"worst": worst, "worst_label": BY_KEY[worst].label, "worst_value": crit[worst],
            "recovery": max(recovery[worst], 0.0), "also": also[0] if also else None,
            "also_value": crit[also[0]] if also else None}


def _pts(x: float) -> str:
    return f"{x:.1f}".removesuffix(".0")


def _sentence(row: dict, config) -> str:
    """'Uncertainty 0/15: your probabilities cost more ... (UOP -5.83): calibrate or ...'."""
    head = f"{row['label']} {_pts(row['got'])}/{_pts(row['max'])}"
    c = row.get("worst")
    if c is None:
        return f"{head}: its criteria were not measured"
    why, fix = _advice(c, row["worst_value"], config)
    if row["recovery"] >= 0.05:
        gain = f"; that alone would give back {_pts(row['recovery'])} points"
    elif row.get("also"):  # the fallback of where_points_went: two criteria hold the KPI down together
        gain = (f"; it gives points back only once {BY_KEY[row['also']].label} "
                f"{row['also_value']:.3g} is mended too")
    else:
        gain = ""
    return f"{head}: {why}: {fix}{gain}"


def _advice(c: str, v: float, config) -> tuple[str, str]:
    """(what cost the points, what would recover them) for criterion ``c`` at value ``v``."""
    cost = config.cost
    miss, unsure = cost["KO"]["OK"], cost["KO"]["UNKNOWN"]
    label = BY_KEY[c].label
    if c in ("op", "op_g", "op_d"):
        where = {"op": "", "op_g": " on unseen seams", "op_d": " on the drift images not labelled OOD"}[c]
        how = ("cost more than a human-only process would" if v >= 1 else
               f"cost {100 * v:.0f} % of what a human-only process would, above perfect")
        return (f"your answers{where} {how} ({label} {v:.2f}; 0 = perfect, 1 = human-only)",
                f"answer UNKNOWN (cost {unsure:g}) rather than OK (cost {miss:g} for a missed defect) "
                "when a weld is doubtful")
    if c in ("ml", "ml_g"):
        where = " on unseen seams" if c == "ml_g" else ""
        return (f"your defect finding{where} scores F1 {v:.3f} on KO ({label})",
                "find more of the KO welds without raising false alarms (recall and precision of KO)")
    if c == "time_p95":
        return (f"your 95th-percentile time is {1000 * v:.0f} ms per image ({label} {v:.3f})",
                "make predict() faster (batch the images, a smaller model)")
    if c == "uop":
        if v < 0:
            return (f"your probabilities cost more than your hard answers (UOP {v:.2f})",
                    "calibrate, or send doubtful welds to UNKNOWN")
        why = ("add nothing to your hard answers, as one-hot probabilities do" if v < 1e-9 else
               f"recover only {100 * v:.0f} % of your hard answers' gap to perfect")
        return f"your probabilities {why} (UOP {v:.2f})", "put probability on KO or UNKNOWN where a weld is doubtful"
    if c in ("ucalib_ko", "ucalib_ok"):
        cls = "KO" if c == "ucalib_ko" else "OK"
        return (f"your confidence on true-{cls} welds is off by {v:.3f} ({label})",
                "calibrate the probabilities on held-out data (e.g. temperature scaling)")
    if BY_KEY[c].axis:
        axis = BY_KEY[c].axis
        return (f"defect finding falls on {AXIS_WORDS[axis]} images ({label} {v:.3f})",
                f"train on {AXIS_WORDS[axis]} copies of the images (augmentation)")
    where = {"ood_syn": "synthetic out-of-distribution images", "ood_real": "real out-of-distribution images",
             "ood_d": "the drifting images"}[c]
    if v <= 0.5 + 1e-9:
        how = ("does not tell {} from normal ones (AUROC {:.3f}: chance, as a constant or missing score gives)"
               if v >= 0.5 - 1e-9 else "ranks {} below normal ones (AUROC {:.3f}, under chance)").format(where, v)
        return f"your OOD score {how}", OOD_FIX
    return f"your OOD score tells {where} from normal ones at AUROC {v:.3f} (0.5 = chance)", OOD_FIX
