"""Organisers' caps on set sizes: exact sizes, the table printed before anything is written,
one clear line per bad value."""

import re
import subprocess
import sys

import pandas as pd
import pytest

from challenge_welding.commands.build_sets import parse_caps
from challenge_welding.contract.names import SET_NAMES
from challenge_welding.data.build_sets import build_sets
from challenge_welding.contract.errors import ChallengeError

# 5 + 6 + 6 + 4 ladder levels in data/build_config.yaml, plus the clean copy
COPIES = 1 + 5 + 6 + 6 + 4
CAPS = {"performance": 30, "robustness": 10 * COPIES + 5, "ood_synthetic": 31, "ood_real": 10,
        "generalization": 20, "drift": 50}
# by hand: robustness 225 // 22 = 10 base images (each 22 times); ood_synthetic 31 // 2 = 15 per
# class; ood_real 10 // 2 = 5 photos + 5 normal; the others exactly their cap.
EXPECTED = {"performance": 30, "robustness": 10 * COPIES, "ood_synthetic": 30, "ood_real": 10,
            "generalization": 20, "drift": 50}


@pytest.fixture
def low_min_ko(cfg):
    return cfg.replaced({"robustness": {"min_ko_per_level": 2}})  # so 10 base images satisfy it (~3 KO of 10)


def test_capped_sizes_are_exact_and_printed_before_writing(synth, tmp_path, low_min_ko, src_groups):
    out = tmp_path / "data"
    tables = []

    def report(table):
        assert not out.exists()  # nothing written yet
        tables.append(table)

    build_sets(out=out, seed=1, config=low_min_ko, progress=False, max_per_set=CAPS, report=report,
               plan_only=True, **synth.build_args())
    assert not out.exists()  # plan only: still nothing
    table = tables[0].set_index("set")
    assert {name: int(table.loc[name, "images"]) for name in SET_NAMES} == EXPECTED
    # performance: a stratified subsample of the 20 % held out: every (seam, class) group in
    # proportion (within one image of its share)
    assert table.loc["performance", "KO"] == pytest.approx(30 * src_groups["KO"], abs=1.5)


@pytest.fixture(scope="module")
def src_groups(source):
    meta = pd.read_parquet(source / "metadata" / "ds_meta.parquet")
    return (meta["class"].value_counts() / len(meta)).to_dict()


def test_the_table_matches_the_written_sets(synth, tmp_path, low_min_ko):
    tables = []
    out = build_sets(out=tmp_path / "data", seed=1, config=low_min_ko, progress=False, max_per_set=CAPS,
                     report=tables.append, **synth.build_args())
    table = tables[0].set_index("set")
    for name in SET_NAMES:
        ref = pd.read_parquet(out / "reference_data" / f"{name}.parquet")
        inp = pd.read_parquet(out / "input_data" / name / "metadata.parquet")
        assert len(ref) == EXPECTED[name] == table.loc[name, "images"]
        assert (ref["class"] == "KO").sum() == table.loc[name, "KO"]
        mpix = sum(int(w) * int(h) for w, h in inp["resolution"]) / 1e6
        assert table.loc[name, "megapixels"] == pytest.approx(mpix, abs=0.05)
    rob = pd.read_parquet(out / "reference_data" / "robustness.parquet")
    assert (rob["perturbation"] == "none").sum() == 10  # the ladder's base images


def test_a_cap_below_the_sets_minimum_is_one_clear_line(synth, tmp_path, cfg):
    # min_ko_per_level = 10 raises robustness to >= 10 KO per level: more than 2 base images
    with pytest.raises(ChallengeError, match=r"^max_per_set: robustness: (\d+) images planned \((\d+) base "
                       r"images x 22 copies: the fewest that hold robustness.min_ko_per_level KO per "
                       r"level\), cap 44: raise the cap") as info:
        build_sets(out=tmp_path / "d", seed=1, config=cfg, progress=False, plan_only=True,
                   max_per_set={"robustness": 2 * COPIES}, **synth.build_args())
    planned, base = (int(x) for x in re.match(r"\D+(\d+)\D+(\d+)", str(info.value)).groups())
    assert planned == base * COPIES and base >= 10 and "\n" not in str(info.value)


def test_bad_values_one_line_each():
    with pytest.raises(ChallengeError) as info:
        parse_caps("performance=abc, robustnes=3,drift,drift=0", "x")
    assert str(info.value).splitlines() == [
        "--max-per-set performance: expected a positive integer, got 'abc'",
        "--max-per-set 'robustnes': expected one of performance, robustness, ood_real, ood_synthetic, "
        "generalization, drift, got 'robustnes'",
        "--max-per-set 'drift': expected SET=N, got no '='",
        "--max-per-set drift: expected a positive integer, got '0'",
        "--robustness-base: expected a positive integer, got 'x'",
    ]
    assert parse_caps("performance=5000,robustness=2000", "7") == ({"performance": 5000,
                                                                     "robustness": 2000}, 7)


def test_cli_prints_the_table_and_writes_nothing(synth, tmp_path):
    out = tmp_path / "data"
    run = subprocess.run([sys.executable, "-m", "challenge_welding.commands.cli", "build-sets", "--source",
                          str(synth.source), "--unseen-source", str(synth.unseen), "--ood-source",
                          str(synth.ood), "--out", str(out), "--plan-only", "--max-per-set",
                          "drift=40,generalization=12", "--workers", "1"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "planned sizes (nothing written):"
    assert lines[1].split() == ["set", "images", "KO", "megapixels"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert list(rows) == [*SET_NAMES, "training_data"]
    assert rows["drift"][0] == "40" and rows["generalization"][0] == "12"
    assert not out.exists()
