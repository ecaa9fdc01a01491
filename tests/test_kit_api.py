"""The published starter kit's API in our package (issue 25; docs/contracts.md "The published
kit's API"): ChallengeUI, the dataloaders and TestAIComponent against a real synthetic store,
served over HTTP on 127.0.0.1 by python's http.server, or read as a folder.

The published tutorials (01, 02, 03 of the organisers' reference-solution repository) run
unchanged in test_published_tutorial when a checkout of that repository is named by
CHALLENGE_WELDING_REFERENCE_REPO (their code is not ours to commit);
test_every_call_the_tutorials_make makes the same calls in-process, so CI covers them
without the checkout.
"""

from __future__ import annotations

import hashlib
import http.server
import inspect
import os
import shutil
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
import yaml

from challenge_welding import dataloaders, inference_tools, user_interface
from challenge_welding.data.parquet_io import write_parquet
from challenge_welding.data.synth import generate_dataset, write_datasets_list
from challenge_welding.dataloaders import ChallengeWeldingDataset, create_pytorch_dataloader
from challenge_welding.inference_tools import TestAIComponent
from challenge_welding.ingestion.run.validate import OutputError
from challenge_welding.user_interface import PUBLIC_STORE, STORE_ENV, ChallengeUI, StoreError

REPO = Path(__file__).resolve().parents[1]
MINI = "example_mini_dataset"  # the dataset name the published tutorials hard-code
PUBLISHED_COLUMNS = ("sample_id", "class", "timestamp", "welding-seams", "labelling_type", "resolution",
                     "path", "sha256", "storage_type", "data_origin", "blur_level", "blur_class",
                     "luminosity_level", "external_path")


def make_store(root: Path) -> Path:
    """A synthetic store (synth, 40 images at 64x36 and 32x18) plus the tutorials'
    example_mini_dataset: the synthetic dataset's rows in the published columns only (the
    published store has no mask_path), pointing at the same image files."""
    generate_dataset(root, n=40, seed=1, resolution=(64, 36), workers=1, progress=False)
    meta = pd.read_parquet(root / "challenge-welding/datasets/synthetic/metadata/ds_meta.parquet")
    mini = root / "challenge-welding/datasets" / MINI / "metadata"
    mini.mkdir(parents=True)
    write_parquet(meta[list(PUBLISHED_COLUMNS)], mini / "ds_meta.parquet")  # readable by the kit's pyarrow 19
    write_datasets_list(root, ["synthetic", "synthetic_unseen", MINI])
    return root


class Served:
    """The store served over HTTP on 127.0.0.1 by http.server in a thread; records each GET."""

    def __init__(self, root: Path):
        self.paths: list[str] = []
        served = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # quiet; the paths are recorded instead
                served.paths.append(self.path)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("store") / "STORE")


@pytest.fixture(scope="module")
def served(store):
    s = Served(store)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_store_env(monkeypatch):
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # never through a proxy
    monkeypatch.setenv("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def no_component_left_behind():
    """TestAIComponent imports challenge_solution in this process: gone after each test, so that
    no other test of the worker imports this one's."""
    path = list(sys.path)
    yield
    sys.path[:] = path
    for name in [m for m in sys.modules if m == "challenge_solution" or m.startswith("challenge_solution.")]:
        del sys.modules[name]


def rgb_by_opencv(path: Path) -> np.ndarray:
    """The file decoded by OpenCV (an independent decoder from the Pillow one under test)."""
    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


# --- the store ----------------------------------------------------------------------------

def test_synth_writes_the_datasets_list(tmp_path):
    generate_dataset(tmp_path / "S", n=30, seed=0, resolution=(64, 36), workers=1, progress=False)
    listed = yaml.safe_load((tmp_path / "S/challenge-welding/datasets_list.yml").read_text())
    on_disk = sorted(p.name for p in (tmp_path / "S/challenge-welding/datasets").iterdir())
    assert listed == on_disk == ["synthetic", "synthetic_unseen"]
    assert ChallengeUI(base_url=tmp_path / "S").list_datasets() == listed


def test_store_default_is_the_public_store_or_the_environment(monkeypatch, served):
    assert ChallengeUI().base_url == PUBLIC_STORE
    monkeypatch.setenv(STORE_ENV, served.url.rstrip("/"))
    assert ChallengeUI().base_url == served.url  # the slash is added: paths are appended
    assert ChallengeUI(base_url="/data/store").base_url == "/data/store"  # an explicit one wins
    assert user_interface.store_root("file:///data/store") == "/data/store"


@pytest.mark.parametrize("where", ["http", "folder"])
def test_metadata_and_images_match_the_files(where, store, served):
    ui = ChallengeUI(base_url=served.url if where == "http" else str(store))
    assert ui.list_datasets() == ["synthetic", "synthetic_unseen", MINI]
    meta = ui.get_ds_metadata_dataframe("synthetic")
    expected = pd.read_parquet(store / "challenge-welding/datasets/synthetic/metadata/ds_meta.parquet")
    pd.testing.assert_frame_equal(meta, expected)
    for rel in meta["path"].iloc[:5]:
        img = ui.open_image(rel)
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.flags.writeable
        assert np.array_equal(img, rgb_by_opencv(store / rel))
    if where == "http":
        assert "/challenge-welding/datasets_list.yml" in served.paths
        assert f"/{meta['path'].iloc[4]}" in served.paths


def test_local_cache_keeps_the_store_bytes_and_serves_from_them(tmp_path, store, served):
    ui = ChallengeUI(cache_strategy="local", cache_dir=str(tmp_path / "cache"), base_url=served.url)
    meta = ui.get_ds_metadata_dataframe("synthetic")
    row = meta.iloc[3]
    first = ui.open_image(row["path"])
    cached = tmp_path / "cache" / row["path"]
    # the store's bytes, not a re-encoding: its digest is the metadata's
    assert hashlib.sha256(cached.read_bytes()).digest() == row["sha256"]
    gets = served.paths.count(f"/{row['path']}")
    again = ui.open_image(row["path"])
    assert served.paths.count(f"/{row['path']}") == gets  # read from the cache, not the server
    assert np.array_equal(first, again)
    # pages/data.md: a downloaded dataset folder opens as the cache of any store
    offline = ChallengeUI(cache_strategy="local", cache_dir=str(store), base_url="http://127.0.0.1:9/")
    assert np.array_equal(offline.open_image(row["path"]), first)


def test_open_image_gives_rgb_for_greyscale_and_alpha_files(tmp_path):
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    cv2.imwrite(str(tmp_path / "g.png"), grey)
    rgba = np.zeros((2, 2, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 255  # blue in OpenCV's BGRA order
    cv2.imwrite(str(tmp_path / "a.png"), rgba)
    ui = ChallengeUI(base_url=str(tmp_path))
    assert np.array_equal(ui.open_image("g.png"), np.stack([grey] * 3, axis=2))
    assert ui.open_image("a.png").tolist() == [[[0, 0, 200]] * 2] * 2


def test_missing_things_raise_one_clear_connection_error(tmp_path, served):
    ui = ChallengeUI(base_url=served.url)
    with pytest.raises(StoreError) as err:
        ui.get_ds_metadata_dataframe("welding-detection-challenge-dataset")
    text = str(err.value)
    assert isinstance(err.value, ConnectionError)  # what the kit raises and its users catch
    assert "metadata of dataset 'welding-detection-challenge-dataset' not found" in text
    assert "(HTTP 404)" in text and f"the store lists: synthetic, synthetic_unseen, {MINI}" in text
    assert "\n" not in text
    with pytest.raises(StoreError, match="image nope.jpeg not found: no file .*nope.jpeg"):
        ChallengeUI(base_url=str(tmp_path)).open_image("nope.jpeg")
    # a closed port on this machine: cannot reach, naming the environment variable to check
    with pytest.raises(StoreError, match=f"cannot reach http://127.0.0.1:9/.*{STORE_ENV}"):
        ChallengeUI(base_url="http://127.0.0.1:9/").list_datasets()
    with pytest.raises(ValueError, match="not relative to the store"):
        ChallengeUI(cache_strategy="local", cache_dir=str(tmp_path)).open_image("../../etc/passwd")
    with pytest.raises(ValueError, match="cache_strategy must be 'local' or 'remote', got 'disk'"):
        ChallengeUI(cache_strategy="disk")


def test_check_integrity_finds_the_changed_and_the_missing_file(tmp_path, store, monkeypatch):
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    meta = pd.read_parquet(store / "challenge-welding/datasets/synthetic/metadata/ds_meta.parquet")
    changed, missing = meta.iloc[2], meta.iloc[7]
    path = copy / changed["path"]
    path.write_bytes(path.read_bytes() + b"\0")
    (copy / missing["path"]).unlink()
    monkeypatch.chdir(tmp_path)
    found = ChallengeUI(base_url=str(copy)).check_integrity("synthetic")
    assert [(a["index"], a["sample_id"]) for a in found] == [(2, changed["sample_id"]), (7, missing["sample_id"])]
    assert found[0]["full_path"] == str(copy / changed["path"])
    assert yaml.safe_load((tmp_path / "anomalous_samples_list.yml").read_text()) == found
    assert ChallengeUI(base_url=str(store)).check_integrity("synthetic") == []


def test_display_image_shows_and_returns_the_image(store):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    ui = ChallengeUI(base_url=str(store))
    meta = ui.get_ds_metadata_dataframe("synthetic")
    img = ui.display_image(meta, 5, show_info=True)
    assert np.array_equal(img, rgb_by_opencv(store / meta["path"].iloc[5]))
    ax = plt.gcf().axes[0]
    assert ax.get_title() == f"Class: {meta['class'].iloc[5]}, blur_class:{meta['blur_class'].iloc[5]}"
    assert np.array_equal(ax.images[0].get_array(), img)
    plt.close("all")


# --- dataloaders --------------------------------------------------------------------------

def test_dataset_resizes_to_width_height_and_sets_the_resolution(store):
    ui = ChallengeUI(base_url=str(store))
    meta = ui.get_ds_metadata_dataframe(MINI)
    seen = []
    ds = ChallengeWeldingDataset(user_ui=ui, meta_df=meta[0:6], resize=(40, 20),
                                 transform=lambda s: seen.append(s["meta"]["sample_id"]) or s)
    assert len(ds) == 6
    sample = ds[1]
    assert sample["image"].shape == (20, 40, 3)  # (width, height) -> H x W
    from PIL import Image

    # the kit's resize (Pillow's default filter) of the file decoded by OpenCV
    expected = np.asarray(Image.fromarray(rgb_by_opencv(store / meta["path"].iloc[1])).resize((40, 20)))
    assert np.array_equal(sample["image"], expected)
    assert sample["meta"]["resolution"] == [40, 20] and sample["meta"]["sample_id"] == meta["sample_id"].iloc[1]
    assert seen == [meta["sample_id"].iloc[1]]
    assert len(list(ds)) == 6  # iterable as a plain sequence, torch or not


def test_dataloader_batches_with_torch_or_says_what_to_install(store):
    ui = ChallengeUI(base_url=str(store))
    meta = ui.get_ds_metadata_dataframe(MINI)
    ds = ChallengeWeldingDataset(user_ui=ui, meta_df=meta[0:20], resize=(32, 16))
    try:
        import torch  # noqa: F401 - only whether it imports
    except ImportError:
        with pytest.raises(ImportError, match="needs PyTorch, which is not installed: pip install torch"):
            create_pytorch_dataloader(dataset=ds, batch_size=8)
        return
    batches = list(create_pytorch_dataloader(dataset=ds, batch_size=8, shuffle=False, num_workers=0))
    assert [tuple(b["image"].shape) for b in batches] == [(8, 16, 32, 3), (8, 16, 32, 3), (4, 16, 32, 3)]
    assert list(batches[2]["meta"]["sample_id"]) == list(meta["sample_id"].iloc[16:20])


# --- TestAIComponent ----------------------------------------------------------------------

PROBE = '''
import json, os
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent

class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        self.calls = []

    def predict(self, input_images, images_meta_informations{device}):
        self.calls.append({{"n": len(input_images), "metas": images_meta_informations, "device": {got}}})
        # the published reference solution's forms: numpy rows and numpy floats
        means = [float(img.mean()) / 255 for img in input_images]
        return {{"predictions": ["KO" if m < 0.4 else "OK" for m in means],
                "probabilities": [np.array([m, 1 - m, 0.0]) for m in means],
                "OOD_scores": [np.float64(m) for m in means]}}
'''


def write_probe(folder: Path, device=True) -> Path:
    pkg = folder / "challenge_solution"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    text = PROBE.format(device=', device="cuda"' if device else "", got="device" if device else "None")
    (pkg / "AIComponent.py").write_text(text)
    return folder


@pytest.mark.parametrize("takes_device", [True, False])
def test_grouped_inference_runs_as_the_evaluator_does(takes_device, tmp_path, store, served, monkeypatch):
    monkeypatch.setenv(STORE_ENV, served.url)  # the ChallengeUI made inside TestAIComponent uses it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: device "cpu"
    meta = ChallengeUI().get_ds_metadata_dataframe(MINI)
    probe = write_probe(tmp_path / f"probe{takes_device}", device=takes_device)
    t = TestAIComponent(proposed_solution_path=str(probe), meta_root_path=str(tmp_path / "res"),
                        cache_strategy="local", cache_dir=str(tmp_path / "cache"))
    t.load_proposed_solution()
    out = t.perform_grouped_inference(evaluation_dataset=meta, results_inference_path=str(tmp_path / "res/r.parquet"),
                                      batch_size=8)
    calls = t.ai_component.calls
    assert [c["n"] for c in calls] == [8, 8, 8, 8, 2]  # 34 rows in batches of 8
    assert {c["device"] for c in calls} == ({"cpu"} if takes_device else {None})
    first = rgb_by_opencv(store / meta["path"].iloc[0])
    assert calls[0]["metas"][0] == {"welding-seams": meta["welding-seams"].iloc[0],
                                   "resolution": [first.shape[1], first.shape[0]]}
    means = np.array([rgb_by_opencv(store / p).mean() / 255 for p in meta["path"]])
    assert list(out.index) == list(meta["sample_id"])
    assert out["scores OOD"].to_numpy() == pytest.approx(means)
    assert out["scores KO"].to_numpy() == pytest.approx(means)
    assert out["scores OK"].to_numpy() == pytest.approx(1 - means)
    assert (out["scores UNKNOWN"] == 0).all() and (out["compute_time"] > 0).all()
    assert list(out["predicted_state"]) == ["KO" if m < 0.4 else "OK" for m in means]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "res/r.parquet"), out)
    assert (tmp_path / "cache" / meta["path"].iloc[0]).is_file()
    assert f"/{meta['path'].iloc[0]}" in served.paths


def test_grouped_inference_refuses_output_the_evaluator_refuses(tmp_path, store, monkeypatch):
    monkeypatch.setenv(STORE_ENV, str(store))
    meta = ChallengeUI().get_ds_metadata_dataframe(MINI)
    probe = write_probe(tmp_path / "bad")
    text = (probe / "challenge_solution/AIComponent.py").read_text()
    (probe / "challenge_solution/AIComponent.py").write_text(text.replace("np.float64(m)", "float('nan')"))
    t = TestAIComponent(str(probe), str(tmp_path / "res"))
    t.load_proposed_solution()
    with pytest.raises(OutputError, match=f"sample {meta['sample_id'].iloc[0]}: OOD score is nan"):
        t.perform_grouped_inference(meta, str(tmp_path / "res/r.parquet"))


# --- the kit's names and signatures -------------------------------------------------------

# Written from challenge-welding 1.0's modules (parameter names and defaults); base_url's
# default is None here, meaning CHALLENGE_WELDING_STORE or the same public store.
KIT_SIGNATURES = {
    (user_interface, "ChallengeUI.__init__"): "(self, cache_strategy='remote', cache_dir='.cache', base_url=None, ds_meta_path='challenge-welding/datasets_list.yml')",
    (user_interface, "ChallengeUI.list_datasets"): "(self)",
    (user_interface, "ChallengeUI.get_ds_metadata_dataframe"): "(self, ds_name)",
    (user_interface, "ChallengeUI.open_image"): "(self, image_url)",
    (user_interface, "ChallengeUI.display_image"): "(self, df, index, show_info=False)",
    (user_interface, "ChallengeUI.check_integrity"): "(self, ds_name)",
    (dataloaders, "ChallengeWeldingDataset.__init__"): "(self, user_ui, meta_df, resize=None, transform=None)",
    (dataloaders, "ChallengeWeldingDataset.__len__"): "(self)",
    (dataloaders, "ChallengeWeldingDataset.__getitem__"): "(self, idx)",
    (dataloaders, "create_pytorch_dataloader"): "(dataset, batch_size, shuffle=False, num_workers=0)",
    (inference_tools, "TestAIComponent.__init__"): "(self, proposed_solution_path, meta_root_path, cache_strategy='remote', cache_dir='.cache_pipeline')",
    (inference_tools, "TestAIComponent.load_proposed_solution"): "(self)",
    (inference_tools, "TestAIComponent.perform_grouped_inference"): "(self, evaluation_dataset, results_inference_path, batch_size=10)",
}


@pytest.mark.parametrize("module, name", list(KIT_SIGNATURES), ids=lambda x: getattr(x, "__name__", x))
def test_kit_names_have_the_kit_signatures(module, name):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    sig = inspect.signature(obj).replace(return_annotation=inspect.Signature.empty)
    plain = sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()])
    assert str(plain) == KIT_SIGNATURES[(module, name)]


# --- the tutorials ------------------------------------------------------------------------

def tutorial_layout(tmp_path: Path, store: Path) -> Path:
    """The tutorials' working folder; 03 loads the component at ../Challenge-Welding-Reference-Solution-1:
    there, the repository's `random` reference solution (numpy only; the published one needs
    tensorflow)."""
    shutil.copytree(REPO / "reference-solutions/random", tmp_path / "Challenge-Welding-Reference-Solution-1")
    (tmp_path / "run").mkdir()
    return tmp_path / "run"


def test_every_call_the_tutorials_make(tmp_path, store, served, monkeypatch, capsys):
    """01-Tutorial.py and 03-Test_AIComponent.py's calls, in their order and with their arguments."""
    monkeypatch.setenv(STORE_ENV, served.url)
    monkeypatch.chdir(tutorial_layout(tmp_path, store))
    # 01
    my_challenge_UI = ChallengeUI(cache_strategy="local", cache_dir="notebooks_cache")
    assert my_challenge_UI.list_datasets() == ["synthetic", "synthetic_unseen", MINI]
    meta_df = my_challenge_UI.get_ds_metadata_dataframe(MINI)
    sample_meta = meta_df.iloc[10]
    meta_df["resolution"] = meta_df["resolution"].astype(str)
    assert set(meta_df["resolution"].value_counts().index) == {"[64 36]", "[32 18]"}
    assert meta_df["class"].value_counts().sum() == 34
    by_class = meta_df.groupby(["welding-seams", "class"]).count()["sample_id"]
    assert by_class.sum() == 34 and set(by_class.index.get_level_values(0)) == {"c102", "c20", "c33"}
    assert meta_df.groupby(["welding-seams", "blur_class"]).count()["sample_id"].sum() == 34
    stats = meta_df.groupby(["welding-seams"])[["blur_level", "luminosity_level"]].describe()
    assert stats[("luminosity_level", "count")].sum() == 34
    img = my_challenge_UI.open_image(sample_meta["path"])
    assert img.shape == (sample_meta["resolution"][1], sample_meta["resolution"][0], 3)
    assert (Path("notebooks_cache") / sample_meta["path"]).is_file()
    # 03
    evaluation_ds_meta_df = ChallengeUI().get_ds_metadata_dataframe(MINI)
    pipeline = TestAIComponent(proposed_solution_path="../Challenge-Welding-Reference-Solution-1",
                               meta_root_path="starter_kit_test_pipeline_results",
                               cache_strategy="local", cache_dir="test_cache")
    pipeline.load_proposed_solution()
    result_df = pipeline.perform_grouped_inference(
        evaluation_dataset=evaluation_ds_meta_df,
        results_inference_path=pipeline.meta_root_path + "/res_inference.parquet", batch_size=150)
    assert len(result_df) == 34 and set(result_df["predicted_state"]) <= {"KO", "OK", "UNKNOWN"}
    assert result_df[["scores KO", "scores OK", "scores UNKNOWN"]].sum(axis=1).to_numpy() == pytest.approx(1)
    assert Path("starter_kit_test_pipeline_results/res_inference.parquet").is_file()
    assert len(list(Path("test_cache").rglob("*.jpeg"))) == 34


def reference_checkout() -> Path | None:
    repo = os.environ.get("CHALLENGE_WELDING_REFERENCE_REPO")
    return Path(repo) if repo and (Path(repo) / "01-Tutorial.py").is_file() else None


def torch_missing() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is None


@pytest.mark.parametrize("script", ["01-Tutorial.py", "02-Create_pytorch_dataloader.py", "03-Test_AIComponent.py"])
def test_published_tutorial(script, tmp_path, store, served):
    """The organisers' tutorial, unchanged, from a checkout of confianceai/Challenge-Welding-
    Reference-Solution-1 (CHALLENGE_WELDING_REFERENCE_REPO), against the store over HTTP."""
    checkout = reference_checkout()
    if checkout is None:
        pytest.skip("CHALLENGE_WELDING_REFERENCE_REPO does not name a checkout of the reference-solution repository")
    if script.startswith("02") and torch_missing():
        pytest.skip("02 needs torch, which is not installed")
    run = tutorial_layout(tmp_path, store)
    shutil.copy2(checkout / script, run / script)
    env = {**os.environ, STORE_ENV: served.url, "NO_PROXY": "127.0.0.1,localhost", "MPLBACKEND": "Agg"}
    before = len(served.paths)
    proc = subprocess.run([sys.executable, script], cwd=run, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (run / script).read_bytes() == (checkout / script).read_bytes()  # unchanged
    got = served.paths[before:]
    assert "/challenge-welding/datasets_list.yml" in got or script.startswith("03")
    assert f"/challenge-welding/datasets/{MINI}/metadata/ds_meta.parquet" in got
    assert any(p.endswith(".jpeg") for p in got)
    if script.startswith("03"):
        out = pd.read_parquet(run / "starter_kit_test_pipeline_results/res_inference.parquet")
        assert len(out) == 34 and "pipeline finished" in proc.stdout
        assert list(out.columns[-6:]) == ["predicted_state", "scores KO", "scores OK", "scores UNKNOWN",
                                          "scores OOD", "compute_time"]
    if script.startswith("01"):
        assert f"['synthetic', 'synthetic_unseen', '{MINI}']" in proc.stdout
        assert "size of the opened image" in proc.stdout


# --- ours installed over the published kit ------------------------------------------------

def python312():
    """pyenv's CPython 3.12 (the published challenge-welding 1.0 needs Python >= 3.12), or None."""
    import glob

    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    return found[0] if found else shutil.which("python3.12")


# The kit's calls that need no torch and no network but the store's (the published
# check_integrity reads external_path, an address of the organisers' server).
KIT_USAGE = r'''
import hashlib, json, sys
import importlib.metadata as md
from challenge_welding.user_interface import ChallengeUI
ui = ChallengeUI(cache_strategy="local", cache_dir=sys.argv[2], base_url=sys.argv[1])
names = ui.list_datasets()
meta = ui.get_ds_metadata_dataframe("example_mini_dataset")
images = [ui.open_image(p) for p in meta["path"].iloc[:5]]
remote = ChallengeUI(base_url=sys.argv[1]).open_image(meta["path"].iloc[5])
print(json.dumps({"version": md.version("challenge-welding"), "names": names,
                  "meta": hashlib.sha256(repr([list(map(repr, r)) for r in meta.itertuples(index=False)]).encode()).hexdigest(), "rows": len(meta),
                  "images": [hashlib.sha256(i.tobytes()).hexdigest() + str(i.shape) for i in images],
                  "remote": hashlib.sha256(remote.tobytes()).hexdigest()}))
'''


@pytest.mark.skipif(python312() is None, reason="no Python 3.12 (the published challenge-welding 1.0 needs it)")
def test_ours_installed_over_the_published_kit_keeps_its_api(tmp_path, served):
    """A participant's environment with the published kit (1.0 and its tutorials' pins), then
    ours installed over it: the kit's calls give the same answers as under 1.0, and every
    module of the published wheel is still importable (dataloaders and inference_tools too)."""
    import json

    uv = [sys.executable, "-m", "uv"]
    venv = tmp_path / "kitenv"
    subprocess.run(uv + ["venv", "--quiet", "--python", python312(), str(venv)], check=True)
    py = str(venv / "bin/python")
    pins = ["challenge-welding==1.0", "numpy==2.2.6", "pandas==2.2.3", "pyarrow==19.0.0", "pyyaml==6.0.2",
            "requests==2.32.3", "pillow==11.0.0", "tqdm==4.67.0", "matplotlib==3.10.0"]
    subprocess.run(uv + ["pip", "install", "--quiet", "--python", py] + pins, check=True)
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "MPLBACKEND": "Agg"}
    env.pop(STORE_ENV, None)

    def usage(tag):
        proc = subprocess.run([py, "-c", KIT_USAGE, served.url, str(tmp_path / f"cache-{tag}")],
                              capture_output=True, text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    published = usage("published")
    assert published["version"] == "1.0"
    subprocess.run(uv + ["pip", "install", "--quiet", "--no-deps", "--python", py, str(REPO / "challenge-welding")],
                   check=True)
    ours = usage("ours")
    assert ours["version"] == "1.1.0"
    assert {k: v for k, v in ours.items() if k != "version"} == {k: v for k, v in published.items() if k != "version"}
    probe = ("import challenge_welding.user_interface, challenge_welding.inference_tools, "
             "challenge_welding.dataloaders, challenge_welding.ai_component_interface, challenge_welding._version_\n"
             "from challenge_welding.inference_tools import TestAIComponent\n"
             "from challenge_welding.dataloaders import ChallengeWeldingDataset, create_pytorch_dataloader\n"
             "print(challenge_welding._version_.__version__)")
    proc = subprocess.run([py, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "1.1.0"
