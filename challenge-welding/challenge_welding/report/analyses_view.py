"""The analyses section of the results page: chart markup and template data from details["analyses"].

No arithmetic: every number comes from details.json (scoring.analyses); this module picks
what to show and draws the charts (report.analyses_charts).
"""

from __future__ import annotations

from . import analyses_charts

# how each metric of the section is read, for the metric card (formula, undefined cases)
CARD = [
    {"name": "Cost-coverage (operating point in cost)", "set": "performance",
     "formula": "policies on p_KO: OK below t_lo, UNKNOWN in [t_lo, t_hi), KO from t_hi; mean seam-weighted cost "
                "with the cost matrix; curve = cheapest policy handing over at most n(1 - c) images; gap = "
                "C(answers) - C(best thresholds)",
     "parameters": {"thresholds": "between blocks of >= min_samples images", "points": "disclosure.points"},
     "undefined": "empty set: not reported"},
    {"name": "AURC, E-AURC, AUGRC (fd-shifts)", "set": "performance",
     "formula": "confidence max(p_KO, p_OK)/(p_KO + p_OK), 0/1 loss of the top label; AURC = trapezoid of "
                "selective risk over coverage; E-AURC = AURC - (r + (1 - r) ln(1 - r)); AUGRC = trapezoid of "
                "errors accepted / n", "parameters": {"scale": "0..1 (fd-shifts prints x1000)"},
     "undefined": "empty set: None"},
    {"name": "FPR@95TPR, AUPR-In, AUPR-Out", "set": "ood_real, ood_synthetic, drift",
     "formula": "in-distribution positive ranked by -s: FPR at the first threshold with TPR >= 0.95; "
                "step-wise average precision with ID (score -s) and OOD (score s) positive",
     "parameters": {"tpr": "analyses.ood_tpr"}, "undefined": "one class only: None"},
    {"name": "Breaking point", "set": "robustness vs performance",
     "formula": "first level by |level| (per direction) with precision(KO) < precision_perf - margin; "
                "interval = quantiles of the breaking level over binomial count resamples",
     "parameters": {"margin": "analyses.breaking_margin"},
     "undefined": "no KO predicted at a level: zero_division; never below: not reached"},
    {"name": "Relative robustness (mCE-style)", "set": "robustness",
     "formula": "per type sum_l (1 - ML_l) / sum_l (1 - ML_l baseline) over non-zero levels; mCE = mean",
     "parameters": {"baseline": "score --baseline OUT / leaderboard --baseline NAME"},
     "undefined": "no baseline, or a baseline without error: None"},
    {"name": "Drift detection delay", "set": "drift",
     "formula": "tau = (1 - FAR) quantile ('higher') of the OOD scores before the onset; delay = first position "
                ">= onset with s > tau, minus the onset; false alarms = #{before: s > tau}",
     "parameters": {"FAR": "analyses.drift_false_alarm_rate", "onset": "rounded down to min_samples"},
     "undefined": "no OOD label, fewer than min_samples before the onset, or no alarm after it: None"},
    {"name": "Pointing game, energy-based pointing game", "set": "KO images with a defect mask",
     "formula": "mask max-pooled over 4x4 blocks onto the map grid; hit = share of the map's maxima inside; "
                "energy = sum(map in mask) / sum(map); means with bootstrap intervals",
     "parameters": {"map scale": 4}, "undefined": "no maps / no masks: said; empty mask: left out; "
                                                  "map with no mass: energy 0; fewer than min_samples: not reported"},
    {"name": "KPIs on expert labels", "set": "sets carrying labelling_type",
     "formula": "the score's own code on the rows labelled 'expert'", "parameters": {},
     "undefined": "no labelling_type in the reference: not available"},
]


def analyses_context(details: dict, chart) -> dict:
    """{"analyses": the block, "analyses_charts": markup, "analyses_card": rows}; ``chart`` is html's safe drawer."""
    a = details.get("analyses") or {}
    card = [{"name": r["name"], "set": r["set"], "formula": r["formula"],
             "parameters": {**r["parameters"], "undefined cases": r["undefined"]}} for r in CARD]
    if not a:
        return {"analyses": {}, "analyses_charts": {}, "analyses_card": card}
    return {"analyses": a, "analyses_card": card, "analyses_charts": {
        "cost": chart("cost-coverage", analyses_charts.cost_coverage_chart, a.get("cost_coverage")),
        "breaking": chart("breaking points", analyses_charts.breaking_chart, a.get("breaking_points")),
        "drift": chart("drift timeline", analyses_charts.drift_timeline_chart, a.get("drift_delay")),
    }}
