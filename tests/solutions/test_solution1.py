"""Solution-1: trained by its own command on a tiny synthetic set, then used as installed code."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SOLUTION = Path(__file__).resolve().parents[2] / "reference-solutions" / "Solution-1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from challenge_welding.data.synth import generate_dataset

    root = tmp_path_factory.mktemp("sol1")
    data = generate_dataset(root / "train", n=160, seed=3, resolution=(240, 135), ko_share=0.15,
                            progress=False).source
    out = root / "Solution-1"
    res = subprocess.run([sys.executable, str(SOLUTION / "train.py"), "--data", str(data), "--out", str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return data, out


def _component(folder, monkeypatch):
    monkeypatch.syspath_prepend(str(folder))
    for mod in [m for m in sys.modules if m.startswith("challenge_solution")]:
        del sys.modules[mod]
    from challenge_solution.AIComponent import MyAIComponent

    comp = MyAIComponent()
    comp.load_model()
    return comp


def _images(data, k):
    import cv2

    meta = pd.read_parquet(data / "metadata" / "ds_meta.parquet")
    if "OOD_class" in meta:
        meta = meta[meta["OOD_class"].fillna(0) == 0]
    store = data.parents[2]  # paths are relative to the storage root (the published layout)
    return [cv2.cvtColor(cv2.imread(str(store / p)), cv2.COLOR_BGR2RGB) for p in meta["path"][:k]]


def test_submission_folder_is_complete(trained):
    _, out = trained
    for name in ("setup.py", "requirements.txt", "MANIFEST.in", "challenge_solution/__init__.py",
                 "challenge_solution/AIComponent.py", "challenge_solution/model.npz"):
        assert (out / name).is_file(), name
    reqs = (out / "requirements.txt").read_text().split()
    assert reqs and all("==" in r for r in reqs)  # pinned
    assert "model.npz" in (out / "MANIFEST.in").read_text()


def test_features_are_deterministic_and_resolution_free(trained, monkeypatch):
    import cv2

    data, out = trained
    monkeypatch.syspath_prepend(str(out))
    from challenge_solution.features import image_features

    img = _images(data, 1)[0]
    a, b = image_features(img), image_features(img.copy())
    # cv2's multi-threaded reductions may differ in the last bits from one call to the next.
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert np.isfinite(a).all()
    big = cv2.resize(img, (img.shape[1] * 4, img.shape[0] * 4), interpolation=cv2.INTER_CUBIC)
    # Same scene at 4x the pixels: photometric features (the first 7 percentiles) barely move.
    np.testing.assert_allclose(image_features(big)[:7], a[:7], atol=0.03)


def test_predictions_ood_and_trust_switch(trained, monkeypatch):
    data, out = trained
    comp = _component(out, monkeypatch)
    imgs = _images(data, 40)
    res = comp.predict(imgs, [{"welding-seams": "c20", "resolution": [240, 135]}] * len(imgs))
    states = np.asarray(res["predictions"])
    probs = np.asarray(res["probabilities"])
    ood = np.asarray(res["OOD_scores"])
    assert set(states) <= {"KO", "OK", "UNKNOWN"}
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    assert (probs >= 0).all()
    assert np.median(ood) < 1.0  # in-distribution: inside the boundary
    black = np.zeros((1080, 1920, 3), np.uint8)
    white = np.full((1080, 1920, 3), 255, np.uint8)
    res_ood = comp.predict([black, white], [{"welding-seams": "c20", "resolution": [1920, 1080]}] * 2)
    assert min(res_ood["OOD_scores"]) >= 1.0
    assert res_ood["predictions"] == ["UNKNOWN", "UNKNOWN"]

    # The no-trust switch: same model, one-hot answers, no OOD score, no UNKNOWN.
    (out / "challenge_solution" / "settings.json").write_text('{"trust": false}\n')
    try:
        plain = _component(out, monkeypatch).predict(imgs, [{}] * len(imgs))
    finally:
        (out / "challenge_solution" / "settings.json").write_text('{"trust": true}\n')
    p = np.asarray(plain["probabilities"])
    assert set(plain["predictions"]) <= {"KO", "OK"}
    assert set(np.unique(p)) <= {0.0, 1.0} and (p[:, 2] == 0).all()
    assert not any(plain["OOD_scores"])


def test_predict_returns_a_map_per_image(trained, monkeypatch):
    """The solution spec's optional explainability output: one map per image, the image's size, in [0, 1]."""
    data, out = trained
    comp = _component(out, monkeypatch)
    imgs = _images(data, 5)
    res = comp.predict(imgs, [{"welding-seams": "c20", "resolution": [240, 135]}] * len(imgs))
    maps = res["explainability"]
    assert len(maps) == len(imgs)
    for img, m in zip(imgs, maps):
        assert m.shape == img.shape[:2] and np.isfinite(m).all() and 0.0 <= m.min() and m.max() <= 1.0
    assert comp.predict([], [])["explainability"] == []
