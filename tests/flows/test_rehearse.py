"""rehearse: the fitting arithmetic by hand, and one real rehearsal from the command line.

The rehearsal runs the real chain (synth, build-sets, bundle, ingestions in their own
environments, scoring, leaderboard) at a tiny size; its figures are checked against the
files it left on disk, read independently (os.walk, zipfile, parquet).
"""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest

from challenge_welding.data.build_sets import load_build_config
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.rehearse import (FULL_N, affine_fit, extrapolate, loglog_slope, parse_mix,
                                              scaled_build_config, scaled_with_floors, stage_key)


def test_mix_is_a_resolution_and_its_half():
    assert parse_mix("1920x1080:2,960x540:1") == ((1920, 1080), pytest.approx(1 / 3))
    assert parse_mix("960x540:1,1920x1080:3") == ((1920, 1080), pytest.approx(1 / 4))
    assert parse_mix("480x270") == ((480, 270), 0.0)
    for bad in ("1920x1080:2,800x600:1", "1920x1080:0", "big", "1x1:1,2x2:1,4x4:1"):
        with pytest.raises(ChallengeError, match="--mix"):
            parse_mix(bad)


def test_slope_and_affine_fit_by_hand():
    ns = [100, 300, 900]
    assert loglog_slope(ns, [3 * n * n for n in ns]) == pytest.approx(2.0)
    assert loglog_slope(ns, [7.0] * 3) == pytest.approx(0.0)
    assert loglog_slope([100], [1.0]) is None and loglog_slope(ns, [1, 0, 2]) is None
    assert affine_fit(ns, [5 + 2 * n for n in ns]) == pytest.approx((5.0, 2.0))
    # a negative intercept is refitted through the origin: b = sum(v n) / sum(n^2)
    v = [1.0, 5.0, 20.0]
    b = sum(x * n for x, n in zip(v, ns)) / sum(n * n for n in ns)
    assert affine_fit(ns, v) == pytest.approx((0.0, b))
    assert affine_fit(ns, [9.0, 6.0, 3.0]) == (6.0, 0.0)  # shrinking: a constant


def test_extrapolation_says_how():
    ns = [100, 300, 900]
    lin = extrapolate(ns, [5 + 2 * n for n in ns], 22753)
    assert lin["value"] == pytest.approx(5 + 2 * 22753) and lin["how"].startswith("extrapolated (affine")
    quad = extrapolate(ns, [n * n / 1e4 for n in ns], 22753)
    assert quad["value"] == pytest.approx(22753 ** 2 / 1e4) and "worse than linear" in quad["how"]
    assert extrapolate(ns, [1, 2, 3], 300) == {"value": 2.0, "how": "measured"}
    assert extrapolate([100], [1.0], 22753)["value"] is None


def test_sets_scale_with_the_source_and_are_the_defaults_at_full_size():
    defaults = load_build_config()
    assert scaled_build_config(FULL_N, defaults) == defaults
    half = scaled_build_config(FULL_N // 2, defaults)
    assert half.robustness.size == round(defaults.robustness.size * (FULL_N // 2) / FULL_N)
    assert scaled_build_config(10, defaults).drift.size == 10  # the floor
    cfg, floored = scaled_with_floors(FULL_N // 2, defaults)
    assert floored == [] and cfg == half
    _, floored = scaled_with_floors(60, defaults)  # 150 * 60 / 22753 = 0.4 -> floor 4
    assert "robustness.size" in floored
    # 2000 / 22753 = 0.088: robustness 13.2 -> 13, min KO 0.88 -> 1, drift 26.4 -> 26: no floor binds
    cfg, floored = scaled_with_floors(2000, defaults)
    assert floored == [] and (cfg.robustness.size, cfg.drift.size) == (13, 26)
    assert stage_key("score 43 virtual") == "score virtual" and stage_key("ingest cnn-small") == "ingest cnn-small"


def tree_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not os.path.islink(os.path.join(d, f)))


def test_rehearsal_runs_from_one_command(tmp_path):
    work, report = tmp_path / "work", tmp_path / "rehearsal.json"
    proc = subprocess.run([sys.executable, "-m", "challenge_welding", "rehearse", "--workdir", str(work),
                           "--images", "60", "--sizes", "60", "--mix", "320x180:2,160x90:1",
                           "--ko-share", "0.3", "--runs", "4", "--solutions", "always-ok,cnn-small",
                           "--keep", "--json", str(report)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(report.read_text())
    (size,) = result["sizes"]
    names = [s["name"] for s in size["stages"]]
    assert names == ["synth", "build-sets", "bundle", "ingest always-ok", "score always-ok",
                     "ingest cnn-small", "score cnn-small", "score 2 virtual", "leaderboard 4 runs"]
    for name in names:  # the printed table has every stage
        assert f"\n{stage_key(name)} " in proc.stdout
    for s in size["stages"]:
        assert s["wall_s"] > 0 and s["cpu_s"] > 0 and s["peak_rss_mb"] > 0, s
        assert s["cpu_s"] == pytest.approx(s["user_s"] + s["sys_s"])
        if s["name"].split()[0] != "leaderboard":  # outputs as the files on disk say
            assert s["output_mb"] == pytest.approx(tree_bytes(s["output"]) / 1e6), s["name"]
    root = work / "n60"
    # the synth store holds the 60 images (+ parquet), the sets as many images as their metadata rows
    store_images = [f for d, _, fs in os.walk(root / "store") for f in fs
                    if f.endswith((".jpeg", ".jpg", ".png")) and not f.endswith("_mask.png")]
    assert len(store_images) == 60  # the KO welds' defect masks beside them aside
    for name, count in size["eval_images"].items():
        assert count == len(list((root / "data" / "input_data" / name / "images").iterdir())) > 0
    assert set(size["eval_images"]) == {"performance", "robustness", "ood_real", "ood_synthetic",
                                        "generalization", "drift"}
    bundle = root / "bundle.zip"
    assert size["bundle"]["zip_bytes"] == bundle.stat().st_size
    with zipfile.ZipFile(bundle) as zf:
        inner = sum(i.file_size for i in zf.infolist() if i.filename.endswith(".zip"))
    assert size["bundle"]["stored_bytes"] == inner and size["bundle"]["quota_problems"] == []
    assert size["sizes_bytes"]["input_data"] == tree_bytes(root / "data" / "input_data")
    assert all(v >= 1800 for v in size["bundle"]["limits_s"].values())
    # the leaderboard ranked all four runs; cnn-small's answers are valid and cost real CPU
    board = pd.read_csv(root / "leaderboard.csv")
    assert len(board) == 4
    pred = pd.read_parquet(root / "predictions" / "cnn-small" / "performance.parquet")
    probs = pred[["scores KO", "scores OK", "scores UNKNOWN"]].to_numpy()
    assert np.allclose(probs.sum(axis=1), 1.0) and (pred["scores OOD"] >= 0).all()
    cnn = next(s for s in size["stages"] if s["name"] == "ingest cnn-small")
    instant = next(s for s in size["stages"] if s["name"] == "ingest always-ok")
    assert cnn["extra"]["component_ms_per_image"] > 10 * instant["extra"]["component_ms_per_image"]
