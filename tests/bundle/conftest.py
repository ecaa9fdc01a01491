"""A tiny evaluation-data folder in the contract layout (docs/contracts.md), a tiny real
submission folder, and the bundle built from them once per session."""

from __future__ import annotations

import shutil
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from challenge_welding.contract.names import SET_NAMES

ROOT = Path(__file__).resolve().parents[2]
N_PER_SET = 4


def _jpeg(path: Path, seed: int) -> None:
    import cv2

    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, size=(27, 48, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), img)


def make_tiny_data(out: Path) -> Path:
    """DATA/{input_data,reference_data,training_data} with N_PER_SET images per set."""
    k = 0
    for s in SET_NAMES:
        rows, ref = [], []
        for i in range(N_PER_SET):
            k += 1
            sid = f"{s[:3]}{k:04d}"
            rel = f"images/{sid}.jpeg"
            _jpeg(out / "input_data" / s / rel, k)
            rows.append({"sample_id": sid, "path": rel, "welding-seams": "c20",
                         "resolution": [48, 27]})
            r = {"sample_id": sid, "class": "KO" if i == 0 else "OK", "welding-seams": "c20"}
            if s == "robustness":
                r.update(perturbation="none" if i < 2 else "blur", level=float(max(0, i - 1)))
            if s in ("ood_real", "ood_synthetic", "drift"):
                r["ood"] = int(i >= 2)
            if s == "drift":
                r["position"] = i
            ref.append(r)
        pd.DataFrame(rows).to_parquet(out / "input_data" / s / "metadata.parquet")
        (out / "reference_data").mkdir(parents=True, exist_ok=True)
        pd.DataFrame(ref).to_parquet(out / "reference_data" / f"{s}.parquet")
    shutil.copy2(ROOT / "reference_data" / "scoring.yaml", out / "reference_data" / "scoring.yaml")
    train = out / "training_data"
    (train / "metadata").mkdir(parents=True)
    _jpeg(train / "images" / "t0.jpeg", 999)
    pd.DataFrame([{"sample_id": "t0", "class": "OK", "path": "images/t0.jpeg"}]).to_parquet(
        train / "metadata" / "ds_meta.parquet")
    return out


def make_tiny_solution(out: Path) -> Path:
    """A real (if naive) submission: answers UNKNOWN, ships a model file via MANIFEST.in."""
    pkg = out / "challenge_solution"
    pkg.mkdir(parents=True)
    (out / "setup.py").write_text(textwrap.dedent("""\
        from setuptools import setup, find_packages
        setup(name="tiny-solution", version="0.1", packages=find_packages(),
              include_package_data=True,
              install_requires=open("requirements.txt").read().split())
        """))
    (out / "requirements.txt").write_text("numpy\n")
    (out / "MANIFEST.in").write_text("include challenge_solution/model.txt\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "model.txt").write_text("UNKNOWN\n")
    (pkg / "AIComponent.py").write_text(textwrap.dedent("""\
        from pathlib import Path
        from challenge_welding.AIComponent_interface import AbstractAIComponent
        ROOT_PATH = Path(__file__).parent.resolve()

        class MyAIComponent(AbstractAIComponent):
            def load_model(self, config_file=None):
                self.answer = (ROOT_PATH / "model.txt").read_text().strip()

            def predict(self, input_images, images_meta_informations, device="cpu"):
                return {"predictions": [self.answer] * len(input_images)}
        """))
    return out


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    return make_tiny_data(tmp_path_factory.mktemp("data") / "DATA")


@pytest.fixture(scope="session")
def tiny_solution(tmp_path_factory) -> Path:
    return make_tiny_solution(tmp_path_factory.mktemp("solution") / "Solution-1")


@pytest.fixture(scope="session")
def bundle_zip(tmp_path_factory, tiny_data, tiny_solution) -> Path:
    from challenge_welding.bundle.bundle import make_bundle

    out = tmp_path_factory.mktemp("bundle") / "bundle.zip"
    return make_bundle(tiny_data, out, repo_root=ROOT, solution=tiny_solution, log=lambda *_: None)


@pytest.fixture
def bundle_dir(bundle_zip, tmp_path) -> Path:
    """A fresh unpacked copy of the good bundle, to break by hand."""
    d = tmp_path / "unpacked"
    with zipfile.ZipFile(bundle_zip) as zf:
        zf.extractall(d)
    return d
