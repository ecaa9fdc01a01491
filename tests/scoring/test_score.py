"""The score shell and commands: files written, byte-identical scores, exit statuses, calibration."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import yaml

from challenge_welding.contract.names import KPI_KEYS, SCORE_KEYS, SET_NAMES
from challenge_welding.scoring.bootstrap import Resampler, bootstrap
from challenge_welding.scoring.calibrate import calibrate
from challenge_welding.scoring.config import DEFAULT_CONFIG_PATH, load_config
from challenge_welding.scoring.criteria import compute, prepare
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.flows.score import score
from challenge_welding.scoring.virtual import make_virtual

CLI = [sys.executable, "-m", "challenge_welding"]


@pytest.fixture(scope="module")
def scored(reference_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("scored")
    pred = make_virtual(reference_dir, "with_trust", base / "pred")
    result = score(reference_dir, pred, base / "out1")
    return base, pred, result


def test_score_writes_the_three_files(scored):
    base, _, result = scored
    out = base / "out1"
    assert sorted(p.name for p in out.iterdir()) == ["detailed_results.html", "details.json", "scores.json"]
    scores = json.loads((out / "scores.json").read_text())
    assert tuple(scores) == SCORE_KEYS and scores == result
    assert all(isinstance(v, float) and math.isfinite(v) for v in scores.values())
    assert 0 <= scores["score"] <= 100 and all(0 <= scores[k] <= 1 for k in KPI_KEYS)


def test_scores_json_is_byte_identical_across_runs(scored, reference_dir):
    base, pred, _ = scored
    score(reference_dir, pred, base / "out2")
    assert (base / "out1/scores.json").read_bytes() == (base / "out2/scores.json").read_bytes()
    d1 = json.loads((base / "out1/details.json").read_text())
    d2 = json.loads((base / "out2/details.json").read_text())
    assert d1["score_ci"] == d2["score_ci"] and d1["criteria_ci"] == d2["criteria_ci"]


def test_details_schema_and_consistency(scored):
    base, _, result = scored
    d = json.loads((base / "out1/details.json").read_text())
    for key in ("score", "score_ci", "scores", "kpis", "criteria_ci", "sets", "robustness", "time",
                "undefined_cases", "warnings", "extras", "metric_card", "config"):
        assert key in d
    assert d["scores"] == result
    lo, hi = d["score_ci"]
    assert lo <= d["score"] <= hi
    # the final score is the weighted sum of the rescaled KPIs written in details
    total = 100 * sum(d["kpis"][k]["weight"] * d["kpis"][k]["rescaled"] for k in KPI_KEYS)
    assert total == pytest.approx(d["score"], abs=1e-6)
    assert d["kpis"]["perf"]["rescaling"] == "three-piece" and d["kpis"]["uncertainty"]["rescaling"] == "two-piece"
    perf = d["sets"]["performance"]
    assert perf["n"] == perf["n_KO"] + perf["n_OK"]
    assert sum(sum(row.values()) for row in perf["confusion"].values()) == perf["n"]
    assert set(d["robustness"]) == {"blur", "luminance", "rotation", "translation"}
    assert d["robustness"]["rotation"]["levels"] == [-30.0, -20.0, -10.0, 0.0, 10.0, 20.0, 30.0]
    assert set(d["metric_card"]["inputs_sha256"]) == set(SET_NAMES)
    assert any(x["name"] == "ECE" and x["parameters"]["bins"] == 10 for x in d["metric_card"]["metrics"])


@pytest.mark.parametrize("kind, expected", [
    ("full_unknown", {("AUROC", "ood_real", "constant scores"), ("AUROC", "ood_synthetic", "constant scores"),
                      ("AUROC", "drift", "constant scores")}),
    ("perfect", {("UOP", "performance", "hard decisions already perfect")}),
])
def test_undefined_cases_are_listed(reference_dir, tmp_path, kind, expected):
    from challenge_welding.scoring.score import score_frames

    frames, _, _ = read_frames(reference_dir, make_virtual(reference_dir, kind, tmp_path / "pred"))
    _, details = score_frames(frames, load_config(reference_dir / "scoring.yaml"), with_bootstrap=False)
    assert {(u["metric"], u["set"], u["case"]) for u in details["undefined_cases"]} == expected
    assert all(u["resolution"] for u in details["undefined_cases"])


def test_cli_score_success_and_failure(scored, reference_dir, tmp_path):
    _, pred, _ = scored
    from challenge_welding.commands import cli

    # success in-process (the page's imports are already loaded), failure as a real subprocess
    status = cli.main(["score", "--reference", str(reference_dir), "--predictions", str(pred),
                       "--output", str(tmp_path / "out")])
    assert status == 0
    assert (tmp_path / "out/scores.json").read_bytes() == (scored[0] / "out1/scores.json").read_bytes()
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in SET_NAMES[:-1]:
        (broken / f"{name}.parquet").write_bytes((pred / f"{name}.parquet").read_bytes())
    bad = subprocess.run(CLI + ["score", "--reference", str(reference_dir), "--predictions", str(broken),
                                "--output", str(tmp_path / "out2")], capture_output=True, text=True)
    assert bad.returncode != 0
    assert bad.stderr.startswith("error:") and "drift" in bad.stderr
    assert not (tmp_path / "out2" / "scores.json").exists()


def test_default_config_is_used_with_a_warning(uncalibrated_reference, tmp_path):
    pred = make_virtual(uncalibrated_reference, "good", tmp_path / "pred")
    frames, _, _ = read_frames(uncalibrated_reference, pred)
    from challenge_welding.scoring.score import resolve_config, score_frames

    warnings = []
    assert resolve_config(uncalibrated_reference, None, warnings) == DEFAULT_CONFIG_PATH
    assert "packaged default" in warnings[0]
    scores, details = score_frames(frames, load_config(), warnings=warnings, with_bootstrap=False)
    assert all(details["kpis"][k]["rescaling"] == "unscaled" for k in KPI_KEYS)
    assert scores["perf"] == details["kpis"]["perf"]["raw"]


def test_calibrate_writes_alphas_and_keeps_the_rest(uncalibrated_reference, tmp_path):
    import shutil

    ref = tmp_path / "ref"
    shutil.copytree(uncalibrated_reference, ref)
    text = DEFAULT_CONFIG_PATH.read_text().replace("n: 1000, seed: 0", "n: 200, seed: 0")
    (ref / "scoring.yaml").write_text(text)
    alphas = calibrate(ref)
    written = (ref / "scoring.yaml").read_text()
    assert "# Scoring configuration" in written and "n: 200" in written  # comments and settings kept
    config = load_config(ref / "scoring.yaml")
    assert config.as_dict()["rescaling"]["alpha"] == alphas
    assert alphas["perf"]["alpha1"] == pytest.approx(0.4 * math.exp(-1), abs=1e-9)  # full UNKNOWN: OP=1, ML=0
    assert alphas["ood"]["alpha1"] == 0.5 and alphas["uncertainty"]["alpha1"] == 0.0
    assert all(a["alpha1"] < a["alpha2"] < 1 for a in alphas.values())
    # the calibrated good solution then scores 90 on that folder
    pred = make_virtual(ref, "good", tmp_path / "pred")
    frames, _, _ = read_frames(ref, pred)
    res = compute(prepare(frames, config), config)
    assert float(res["score"]) == pytest.approx(90.0, abs=1e-6)
    cli = subprocess.run(CLI + ["calibrate", "--reference", str(ref)], capture_output=True, text=True)
    assert cli.returncode == 0 and "alpha1" in cli.stdout
    assert yaml.safe_load((ref / "scoring.yaml").read_text()) == yaml.safe_load(written)


def test_cli_virtual_writes_six_sets(uncalibrated_reference, tmp_path):
    out = tmp_path / "pred"
    res = subprocess.run(CLI + ["virtual", "--reference", str(uncalibrated_reference), "--kind", "random",
                                "--output", str(out), "--seed", "3"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{n}.parquet" for n in SET_NAMES] + ["ingestion.json"])
    bad = subprocess.run(CLI + ["virtual", "--reference", str(uncalibrated_reference), "--kind", "superb",
                                "--output", str(out)], capture_output=True, text=True)
    assert bad.returncode != 0 and "superb" in bad.stderr


def test_virtual_is_reproducible(uncalibrated_reference, tmp_path):
    a = make_virtual(uncalibrated_reference, "with_trust", tmp_path / "a", seed=5)
    b = make_virtual(uncalibrated_reference, "with_trust", tmp_path / "b", seed=5)
    c = make_virtual(uncalibrated_reference, "with_trust", tmp_path / "c", seed=6)
    assert (a / "robustness.parquet").read_bytes() == (b / "robustness.parquet").read_bytes()
    assert (a / "robustness.parquet").read_bytes() != (c / "robustness.parquet").read_bytes()


# --- bootstrap -------------------------------------------------------------------------------------
def test_resample_counts_keep_each_stratum_size():
    strata = np.array([0, 1, 0, 2, 1, 0, 1, 1, 1, 2])  # stratum sizes 3, 5, 2
    row_of = np.array([0, 2, 1, 5, 3, 0, 4, 2, 4, 5])  # rows 0-1 in stratum 0, 2-4 in 1, 5 in 2
    counts = Resampler(strata, 0, "performance").counts(row_of, 6, 50)
    assert counts.shape == (50, 6)
    np.testing.assert_array_equal(counts[:, :2].sum(1), 3)
    np.testing.assert_array_equal(counts[:, 2:5].sum(1), 5)
    np.testing.assert_array_equal(counts[:, 5], 2)
    # row 0 holds 2 of the 3 samples of stratum 0: drawn about 2/3 of the time
    assert counts[:, 0].sum() / counts[:, :2].sum() == pytest.approx(2 / 3, abs=0.1)


@pytest.mark.parametrize("n", [400, 9000])
def test_resamples_are_the_same_samples_whatever_the_rows(n):
    """Paired by construction: the drawn samples depend on the strata and the seed only.

    Groupings from 1 to k distinct rows per stratum go through every counting path
    (n = 9000: two strata of ~4500 samples, above FEW_ROWS).
    """
    from challenge_welding.scoring import bootstrap as bs

    rng = np.random.default_rng(5)
    strata = rng.integers(0, 3 if n < 1000 else 2, n)
    per_sample = np.argsort(np.argsort(strata, kind="stable"), kind="stable")  # one row per sample
    samples = Resampler(strata, 7, "drift").counts(per_sample, n, 6)
    assert n < 1000 or np.bincount(strata).min() > bs.FEW_ROWS
    for grouping in (rng.integers(0, 2, n), np.zeros(n, dtype=int), rng.integers(0, 50, n),
                     rng.integers(0, n // 2, n), rng.integers(0, 100 * n, n)):
        gid = np.unique(np.stack([strata, grouping]), axis=1, return_inverse=True)[1].ravel()
        grouped = Resampler(strata, 7, "drift").counts(gid, gid.max() + 1, 6)
        expected = np.zeros_like(grouped)
        np.add.at(expected.T, gid, samples.T[per_sample])
        np.testing.assert_array_equal(grouped, expected)


@pytest.mark.parametrize("kind", ["random", "with_trust"])
def test_collapsed_sets_give_the_same_criteria(reference_dir, tmp_path, kind):
    from challenge_welding.scoring.bootstrap import RELEVANT, collapse
    from challenge_welding.scoring.criteria import set_criteria

    config = load_config(reference_dir / "scoring.yaml")
    frames, _, _ = read_frames(reference_dir, make_virtual(reference_dir, kind, tmp_path / "pred"))
    prep = prepare(frames, config)
    for name, a in prep.items():
        rows, mult, _ = collapse(a, RELEVANT[name])
        assert mult.sum() == a.n
        full, _ = set_criteria(name, a, config)
        small, _ = set_criteria(name, rows, config, mult)
        for key in full:
            assert float(small[key]) == pytest.approx(float(full[key]), abs=1e-12), (name, key)
    assert collapse(prep["robustness"], RELEVANT["robustness"])[0].n < prep["robustness"].n / 10


def test_batch_evaluation_equals_one_resample_at_a_time(reference_dir, tmp_path):
    from challenge_welding.scoring.bootstrap import RELEVANT, collapse_index
    from challenge_welding.scoring.criteria import set_criteria

    config = load_config(reference_dir / "scoring.yaml")
    pred = make_virtual(reference_dir, "random", tmp_path / "pred")
    frames, _, _ = read_frames(reference_dir, pred)
    prep = prepare(frames, config)
    for name, a in prep.items():
        rows, _, _, row_of = collapse_index(a, RELEVANT[name])
        weights = Resampler(a.strata(), 1, name).counts(row_of, rows.n, 3)
        batch, _ = set_criteria(name, rows, config, weights)
        for j in range(3):
            one, _ = set_criteria(name, rows, config, weights[j])
            for key, value in one.items():
                assert float(value) == pytest.approx(batch[key][j], abs=1e-9), (name, key)


def _interval_width(make_reference, tmp_path, n_perf, kind="good"):
    ref = make_reference(tmp_path / f"ref{n_perf}", n_perf=n_perf, seed=11)
    config = load_config(DEFAULT_CONFIG_PATH)
    frames, _, _ = read_frames(ref, make_virtual(ref, kind, tmp_path / f"pred{n_perf}"))
    prep = prepare(frames, config)
    point = compute(prep, config)
    # B = 1000: at 300 the Monte Carlo noise of the width ratio (about 0.69 at B = 3000) reaches 0.75
    ci = bootstrap(prep, config, n_boot=1000, seed=0)
    return point, ci


def test_bootstrap_interval_contains_the_estimate_and_shrinks_with_n(reference_maker, tmp_path):
    small_point, small = _interval_width(reference_maker, tmp_path, 400)
    big_point, big = _interval_width(reference_maker, tmp_path, 3200)
    for point, ci in ((small_point, small), (big_point, big)):
        assert ci["score"][0] <= float(point["score"]) <= ci["score"][1]
        for key in ("op", "ml", "ood_real", "op_d"):
            assert ci["criteria"][key][0] <= float(point["criteria"][key]) <= ci["criteria"][key][1]

    def width(ci, k):
        return ci[k][1] - ci[k][0]

    assert width(big, "score") < width(small, "score") * 0.75
    assert width(big["criteria"], "ood_real") < width(small["criteria"], "ood_real")


def test_undefined_cases_met_in_resamples_are_counted(uncalibrated_reference, tmp_path):
    from challenge_welding.scoring.criteria import UndefinedCases

    config = load_config(DEFAULT_CONFIG_PATH)
    frames, _, _ = read_frames(uncalibrated_reference, make_virtual(uncalibrated_reference, "perfect", tmp_path / "p"))
    notes = UndefinedCases()
    bootstrap(prepare(frames, config), config, n_boot=120, seed=0, notes=notes)
    counted = [r for r in notes.records if "resamples" in r]
    # every resample of a perfect answer keeps the hard decisions perfect: UOP's degenerate case each time
    assert [(r["metric"], r["set"], r["resamples"], r["of"]) for r in counted] == [("UOP", "performance", 120, 120)]


def test_each_set_carries_its_operational_cost(reference_dir, tmp_path):
    """details.json's per-set OP is the score's own: by hand from the set's costs, and the criterion op."""
    from challenge_welding.scoring.score import score_frames

    frames, _, _ = read_frames(reference_dir, make_virtual(reference_dir, "good", tmp_path / "pred"))
    scores, details = score_frames(frames, load_config(reference_dir / "scoring.yaml"), with_bootstrap=False)
    for name, s in details["sets"].items():
        if "cost" in s:
            assert s["op"] == pytest.approx((s["cost"] - s["cost_ideal"]) / (s["cost_human"] - s["cost_ideal"]),
                                            rel=1e-9), name
    assert details["sets"]["performance"]["op"] == pytest.approx(scores["op"], rel=1e-9)
