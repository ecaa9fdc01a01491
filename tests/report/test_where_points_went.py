"""Where the points went (scoring.shortfall): each KPI's loss and the criterion that cost it most, by hand.

The default config's weights: perf 0.30, uncertainty 0.15, robustness 0.25, ood 0.20,
generalization 0.05, drift 0.05. KPIs given with alpha1 = alpha2 = None are unscaled
(rescaled = raw), so each recovery below is plain arithmetic on the formulas of docs/scoring.md.
"""

import math

import pytest

from challenge_welding.report.html import render_report
from challenge_welding.scoring.shortfall import where_points_went

UNSCALED = {"alpha1": None, "alpha2": None}


def _kpis(**rescaled):
    return {k: {"rescaled": v, **UNSCALED} for k, v in rescaled.items()}


# criteria consistent with the rescaled KPIs below (unscaled, so raw = rescaled):
# I_U = clip(-5.83) ... = 0; I_ood = 0.3 * 0.9 + 0.7 * 0.6 = 0.69; I_gen = 0.4 e^0 + 0.6 * 1 = 1.
CRITERIA = {"op": 0.2, "ml": 0.8, "time_p95": 0.0, "uop": -5.83, "ucalib_ko": 0.1, "ucalib_ok": 0.05,
            "r_blur": 0.5, "r_lum": 0.9, "r_rot": 0.9, "r_trans": 0.9, "ood_syn": 0.9, "ood_real": 0.6,
            "op_g": 0.0, "ml_g": 1.0, "op_d": 1.0, "ood_d": 0.5}
PERF = (0.4 * math.exp(-0.2) + 0.6 * 0.8)  # t = 0: denominator 1
ROB = 0.3 * 0.5 + 0.3 * 0.9 + 0.2 * 0.9 + 0.2 * 0.9
DRIFT = 0.5 * math.exp(-0.05) + 0.5 * 0.5


@pytest.fixture(scope="module")
def rows(scoring_config):
    kpis = _kpis(perf=PERF, uncertainty=0.0, robustness=ROB, ood=0.69, generalization=1.0, drift=DRIFT)
    return where_points_went(kpis, CRITERIA, scoring_config)


def test_losses_are_weight_times_shortfall_biggest_first_and_sum_to_100_minus_score(rows):
    score = 100 * (0.30 * PERF + 0.15 * 0 + 0.25 * ROB + 0.20 * 0.69 + 0.05 * 1.0 + 0.05 * DRIFT)
    loss = {r["kpi"]: r["loss"] for r in rows}
    # by hand: 100 w (1 - I)
    assert loss["uncertainty"] == pytest.approx(15.0)
    assert loss["ood"] == pytest.approx(20 * 0.31)                         # 6.2
    assert loss["robustness"] == pytest.approx(25 * (1 - 0.78))            # 5.5
    assert loss["perf"] == pytest.approx(30 * (1 - 0.4 * math.exp(-0.2) - 0.48))  # 30 (0.52 - 0.32749) = 5.775
    assert loss["drift"] == pytest.approx(5 * (0.75 - 0.5 * math.exp(-0.05)))      # 1.372
    assert loss["generalization"] == 0.0
    assert [r["kpi"] for r in rows] == ["uncertainty", "ood", "perf", "robustness", "drift", "generalization"]
    assert sum(loss.values()) == pytest.approx(100 - score)
    assert sum(r["got"] for r in rows) == pytest.approx(score)


def test_the_criterion_that_cost_most_and_what_fixing_it_gives_back(rows):
    by = {r["kpi"]: r for r in rows}
    # I_U: UOP -> 1 gives clip(1 - 2 (0.8 * 0.1 + 0.2 * 0.05)) = 0.82 -> 15 * 0.82 = 12.3; the ECEs alone give 0
    u = by["uncertainty"]
    assert u["worst"] == "uop" and u["recovery"] == pytest.approx(12.3)
    assert u["sentence"] == ("Uncertainty 0/15: your probabilities cost more than your hard answers (UOP -5.83): "
                             "calibrate, or send doubtful welds to UNKNOWN; that alone would give back 12.3 points")
    # I_ood: real 0.6 -> 1 gives 20 * 0.7 * 0.4 = 5.6, synthetic 0.9 -> 1 only 20 * 0.3 * 0.1 = 0.6
    assert by["ood"]["worst"] == "ood_real" and by["ood"]["recovery"] == pytest.approx(5.6)
    # I_rob: blur 0.5 -> 1 gives 25 * 0.3 * 0.5 = 3.75; the others 25 * a * 0.1 at most 0.75
    assert by["robustness"]["worst"] == "r_blur" and by["robustness"]["recovery"] == pytest.approx(3.75)
    assert "blurred" in by["robustness"]["sentence"]
    # I_perf: ML 0.8 -> 1 gives 30 * 0.6 * 0.2 = 3.6; OP 0.2 -> 0 gives 30 * 0.4 (1 - e^-0.2) = 2.175
    assert by["perf"]["worst"] == "ml" and by["perf"]["recovery"] == pytest.approx(3.6)
    # I_drift: AUROC_d 0.5 -> 1 gives 5 * 0.5 * 0.5 = 1.25; OP_d 1 -> 0 gives 5 * 0.5 (1 - e^-0.05) = 0.122
    assert by["drift"]["worst"] == "ood_d" and by["drift"]["recovery"] == pytest.approx(1.25)
    assert by["generalization"]["sentence"] == "Generalization 5/5: nothing lost"


def test_time_over_budget_and_the_rescaling_of_the_kpi(scoring_config):
    # I_perf with OP 0, ML 1, t = 0.1 s: 1 / (1 + 12 ln 1.1) = 0.53358; three-piece through (0.2, 0.1), (0.8, 0.9)
    raw = 1 / (1 + 12 * math.log(1.1))
    resc = 0.1 + 0.8 * (raw - 0.2) / 0.6
    kpis = {"perf": {"rescaled": resc, "alpha1": 0.2, "alpha2": 0.8}}
    crit = dict(CRITERIA, op=0.0, ml=1.0, time_p95=0.1)
    perf = next(r for r in where_points_went(kpis, crit, scoring_config) if r["kpi"] == "perf")
    assert perf["worst"] == "time_p95"
    assert perf["recovery"] == pytest.approx(30 * (1 - resc))  # t -> 0 gives raw 1 -> rescaled 1
    assert "100 ms per image" in perf["sentence"]


def test_absent_kpi_loses_its_weight_and_says_so(scoring_config):
    rows = where_points_went({}, {}, scoring_config)
    assert sum(r["loss"] for r in rows) == pytest.approx(100)
    assert rows[0]["kpi"] == "perf" and "not measured" in rows[0]["sentence"]


def test_when_no_criterion_alone_gives_points_back_the_one_costing_most_alone_is_named(scoring_config):
    # UOP -1 and ECE_KO 0.55, ECE_OK 0.6: UOP -> 1 leaves clip(1 - 2 (0.44 + 0.12)) = 0, the ECEs -> 0 leave clip(-1)
    # = 0: no recovery. Alone (others perfect): UOP costs 15, ECE_KO 15 (1 - (1 - 0.88)) = 13.2, ECE_OK 15 * 0.24 = 3.6.
    crit = dict(CRITERIA, uop=-1.0, ucalib_ko=0.55, ucalib_ok=0.6)
    u = next(r for r in where_points_went(_kpis(uncertainty=0.0), crit, scoring_config) if r["kpi"] == "uncertainty")
    assert u["worst"] == "uop" and u["recovery"] == 0.0
    assert u["also"] == "ucalib_ko"
    assert u["sentence"].endswith("it gives points back only once ECE_KO 0.55 is mended too")


def test_the_page_draws_it_at_the_top(report_details, scoring_config):
    import copy

    details = copy.deepcopy(report_details)
    details["shortfall"] = where_points_went(details["kpis"], details["scores"], scoring_config)
    html = render_report(details, scoring_config)
    top = html.index('id="points"')
    assert top < html.index('id="kpis"') and top < html.index('id="warnings"')
    first = details["shortfall"][0]
    assert html.index(first["label"], top) < html.index(details["shortfall"][1]["label"], top)
    assert "Provenance" in html and html.index('id="provenance"') > html.index('id="kpis"')
