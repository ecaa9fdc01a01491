"""Subjective-logic trust opinions: a hand-computed case and fusion = summed evidence."""

from functools import reduce

import numpy as np
import pytest

from challenge_welding.scoring.trust_opinion import (
    bin_index, binary_probability, class_opinion, cumulative_fusion, model_opinion,
    opinion_from_evidence,
)

# (true class, p_KO, p_OK); the third row puts all its mass on UNKNOWN (0/0 -> 0.5).
Y = np.array(["KO", "KO", "OK", "OK"])
P_KO = np.array([0.9, 0.3, 0.0, 0.2])
P_OK = np.array([0.1, 0.1, 0.0, 0.8])


def test_binary_probability_and_bins():
    q = binary_probability(P_KO, P_OK, "KO")
    assert q == pytest.approx([0.9, 0.75, 0.5, 0.2])
    assert bin_index(np.array([0.0, 0.1, 0.3, 0.7, 0.999, 1.0]), 10).tolist() == [0, 1, 3, 7, 9, 9]


def test_class_and_model_opinions_by_hand():
    # KO: bins 9 (n=1,t=1,RP=.95), 7 (1,1,.75), 5 (1,0,.55), 2 (1,0,.25)
    #     r = 2, s = .05 + .25 + .55 + .25 = 1.1, prior 0.5
    ko = class_opinion(Y, P_KO, P_OK, "KO")["opinion"]
    assert (ko["r"], ko["s"]) == pytest.approx((2.0, 1.1))
    assert (ko["b"], ko["d"], ko["u"], ko["P"]) == pytest.approx((2 / 5.1, 1.1 / 5.1, 2 / 5.1, 3 / 5.1))
    # OK: q_OK = .1 (bin 1, RP .15, t 0), .25 (bin 2, RP .25, t 0), .5 (bin 5, RP .55, t 1),
    #     .8 (bin 8, RP .85, t 1): r = 2, s = .15 + .25 + .45 + .15 = 1.0
    ok = class_opinion(Y, P_KO, P_OK, "OK")["opinion"]
    assert (ok["b"], ok["d"], ok["u"], ok["P"]) == pytest.approx((0.4, 0.2, 0.4, 0.6))
    m = model_opinion(Y, P_KO, P_OK)["model"]
    assert (m["r"], m["s"]) == pytest.approx((4.0, 2.1))
    assert (m["b"], m["d"], m["u"], m["a"]) == pytest.approx((4 / 8.1, 2.1 / 8.1, 2 / 8.1, 0.5))


def test_base_rate_is_class_prior():
    y = np.array(["KO"] + ["OK"] * 3)
    res = model_opinion(y, np.ones(4), np.zeros(4))
    assert res["classes"]["KO"]["opinion"]["a"] == 0.25
    assert res["classes"]["OK"]["opinion"]["a"] == 0.75


def _fuse_all(opinions):
    return reduce(cumulative_fusion, opinions)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairwise_fusion_equals_summed_evidence(seed):
    rng = np.random.default_rng(seed)
    n = 500
    y = np.where(rng.random(n) < 0.2, "KO", "OK")
    p_ko = rng.random(n) * rng.random(n)
    p_ok = (1 - p_ko) * rng.random(n)
    p_ok[:5] = p_ko[:5] = 0.0  # some all-UNKNOWN rows
    for cls in ("KO", "OK"):
        res = class_opinion(y, p_ko, p_ok, cls, bins=10)
        fused = _fuse_all(res["bins"])  # includes empty (vacuous) bins
        for key in "bduaP":
            assert fused[key] == pytest.approx(res["opinion"][key], rel=1e-12, abs=1e-12)
    both = model_opinion(y, p_ko, p_ok)
    fused = cumulative_fusion(both["classes"]["KO"]["opinion"], both["classes"]["OK"]["opinion"])
    for key in "bduaP":
        assert fused[key] == pytest.approx(both["model"][key], rel=1e-12)


def test_fusion_edge_cases():
    vac = opinion_from_evidence(0, 0, 0.3)
    x = opinion_from_evidence(5, 1, 0.3)
    assert cumulative_fusion(vac, x) == pytest.approx({k: x[k] for k in "bduaP"})
    both_vac = cumulative_fusion(vac, opinion_from_evidence(0, 0, 0.7))
    assert both_vac["u"] == 1.0 and both_vac["a"] == pytest.approx(0.5)
    dog = cumulative_fusion({"b": 1, "d": 0, "u": 0, "a": .5}, {"b": 0, "d": 1, "u": 0, "a": .5})
    assert (dog["b"], dog["d"], dog["u"]) == (0.5, 0.5, 0.0)


def test_empty_set_is_vacuous():
    res = model_opinion(np.array([], str), np.zeros(0), np.zeros(0))
    assert res["model"]["u"] == 1.0 and res["model"]["P"] == 0.5
