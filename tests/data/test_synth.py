"""The synthetic source dataset: columns, measured values recomputed from the files, shares."""

import hashlib

import cv2
import numpy as np
import pandas as pd
import pytest

from challenge_welding.constants import IN_DOMAIN_SEAMS, SOURCE_COLUMNS, UNSEEN_SEAMS
from challenge_welding.errors import ChallengeError
from challenge_welding.data.synth import generate_dataset

N, KO_SHARE = 360, 0.3  # as in conftest.py


@pytest.fixture(scope="module")
def meta(source):
    return pd.read_parquet(source / "metadata" / "ds_meta.parquet")


def test_every_column_filled(meta):
    assert list(meta.columns) == list(SOURCE_COLUMNS) + ["OOD_class"]
    assert len(meta) == N and meta["sample_id"].is_unique
    assert not meta.drop(columns=["external_path"]).isna().any().any()
    assert set(meta["class"]) == {"OK", "KO"}
    assert set(meta["labelling_type"]) == {"expert", "operator"}
    assert set(meta["OOD_class"]) == {0, 1}


def test_measured_columns_match_the_files(source, meta):
    for row in meta.itertuples():
        data = (source / row.path).read_bytes()
        assert data[:2] == b"\xff\xd8"  # a real JPEG
        assert hashlib.sha256(data).hexdigest() == row.sha256
        grey = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
        assert [grey.shape[1], grey.shape[0]] == list(row.resolution)
        assert row.blur_level == pytest.approx(cv2.Laplacian(grey, cv2.CV_64F).var(), rel=1e-9)
        assert row.luminosity_level == pytest.approx(grey.mean(), rel=1e-9)
        assert row.blur_class == ("blurry" if row.blur_level < 950 else "sharp")


def test_shares(meta):
    # exact allocation: 12 % unseen seams, in-domain 39/22/39 %, KO and OOD shares
    counts = meta["welding-seams"].value_counts()
    unseen = counts[list(UNSEEN_SEAMS)].sum()
    assert unseen == round(0.12 * N)
    dom = counts[list(IN_DOMAIN_SEAMS)]
    assert abs(dom["c102"] / dom.sum() - 0.39) < 0.01 and abs(dom["c20"] / dom.sum() - 0.22) < 0.01
    # label noise: a few operator rows flipped both ways, none on expert rows
    assert abs((meta["class"] == "KO").mean() - KO_SHARE) < 0.03
    assert meta["OOD_class"].sum() == round(0.08 * N)
    assert set(meta["resolution"].map(tuple)) == {(160, 90), (80, 45)}


def test_real_ood_images_differ(meta):
    # OOD photos (dark, bright, glare, occlusion, motion blur) sit at the extremes more often
    ood = meta[meta["OOD_class"] == 1]
    normal = meta[meta["OOD_class"] == 0]
    extreme = lambda f: ((f.luminosity_level < 40) | (f.luminosity_level > 200)).mean()
    assert extreme(ood) > extreme(normal) + 0.2


def test_same_seed_same_bytes(tmp_path):
    a = generate_dataset(tmp_path / "a", n=12, seed=5, resolution=(96, 54), workers=2, progress=False)
    b = generate_dataset(tmp_path / "b", n=12, seed=5, resolution=(96, 54), workers=1, progress=False)
    ma, mb = (pd.read_parquet(p / "metadata" / "ds_meta.parquet") for p in (a, b))
    pd.testing.assert_frame_equal(ma, mb)
    c = generate_dataset(tmp_path / "c", n=12, seed=6, resolution=(96, 54), progress=False)
    assert set(pd.read_parquet(c / "metadata" / "ds_meta.parquet")["sha256"]).isdisjoint(ma["sha256"])


def test_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(ChallengeError, match="not empty"):
        generate_dataset(tmp_path / "x", n=2, progress=False)
