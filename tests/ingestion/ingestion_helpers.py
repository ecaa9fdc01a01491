"""Builders of real submission folders and a tiny evaluation input-data folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

import challenge_welding
from challenge_welding.contract.names import SET_NAMES

# the packaged scoring config (the reference folders' scoring.yaml)
CONFIG = Path(challenge_welding.__file__).parent / "scoring" / "default_scoring.yaml"

# setup.py of the starter kit's template: install_requires read from requirements.txt.
SETUP_PY = """\
import setuptools
from setuptools import setup


def parse_requirements(filename):
    with open(filename) as f:
        return [line for line in f.read().splitlines() if line.strip()]


setup(name="challenge_solution", version="0.1", packages=setuptools.find_packages(),
      include_package_data=True, install_requires=parse_requirements("requirements.txt"))
"""
# A numpy other than the evaluator's (2.4.x): the submission's pin must win in its env.
REQUIREMENTS = "numpy==2.2.6\n"

# The good component: KO when the image is redder than green, probabilities from the mean
# colour (as numpy arrays, like the published reference solution), OOD = mean blue / 255 as
# numpy floats. It checks what the interface promises and fails loudly otherwise.
GOOD = '''
import numpy as np
from challenge_welding.ai_component_interface import AbstractAIComponent


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        self.loaded = True

    def predict(self, input_images, images_meta_informations, device="cuda"):
        assert self.loaded
        assert device == "cpu", device
        assert np.__version__ == "2.2.6", np.__version__
        preds, probs, ood = [], [], []
        for img, meta in zip(input_images, images_meta_informations):
            assert set(meta) == {"welding-seams", "resolution"}, meta
            assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
            assert list(img.shape[1::-1]) == meta["resolution"], (img.shape, meta)
            r, g, b = img.reshape(-1, 3).mean(axis=0)
            preds.append("KO" if r > g else "OK")
            probs.append(np.array([r, g, b]) / (r + g + b))
            ood.append(np.float64(b / 255.0))
        return {"predictions": preds, "probabilities": probs, "OOD_scores": ood}
'''


def make_submission(root: Path, component: str = GOOD, requirements: str = REQUIREMENTS,
                    setup: str | None = SETUP_PY, manifest: str | None = None,
                    extra: dict | None = None) -> Path:
    pkg = root / "challenge_solution"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "AIComponent.py").write_text(textwrap.dedent(component))
    if requirements is not None:
        (root / "requirements.txt").write_text(requirements)
    if setup is not None:
        (root / "setup.py").write_text(setup)
    if manifest is not None:
        (root / "MANIFEST.in").write_text(manifest)
    for rel, text in (extra or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# Per set: a list of (RGB colour, (w, h)). Flat colours survive JPEG to within a few levels,
# so the expected outputs of GOOD can be worked out by hand from these numbers.
RED, GREEN, BLUEISH = (200, 40, 20), (30, 180, 60), (60, 90, 200)
SAMPLES = {
    "performance": [(RED, (64, 36)), (GREEN, (64, 36)), (GREEN, (32, 18)), (BLUEISH, (64, 36)),
                    (RED, (32, 18)), (GREEN, (64, 36)), (RED, (64, 36))],
    "robustness": [(GREEN, (64, 36)), (RED, (64, 36)), (GREEN, (64, 36))],
    "ood_real": [(BLUEISH, (48, 27)), (GREEN, (48, 27))],
    "ood_synthetic": [(RED, (64, 36)), (BLUEISH, (64, 36))],
    "generalization": [(GREEN, (32, 18)), (RED, (32, 18))],
    "drift": [(GREEN, (64, 36)), (GREEN, (64, 36)), (RED, (64, 36)), (BLUEISH, (64, 36)),
              (RED, (64, 36))],
}


def make_input_data(root: Path, sets=SET_NAMES) -> Path:
    """DIR/<set>/metadata.parquet + DIR/<set>/images/<id>.jpeg, the contract's layout."""
    for name in sets:
        rows = []
        (root / name / "images").mkdir(parents=True, exist_ok=True)
        for i, (rgb, (w, h)) in enumerate(SAMPLES[name]):
            sid = f"{name[:3]}{i:03d}"
            img = np.empty((h, w, 3), np.uint8)
            img[:] = rgb[::-1]  # cv2 writes BGR
            rel = f"images/{sid}.jpeg"
            assert cv2.imwrite(str(root / name / rel), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
            rows.append({"sample_id": sid, "path": rel, "welding-seams": "c20",
                         "resolution": [w, h]})
        pd.DataFrame(rows).to_parquet(root / name / "metadata.parquet", index=False)
    return root


def expected(name: str):
    """Hand-derived expected outputs of GOOD on SAMPLES[name]: labels, probabilities, OOD."""
    labels, probs, ood = [], [], []
    for (r, g, b), _ in SAMPLES[name]:
        labels.append("KO" if r > g else "OK")
        probs.append([r / (r + g + b), g / (r + g + b), b / (r + g + b)])
        ood.append(b / 255)
    return labels, np.array(probs), np.array(ood)


def make_reference(root: Path, config: Path) -> Path:
    """Labels of SAMPLES in the reference-data format: red welds are KO, blueish ones are the
    OOD samples (in the OOD sets and drift), robustness has a clean copy and a blur ladder."""
    import shutil

    root.mkdir(parents=True, exist_ok=True)
    for name, samples in SAMPLES.items():
        rows = []
        for i, (rgb, _) in enumerate(samples):
            row = {"sample_id": f"{name[:3]}{i:03d}", "class": "KO" if rgb == RED else "OK",
                   "welding-seams": "c20"}
            if name == "robustness":
                row.update(perturbation=("none", "blur", "blur")[i], level=(0.0, 1.0, 2.0)[i])
            if name in ("ood_real", "ood_synthetic", "drift"):
                row["ood"] = int(rgb == BLUEISH)
            if name == "drift":
                row["position"] = i
            rows.append(row)
        pd.DataFrame(rows).to_parquet(root / f"{name}.parquet", index=False)
    shutil.copy(config, root / "scoring.yaml")
    return root


def failed_with_one_line(report, out, *parts):
    """The run failed with exactly one error line holding ``parts``; no traceback of ours."""
    assert report["status"] == "failed", report
    assert len(report["errors"]) == 1 and "\n" not in report["errors"][0], report["errors"]
    for part in parts:
        assert part in report["errors"][0], report["errors"][0]
    log = (out / "ingestion.log").read_text()
    assert report["errors"][0] in log
    assert "Traceback" not in log and "Traceback" not in report["errors"][0]
