"""The dry run's worker replica, without a container engine: the container options as
data (checked against compute_worker.py's values, copied here by hand), the folders and
ZipFile extraction, the metadata file, the time limit, the bundle's sources and the
command's argument errors."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

import challenge_welding
from challenge_welding.bundle import worker
from challenge_welding.bundle.dry_run import parse_mount, sources_from_bundle
from challenge_welding.bundle.worker import Mount, StepFolders
from challenge_welding.contract.errors import ChallengeError

from .conftest import ROOT


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_time_limit_is_the_workers():
    # competitions/tasks.py: min(MAX_EXECUTION_TIME_LIMIT=600, phase) on the default queue
    assert worker.time_limit(2100, private_queue=False) == 600
    assert worker.time_limit(300, private_queue=False) == 300
    assert worker.time_limit(2100, private_queue=True) == 2100
    assert worker.time_limit(None, private_queue=True) == 600  # Phase model's default
    assert worker.time_limit(2100, private_queue=False, default_queue_limit=1200) == 1200


def _prediction_run(tmp_path: Path, submission_command: str | None) -> StepFolders:
    run = StepFolders(tmp_path / "run")
    for d in (run.program, run.ingestion_program, run.input_data):
        d.mkdir(parents=True)
    (run.ingestion_program / "metadata.yaml").write_text(
        "command: python3 /app/program/ingestion.py /app/input_data /app/output /app/program "
        "/app/ingested_program\n")
    if submission_command:
        (run.program / "metadata.yaml").write_text(f"command: {submission_command}\n")
    return run


def test_prediction_containers_as_the_worker_makes_them(tmp_path):
    run = _prediction_run(tmp_path, None)
    data = tmp_path / "data"
    [ing] = worker.prediction_specs(run, image="img:1", data_dir=data, name="x")
    r = str(run.root)
    assert ing.name == "ingestion_x"
    assert ing.command == ("python3 /app/program/ingestion.py /app/input_data /app/output "
                           "/app/program /app/ingested_program")
    cfg = ing.host_config()
    assert cfg["binds"] == [f"{r}/ingestion_program:/app/program:z", f"{r}/output:/app/output:z",
                            f"{data}:/app/data:ro", f"{r}/program:/app/ingested_program:rw",
                            f"{r}/input_data:/app/input_data:rw"]
    assert cfg["cap_drop"] == ["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID",
                               "KILL", "MKNOD", "NET_BIND_SERVICE", "NET_RAW", "SETFCAP",
                               "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"]
    assert cfg["security_opt"] == ["no-new-privileges"]
    assert cfg["shm_size"] == 64 * 1024 * 1024 and cfg["userns_mode"] == "host"
    assert "network_mode" not in cfg  # the engine's default network, as the worker
    kw = ing.create_kwargs()
    assert kw["environment"] == ["PYTHONUNBUFFERED=1", "http_proxy=", "https_proxy="]
    assert kw["working_dir"] == "/app/program" and kw["network_disabled"] is False
    assert kw["image"] == "img:1" and "user" not in kw  # the image's own user
    assert _mode(run.output) == 0o755


def test_a_submission_with_a_command_runs_beside_the_ingestion(tmp_path):
    run = _prediction_run(tmp_path, "python3 forge.py")
    wheels = tmp_path / "wheels"
    specs = worker.prediction_specs(run, image="img", data_dir=tmp_path / "d", name="x",
                                    network_disabled=True, wheelhouse=wheels)
    assert [s.name for s in specs] == ["program_x", "ingestion_x"]
    prog, ing = specs
    r = str(run.root)
    assert prog.command == "python3 forge.py"
    # same /app/output as the ingestion: what it writes there is what gets scored
    assert prog.host_config()["binds"] == [
        f"{r}/program:/app/program:z", f"{r}/output:/app/output:z", f"{tmp_path}/d:/app/data:ro",
        f"{wheels}:/app/data/wheelhouse:ro", f"{r}/input_data:/app/input_data:rw"]
    assert ing.create_kwargs()["environment"][-1] == \
        "CHALLENGE_WELDING_WHEELHOUSE=/app/data/wheelhouse"
    assert "CHALLENGE_WELDING_WHEELHOUSE" not in " ".join(prog.environment)
    assert prog.network_disabled and ing.network_disabled


def test_scoring_container(tmp_path):
    run = StepFolders(tmp_path / "s")
    run.program.mkdir(parents=True)
    (run.program / "metadata.yaml").write_text("command: python3 /app/program/score.py "
                                               "/app/input /app/output\n")
    spec = worker.scoring_spec(run, image="img", data_dir=tmp_path / "d", name="x",
                               extra_mounts=[Mount("/etc/ca.crt", "/etc/ca.crt", "ro")])
    r = str(run.root)
    assert spec.name == "scoring_x"
    assert spec.host_config()["binds"] == [
        f"{r}/program:/app/program:z", f"{r}/output:/app/output:z", f"{tmp_path}/d:/app/data:ro",
        "/etc/ca.crt:/etc/ca.crt:ro", f"{r}/shared:/app/shared:rw", f"{r}/input:/app/input:rw"]
    assert all(_mode(d) == 0o755 for d in (run.output, run.shared, run.input))


def test_extraction_drops_the_zip_s_modes(tmp_path):
    z = tmp_path / "s.zip"
    with zipfile.ZipFile(z, "w") as zf:
        info = zipfile.ZipInfo("bin/run.sh")
        info.external_attr = 0o777 << 16
        zf.writestr(info, "#!/bin/sh\n")
        zf.writestr("a.txt", "x")
    old = os.umask(0o077)  # whatever our own umask, the worker's modes come out
    try:
        worker.extract(z, tmp_path / "out")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "out" / "bin" / "run.sh") == 0o644
    assert _mode(tmp_path / "out" / "a.txt") == 0o644
    assert _mode(tmp_path / "out" / "bin") == 0o755 and _mode(tmp_path / "out") == 0o755


def test_metadata_file_and_its_refusal(tmp_path):
    path = worker.write_metadata(tmp_path, exit_code=None, elapsed=None, ingestion_exit_code=1,
                                 ingestion_elapsed=3.5)
    assert yaml.safe_load(path.read_text()) == {"exitCode": None, "elapsedTime": 3.5,
                                                "ingestionExitCode": 1,
                                                "ingestionElapsedTime": 3.5}
    assert path.read_text().splitlines()[0] == "elapsedTime: 3.5"  # yaml.dump sorts the keys
    with pytest.raises(FileExistsError, match="already contains a metadata file"):
        worker.write_metadata(tmp_path, exit_code=0, elapsed=1, ingestion_exit_code=0,
                              ingestion_elapsed=1)


def test_results_submission_is_copied_and_output_passes_to_scoring(tmp_path):
    run = StepFolders(tmp_path / "r")
    run.program.mkdir(parents=True)
    (run.program / "performance.parquet").write_bytes(b"P")
    assert worker.copy_submission_without_metadata(run) is True
    assert (run.output / "performance.parquet").read_bytes() == b"P"
    worker.write_metadata(run.output, exit_code=None, elapsed=None, ingestion_exit_code=0,
                          ingestion_elapsed=2.0)
    res = worker.pass_output(run.output, tmp_path / "pred.zip", tmp_path / "input" / "res")
    assert sorted(p.name for p in res.iterdir()) == ["metadata", "performance.parquet"]
    assert yaml.safe_load((res / "metadata").read_text())["ingestionExitCode"] == 0
    (run.program / "metadata.yaml").write_text("command: x\n")
    assert worker.copy_submission_without_metadata(run) is False


def test_read_command_legacy_name_and_none(tmp_path):
    (tmp_path / "metadata").write_text("command: python3 run.py\n")
    assert worker.read_command(tmp_path) == "python3 run.py"
    (tmp_path / "metadata").write_text("description: results only\n")
    assert worker.read_command(tmp_path) is None
    assert worker.read_command(tmp_path / "nope") is None


def test_sources_from_the_bundle(bundle_zip, tmp_path):
    src = sources_from_bundle(bundle_zip, tmp_path, 0)
    assert src.ingestion_program.name == "ingestion_program.zip"
    assert src.reference_data.name == "reference_data.zip"
    assert src.image == "challengewelding/evaluator:1.1.0" and src.private_queue is False
    assert src.phase_limit == 1800 and src.phase_name == "Development"
    assert worker.time_limit(src.phase_limit, private_queue=src.private_queue) == 600
    assert sources_from_bundle(bundle_zip, tmp_path / "b", 1).phase_name == "Final"
    with pytest.raises(ChallengeError, match="no phase 2"):
        sources_from_bundle(bundle_zip, tmp_path / "c", 2)


def test_parse_mount(tmp_path):
    assert parse_mount(f"{tmp_path}:/x:ro") == Mount(str(tmp_path), "/x", "ro")
    assert parse_mount(f"{tmp_path}:/x").mode == "rw"
    for bad, msg in ((f"{tmp_path}", "expected HOST"), (f"{tmp_path}:x", "expected HOST"),
                     (f"{tmp_path}:/x:z", "mode must be ro or rw"),
                     (f"{tmp_path}/nope:/x", "does not exist")):
        with pytest.raises(ChallengeError, match=msg):
            parse_mount(bad)


def _cli(*args):
    exe = Path(sys.executable).with_name("challenge-welding")
    return subprocess.run([str(exe), "dry-run", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: --submission"),
    (["--submission", "s.zip"], "one of the arguments --bundle --data is required"),
    (["--submission", "s.zip", "--bundle", "b.zip", "--data", "D"], "not allowed with"),
])
def test_usage_errors(args, message):
    res = _cli(*args)
    assert res.returncode == 2 and message in res.stderr


def test_input_errors_are_one_line(tmp_path, tiny_data, tiny_solution):
    cases = [
        (["--submission", str(tiny_solution), "--bundle", str(tmp_path / "nope.zip")],
         f"error: {tmp_path / 'nope.zip'}: no such file"),
        (["--submission", str(tmp_path / "x.zip"), "--data", str(tiny_data)],
         f"error: {tmp_path / 'x.zip'}: no such file or folder"),
        (["--submission", str(tiny_solution), "--data", str(tiny_data), "--repo", str(ROOT)],
         "error: --image is required with --data (a bundle names its docker_image)"),
        (["--submission", str(tiny_solution), "--data", str(tiny_data), "--time-limit", "0"],
         "error: --time-limit 0: must be a positive number of seconds"),
        (["--submission", str(tiny_solution), "--data", str(tiny_data), "--image", "i",
          "--repo", str(ROOT), "--engine-url", f"unix://{tmp_path}/no.sock"],
         f"error: no container engine at unix://{tmp_path}/no.sock"),
    ]
    for args, message in cases:
        res = _cli(*args, "--out", str(tmp_path / "out"))
        assert res.returncode == 2, (args, res.stderr)
        [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert line.startswith(message), line
    # the engine hint names Podman's API service
    assert "podman system service --time=0 unix:///run/podman/podman.sock" in res.stderr


def test_programs_root_of_the_repository_and_of_a_kit(tmp_path):
    from challenge_welding.bundle.dry_run import programs_root

    assert programs_root(ROOT) == ROOT
    kit = tmp_path / "kit"
    for f in ("ingestion_program", "scoring_program"):
        (kit / f).mkdir(parents=True)
        (kit / f / "metadata.yaml").write_text("command: x\n")
    (kit / "sub").mkdir()
    assert programs_root(kit / "sub") == kit  # no competition.yaml needed
    with pytest.raises(ChallengeError, match="pass --repo"):
        programs_root(tmp_path / "elsewhere")


def test_one_root_finder_works_from_an_installed_package(tmp_path):
    """A copy of the package outside any checkout (as site-packages holds it): run from inside the
    clone, the finder finds the clone; run from elsewhere, one line naming what is missing.
    Before (317e1dc) demo and rehearse took parents[3] of their own file: from site-packages,
    a folder that is not the repository."""
    site = tmp_path / "site"
    shutil.copytree(Path(challenge_welding.__file__).parent, site / "challenge_welding",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import challenge_welding as c; from challenge_welding.flows.demo import solutions_dir; "
            "print(c.__file__); print(solutions_dir())")
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "docs", env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    where, found = res.stdout.split()
    assert where.startswith(str(site)) and found == str(ROOT / "reference-solutions")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1 and "no reference-solutions/Solution-1/train.py found at" in res.stderr
