"""The scorer scores only the ingestion's predictions (issue 10, attack 3 and rewritten set files)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from challenge_welding.contract.errors import SubmissionFailed
from challenge_welding.scoring.config import DEFAULT_CONFIG_PATH
from challenge_welding.scoring.inputs import read_inputs
from challenge_welding.scoring.provenance import manifest_of
from challenge_welding.scoring.virtual import make_virtual

CLI = [sys.executable, "-m", "challenge_welding"]
SCORING_PROGRAM = Path(__file__).resolve().parents[2] / "scoring_program" / "score.py"


@pytest.fixture(scope="module")
def virtual_pred(uncalibrated_reference, tmp_path_factory):
    return make_virtual(uncalibrated_reference, "good", tmp_path_factory.mktemp("pred") / "pred")


@pytest.fixture
def pred(virtual_pred, tmp_path):
    dst = tmp_path / "res"
    shutil.copytree(virtual_pred, dst)
    return dst


def _refused(ref, pred):
    with pytest.raises(SubmissionFailed) as info:
        read_inputs(ref, pred)
    assert len(str(info.value).splitlines()) == 1
    return str(info.value)


def _report(pred, **changes):
    path = pred / "ingestion.json"
    report = json.loads(path.read_text())
    report.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del report[key]
    path.write_text(json.dumps(report))


def test_virtual_output_is_accepted_and_says_its_origin(uncalibrated_reference, pred):
    report = json.loads((pred / "ingestion.json").read_text())
    assert report["status"] == "ok" and report["origin"] == "virtual"
    assert report["manifest"] == manifest_of(pred, [f"{n}.parquet" for n in report["counts"]])
    inputs = read_inputs(uncalibrated_reference, pred)
    assert inputs.provenance == {"verified": True, "origin": "virtual"}
    assert not any("not verified" in w for w in inputs.warnings)
    # Codabench's worker metadata with a clean ingestion exit: accepted too
    (pred / "metadata").write_text("exitCode: 0\nelapsedTime: 12.5\ningestionExitCode: 0\n"
                                   "ingestionElapsedTime: 10.1\n")
    assert read_inputs(uncalibrated_reference, pred).provenance["verified"]


def test_second_container_is_refused(uncalibrated_reference, pred, tmp_path):
    """Attack 3: the ingestion refused the submission (exit 1) but a second container wrote predictions,
    even a consistent ingestion.json with a matching manifest; the worker's metadata tells."""
    (pred / "metadata").write_text("exitCode: 0\nelapsedTime: 30.2\ningestionExitCode: 1\n"
                                   "ingestionElapsedTime: 3.0\n")
    msg = _refused(uncalibrated_reference, pred)
    assert "ingestion exited with status 1" in msg
    # through the Codabench scoring program: non-zero exit (1), one line, no score written
    inp = tmp_path / "input"
    inp.mkdir()
    (inp / "ref").symlink_to(uncalibrated_reference)
    (inp / "res").symlink_to(pred)
    run = subprocess.run([sys.executable, str(SCORING_PROGRAM), str(inp), str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: the ingestion exited with status 1")
    assert not (tmp_path / "out" / "scores.json").exists()


def test_tampered_file_is_refused(uncalibrated_reference, pred):
    """Rewritten set files (attack 2): compute_time set to 0 after the ingestion wrote the file."""
    path = pred / "performance.parquet"
    frame = pd.read_parquet(path)
    frame["compute_time"] = 0.0 * frame["compute_time"] + 1e-9
    frame.to_parquet(path, index=False)
    msg = _refused(uncalibrated_reference, pred)
    assert "performance.parquet changed after the ingestion wrote it" in msg


@pytest.mark.parametrize("change, words", [
    ({"status": "failed", "errors": ["predict() raised ValueError\nTraceback ..."]},
     "ingestion status is 'failed', not 'ok'"),
    ({"status": "running"}, "ingestion status is 'running'"),
    ({"manifest": None}, "has no manifest"),
])
def test_bad_ingestion_report_is_refused(uncalibrated_reference, pred, change, words):
    _report(pred, **change)
    msg = _refused(uncalibrated_reference, pred)
    assert words in msg
    if change.get("errors"):
        assert "predict() raised ValueError" in msg and "Traceback" not in msg


def test_file_missing_from_the_manifest_is_refused(uncalibrated_reference, pred):
    report = json.loads((pred / "ingestion.json").read_text())
    del report["manifest"]["drift.parquet"]
    (pred / "ingestion.json").write_text(json.dumps(report))
    assert "drift.parquet is not in the manifest" in _refused(uncalibrated_reference, pred)


def test_missing_report_is_refused_and_unverified_scores_it(uncalibrated_reference, pred, tmp_path):
    (pred / "ingestion.json").unlink()
    msg = _refused(uncalibrated_reference, pred)
    assert "no ingestion.json" in msg and "--unverified" in msg
    base = CLI + ["score", "--reference", str(uncalibrated_reference), "--predictions", str(pred)]
    bad = subprocess.run(base + ["--output", str(tmp_path / "o1")], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: no ingestion.json")
    # hand-made predictions: scored locally with --unverified, and the output says so
    config = tmp_path / "fast.yaml"
    config.write_text(DEFAULT_CONFIG_PATH.read_text().replace("n: 1000, seed: 0", "n: 0, seed: 0"))
    ok = subprocess.run(base + ["--output", str(tmp_path / "o2"), "--unverified", "--config", str(config)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    details = json.loads((tmp_path / "o2" / "details.json").read_text())
    assert details["provenance"] == {"verified": False, "origin": "unverified (score --unverified)"}
    assert "not verified (score --unverified)" in details["warnings"][0]
    assert "not verified" in (tmp_path / "o2" / "detailed_results.html").read_text()


def test_scoring_program_refuses_unverified(tmp_path):
    run = subprocess.run([sys.executable, str(SCORING_PROGRAM), "--unverified", "--reference", "r",
                          "--predictions", "p", "--output", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and "never scores unverified predictions" in run.stderr


def test_traces_go_outside_the_published_output(uncalibrated_reference, virtual_pred, tmp_path):
    from challenge_welding.contract.errors import ChallengeError
    from challenge_welding.flows.score import score

    config = tmp_path / "fast.yaml"
    config.write_text(DEFAULT_CONFIG_PATH.read_text().replace("n: 1000, seed: 0", "n: 0, seed: 0"))
    with pytest.raises(ChallengeError, match="inside the output folder"):
        score(uncalibrated_reference, virtual_pred, tmp_path / "out", config, traces=tmp_path / "out" / "t.parquet")
    assert not (tmp_path / "out").exists()
    score(uncalibrated_reference, virtual_pred, tmp_path / "out", config, traces=tmp_path / "private" / "t.parquet")
    traces = pd.read_parquet(tmp_path / "private" / "t.parquet")
    perf = pd.read_parquet(virtual_pred / "performance.parquet")
    assert (traces["set"] == "performance").sum() == len(perf)
    row = traces[traces["sample_id"] == perf["sample_id"][0]].iloc[0]
    assert row["uncertainty"] == pytest.approx(1 - max(perf["scores KO"][0], perf["scores OK"][0]))
    assert row["misclassification"] == float(row["predicted_state"] != row["class"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["detailed_results.html", "details.json",
                                                                   "scores.json"]
