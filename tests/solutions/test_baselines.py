"""The naive baselines are real submissions: installed and run by the real ingestion."""

from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from challenge_welding.ingestion.run.ingest import ingest

SOLUTIONS = Path(__file__).resolve().parents[2] / "reference-solutions"
N = 12


@pytest.fixture(scope="module")
def input_data(tmp_path_factory):
    """A one-set input_data folder (performance) of N small JPEGs in the contract's layout."""
    root = tmp_path_factory.mktemp("input_data")
    folder = root / "performance"
    (folder / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(N):
        img = rng.integers(0, 256, (54, 96, 3), dtype=np.uint8)
        name = f"images/{i:04x}.jpeg"
        cv2.imwrite(str(folder / name), img)
        rows.append({"sample_id": f"id{i}", "path": name, "welding-seams": "c20", "resolution": [96, 54]})
    pd.DataFrame(rows).to_parquet(folder / "metadata.parquet")
    return root


def _run(name, input_data, out):
    report = ingest(SOLUTIONS / name, input_data, out, sets=["performance"], progress=False, verbose=False)
    assert report["status"] == "ok", report.get("errors")
    return pd.read_parquet(out / "performance.parquet").sort_values("sample_id").reset_index(drop=True)


@pytest.mark.parametrize("name, state, probs", [
    ("always-ok", "OK", [0, 1, 0]), ("always-ko", "KO", [1, 0, 0]), ("full-unknown", "UNKNOWN", [0, 0, 1]),
])
def test_constant_baselines(name, state, probs, input_data, tmp_path):
    pred = _run(name, input_data, tmp_path / name)
    assert len(pred) == N
    assert (pred["predicted_state"] == state).all()
    got = pred[["scores KO", "scores OK", "scores UNKNOWN"]].to_numpy()
    np.testing.assert_array_equal(got, np.tile(probs, (N, 1)))
    assert (pred["scores OOD"] == 0).all()


def test_random_baseline_is_valid_varied_and_reproducible(input_data, tmp_path):
    first = _run("random", input_data, tmp_path / "a")
    second = _run("random", input_data, tmp_path / "b")
    cols = ["predicted_state", "scores KO", "scores OK", "scores UNKNOWN", "scores OOD"]
    pd.testing.assert_frame_equal(first[cols], second[cols])  # seeded
    p = first[["scores KO", "scores OK", "scores UNKNOWN"]].to_numpy()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-9)
    assert first["predicted_state"].nunique() >= 2 and first["scores OOD"].nunique() == N
    assert ((first["scores OOD"] >= 0) & (first["scores OOD"] <= 2)).all()
