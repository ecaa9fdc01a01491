"""The analyses' rows of the metric card: formula, parameters and undefined cases of each (issue 20)."""

from __future__ import annotations

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


def card_rows(config) -> list[dict]:
    """Metric-card rows in details.json's schema (name, set, formula, parameters), settings from the config."""
    a = config.analyses
    values = {"analyses.ood_tpr": a.ood_tpr, "analyses.breaking_margin": a.breaking_margin,
              "analyses.drift_false_alarm_rate": a.drift_false_alarm_rate,
              "disclosure.points": config.disclosure.points}
    return [{"name": r["name"], "set": r["set"], "formula": r["formula"],
             "parameters": {**{k: values.get(v, v) for k, v in r["parameters"].items()},
                            "undefined cases": r["undefined"]}} for r in CARD]
