"""Each criterion on hand-computed tiny cases, and against scikit-learn where it has the metric."""

import numpy as np
import pytest
from sklearn.metrics import fbeta_score, precision_score, roc_auc_score

from challenge_welding.scoring import metrics as m

KO, OK, UNK = 0, 1, 2


def test_seam_weighted_cost_by_hand():
    costs = np.array([1.0, 3.0, 10.0])
    seams = np.array([0, 0, 1])
    w = np.array([0.2, 0.4])
    # seam means 2 and 10: (0.2*2 + 0.4*10) / 0.6
    assert m.seam_weighted_cost(costs, seams, w) == pytest.approx(4.4 / 0.6)
    # frequency weights 2, 0, 1: seam 0 mean = 1
    assert m.seam_weighted_cost(costs, seams, w, sample_weight=np.array([2.0, 0, 1])) == pytest.approx(4.2 / 0.6)
    # a seam with no sample drops out of both sums
    assert m.seam_weighted_cost(costs, seams, w, sample_weight=np.array([1.0, 1, 0])) == pytest.approx(2.0)
    # batch of weights: one value per row, same as row by row
    W = np.array([[2.0, 0, 1], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_allclose(m.seam_weighted_cost(costs, seams, w, sample_weight=W), [4.2 / 0.6, 2.0, 4.4 / 0.6])


def test_seam_weighted_cost_empty_is_recorded():
    notes = []
    assert m.seam_weighted_cost(np.array([]), np.array([], dtype=int), np.array([0.5]), undefined=notes) == 0
    assert notes and "no sample" in notes[0]


def test_sample_and_expected_costs():
    cost = np.array([[26.4, 3000, 41], [30, 0.4, 20]])
    y = np.array([KO, OK])
    np.testing.assert_allclose(m.sample_costs(y, np.array([OK, UNK]), cost), [3000, 20])
    proba = np.array([[0.5, 0.1, 0.4], [0.0, 1.0, 0.0]])
    np.testing.assert_allclose(m.expected_costs(y, proba, cost), [13.2 + 300 + 16.4, 0.4])


def test_operational_cost_and_its_undefined_case():
    assert m.operational_cost(10.0, 2.0, 12.0) == pytest.approx(0.8)
    notes = []
    assert m.operational_cost(5.0, 3.0, 3.0, undefined=notes) == 0.0
    assert "OP set to 0" in notes[0]


def test_uncertainty_gain_regular_and_degenerate():
    assert m.uncertainty_gain(10.0, 6.0, 2.0, 12.0) == pytest.approx(0.5)
    assert m.uncertainty_gain(10.0, 14.0, 2.0, 12.0) == pytest.approx(-0.5)  # soft outputs worse: negative
    notes = []
    # hard decisions perfect: 1 - (4 - 2) / (12 - 2)
    assert m.uncertainty_gain(2.0, 4.0, 2.0, 12.0, undefined=notes) == pytest.approx(0.8)
    assert "already perfect" in notes[0]
    np.testing.assert_allclose(m.uncertainty_gain(np.array([10.0, 2.0]), np.array([6.0, 4.0]), 2.0, 12.0), [0.5, 0.8])


def test_fbeta_by_hand():
    y = np.array([KO, KO, OK, OK])
    pred = np.array([KO, UNK, KO, OK])  # TP 1, FN 1 (UNKNOWN is not KO), FP 1
    assert m.ml_score(y, pred) == pytest.approx(0.5)
    assert m.ml_score(y, pred, average="precision") == pytest.approx(0.5)
    # F2 = 5 TP / (5 TP + 4 FN + FP) = 5 / 10
    assert m.ml_score(y, pred, beta=2.0) == pytest.approx(0.5)


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("zero_division", [0.0, 1.0])
def test_fbeta_matches_sklearn(beta, zero_division):
    rng = np.random.default_rng(1)
    names = np.array(["KO", "OK", "UNKNOWN"])
    for trial in range(20):
        n = int(rng.integers(1, 30))
        y = rng.integers(0, 2, n) if trial % 4 else np.ones(n, dtype=int)  # some without any KO
        pred = rng.integers(0, 3, n) if trial % 5 else np.full(n, UNK)     # some without predicted KO
        w = rng.integers(0, 3, n).astype(float)
        for avg, labels in (("binary", None), ("macro", ["KO", "OK"])):
            kw = dict(average=avg, labels=labels, zero_division=zero_division, beta=beta)
            if avg == "binary":
                kw.update(labels=["KO"], average="macro")  # binary F of KO with UNKNOWN among the answers
            expected = fbeta_score(names[y], names[pred], **kw)
            assert m.ml_score(y, pred, beta=beta, average=avg, zero_division=zero_division) == pytest.approx(expected)
            expected_w = fbeta_score(names[y], names[pred], sample_weight=w, **kw)
            assert m.ml_score(y, pred, beta=beta, average=avg, zero_division=zero_division,
                              sample_weight=w) == pytest.approx(expected_w)
        expected_p = precision_score(names[y], names[pred], labels=["KO"], average="macro",
                                     zero_division=zero_division)
        assert m.ml_score(y, pred, average="precision", zero_division=zero_division) == pytest.approx(expected_p)


def test_fbeta_zero_division_is_recorded_and_grouped():
    notes = []
    y = np.array([OK, OK, KO, KO])
    pred = np.array([OK, OK, KO, OK])
    groups = np.array([0, 0, 1, 1])
    # group 0: no true and no predicted KO -> zero_division; group 1: TP 1, FN 1 -> 2/3
    np.testing.assert_allclose(m.ml_score(y, pred, groups=groups, n_groups=2, undefined=notes), [0.0, 2 / 3])
    assert "zero_division" in notes[0]


def test_time_percentile_weighted_equals_repeated():
    rng = np.random.default_rng(2)
    t = rng.exponential(0.05, 50)
    t[:5] = t[5]  # ties
    W = rng.integers(0, 4, size=(6, 50)).astype(float)
    got = m.time_percentile(t, 95.0, sample_weight=W)
    for row, value in zip(W, got):
        assert value == pytest.approx(np.percentile(np.repeat(t, row.astype(int)), 95.0))
    for method in ("lower", "higher", "midpoint"):
        got = m.time_percentile(t, 90.0, method=method, sample_weight=W[:1])
        assert got[0] == pytest.approx(np.percentile(np.repeat(t, W[0].astype(int)), 90.0, method=method))
    assert m.time_percentile(np.array([0.1, 0.2, 0.3, 0.4]), 95.0) == pytest.approx(0.385)


def test_top_label_confidence():
    conf, label = m.top_label(np.array([[0.6, 0.2, 0.2], [0.0, 0.0, 1.0], [0.2, 0.2, 0.6], [0.1, 0.3, 0.6]]))
    np.testing.assert_allclose(conf, [0.75, 0.5, 0.5, 0.75])
    np.testing.assert_array_equal(label, [KO, KO, KO, OK])  # ties go to KO


def test_ece_by_hand():
    y = np.array([KO, KO, KO, KO])
    proba = np.array([[0.9, 0.1, 0.0],    # conf 0.9, top KO, right   -> bin 9
                      [0.3, 0.5, 0.2],    # conf 0.625, top OK, wrong -> bin 6
                      [0.85, 0.15, 0.0],  # conf 0.85, right          -> bin 8
                      [1.0, 0.0, 0.0]])   # conf 1.0 (last bin closed) -> bin 9
    # bin 9: acc 1, conf 0.95, 2 samples; bin 6: acc 0, conf 0.625; bin 8: acc 1, conf 0.85
    expected = (2 * 0.05 + 0.625 + 0.15) / 4
    assert m.expected_calibration_error(y, proba, 10) == pytest.approx(expected)
    # with 2 bins: [0, 0.5) empty, [0.5, 1]: acc 3/4, conf (0.9+0.625+0.85+1)/4
    assert m.expected_calibration_error(y, proba, 2) == pytest.approx(abs(0.75 - 3.375 / 4))


def test_ece_bin_edges_and_empty_subset():
    # conf exactly 0.6 belongs to bin [0.6, 0.7): with 10 bins, two samples at 0.6 (right) and 0.65 (wrong)
    y = np.array([KO, OK])
    proba = np.array([[0.6, 0.4, 0.0], [0.65, 0.35, 0.0]])
    # one bin [0.6, 0.7): acc 0.5, conf 0.625
    assert m.expected_calibration_error(y, proba, 10) == pytest.approx(0.125)
    notes = []
    assert m.expected_calibration_error(np.array([], dtype=int), np.zeros((0, 3)), 10, undefined=notes) == 0
    assert "empty subset" in notes[0]


def test_ece_weighted_rows_match_repetition():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 40)
    proba = rng.dirichlet(np.ones(3), 40)
    W = rng.integers(0, 3, size=(3, 40)).astype(float)
    got = m.expected_calibration_error(y, proba, 10, sample_weight=W)
    for row, value in zip(W, got):
        idx = np.repeat(np.arange(40), row.astype(int))
        assert value == pytest.approx(m.expected_calibration_error(y[idx], proba[idx], 10))


def test_auroc_matches_sklearn_with_ties_and_weights():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 60))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            y[0] = 1 - y[0]
        s = np.round(rng.normal(size=n) + y, 1)  # rounded: many ties
        assert m.roc_auc(y, s) == pytest.approx(roc_auc_score(y, s))
        w = rng.integers(1, 4, n).astype(float)
        assert m.roc_auc(y, s, sample_weight=w) == pytest.approx(roc_auc_score(y, s, sample_weight=w))
        W = np.stack([w, np.ones(n)])
        np.testing.assert_allclose(m.roc_auc(y, s, sample_weight=W),
                                   [roc_auc_score(y, s, sample_weight=w), roc_auc_score(y, s)])


def test_auroc_by_hand_and_undefined_cases():
    # pairs (ood, in): (0.8 > 0.1), (0.8 > 0.4), (0.4 = 0.4) counts 1/2, (0.4 > 0.1) -> 3.5 / 4
    assert m.roc_auc(np.array([1, 1, 0, 0]), np.array([0.8, 0.4, 0.4, 0.1])) == pytest.approx(0.875)
    notes = []
    assert m.roc_auc(np.array([0, 1, 0]), np.zeros(3), undefined=notes) == 0.5
    assert any("constant" in n for n in notes)
    notes = []
    assert m.roc_auc(np.array([1, 1]), np.array([0.1, 0.9]), undefined=notes) == 0.5
    assert any("single class" in n for n in notes)


def test_level_auc():
    # signed axis -30..30: trapezoids (0.5+1)/2*30 twice over a length of 60
    assert m.level_auc([-30.0, 0.0, 30.0], np.array([0.5, 1.0, 0.5])) == pytest.approx(0.75)
    assert m.level_auc([0.0, 5.0, 20.0], np.array([0.8, 0.8, 0.8])) == pytest.approx(0.8)
    # 0..20 with ML 1, 1, 0 at 0, 10, 20: (10 + 5) / 20
    assert m.level_auc([0.0, 10.0, 20.0], np.array([1.0, 1.0, 0.0])) == pytest.approx(0.75)
    np.testing.assert_allclose(m.level_auc([0.0, 10.0], np.array([[1.0, 0.0], [1.0, 1.0]])), [0.5, 1.0])
    notes = []
    assert m.level_auc([0.0], np.array([0.7]), undefined=notes) == pytest.approx(0.7)
    assert "single level" in notes[0]


@pytest.mark.parametrize("n_bins, m_edge", [(10, 7), (22, 15), (23, 13), (39, 31)])
def test_ece_edges_belong_to_the_upper_bin(n_bins, m_edge):
    # a confidence exactly on the edge m/M belongs to bin m (floor(conf * M) puts these in m - 1):
    # with a right sample on the edge and a wrong one just below it, the bins differ and
    # ECE = ((1 - conf) + below) / 2; in one bin it would be |1/2 - (conf + below)/2|
    conf = m_edge / n_bins
    below = np.nextafter(conf, 0)
    proba = np.array([[conf, 1 - conf, 0.0], [below, 1 - below, 0.0]])
    y = np.array([KO, OK])
    assert m.expected_calibration_error(y, proba, n_bins) == pytest.approx(((1 - conf) + below) / 2)
