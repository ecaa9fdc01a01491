"""Real submission folders run through `ingest`: real uv environments, real child processes."""

import json
import zipfile

import numpy as np
import pandas as pd
import pytest

from challenge_welding.contract.names import PRED_COLUMNS, SET_NAMES
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.ingestion.run.ingest import ingest

from ingestion_helpers import GOOD, REQUIREMENTS, expected, make_input_data, make_submission

# 7 performance images, batch 3 -> calls 1 (warm-up), 2, 3, 4 on performance; call 5 is the
# first robustness batch. Faulty components misbehave at call 5 so that performance is done.
FAULT_AT_CALL_5 = '''
import os, sys, time, ctypes, signal
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent


class MyAIComponent(AbstractAIComponent):
    calls = 0

    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        MyAIComponent.calls += 1
        if MyAIComponent.calls == 5:
            misbehave()
        n = len(input_images)
        return {{"predictions": ["OK"] * n, "probabilities": [[0.1, 0.9, 0.0]] * n,
                "OOD_scores": [0.5] * n}}


def misbehave():
    {body}
'''


def run(tmp_path, input_data, env_cache, component=GOOD, requirements=REQUIREMENTS, **opts):
    sub = make_submission(tmp_path / "sub", component, requirements)
    out = tmp_path / "pred"
    opts.setdefault("batch_size", 3)
    report = ingest(sub, input_data, out, cache_dir=env_cache, progress=False, **opts)
    on_disk = json.loads((out / "ingestion.json").read_text())
    assert on_disk["status"] == report["status"]
    assert not (out / "metadata").exists()
    return report, out


def check_good_predictions(out, sets=SET_NAMES):
    for name in sets:
        df = pd.read_parquet(out / f"{name}.parquet")
        assert list(df.columns) == list(PRED_COLUMNS)
        labels, probs, ood = expected(name)
        assert df["sample_id"].tolist() == [f"{name[:3]}{i:03d}" for i in range(len(labels))]
        assert df["predicted_state"].tolist() == labels
        # flat JPEG colours come back within a few levels: 0.02 on ratios of means
        np.testing.assert_allclose(df[["scores KO", "scores OK", "scores UNKNOWN"]], probs,
                                   atol=0.02)
        np.testing.assert_allclose(df["scores OOD"], ood, atol=0.02)
        assert (df["compute_time"] > 0).all() and (df["compute_time"] < 1).all()


def test_good_submission_with_its_own_numpy(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache)
    assert report["status"] == "ok", report["errors"]
    assert report["errors"] == [] and report["fault"] is None
    # the component asserted numpy 2.2.6 inside; ours is different
    assert report["versions"]["submission_numpy"] == "2.2.6" != report["versions"]["numpy"]
    assert report["device"] == {"name": "cpu", "reason": report["device"]["reason"],
                                "passed": True}
    assert report["environment"]["kind"] == "uv"
    check_good_predictions(out)
    # compute_time is per batch: one value shared by the images of a batch (3, 3, 1)
    t = pd.read_parquet(out / "performance.parquet")["compute_time"].to_numpy()
    assert t[0] == t[1] == t[2] and t[3] == t[4] == t[5]
    assert report["timings"]["sets"]["performance"]["n"] == 7
    assert "warmup_s" in report["timings"]


def test_exclusive_predict_gives_the_same_predictions(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, exclusive_predict=True, warmup=False)
    assert report["status"] == "ok", report["errors"]
    # the option now names the sets without decoding during predict: True means all of them
    assert report["options"]["exclusive_predict"] == "all" and "warmup_s" not in report["timings"]
    assert all(t["exclusive"] for t in report["timings"]["sets"].values())
    check_good_predictions(out)


def test_zip_with_one_top_folder_and_env_reuse(tmp_path, input_data, env_cache):
    src = make_submission(tmp_path / "src")
    archive = tmp_path / "submission.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in src.rglob("*"):
            zf.write(f, "my-solution/" + f.relative_to(src).as_posix())
    out = tmp_path / "pred"
    ingest(archive, input_data, out, cache_dir=env_cache, progress=False, batch_size=4)
    report = ingest(archive, input_data, out, cache_dir=env_cache, progress=False, batch_size=4)
    assert report["status"] == "ok", report["errors"]
    assert report["environment"]["cached"] is True  # second run: same requirements, same env
    check_good_predictions(out)


OLD_STYLE = '''
import numpy as np
from challenge_welding.AIComponent_interface import AbstractAIComponent


class MyAIComponent(AbstractAIComponent):
    def load_model(self):
        pass

    def predict(self, input_images, images_meta_informations):
        preds, probs, ood = [], [], []
        for img in input_images:
            r, g, b = img.reshape(-1, 3).mean(axis=0)
            preds.append("KO" if r > g else "OK")
            probs.append(np.array([r, g, b]) / (r + g + b))
            ood.append(np.float32(b / 255.0))
        return {"predictions": np.array(preds), "probabilities": np.stack(probs),
                "OOD_scores": tuple(ood)}
'''


def test_old_import_path_and_signature_without_device(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, OLD_STYLE)
    assert report["status"] == "ok", report["errors"]
    assert report["device"]["passed"] is False
    check_good_predictions(out)


def test_pin_of_published_challenge_welding_and_missing_sets(tmp_path, env_cache):
    partial = make_input_data(tmp_path / "partial", sets=("performance", "drift"))
    report, out = run(tmp_path, partial, env_cache,
                      requirements="numpy==2.2.6\nchallenge-welding==1.0\n")
    assert report["status"] == "ok", report["errors"]
    assert any("'challenge-welding==1.0' satisfied by the evaluator" in n
               for n in report["environment"]["notes"])
    assert "satisfied by the evaluator" in (out / "ingestion.log").read_text()
    check_good_predictions(out, ("performance", "drift"))
    skipped = [s for s in SET_NAMES if s not in ("performance", "drift")]
    assert all(report["sets"][s]["status"] == "skipped" for s in skipped)
    assert sum("set skipped" in w for w in report["warnings"]) == len(skipped)
    assert not (out / "robustness.parquet").exists()


CHEATER = '''
from challenge_welding.ai_component_interface import AbstractAIComponent


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        found = [m.get("class") or m.get("OOD_class") or m.get("path") for m in images_meta_informations]
        return {"predictions": [f if f in ("KO", "OK") else "UNKNOWN" for f in found]}
'''


def test_predict_finds_no_label_in_metadata(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, CHEATER, sets=["performance"])
    assert report["status"] == "ok", report["errors"]
    df = pd.read_parquet(out / "performance.parquet")
    assert (df["predicted_state"] == "UNKNOWN").all()
    # probabilities missing -> one-hot of the prediction; OOD missing -> 0
    assert (df["scores UNKNOWN"] == 1).all() and (df["scores OOD"] == 0).all()
    assert any("probabilities missing" in w for w in report["warnings"])


LENIENT = '''
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        pass

    def predict(self, input_images, images_meta_informations, device="cuda"):
        n = len(input_images)
        return {"predictions": tuple([" ok"] * n), "probabilities": np.full((n, 3), 2.0),
                "OOD_scores": np.full(n, -0.5),
                "explainability": [np.random.rand(*im.shape[:2]) for im in input_images],
                "attention": [None] * n}
'''


def test_lenient_outputs_are_normalised_with_warnings(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, LENIENT, sets=["ood_real"])
    assert report["status"] == "ok", report["errors"]
    df = pd.read_parquet(out / "ood_real.parquet")
    assert df["predicted_state"].tolist() == ["OK", "OK"]
    np.testing.assert_allclose(df[["scores KO", "scores OK", "scores UNKNOWN"]], 1 / 3)
    assert df["scores OOD"].tolist() == [0.0, 0.0]
    text = "\n".join(report["warnings"])
    assert "ood_real: labels normalised" in text and "renormalised" in text and "clipped" in text
    assert "ood_real: output keys ignored: 2 sample(s), e.g. attention" in text
    # the maps are kept (issue 20): 48x27 images -> 12x6 uint8 maps
    from challenge_welding.contract.explanation_maps import read_explainability

    maps = read_explainability(out, "ood_real")
    assert sorted(maps) == ["ood000", "ood001"] and {m.shape for m in maps.values()} == {(6, 12)}
    assert report["manifest"]["ood_real.explainability.parquet"]


def fault(tmp_path, input_data, env_cache, body, **opts):
    report, out = run(tmp_path, input_data, env_cache, FAULT_AT_CALL_5.format(body=body), **opts)
    assert report["status"] == "failed"
    assert len(report["errors"]) == 1
    # the set finished before the fault stays written; the failing and later sets do not
    assert report["sets"]["performance"]["status"] == "ok"
    assert pd.read_parquet(out / "performance.parquet")["predicted_state"].eq("OK").all()
    assert report["sets"]["robustness"]["status"] == "failed"
    assert all(report["sets"][s]["status"] == "not run" for s in SET_NAMES[2:])
    assert not (out / "robustness.parquet").exists() and not (out / "drift.parquet").exists()
    assert report["errors"][0].startswith("robustness: ")
    assert report["errors"][0] in (out / "ingestion.log").read_text()
    return report, out


def test_exception_in_predict(tmp_path, input_data, env_cache):
    report, _ = fault(tmp_path, input_data, env_cache, 'raise ValueError("bad weld tensor")')
    assert "raised ValueError: bad weld tensor in predict()" in report["errors"][0]
    assert "batch 1/1" in report["errors"][0]
    tb = report["fault"]["traceback"]
    assert "AIComponent.py" in tb and "in misbehave" in tb and 'raise ValueError' in tb


def test_segfault(tmp_path, input_data, env_cache):
    report, out = fault(tmp_path, input_data, env_cache, "ctypes.string_at(0)")
    assert "segmentation fault (SIGSEGV)" in report["errors"][0]
    # faulthandler's dump of the submission's stack
    assert "in misbehave" in report["fault"]["traceback"]


def test_os_exit(tmp_path, input_data, env_cache):
    report, _ = fault(tmp_path, input_data, env_cache, "os._exit(3)")
    assert "exited with status 3" in report["errors"][0]


def test_killed_like_by_the_oom_killer(tmp_path, input_data, env_cache):
    report, _ = fault(tmp_path, input_data, env_cache, "os.kill(os.getpid(), signal.SIGKILL)")
    assert "killed (SIGKILL), most likely by the out-of-memory killer" in report["errors"][0]


def test_hang_hits_the_batch_timeout(tmp_path, input_data, env_cache):
    report, _ = fault(tmp_path, input_data, env_cache, "time.sleep(600)", batch_timeout=2)
    assert "timed out: no answer after 2 s" in report["errors"][0]


def test_garbage_output(tmp_path, input_data, env_cache):
    comp = FAULT_AT_CALL_5.format(body="pass").replace(
        'return {"predictions"', 'return "OK" if MyAIComponent.calls >= 5 else {"predictions"')
    report, _ = run(tmp_path, input_data, env_cache, comp)
    assert report["status"] == "failed"
    assert "predict() must return a dict" in report["errors"][0]
    assert report["sets"]["performance"]["status"] == "ok"


@pytest.mark.parametrize("returned,message", [
    ('{"predictions": ["OK"] * (len(input_images) - 1)}', "'predictions' has 2 entries for a batch of 3"),
    ('{"predictions": ["OK"] * len(input_images), "probabilities": [[float("nan"), 0.5, 0.5]] * len(input_images)}',
     "probabilities contain NaN"),
    ('{"predictions": ["GOOD"] * len(input_images)}', "prediction 'GOOD' is not one of KO, OK, UNKNOWN"),
])
def test_invalid_outputs(tmp_path, input_data, env_cache, returned, message):
    comp = GOOD.replace("assert self.loaded", f"return {returned}")
    report, _ = run(tmp_path, input_data, env_cache, comp, sets=["robustness"])
    assert report["status"] == "failed"
    assert report["errors"][0].startswith("robustness: invalid output of predict() on set "
                                          "robustness, batch 1/1 (samples rob000 .. rob002)")
    assert message in report["errors"][0]


def test_exception_at_import_and_in_load_model(tmp_path, input_data, env_cache):
    at_import = 'raise ImportError("tensorflow is not installed")\n' + GOOD
    report, out = run(tmp_path / "a", input_data, env_cache, at_import)
    assert report["status"] == "failed"
    assert "raised ImportError: tensorflow is not installed in importing the component" \
        in report["errors"][0]
    assert "AIComponent.py" in report["fault"]["traceback"]
    assert all(report["sets"][s]["status"] == "not run" for s in SET_NAMES)
    assert not list(out.glob("*.parquet"))

    in_load = GOOD.replace("self.loaded = True", "open('/nonexistent/model.h5')")
    report, _ = run(tmp_path / "b", input_data, env_cache, in_load)
    assert "raised FileNotFoundError" in report["errors"][0] and "load_model()" in report["errors"][0]

    in_init = GOOD.replace("    def load_model(", "    def __init__(self, size):\n"
                           "        super().__init__()\n\n    def load_model(")
    report, _ = run(tmp_path / "c", input_data, env_cache, in_init)
    assert report["errors"][0].startswith("the submission raised TypeError: MyAIComponent."
                                          "__init__() missing 1 required positional argument")
    assert report["errors"][0].endswith("in MyAIComponent()")


def test_stdout_flood_is_capped(tmp_path, input_data, env_cache):
    flood = GOOD.replace("assert self.loaded", "print('x' * 4_000_000, flush=True)")
    report, out = run(tmp_path, input_data, env_cache, flood, max_log_mb=1, sets=["performance"])
    assert report["status"] == "ok", report["errors"]
    assert report["submission_output_bytes"] >= 4 * 4_000_000  # 4 calls with the warm-up
    size = (out / "submission_output.log").stat().st_size
    assert (1 << 20) < size < (1 << 20) + 20_000  # the first MB, a marker and the 16 KB tail
    assert any("wrote 16.0 MB" in w for w in report["warnings"])


def test_no_isolation_runs_from_the_folder(tmp_path, input_data):
    comp = OLD_STYLE  # any numpy works without the pin check
    sub = make_submission(tmp_path / "sub", comp)
    report = ingest(sub, input_data, tmp_path / "pred", isolation=False, progress=False)
    assert report["status"] == "ok" and report["environment"]["kind"] == "none"
    check_good_predictions(tmp_path / "pred")


def test_bad_input_data_is_an_error(tmp_path, env_cache):
    sub = make_submission(tmp_path / "sub")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ChallengeError, match="none of the sets"):
        ingest(sub, tmp_path / "empty", tmp_path / "pred", cache_dir=env_cache, progress=False)
    assert json.loads((tmp_path / "pred" / "ingestion.json").read_text())["status"] == "failed"


def test_total_time_limit(tmp_path, input_data, env_cache):
    report, _ = fault(tmp_path, input_data, env_cache, "time.sleep(600)", total_timeout=3)
    assert "(the total time limit of 3 s)" in report["errors"][0]


def test_install_failure_is_one_clear_line(tmp_path, input_data, env_cache):
    report, out = run(tmp_path, input_data, env_cache, requirements="numpy==0.0.1\n")
    assert report["status"] == "failed" and report["fault"]["stage"] == "install"
    assert report["errors"] == ["install: installing requirements.txt: there is no version of "
                                "numpy==0.0.1 -> fix: change requirements.txt so that it resolves "
                                "(uv pip compile requirements.txt shows why)"]
    assert "numpy==0.0.1" in report["fault"]["traceback"]  # the installer's own words
    assert (out / "install.log").is_file() and not list(out.glob("*.parquet"))


def test_codabench_entry_script(tmp_path, input_data, env_cache):
    """ingestion_program/ingestion.py with the argv of its metadata.yaml command."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    program = Path(__file__).resolve().parents[3] / "ingestion_program"
    command = (program / "metadata.yaml").read_text()
    assert "ingestion.py /app/input_data /app/output /app/program /app/ingested_program" in command
    env = {**os.environ, "XDG_CACHE_HOME": str(env_cache.parents[1])}
    good = make_submission(tmp_path / "good")
    bad = make_submission(tmp_path / "bad", GOOD.replace("assert self.loaded", "1 / 0"))
    for sub, status in ((good, 0), (bad, 1)):
        out = tmp_path / f"out-{sub.name}"
        proc = subprocess.run([sys.executable, str(program / "ingestion.py"), str(input_data),
                               str(out), str(program), str(sub)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == status, proc.stderr[-2000:]
        report = json.loads((out / "ingestion.json").read_text())
        if status:
            assert report["environment"]["cached"] is True  # the default cache, via XDG
            assert "error: performance: the submission raised ZeroDivisionError" in proc.stderr
        else:
            check_good_predictions(out)


def test_pip_fallback_satisfies_the_published_pin(tmp_path, env_cache):
    """Without uv: venv + pip; the shim wheel carries the pinned version 1.0, so pip keeps it
    for both requirements.txt and setup.py's install_requires."""
    data = make_input_data(tmp_path / "data", sets=("generalization",))
    report, out = run(tmp_path, data, env_cache, installer="pip",
                      requirements="numpy==2.2.6\nchallenge-welding==1.0\n")
    assert report["status"] == "ok", report["errors"]
    assert report["environment"]["kind"] == "pip"
    assert "challenge-welding 1.0 interface package" in report["environment"]["notes"][0]
    check_good_predictions(out, ("generalization",))


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    """A folder of wheels, as an organiser would prepare for workers without internet."""
    import subprocess
    import sys

    wh = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                    "-d", str(wh), "numpy==2.2.6", "setuptools", "wheel"], check=True,
                   timeout=300)
    return wh


def test_offline_install_from_a_wheelhouse(tmp_path, input_data, wheelhouse, env_cache):
    report, out = run(tmp_path / "ok", input_data, env_cache, wheelhouse=str(wheelhouse),
                      no_index=True, sets=["drift"])
    assert report["status"] == "ok", report["errors"]
    check_good_predictions(out, ("drift",))
    # a requirement the wheelhouse lacks is not fetched from an index: one clear failure
    report, _ = run(tmp_path / "missing", input_data, env_cache, wheelhouse=str(wheelhouse),
                    no_index=True, requirements="numpy==2.2.6\nchallenge-welding-absent==9.9\n")
    assert report["status"] == "failed" and report["fault"]["stage"] == "install"
    assert "challenge-welding-absent" in report["fault"]["traceback"]


def test_hang_in_load_model_hits_the_load_time_limit(tmp_path, input_data, env_cache):
    comp = GOOD.replace("self.loaded = True", "import time; time.sleep(600)")
    report, _ = run(tmp_path, input_data, env_cache, comp, load_timeout=2)
    assert report["status"] == "failed"
    assert report["errors"] == ["the submission timed out: no answer after 2 s during import "
                                "and load_model() (the load time limit); the child was stopped"]


def test_image_paths_relative_to_the_input_folder_and_missing_files(tmp_path, env_cache):
    data = make_input_data(tmp_path / "data", sets=("ood_real",))
    meta = data / "ood_real" / "metadata.parquet"
    df = pd.read_parquet(meta)
    df["path"] = "ood_real/" + df["path"]
    df.to_parquet(meta, index=False)
    report, out = run(tmp_path, data, env_cache)
    assert report["status"] == "ok", report["errors"]
    check_good_predictions(out, ("ood_real",))
    (data / "ood_real" / "images" / "ood001.jpeg").unlink()
    with pytest.raises(ChallengeError, match=r"ood_real/metadata.parquet: 1 image file\(s\) not "
                                             r"found, e.g. \['.*ood001.jpeg'\]"):
        run(tmp_path, data, env_cache)


def test_corrupt_image_is_a_data_error_naming_the_file(tmp_path, env_cache):
    data = make_input_data(tmp_path / "data", sets=("performance", "drift"))
    (data / "drift" / "images" / "dri002.jpeg").write_bytes(b"not a jpeg")
    with pytest.raises(ChallengeError, match=r"cannot decode image .*drift/images/dri002.jpeg"):
        run(tmp_path, data, env_cache)
    out = tmp_path / "pred"
    report = json.loads((out / "ingestion.json").read_text())
    assert report["status"] == "failed" and "dri002.jpeg" in report["errors"][0]
    assert [report["sets"][s]["status"] for s in ("performance", "drift", "robustness")] == \
        ["ok", "failed", "skipped"]
    check_good_predictions(out, ("performance",))  # the set done before stays
    assert not (out / "drift.parquet").exists()


def test_unusable_archives_fail_the_submission_not_the_evaluator(tmp_path, input_data):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../escape.py", "x")
    report = ingest(evil, input_data, tmp_path / "p1", progress=False)
    assert report["status"] == "failed"
    assert report["errors"] == [f"submission: {evil}: unsafe member '../escape.py' in the zip"]
    notzip = tmp_path / "sub.tar"
    notzip.write_bytes(b"\0" * 100)
    report = ingest(notzip, input_data, tmp_path / "p2", progress=False)
    assert report["errors"] == [f"submission: {notzip}: not a folder nor a zip file"]
    empty = make_submission(tmp_path / "empty", setup=None)
    report = ingest(empty, input_data, tmp_path / "p3", progress=False)
    assert report["errors"][0].startswith("submission layout: no setup.py or pyproject.toml")
    with pytest.raises(ChallengeError, match="submission not found"):
        ingest(tmp_path / "nowhere", input_data, tmp_path / "p4", progress=False)


def test_exit_codes_of_the_command(tmp_path, input_data, env_cache, monkeypatch):
    """0 = ok, 1 = the submission failed, 2 = bad input or usage (documented in --help)."""
    from challenge_welding.commands import cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(env_cache.parents[1]))
    good = make_submission(tmp_path / "good")
    bad = make_submission(tmp_path / "bad", GOOD.replace("assert self.loaded", "1 / 0"))
    (tmp_path / "empty").mkdir()
    base = ["ingest", "--no-progress", "--sets", "ood_real", "--input-data"]
    assert cli.main(base + [str(input_data), "--submission", str(good),
                            "--output", str(tmp_path / "p0")]) == 0
    assert cli.main(base + [str(input_data), "--submission", str(bad),
                            "--output", str(tmp_path / "p1")]) == 1
    assert cli.main(base + [str(tmp_path / "empty"), "--submission", str(good),
                            "--output", str(tmp_path / "p2")]) == 2
    with pytest.raises(SystemExit) as usage:
        cli.main(["ingest", "--submission", str(good)])
    assert usage.value.code == 2
    from challenge_welding.commands.ingest import EPILOG

    assert "1  the submission failed" in EPILOG and "2  bad input or usage" in EPILOG


def test_missing_model_file_gets_its_own_hint(tmp_path, input_data, env_cache):
    """A file the component loads from its package but that was not installed (no
    MANIFEST.in line): the hint names MANIFEST.in, not ROOT_PATH."""
    comp = GOOD.replace("self.loaded = True", "from pathlib import Path\n        "
                        "open(Path(__file__).parent / 'model.bin', 'rb')")
    sub = make_submission(tmp_path / "sub", comp)
    (sub / "challenge_solution" / "model.bin").write_bytes(b"weights")  # never installed
    report = ingest(sub, input_data, tmp_path / "pred", cache_dir=env_cache, progress=False,
                    sets=["ood_real"])
    assert report["status"] == "failed"
    line = report["errors"][0]
    assert "raised FileNotFoundError" in line and "model.bin" in line
    assert line.endswith("(this file of your package was not installed: list it in MANIFEST.in, "
                         "e.g. 'include challenge_solution/model.bin', and keep "
                         "include_package_data=True in setup.py)")
    assert "ROOT_PATH" not in line

    relative = GOOD.replace("self.loaded = True", "open('model.bin', 'rb')")
    report = ingest(make_submission(tmp_path / "rel", relative), input_data, tmp_path / "p2",
                    cache_dir=env_cache, progress=False, sets=["ood_real"])
    assert report["errors"][0].endswith("is resolved against the evaluator's working folder: "
                                        "build it from ROOT_PATH = Path(__file__).parent.resolve())")
