"""The bundle built from a tiny DATA folder, the repository's competition.yaml, and the
vendored programs run from the unzipped bundle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from challenge_welding.bundle.bundle import execution_time_limit, make_bundle
from challenge_welding.bundle.validate import read_competition, validate_bundle
from challenge_welding.contract.names import SCORE_KEYS, SET_NAMES
from challenge_welding.contract.errors import ChallengeError

from .conftest import N_PER_SET, ROOT

QUIET = {"log": lambda *_: None}


def test_repository_competition_yaml_leaderboard_is_scores_json():
    comp = yaml.safe_load((ROOT / "competition.yaml").read_text())
    board = comp["leaderboards"][0]
    columns = sorted(board["columns"], key=lambda c: c["index"])
    assert [c["key"] for c in columns] == list(SCORE_KEYS)
    assert [c["index"] for c in columns] == list(range(len(SCORE_KEYS)))
    assert all(len(c["key"]) <= 36 and len(c["title"]) <= 36 for c in columns)
    primary = [c for c in columns if c["index"] == board["primary_index"]]
    assert primary[0]["key"] == "score" and primary[0]["sorting"] == "desc"
    shown = [c["key"] for c in columns if not c.get("hidden")]
    assert shown == ["score", "perf", "uncertainty", "robustness", "ood", "generalization",
                     "drift"]
    # costs, calibration errors and time: lower is better
    asc = {c["key"] for c in columns if c["sorting"] == "asc"}
    assert asc == {"op", "time_p95", "ucalib_ko", "ucalib_ok", "op_g", "op_d"}
    assert comp["version"] == 2 and comp["enable_detailed_results"] is True
    for page in comp["pages"]:
        assert (ROOT / page["file"]).stat().st_size > 0


def test_execution_time_limit_by_hand():
    assert execution_time_limit(0) == 1800            # the floor
    assert execution_time_limit(24) == 1800           # 1200 + 3 * 24 / 12 = 1206 -> floor
    assert execution_time_limit(20_000) == 6300       # 1200 + 5000 = 6200 -> next 5 min
    assert execution_time_limit(60_000) == 16_200     # 1200 + 15000 = 16200, already round
    assert execution_time_limit(12, budget_s=1.0, safety=1.0, setup_s=0, minimum_s=0) == 300


def test_bundle_layout_and_contents(bundle_zip, tiny_data):
    assert validate_bundle(bundle_zip) == []
    with zipfile.ZipFile(bundle_zip) as zf:
        names = set(zf.namelist())
        assert {"competition.yaml", "logo.png", "ingestion_program.zip", "scoring_program.zip",
                "input_data.zip", "reference_data.zip", "public_data.zip", "starting_kit.zip",
                "solutions/solution-1.zip", "pages/evaluation.md"} <= names
        inner = {n: set(zipfile.ZipFile(zf.open(n)).namelist())
                 for n in names if n.endswith(".zip")}
    expected_inputs = {p.relative_to(tiny_data / "input_data").as_posix()
                       for p in (tiny_data / "input_data").rglob("*") if p.is_file()}
    assert inner["input_data.zip"] == expected_inputs
    assert len(expected_inputs) == len(SET_NAMES) * (N_PER_SET + 1)
    assert inner["reference_data.zip"] == {f"{s}.parquet" for s in SET_NAMES} | {"scoring.yaml"}
    for prog, script in (("ingestion_program.zip", "ingestion.py"), ("scoring_program.zip",
                                                                     "score.py")):
        assert {"metadata.yaml", script, "vendor/challenge_welding/commands/cli.py",
                "vendor/challenge_welding/scoring/default_scoring.yaml"} <= inner[prog]
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in inner[prog])
    kit = inner["starting_kit.zip"]
    assert {"README.md", "interface/challenge_welding/AIComponent_interface.py",
            "interface/challenge_welding/ai_component_interface.py", "Solution-1.zip",
            "Solution-1/challenge_solution/AIComponent.py", "scoring.yaml",
            "challenge-welding/pyproject.toml", "challenge-welding/challenge_welding/commands/cli.py",
            "ingestion_program/metadata.yaml", "scoring_program/score.py"} <= kit
    assert not any(n.startswith(("ingestion_program/vendor", "scoring_program/vendor"))
                   for n in kit)
    assert inner["solutions/solution-1.zip"] == {
        "setup.py", "requirements.txt", "MANIFEST.in", "challenge_solution/__init__.py",
        "challenge_solution/AIComponent.py", "challenge_solution/model.txt"}
    comp = read_competition(bundle_zip)
    # 6 sets x 4 images: the floor of the time-limit model
    assert [p["execution_time_limit"] for p in comp["phases"]] == [1800, 1800]
    assert [p["tasks"] for p in comp["phases"]] == [[0], [0]]
    assert comp["phases"][0]["public_data"] == "public_data.zip"


def test_same_inputs_give_the_same_bytes(bundle_zip, tiny_data, tiny_solution, tmp_path):
    again = make_bundle(tiny_data, tmp_path / "again.zip", repo_root=ROOT, solution=tiny_solution,
                        **QUIET)
    assert again.read_bytes() == bundle_zip.read_bytes()


def test_final_data_adds_a_second_task(tiny_data, tiny_solution, tmp_path):
    out = make_bundle(tiny_data, tmp_path / "b.zip", repo_root=ROOT, solution=tiny_solution,
                      final_data=tiny_data, public_data=False, docker_image="me/img:2", **QUIET)
    comp = read_competition(out)
    assert comp["docker_image"] == "me/img:2"
    assert [t["index"] for t in comp["tasks"]] == [0, 1]
    assert comp["tasks"][1]["input_data"] == "input_data_final.zip"
    assert [p["tasks"] for p in comp["phases"]] == [[0], [1]]
    assert comp["solutions"][0]["tasks"] == [0, 1]
    assert "public_data" not in comp["phases"][0]
    assert validate_bundle(out) == []


def test_incomplete_data_is_one_clear_error(tiny_data, tiny_solution, tmp_path):
    data = tmp_path / "DATA"
    shutil.copytree(tiny_data, data)
    (data / "input_data" / "drift" / "metadata.parquet").unlink()
    (data / "reference_data" / "scoring.yaml").unlink()
    with pytest.raises(ChallengeError) as err:
        make_bundle(data, tmp_path / "b.zip", repo_root=ROOT, solution=tiny_solution, **QUIET)
    msg = str(err.value)
    assert "input_data/drift/metadata.parquet" in msg and "reference_data/scoring.yaml" in msg
    assert not (tmp_path / "b.zip").exists()


def test_untrained_solution_is_refused(tiny_data, tiny_solution, tmp_path):
    sol = tmp_path / "sol"
    shutil.copytree(tiny_solution, sol)
    (sol / "challenge_solution" / "model.txt").unlink()
    with pytest.raises(ChallengeError, match="MANIFEST.in includes 'challenge_solution/model.txt'"):
        make_bundle(tiny_data, tmp_path / "b.zip", repo_root=ROOT, solution=sol, **QUIET)


def _cli(*args, cwd=ROOT):
    exe = Path(sys.executable).with_name("challenge-welding")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_cli_builds_and_checks(tiny_data, tmp_path):
    out = tmp_path / "b.zip"
    res = _cli("bundle", "--data", str(tiny_data), "--output", str(out), "--no-solution")
    assert res.returncode == 0, res.stderr
    assert "validator: no problem" in res.stdout
    res = _cli("bundle", "--check", str(out))
    assert res.returncode == 0 and "no problem" in res.stdout
    res = _cli("bundle", "--data", str(tmp_path / "missing"), "--output", str(out))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'missing'}: no such folder (run `challenge-welding build-sets`)"]


def _plain_python() -> str:
    """A Python without our package installed (the system one), to prove the vendoring."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(cand).exists():
            probe = subprocess.run([cand, "-c", "import challenge_welding"], capture_output=True,
                                   env={"PATH": "/usr/bin:/bin"})
            if probe.returncode != 0:
                return cand
    pytest.skip("no system Python without challenge_welding (/usr/bin/python3): install python3 "
                "(Debian/Ubuntu) to test that the programs run on their vendored copy alone")


@pytest.mark.parametrize("program, script, command", [
    ("ingestion_program.zip", "ingestion.py", "ingest"),
    ("scoring_program.zip", "score.py", "score"),
])
def test_vendored_program_runs_help_from_the_unzipped_bundle(bundle_zip, tmp_path, program,
                                                             script, command):
    with zipfile.ZipFile(bundle_zip) as zf:
        zf.extract(program, tmp_path)
    app = tmp_path / "app_program"
    with zipfile.ZipFile(tmp_path / program) as zf:
        zf.extractall(app)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = "/usr/bin:/bin"
    res = subprocess.run([_plain_python(), str(app / script), "--help"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"usage: challenge-welding {command}" in res.stdout


def test_needed_time_by_hand():
    from challenge_welding.bundle.bundle import needed_time

    assert needed_time(1200) == {"install": 1200, "images": 100.0, "margin": 200.0,
                                 "total": 1500.0}
    assert needed_time(0)["total"] == 1200
    assert needed_time(24, setup_s=0, safety=1.0)["total"] == 2.0


def test_queue_warning_only_past_the_default_queue_without_a_queue():
    from challenge_welding.bundle.bundle import needed_time, queue_warning

    needs = {"dev": needed_time(1200), "final": needed_time(0, setup_s=100)}
    line = queue_warning(needs, None)
    assert line.count("\n") == 0 and "dev 1500 s" in line and "final" not in line
    assert "min(600 s, the phase's limit) = 600 s" in line and "--queue VHOST" in line
    assert queue_warning(needs, "my-vhost") is None
    assert queue_warning({"dev": needed_time(0, setup_s=600)}, None) is None  # 600 fits


def test_bundle_queue_and_its_warning(tiny_data, tiny_solution, tmp_path):
    lines = []
    out = make_bundle(tiny_data, tmp_path / "q.zip", repo_root=ROOT, solution=tiny_solution,
                      queue="my-vhost", log=lines.append)
    assert read_competition(out)["queue"] == "my-vhost"
    with zipfile.ZipFile(out) as zf:  # the needed time is stated in the bundle itself
        header = zf.read("competition.yaml").decode().splitlines()[:4]
    assert f"# dev: 1206 s = install 1200 s + {len(SET_NAMES) * N_PER_SET} images x 1/12 s " \
           "(2 s) + margin 4 s" in header
    assert not any(ln.startswith("warning: no queue set") for ln in lines)
    n = len(SET_NAMES) * N_PER_SET
    assert f"bundle: phase dev needs 1206 s = install 1200 s + {n} images x 1/12 s (2 s) " \
           "+ margin 4 s" in lines
    lines.clear()
    out = make_bundle(tiny_data, tmp_path / "d.zip", repo_root=ROOT, solution=tiny_solution,
                      log=lines.append)
    assert "queue" not in read_competition(out)
    [warning] = [ln for ln in lines if ln.startswith("warning: no queue set")]
    assert "but the phases need dev 1206 s: such submissions fail" in warning


def test_final_phase_text_says_which_submissions_migrate():
    """Codabench migrates the finished submissions on the previous phase's leaderboard;
    Force_Last keeps each participant's last there, and the text must say so."""
    comp = yaml.safe_load((ROOT / "competition.yaml").read_text())
    assert comp["leaderboards"][0]["submission_rule"] == "Force_Last"
    final = sorted(comp["phases"], key=lambda p: p["index"])[-1]
    assert final["auto_migrate_to_this_phase"] is True
    text = " ".join(final["description"].split())
    assert "each participant's last successful development submission" in text
    # the scoring output zip is for organisers; the page and the leaderboard stay public
    assert all(p["hide_score_output"] is True for p in comp["phases"])
    assert not any(p.get("hide_output") for p in comp["phases"])


def test_offline_queue_wheelhouse_in_the_ingestion_command(tiny_data, tmp_path):
    """The worker passes no variable of ours: the ingestion's command sets it (no shell)."""
    import shlex

    out = make_bundle(tiny_data, tmp_path / "w.zip", repo_root=ROOT, solution=None,
                      wheelhouse_path="/app/data/wheelhouse", **QUIET)
    with zipfile.ZipFile(out) as zf, zipfile.ZipFile(zf.open("ingestion_program.zip")) as ing, \
            zipfile.ZipFile(zf.open("scoring_program.zip")) as sco:
        command = yaml.safe_load(ing.read("metadata.yaml"))["command"]
        scoring = yaml.safe_load(sco.read("metadata.yaml"))["command"]
    assert shlex.split(command)[:4] == ["env", "CHALLENGE_WELDING_WHEELHOUSE=/app/data/wheelhouse",
                                        "python3", "/app/program/ingestion.py"]
    assert not scoring.startswith("env")
    assert validate_bundle(out) == []
