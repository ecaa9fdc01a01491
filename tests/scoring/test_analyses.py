"""The analyses of issue 20: each metric against hand-computed values or an independent route."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_curve

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.scoring.analyses import (annotators, breaking_points, cost_coverage, drift_delay,
                                                localisation, ood_detail)
from challenge_welding.scoring.analyses.assemble import localisation_section
from challenge_welding.scoring.config import load_config, validate_config
from challenge_welding.scoring.criteria import compute, prepare

COST = np.array([[26.4, 3000.0, 41.0], [30.0, 0.4, 20.0]])


# --- cost-coverage ---------------------------------------------------------------------------------
def _brute_policies(p, y, cost, v):
    """Every (t_lo, t_hi) pair over the distinct scores and +inf: (cost, coverage, t_lo, t_hi)."""
    cands = list(np.unique(p)) + [np.inf]
    out = []
    for lo, hi in itertools.product(cands, cands):
        if hi < lo:
            continue
        x = np.where(p < lo, 1, np.where(p < hi, 2, 0))
        out.append((float(np.mean(v * cost[y, x])), float(np.mean(x != 2)), lo, hi))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_cost_coverage_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 30
    p = np.round(rng.random(n), 1)  # ties on purpose
    y = (rng.random(n) < 0.7).astype(int)
    v = rng.uniform(0.5, 1.5, n)
    levels = [0.0, 0.3, 0.5, 0.8, 1.0]
    res = cost_coverage.cost_coverage(p, y, COST, v, levels)
    brute = _brute_policies(p, y, COST, v)
    best = min(b[0] for b in brute)
    assert res["best"]["cost"] == pytest.approx(best)
    match = [b for b in brute if math.isclose(b[0], best, rel_tol=1e-12)]
    t_lo = res["best"]["t_lo"] if res["best"]["t_lo"] is not None else np.inf
    t_hi = res["best"]["t_hi"] if res["best"]["t_hi"] is not None else np.inf
    assert any(b[2] == t_lo and b[3] == t_hi for b in match)
    for c, got in zip(levels, res["curve"]["cost"]):
        assert got == pytest.approx(min(b[0] for b in brute if b[1] >= c - 1e-12))


def test_cost_coverage_hand_case():
    # p_KO 0.1 (OK), 0.4 (KO), 0.6 (OK), 0.9 (KO); cost KO row (0, 10, 1), OK row (1, 0, 0.5)
    cost = np.array([[0.0, 10.0, 1.0], [1.0, 0.0, 0.5]])
    res = cost_coverage.cost_coverage(np.array([0.1, 0.4, 0.6, 0.9]), np.array([1, 0, 1, 0]), cost,
                                      coverages=[0.0, 1.0])
    # best: OK below 0.4, KO from 0.4 on: one false alarm (cost 1) over 4 samples
    assert res["best"] == {"cost": 0.25, "coverage": 1.0, "t_lo": 0.4, "t_hi": 0.4}
    # coverage 0: everything UNKNOWN is allowed, but the same policy is cheaper
    assert res["curve"]["cost"] == [0.25, 0.25]
    assert cost_coverage.decision_cost(np.array([1, 0, 1, 0]), np.array([2, 2, 2, 2]), cost) == (0.75, 0.0)


def test_thresholds_only_between_blocks_of_min_samples():
    rng = np.random.default_rng(0)
    p = rng.random(1000)
    cuts = cost_coverage.tie_cuts(np.sort(p), 25)
    assert cuts[0] == 0 and cuts[-1] == 1000 and np.diff(cuts).min() >= 25
    res = cost_coverage.cost_coverage(p, (rng.random(1000) < 0.9).astype(int), COST, min_block=25)
    for t in (res["best"]["t_lo"], res["best"]["t_hi"]):
        if t is not None:  # a threshold sits at a cut: its rank is one of the cut positions
            assert int(np.count_nonzero(p < t)) in set(cuts.tolist())


def _rc_loop(conf, loss):
    """fd-shifts' loops (rc_stats_utils.selective_risk_stats / generalized_risk_stats), rewritten plainly."""
    n = len(conf)
    order = np.argsort(conf)
    c, r = conf[order], loss[order]
    cov, err = [1.0], [r.sum()]
    e = r.sum()
    for i in range(n - 1):
        e -= r[i]
        if c[i] != c[i + 1]:
            cov.append((n - i - 1) / n)
            err.append(e)
    sr = [e_ / (cv * n) for e_, cv in zip(err, cov)] + [None]
    sr[-1] = sr[-2]
    gr = [e_ / n for e_ in err] + [0.0]
    cov = cov + [0.0]
    aurc = sum((cov[k] - cov[k + 1]) * (sr[k] + sr[k + 1]) / 2 for k in range(len(cov) - 1))
    augrc = sum((cov[k] - cov[k + 1]) * (gr[k] + gr[k + 1]) / 2 for k in range(len(cov) - 1))
    return aurc, augrc


@pytest.mark.parametrize("seed", range(3))
def test_risk_coverage_matches_fd_shifts_loops(seed):
    rng = np.random.default_rng(seed)
    conf = np.round(rng.random(200), 2)
    loss = (rng.random(200) < 0.2).astype(float)
    got = cost_coverage.risk_coverage(conf, loss)
    aurc, augrc = _rc_loop(conf, loss)
    assert got["aurc"] == pytest.approx(aurc)
    assert got["augrc"] == pytest.approx(augrc)
    r = loss.mean()
    assert got["eaurc"] == pytest.approx(aurc - (r + (1 - r) * np.log(1 - r)))


def test_risk_coverage_hand_case():
    # accept 1..4: selective risks 0, 0, 1/3, 1/2; generalized 0, 0, 1/4, 1/2
    got = cost_coverage.risk_coverage(np.array([0.9, 0.8, 0.7, 0.6]), np.array([0.0, 0.0, 1.0, 1.0]))
    assert got["aurc"] == pytest.approx(0.25 * (0.5 + 1 / 3) / 2 + 0.25 * (1 / 3) / 2)
    assert got["augrc"] == pytest.approx(0.25 * (0.5 + 0.25) / 2 + 0.25 * 0.25 / 2)
    assert cost_coverage.risk_coverage(np.array([]), np.array([]))["aurc"] is None


# --- OOD detail --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_ood_detail_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    ood = (rng.random(300) < 0.4).astype(int)
    s = np.round(rng.normal(ood * 1.0, 1.0), 1)  # ties
    d = ood_detail.ood_detail(ood, s)
    assert d["aupr_out"] == pytest.approx(average_precision_score(ood, s))
    assert d["aupr_in"] == pytest.approx(average_precision_score(1 - ood, -s))
    fpr, tpr, _ = roc_curve(1 - ood, -s)
    assert d["fpr_at_tpr"] == pytest.approx(fpr[np.searchsorted(tpr, 0.95, side="left")])


def test_ood_detail_hand_and_undefined():
    # ID positive, ranked by -s: 1, 2, 4 are ID; 3, 5 OOD. TPR reaches 1 at -s = -4 where one OOD (3) is in.
    d = ood_detail.ood_detail(np.array([0, 0, 1, 0, 1]), np.array([1, 2, 3, 4, 5.0]))
    assert d["fpr_at_tpr"] == 0.5
    assert d["aupr_out"] == pytest.approx((1 + 1) / 2 * 0.5 + (2 / 3) * 0.5 - 0.5 * 0.5 + 0.5 * 0.5)
    one = ood_detail.ood_detail(np.zeros(5), np.arange(5.0))
    assert one["fpr_at_tpr"] is None and "one class" in one["undefined"]


# --- breaking points ---------------------------------------------------------------------------------
def test_breaking_points_hand_case():
    # performance: 3 TP, 1 FP -> precision 0.75; margin 0.1 -> breaks below 0.65
    y_p, p_p = np.array([0, 0, 0, 1]), np.array([0, 0, 0, 0])
    # blur level 1: 2 TP 0 FP (1.0); level 2: 1 TP 1 FP (0.5: breaks); rotation -10: 1 TP 1 FP, +10: 1 TP
    pert = np.array(["blur"] * 4 + ["rotation"] * 3)
    level = np.array([1, 1, 2, 2, -10, -10, 10.0])
    y = np.array([0, 0, 0, 1, 0, 1, 0])
    pred = np.array([0, 0, 0, 0, 0, 0, 0])
    r = breaking_points.breaking_points(y, pred, pert, level, y_p, p_p, 0.1, ["blur", "rotation"], ("rotation",))
    assert r["reference_precision"] == 0.75
    assert r["ladders"]["blur"]["precision"] == [1.0, 0.5] and r["ladders"]["blur"]["break_level"] == 2.0
    assert r["ladders"]["rotation -"]["break_level"] == -10.0
    assert r["ladders"]["rotation +"]["break_level"] is None


def test_breaking_interval_holds_the_point_and_is_deterministic():
    rng = np.random.default_rng(0)
    n = 400
    level = np.repeat([1.0, 2.0, 3.0, 4.0], n)
    y = (rng.random(4 * n) < 0.5).astype(int)
    fp_rate = np.repeat([0.05, 0.1, 0.4, 0.8], n)  # precision falls with the level
    pred = np.where(y == 0, 0, np.where(rng.random(4 * n) < fp_rate, 0, 1))
    y_p = (rng.random(n) < 0.5).astype(int)
    p_p = np.where(y_p == 0, 0, np.where(rng.random(n) < 0.05, 0, 1))
    args = (y, pred, np.array(["blur"] * 4 * n), level, y_p, p_p, 0.05, ["blur"])
    a = breaking_points.breaking_points(*args, n_boot=200, seed=3)["ladders"]["blur"]
    b = breaking_points.breaking_points(*args, n_boot=200, seed=3)["ladders"]["blur"]
    assert a == b
    lo, hi = a["break_interval"]
    assert lo <= a["break_level"] <= hi


def test_relative_robustness_hand_case():
    mine = {"blur": {"levels": [0, 1, 2], "ml": [1.0, 0.9, 0.8]},
            "rotation": {"levels": [-10, 0, 10], "ml": [0.6, 1.0, None]}}
    base = {"blur": {"levels": [0, 1, 2], "ml": [1.0, 0.8, 0.6]},
            "rotation": {"levels": [-10, 0, 10], "ml": [0.8, 1.0, 0.5]}}
    r = breaking_points.relative_robustness(mine, base)
    assert r["per_type"] == {"blur": pytest.approx(0.3 / 0.6), "rotation": pytest.approx(0.4 / 0.2)}
    assert r["mce"] == pytest.approx((0.5 + 2.0) / 2)
    assert breaking_points.relative_robustness(mine, {"blur": {"levels": [1], "ml": [1.0]}})["mce"] is None


# --- drift -------------------------------------------------------------------------------------------
def test_drift_delay_hand_case():
    s = np.array([0.1, 0.2, 0.3, 0.1, 0.2, 0.25, 0.2, 0.9, 0.8])
    ood = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])
    d = drift_delay.drift_delay(s, ood, far=0.2, block=3)
    # onset 6 (a multiple of 3); tau = 0.8 quantile "higher" of the six scores before = 0.25
    assert (d["onset"], d["threshold"], d["false_alarms"]) == (6, 0.25, 1)
    assert d["delay"] == 1  # position 6 scores 0.2, position 7 rings
    d = drift_delay.drift_delay(s, np.r_[0, 0, 0, 0, 1, 1, 1, 1, 1], far=0.2, block=3)
    assert d["onset"] == 3  # first OOD at 4, rounded down to the block


def test_drift_delay_undefined_cases():
    assert "no onset" in drift_delay.drift_delay(np.arange(5.0), np.zeros(5))["undefined"]
    d = drift_delay.drift_delay(np.arange(50.0), np.r_[np.zeros(10), np.ones(40)], block=25)
    assert d["threshold"] is None and "fewer than 25" in d["undefined"]
    d = drift_delay.drift_delay(np.r_[np.ones(30), np.zeros(20)], np.r_[np.zeros(30), np.ones(20)], block=25)
    assert d["delay"] is None and "not detected" in d["undefined"]


# --- localisation ------------------------------------------------------------------------------------
def test_pool_mask_keeps_a_thin_crack():
    mask = np.zeros((16, 16), bool)
    mask[:, 5] = True  # one pixel wide
    pooled = localisation.pool_mask(mask, (4, 4), 4)
    assert pooled[:, 1].all() and not pooled[:, [0, 2, 3]].any()
    # the remainder rows/columns of an image not divisible by 4 fold into the last block
    m = np.zeros((10, 9), bool)
    m[9, 8] = True
    assert localisation.pool_mask(m, (2, 2), 4).tolist() == [[False, False], [False, True]]


def test_pointing_game_and_energy_hand_case():
    saliency = np.array([[0, 3], [1, 3]], float)
    pooled = np.array([[0, 1], [0, 0]], bool)
    assert localisation.sample_scores(saliency, pooled) == (0.5, 3 / 7, 7.0)  # tied maxima share the credit
    assert localisation.sample_scores(np.zeros((2, 2)), pooled)[:2] == (0.25, 0.0)  # flat map: mask share


def test_localisation_means_and_interval():
    maps = {f"s{i}": np.array([[9, 0], [0, 0]], np.uint8) for i in range(30)}
    masks = {f"s{i}": np.kron(np.array([[1, 0], [0, 0]]) if i < 20 else np.array([[0, 0], [0, 1]]),
                              np.ones((4, 4))).astype(np.uint8) * 255 for i in range(30)}
    masks["empty"], maps["empty"] = np.zeros((8, 8), np.uint8), np.ones((2, 2), np.uint8)
    r = localisation.localisation(maps, masks, 4, n_boot=300, seed=0)
    assert r["n"] == 30 and r["pointing_game"] == pytest.approx(20 / 30) and r["energy"] == pytest.approx(20 / 30)
    assert r["pointing_game_ci"][0] < 20 / 30 < r["pointing_game_ci"][1]
    assert any("empty defect mask" in u for u in r["undefined"])


def test_localisation_says_no_maps_and_no_masks():
    config = load_config()
    frames = {"performance": pd.DataFrame({"sample_id": ["a"], "class": ["KO"]})}
    assert localisation_section(frames, {"performance": None}, {}, config)["reason"].startswith("no maps")
    maps = {"performance": {"a": np.ones((2, 2), np.uint8)}}
    assert localisation_section(frames, maps, {"performance": None}, config)["reason"].startswith("no masks")
    masks = {"performance": {"a": np.full((8, 8), 255, np.uint8)}}
    small = localisation_section(frames, maps, masks, config)  # 1 sample < min_samples: not reported
    assert small["all"]["pointing_game"] is None and small["all"]["n"] == 1


# --- annotators --------------------------------------------------------------------------------------
def test_expert_kpis_use_only_expert_rows(reference_maker, tmp_path):
    from challenge_welding.scoring.inputs import frames_from, read_reference
    from challenge_welding.scoring.virtual import make_virtual
    from challenge_welding.contract.names import SET_NAMES

    ref = reference_maker(tmp_path / "ref", n_perf=600, seed=2)
    make_virtual(ref, "good", tmp_path / "pred", seed=1)
    refs = {n: read_reference(ref, n) for n in SET_NAMES}
    preds = {n: pd.read_parquet(tmp_path / "pred" / f"{n}.parquet") for n in SET_NAMES}
    frames, _ = frames_from(refs, preds)
    config = load_config()
    perf = frames["performance"]
    # expert = the first half of the performance rows; the expert-only score is the score of those rows
    labelling = {"performance": {s: ("expert" if i < 300 else "operator") for i, s in enumerate(perf["sample_id"])}}
    got = annotators.expert_kpis(frames, labelling, config, 25)
    assert got["available"] and got["n"]["performance"] == 300 and "robustness" in got["unlabelled_sets"]
    sub = dict(frames, performance=perf.iloc[:300].reset_index(drop=True))
    with np.errstate(all="ignore"):
        want = compute(prepare(sub, config), config)
    assert got["score"] == pytest.approx(float(want["score"]))
    full = compute(prepare(frames, config), config)
    assert got["kpis"]["perf"] != pytest.approx(float(full["rescaled"]["perf"]))  # the subset matters
    none = annotators.expert_kpis(frames, {}, config, 25)
    assert not none["available"] and "labelling_type" in none["reason"]
    few = {"performance": {s: "expert" for s in perf["sample_id"][:10]}}
    assert "fewer than 25" in annotators.expert_kpis(frames, few, config, 25)["reason"]


# --- config ------------------------------------------------------------------------------------------
def test_labelling_type_comes_from_the_one_read_of_the_reference(reference_maker, tmp_path):
    """The annotators' labelling is what the scoring read with the reference (hashed and parsed
    from one read of its bytes): the analyses need no reference file on disk afterwards."""
    import hashlib

    from challenge_welding.scoring.analyses.run import run_analyses
    from challenge_welding.scoring.inputs import read_inputs
    from challenge_welding.scoring.virtual import make_virtual

    ref = reference_maker(tmp_path / "ref", n_perf=600, seed=2)
    perf_file = ref / "performance.parquet"
    perf = pd.read_parquet(perf_file)
    perf["labelling_type"] = ["expert" if i < 300 else "operator" for i in range(len(perf))]
    perf.to_parquet(perf_file, index=False)
    make_virtual(ref, "good", tmp_path / "pred", seed=1)
    digest = hashlib.sha256(perf_file.read_bytes()).hexdigest()
    inputs = read_inputs(ref, tmp_path / "pred", verify=False)
    assert inputs.hashes["performance"]["reference"] == digest
    assert inputs.labelling == {"performance": dict(zip(perf["sample_id"].astype(str), perf["labelling_type"]))}
    for f in ref.glob("*.parquet"):
        f.unlink()  # nothing left to read a second time
    details = {"warnings": []}
    out = run_analyses(ref, tmp_path / "pred", inputs.frames, load_config(), details, labelling=inputs.labelling)
    assert details["warnings"] == []
    assert out["annotators"]["available"] and out["annotators"]["n"]["performance"] == 300


def test_analyses_settings_in_the_config():
    raw = load_config().as_dict()
    assert raw["analyses"]["drift_false_alarm_rate"] == 0.05 and raw["analyses"]["ood_tpr"] == 0.95
    old = {k: v for k, v in raw.items() if k != "analyses"}
    assert validate_config(old).analyses.as_dict() == raw["analyses"]  # older configs keep working
    bad = dict(raw, analyses=dict(raw["analyses"], ood_tpr=1.5))
    with pytest.raises(ChallengeError, match="analyses.ood_tpr"):
        validate_config(bad, "x.yaml")


def test_maps_are_read_for_the_wanted_samples_only(tmp_path):
    from challenge_welding.contract.explanation_maps import MapsWriter, file_name, read_explainability

    rng = np.random.default_rng(0)
    maps = [rng.integers(0, 256, (3 + i, 5), dtype=np.uint8) for i in range(6)]
    writer = MapsWriter()
    writer.ROW_GROUP_BYTES = 40  # several row groups: the filter crosses them
    writer.add([f"s{i}" for i in range(3)], maps[:3])
    writer.add([f"s{i}" for i in range(3, 6)], maps[3:])
    (tmp_path / file_name("performance")).write_bytes(writer.finish())
    got = read_explainability(tmp_path, "performance", ["s1", "s4", "absent"])
    assert sorted(got) == ["s1", "s4"]
    assert np.array_equal(got["s1"], maps[1]) and np.array_equal(got["s4"], maps[4])
    assert read_explainability(tmp_path, "performance", []) == {}
    assert len(read_explainability(tmp_path, "performance")) == 6
    assert read_explainability(tmp_path, "robustness", ["s1"]) is None  # no file: no maps


def test_maps_without_a_ko_sample_are_not_called_missing():
    config = load_config(None)
    frames = {"performance": pd.DataFrame({"sample_id": ["a", "b"], "class": ["OK", "OK"]})}
    out = localisation_section(frames, {"performance": {}}, {"performance": {"x": np.ones((4, 4))}},
                               config)
    assert out == {"available": False, "reason": "no set has both maps and masks"}
    out = localisation_section(frames, {"performance": None}, {"performance": {"x": np.ones((4, 4))}},
                               config)
    assert out["reason"].startswith("no maps")


def test_masks_pooled_at_read_give_the_localisation_of_full_size_masks(tmp_path):
    import cv2

    from challenge_welding.scoring.analyses import localisation
    from challenge_welding.scoring.analyses.sources import read_masks
    from challenge_welding.contract.explanation_maps import MAP_SCALE, reduced_shape

    rng = np.random.default_rng(3)
    folder = tmp_path / "masks" / "performance"
    folder.mkdir(parents=True)
    maps = {}
    for i, (h, w) in enumerate([(1080, 1920), (540, 960), (101, 77), (37, 50)]):
        mask = np.zeros((h, w), np.uint8)
        y, x = rng.integers(0, h - 5), rng.integers(0, w - 5)
        mask[y:y + 1 + i * 7, x:x + 3 + i * 5] = 255  # thin defects: pooling decides the hits
        cv2.imwrite(str(folder / f"s{i}.png"), mask)
        maps[f"s{i}"] = rng.integers(0, 256, reduced_shape(h, w), dtype=np.uint8)
    full = read_masks(tmp_path, "performance")
    pooled = read_masks(tmp_path, "performance", grid={k: m.shape for k, m in maps.items()})
    assert all(pooled[k].shape == maps[k].shape for k in maps)
    assert sum(m.nbytes for m in pooled.values()) * 15 < sum(m.nbytes for m in full.values())
    assert localisation.localisation(maps, pooled, MAP_SCALE, n_boot=200) == \
        localisation.localisation(maps, full, MAP_SCALE, n_boot=200)
    assert read_masks(tmp_path, "performance", grid={}) == {}  # no map: nothing decoded
    assert read_masks(tmp_path, "drift", grid={}) is None  # no folder: no masks


def test_masks_folder_without_a_ko_map_is_not_called_missing():
    config = load_config(None)
    frames = {"performance": pd.DataFrame({"sample_id": ["a"], "class": ["KO"]})}
    out = localisation_section(frames, {"performance": {}}, {"performance": {}}, config)
    assert out == {"available": False, "reason": "no set has both maps and masks"}
