"""Hostile files (issue 28): what we write is strict JSON, what we read back is checked first.

Every attack is real: a scored folder made by the real `score` of a real reference, then
tampered with as an organiser could receive it; a real submission installed and run by the
real `ingest`. Each command runs as a subprocess (the CLI a user types): one line on stderr,
the documented exit status, no traceback, and for the inflating archive and the deep JSON a
peak memory (/usr/bin/time's maximum resident set size) under 300 MB.

Against main (ca5213d), before this change:
- details.json nested 100,000 deep: `leaderboard` ended in a RecursionError traceback (exit 1);
- details.json "analyses": [..]: AttributeError traceback; baseline curves of strings: ValueError
  traceback (`leaderboard --baseline`), a warning "analyses failed" and exit 0 (`score --baseline`);
- scores.json "score": NaN: ranked first, exit 0;
- a 1.5 MB .draws.npz inflating to 1.5 GB: refused after 1,550 MiB of peak memory (now 122 MiB);
- answers with NaN seconds: status ok, ingestion.json holding a bare NaN (not JSON);
- rows [1e308] * 3: ingestion ok, then `score` "internal error: a score value is not finite" (exit 2);
- rows scaled by 0.99901 (inside the 1e-3 tolerance): kept as they were, the score moved
  (77.63842635 -> 77.65663137 on this reference);
- a prediction folder whose ingestion.json is nested 100,000 deep: `score` ended in a RecursionError
  traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from challenge_welding.contract.checked import MAX_JSON_DEPTH, MAX_NPZ_BYTES

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "ingestion"))
from ingestion_helpers import GOOD, failed_with_one_line, make_input_data, make_submission  # noqa: E402 - after tests/ingestion joins sys.path

CLI = [sys.executable, "-m", "challenge_welding"]
PEAK_LIMIT_KB = 300 * 1024


def strict(text: str):
    """json.loads that refuses NaN / Infinity (what a browser's JSON.parse does)."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def run_cli(tmp_path, *args):
    """(exit status, stderr, peak RSS in kB) of the CLI run as its own process.

    The peak is /usr/bin/time's %M: the command is forked from that small process. Measured
    from here (os.wait4), a child's ru_maxrss would start at pytest's own size (Linux keeps
    the pre-exec high-water mark of a forked copy), hundreds of MB that are not the command's.
    """
    err, peak = tmp_path / "cli.err", tmp_path / "cli.peak"
    with open(err, "wb") as e:
        status = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", str(peak)] + CLI + [str(a) for a in args],
                                stdout=subprocess.DEVNULL, stderr=e, timeout=600).returncode
    return status, err.read_text(), int(peak.read_text().split()[-1])


def one_line(status, stderr, expected_status, *parts):
    assert status == expected_status, (status, stderr[-2000:])
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- scored folders
def _load_scoring_conftest():
    import importlib.util

    spec = importlib.util.spec_from_file_location("scoring_conftest_for_hostile", TESTS / "scoring" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A real reference (600 performance samples, B = 50), one virtual submission scored with its draws."""
    import yaml

    from challenge_welding.flows.score import score
    from challenge_welding.scoring.calibrate import calibrate
    from challenge_welding.contract.draws import draws_path
    from challenge_welding.scoring.virtual import make_virtual

    base = tmp_path_factory.mktemp("hostile")
    ref = _load_scoring_conftest().make_reference(base / "reference_data", n_perf=600, seed=0)
    calibrate(ref)
    config = yaml.safe_load((ref / "scoring.yaml").read_text())
    config.setdefault("extras", {}).setdefault("bootstrap", {})["n"] = 50
    (ref / "scoring.yaml").write_text(yaml.safe_dump(config))
    pred = make_virtual(ref, "with_trust", base / "pred")
    out = base / "scored" / "good"
    score(ref, pred, out, draws_path=draws_path(out))
    return {"reference": ref, "pred": pred, "good": out, "base": base}


def tampered(scored, tmp_path, name, scores=None, details=None):
    """A copy of the good scored folder (and its draws) with scores.json / details.json replaced by text."""
    from challenge_welding.contract.draws import draws_path

    folder = tmp_path / name
    shutil.copytree(scored["good"], folder)
    shutil.copy(draws_path(scored["good"]), draws_path(folder))
    if scores is not None:
        (folder / "scores.json").write_text(scores)
    if details is not None:
        (folder / "details.json").write_text(details)
    return folder


def test_what_score_writes_is_strict_json(scored):
    for name in ("scores.json", "details.json"):
        strict((scored["good"] / name).read_text())
    strict((scored["pred"] / "ingestion.json").read_text())


def test_the_good_folder_is_ranked(scored, tmp_path):
    status, stderr, _ = run_cli(tmp_path, "leaderboard", scored["good"], "--output", tmp_path / "board")
    assert status == 0, stderr


def test_a_nan_score_is_never_ranked(scored, tmp_path):
    text = (scored["good"] / "scores.json").read_text()
    good = json.loads(text)
    bad = tampered(scored, tmp_path, "nan-score",
                   scores=json.dumps({**good, "score": float("nan")}))  # json.dumps writes a bare NaN
    status, stderr, _ = run_cli(tmp_path, "leaderboard", scored["good"], bad, "--output", tmp_path / "board")
    one_line(status, stderr, 2, str(bad / "scores.json"), "'score'", "not ranked")
    assert not (tmp_path / "board.csv").exists()


# one rule (contract.checked.read_scores, docs/integrity.md): a score that is not a number is refused
# in one line naming the file and the key, never ranked nor listed; whatever its spelling
@pytest.mark.parametrize("spelling, said", [
    ("1e999", "'score' is inf"),        # finite text, infinite float: refused as Infinity is
    ("-Infinity", "'score' is -inf"),
    ('"NaN"', "'score' is 'NaN', not a number"),
    ("null", "'score' is None, not a number"),
    ("true", "'score' is True, not a number"),
])
def test_a_score_that_is_not_a_number_is_refused_whatever_its_spelling(scored, tmp_path, spelling, said):
    text = (scored["good"] / "scores.json").read_text()
    good = json.loads(text)
    body = json.dumps({**good, "score": "@"}).replace('"@"', spelling)
    bad = tampered(scored, tmp_path, "odd-score", scores=body)
    status, stderr, _ = run_cli(tmp_path, "leaderboard", scored["good"], bad, "--output", tmp_path / "board")
    one_line(status, stderr, 2, str(bad / "scores.json"), said, "not ranked")
    assert not (tmp_path / "board.csv").exists()


def test_compare_reads_scores_through_the_contract(scored, tmp_path):
    """bundle.compare (a dry run's scores against the host's): a deep or NaN file is one line, exit 2.

    Against main (317e1dc): the deep file ended in a RecursionError traceback (exit 1), the NaN
    file was compared ("score: not finite numbers") and exit 1, as if the runs differed."""
    good = scored["good"] / "scores.json"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps({**json.loads(good.read_text()), "score": float("nan")}))
    for path, said in ((deep, "nested 100000 levels deep"), (nan, "'score' is nan")):
        res = subprocess.run(CLI[:2] + ["challenge_welding.bundle.compare", str(good), str(path)],
                             capture_output=True, text=True, timeout=300)
        one_line(res.returncode, res.stderr, 2, str(path), said)
    res = subprocess.run(CLI[:2] + ["challenge_welding.bundle.compare", str(good), str(good)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.startswith("same scores.json"), res.stderr


def test_details_nested_100000_deep(scored, tmp_path):
    deep = '{"robustness": ' + "[" * 100_000 + "]" * 100_000 + "}"
    bad = tampered(scored, tmp_path, "deep", details=deep)
    status, stderr, peak = run_cli(tmp_path, "leaderboard", bad, "--output", tmp_path / "board")
    one_line(status, stderr, 2, str(bad / "details.json"), f"nested 100001 levels deep (at most {MAX_JSON_DEPTH})")
    print(f"peak RSS, leaderboard over the deep details.json: {peak / 1024:.0f} MiB")
    assert peak < PEAK_LIMIT_KB, peak


def test_analyses_of_the_wrong_type(scored, tmp_path):
    details = json.loads((scored["good"] / "details.json").read_text())
    bad = tampered(scored, tmp_path, "list-analyses", details=json.dumps({**details, "analyses": [1, 2]}))
    status, stderr, _ = run_cli(tmp_path, "leaderboard", bad, "--output", tmp_path / "board")
    one_line(status, stderr, 2, str(bad / "details.json"), "key 'analyses' is [1, 2], expected dict")


def _string_curves(scored, tmp_path):
    details = json.loads((scored["good"] / "details.json").read_text())
    kind = next(iter(details["robustness"]))
    curve = details["robustness"][kind]
    details["robustness"][kind] = {**curve, "ml": ["x"] * len(curve["ml"])}
    return tampered(scored, tmp_path, "strings", details=json.dumps(details)), kind


def test_leaderboard_baseline_curves_of_strings(scored, tmp_path):
    bad, kind = _string_curves(scored, tmp_path)
    status, stderr, _ = run_cli(tmp_path, "leaderboard", scored["good"], bad,
                                "--baseline", "strings", "--output", tmp_path / "board")
    one_line(status, stderr, 2, str(bad / "details.json"), f"key 'robustness.{kind}'", "finite numbers")


def test_score_baseline_curves_of_strings(scored, tmp_path):
    bad, kind = _string_curves(scored, tmp_path)
    out = tmp_path / "out"
    status, stderr, _ = run_cli(tmp_path, "score", "--reference", scored["reference"], "--predictions",
                                scored["pred"], "--output", out, "--baseline", bad)
    one_line(status, stderr, 2, str(bad / "details.json"), f"key 'robustness.{kind}'", "finite numbers")
    assert not out.exists()  # refused before any work


def test_score_baseline_nested_deep(scored, tmp_path):
    bad = tampered(scored, tmp_path, "deep", details="[" * 100_000 + "]" * 100_000)
    status, stderr, peak = run_cli(tmp_path, "score", "--reference", scored["reference"], "--predictions",
                                   scored["pred"], "--output", tmp_path / "out", "--baseline", bad)
    one_line(status, stderr, 2, str(bad / "details.json"), "nested 100000 levels deep")


def test_draws_that_inflate_to_1_5_gb(scored, tmp_path):
    """A 1.5 MB archive whose 'score' array declares (and holds) 1.5 GB of zeros: refused before inflating."""
    from challenge_welding.contract.draws import draws_path

    bad = tampered(scored, tmp_path, "bomb")
    path = draws_path(bad)
    with np.load(path) as f:
        keep = {k: f[k] for k in f.files if k != "score"}
    n = 1_500_000_000 // 8
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in keep.items():
            with z.open(k + ".npy", "w") as fh:
                np.lib.format.write_array(fh, v)
        with z.open("score.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (n,)})
            block = bytes(8 << 20)
            for _ in range(n * 8 // len(block)):
                fh.write(block)
            fh.write(bytes(n * 8 % len(block)))
    size = path.stat().st_size
    assert size < 3 << 20, size  # a small file ...
    status, stderr, peak = run_cli(tmp_path, "leaderboard", bad, "--significance", "--output", tmp_path / "board")
    one_line(status, stderr, 2, str(path), "array 'score' inflates to 1,500,000,128 bytes")
    print(f"peak RSS, leaderboard over the inflating draws: {peak / 1024:.0f} MiB")
    assert peak < PEAK_LIMIT_KB, peak  # ... refused before it is inflated
    assert MAX_NPZ_BYTES < 1_500_000_000


# ---------------------------------------------------------------- prediction folders for `score`
def _predictions(scored, tmp_path, name, change, pattern="*.parquet"):
    """A copy of the good prediction folder with ``change(frame)`` applied to every set (unverified)."""
    pred = tmp_path / name
    shutil.copytree(scored["pred"], pred)
    for path in pred.glob(pattern):
        if "explainability" in path.name:
            continue
        frame = pd.read_parquet(path)
        change(frame)
        frame.to_parquet(path, index=False)
    return pred


COLUMNS = ["scores KO", "scores OK", "scores UNKNOWN"]


def test_ingestion_json_nested_100000_deep(scored, tmp_path):
    pred = _predictions(scored, tmp_path, "deep", lambda frame: None, "none")
    (pred / "ingestion.json").write_text("[" * 100_000 + "]" * 100_000)
    status, stderr, peak = run_cli(tmp_path, "score", "--reference", scored["reference"], "--predictions", pred,
                                   "--output", tmp_path / "out")
    one_line(status, stderr, 1, str(pred / "ingestion.json"), "nested 100000 levels deep")
    assert peak < PEAK_LIMIT_KB, peak


def test_rows_summing_to_infinity_are_refused_by_score(scored, tmp_path):
    def huge(frame):
        frame.loc[0, COLUMNS] = 1e308

    pred = _predictions(scored, tmp_path, "huge", huge, "performance.parquet")
    first = pd.read_parquet(pred / "performance.parquet")["sample_id"].iloc[0]
    status, stderr, _ = run_cli(tmp_path, "score", "--reference", scored["reference"], "--predictions", pred,
                                "--output", tmp_path / "out", "--unverified")
    # the scoring's established form: a head line, then one line per problem (here one set, one row)
    assert status == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert (f"set 'performance', column 'scores KO': probabilities sum to infinity (each row must sum to 1) "
            f"(1 row, e.g. sample_id {first!r})") in stderr.splitlines(), stderr


def test_rows_within_the_tolerance_are_scored_as_normalised_rows(scored, tmp_path):
    """Rows scaled by 0.99901 (off 1 by 9.9e-4 < 1e-3) score exactly as the rows they scale."""
    def scale(frame):
        frame[COLUMNS] = frame[COLUMNS].to_numpy() * 0.99901

    plain = _predictions(scored, tmp_path, "plain", lambda frame: None)
    scaled = _predictions(scored, tmp_path, "scaled", scale)
    got = {}
    for name, pred in (("plain", plain), ("scaled", scaled)):
        status, stderr, _ = run_cli(tmp_path, "score", "--reference", scored["reference"], "--predictions", pred,
                                    "--output", tmp_path / f"out-{name}", "--unverified")
        assert status == 0, stderr
        got[name] = strict((tmp_path / f"out-{name}" / "scores.json").read_text())
    for key, value in got["plain"].items():
        assert got["scaled"][key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


# ---------------------------------------------------------------- answers through a real `ingest`
NAN_SECONDS = GOOD.replace("        assert self.loaded\n", """        assert self.loaded
        import time
        time.perf_counter = lambda: float("nan")  # the child times predict() with it: seconds = NaN
""")
HUGE_ROWS = GOOD.replace("        return {\"predictions\": preds, \"probabilities\": probs, \"OOD_scores\": ood}",
                         "        return {\"predictions\": preds, \"probabilities\": [[1e308] * 3 for _ in preds], "
                         "\"OOD_scores\": ood}")


@pytest.fixture(scope="module")
def ingest_inputs(tmp_path_factory):
    cache = tmp_path_factory.mktemp("xdg") / "challenge-welding" / "envs"
    cache.mkdir(parents=True)
    return make_input_data(tmp_path_factory.mktemp("input_data")), cache


def _ingest(tmp_path, ingest_inputs, component):
    from challenge_welding.ingestion.run.ingest import ingest

    data, cache = ingest_inputs
    sub = make_submission(tmp_path / "sub", component)
    out = tmp_path / "pred"
    report = ingest(sub, data, out, cache_dir=cache, progress=False, batch_timeout=60, batch_size=3,
                    sets=["performance"])
    text = (out / "ingestion.json").read_text()
    assert strict(text) == report  # what we wrote is strict JSON, and is the report
    return report, out


def test_hand_made_fixture_is_good(tmp_path, ingest_inputs):
    assert HUGE_ROWS != GOOD and NAN_SECONDS != GOOD
    report, _ = _ingest(tmp_path, ingest_inputs, GOOD)
    assert report["status"] == "ok", report


def test_answers_with_nan_seconds(tmp_path, ingest_inputs):
    report, out = _ingest(tmp_path, ingest_inputs, NAN_SECONDS)
    failed_with_one_line(report, out, "'seconds' of a result message is nan, not a finite time >= 0")


def test_rows_of_1e308_refused_at_ingestion(tmp_path, ingest_inputs):
    report, out = _ingest(tmp_path, ingest_inputs, HUGE_ROWS)
    failed_with_one_line(report, out, "sample per000: probabilities sum to infinity: [1e+308, 1e+308, 1e+308]")
