"""check-submission on real submission folders: each problem comes with its fix."""

from challenge_welding import cli
from challenge_welding.ingestion.check import _requirement_findings, check_submission

from ingestion_helpers import GOOD, make_submission

NEEDS_MODEL = GOOD.replace(
    "self.loaded = True",
    "from pathlib import Path\n"
    "        self.loaded = (Path(__file__).parent / 'model.bin').read_text() == 'weights'")


def test_good_submission_passes(tmp_path, env_cache, capsys):
    sub = make_submission(tmp_path / "sub")
    status = cli.main(["check-submission", str(sub), "--env-cache", str(env_cache)])
    out = capsys.readouterr().out
    assert status == 0, out
    # a loaded machine may exceed the time budget (a warning): only that warning is allowed
    assert "0 error(s)" in out and "ready to upload" in out
    assert out.count("[warning]") == out.count("exceeds the challenge's budget")
    assert "predict() ran on 4 images; valid outputs" in out


def test_model_file_missing_from_manifest(tmp_path, env_cache):
    sub = make_submission(tmp_path / "sub", NEEDS_MODEL, extra={"challenge_solution/model.bin": "weights"})
    findings = check_submission(sub, cache_dir=env_cache, log=lambda s: None)
    # statically: data file without MANIFEST.in
    static = next(f for f in findings if "no MANIFEST.in" in f.message)
    assert static.fix.startswith("add a MANIFEST.in with a line 'include challenge_solution/model.bin'")
    # for real: load_model cannot find the file in the installed package, and why
    load = next(f for f in findings if f.level == "error" and "load_model()" in f.message)
    assert "FileNotFoundError" in load.message and "ROOT_PATH" in load.fix
    manifest = next(f for f in findings if "are not installed" in f.message)
    assert manifest.message == "1 file(s) of challenge_solution/ are not installed: " \
                               "challenge_solution/model.bin"
    assert "include challenge_solution/model.bin" in manifest.fix

    # the fix works
    (sub / "MANIFEST.in").write_text("include challenge_solution/model.bin\n")
    findings = check_submission(sub, cache_dir=env_cache, log=lambda s: None)
    # the time-budget warning depends on the machine's load, not on the submission's layout
    assert [f for f in findings if f.level != "ok" and "budget" not in f.message] == []


def test_requirement_findings(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "numpy>=1.26\nopencv-python==4.11.0.86\nchallenge-welding==1.0\ntorch\n")
    found = {f.level + ":" + f.message: f for f in _requirement_findings(tmp_path)}
    assert found["warning:requirements.txt: not pinned to an exact version: numpy>=1.26, torch"]
    assert found["warning:requirements.txt: 'opencv-python==4.11.0.86' needs libGL, often absent "
                 "on evaluation workers"].fix == "use opencv-python-headless with the same version"
    assert any(k.startswith("ok:requirements.txt: 'challenge-welding==1.0' is satisfied") for k in found)
