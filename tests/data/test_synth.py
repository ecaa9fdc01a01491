"""synth: the published format and layout, measured values recomputed from the files, shares."""

import hashlib
import re
from datetime import datetime

import cv2
import numpy as np
import pandas as pd
import pytest

from challenge_welding.contract.names import IN_DOMAIN_SEAMS, SOURCE_COLUMNS, UNSEEN_SEAMS
from challenge_welding.data.source import photo_files
from challenge_welding.data.synth import generate_dataset
from challenge_welding.contract.errors import ChallengeError

N, KO_SHARE, OOD_SHARE = 360, 0.3, 0.08  # as in conftest.py


def _meta(folder):
    return pd.read_parquet(folder / "metadata" / "ds_meta.parquet")


@pytest.fixture(scope="module")
def both(synth):
    """The source's and the unseen dataset's metadata, in that order."""
    return _meta(synth.source), _meta(synth.unseen)


def test_layout(synth, tmp_path):
    assert synth.source == synth.store / "challenge-welding/datasets/synthetic"
    assert synth.unseen == synth.store / "challenge-welding/datasets/synthetic_unseen"
    assert synth.ood == synth.store / "ood_photos"
    assert sorted(p.name for p in (synth.store / "challenge-welding/datasets").iterdir()) == \
        ["synthetic", "synthetic_unseen"]
    # the photo folder is plain: photos only, JPEG and PNG, no metadata
    suffixes = {p.suffix for p in synth.ood.iterdir()}
    assert suffixes == {".jpg", ".png"}


def test_every_column_in_its_published_form(synth, both):
    for name, meta in zip(("synthetic", "synthetic_unseen"), both):
        # the published columns (no OOD_class, data_origin with "_"), then the optional mask_path
        assert list(meta.columns) == [*SOURCE_COLUMNS, "mask_path"]
        assert meta["sample_id"].map(lambda s: bool(re.fullmatch(r"data_\d+", s))).all()
        assert not meta.drop(columns="mask_path").isna().any().any()
        assert set(meta["class"]) == {"OK", "KO"}
        assert set(meta["storage_type"]) == {"s3"} and set(meta["data_origin"]) == {"synthetic"}
        assert meta["external_path"].str.match(r"https?://").all()
        for row in meta.itertuples():
            assert re.fullmatch(rf"challenge-welding/datasets/{name}/c\d+/(expert|operator)/sample_\d+\.jpeg",
                                row.path)
            assert row.path.split("/")[3:5] == [row._4, row.labelling_type]
            assert row.external_path.endswith("/" + row.path)
            # expert rows "22/01/20 12:49", operator rows "18/07/2022 20:18"
            form = "%d/%m/%y %H:%M" if row.labelling_type == "expert" else "%d/%m/%Y %H:%M"
            assert datetime.strptime(row.timestamp, form).strftime(form) == row.timestamp
    assert not set(both[0]["sample_id"]) & set(both[1]["sample_id"])


def test_measured_columns_match_the_files(synth, both):
    for meta in both:
        for row in meta.itertuples():
            data = (synth.store / row.path).read_bytes()  # path relative to the storage root
            assert data[:2] == b"\xff\xd8"  # a real JPEG
            assert row.sha256 == hashlib.sha256(data).digest()  # the 32 raw bytes
            grey = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
            assert [grey.shape[1], grey.shape[0]] == list(row.resolution)
            assert row.blur_level == pytest.approx(cv2.Laplacian(grey, cv2.CV_64F).var(), rel=1e-9)
            assert row.luminosity_level == pytest.approx(grey.mean() / 255 * 100, rel=1e-9)
            assert row.blur_class == ("blur" if row.blur_level < 950 else "clean")


def test_masks_beside_the_defective_images(synth, both):
    """Every row drawn with a defect has sample_<n>_mask.png beside its image (uint8 0/255,
    the image's size, not empty); the others have none. Operators mislabel some subtle
    defects as OK, so a mask means "drawn with a defect", not class KO."""
    n_masks = 0
    for meta in both:
        for row in meta.itertuples():
            image = synth.store / row.path
            mask_file = image.with_name(image.stem + "_mask.png")
            if not isinstance(row.mask_path, str):  # null (None or NaN, as pandas reads it)
                assert not mask_file.exists()
                assert row._2 == "OK" or row.labelling_type == "operator"  # KO rows always have one
                continue
            n_masks += 1
            assert synth.store / row.mask_path == mask_file
            mask = cv2.imread(str(mask_file), cv2.IMREAD_UNCHANGED)
            assert mask.dtype == np.uint8 and mask.ndim == 2
            assert [mask.shape[1], mask.shape[0]] == list(row.resolution)
            assert set(np.unique(mask)) <= {0, 255} and (mask == 255).any()
    assert n_masks >= (pd.concat(both)["class"] == "KO").sum() > 0


def test_shares(synth, both):
    src, unseen = both
    photos = photo_files(synth.ood)
    assert len(src) + len(unseen) + len(photos) == N
    assert len(unseen) == round(0.12 * N) and len(photos) == round(OOD_SHARE * N)
    assert set(src["welding-seams"]) == set(IN_DOMAIN_SEAMS)
    assert set(unseen["welding-seams"]) == set(UNSEEN_SEAMS)
    counts = src["welding-seams"].value_counts()
    assert abs(counts["c102"] / len(src) - 0.39) < 0.01 and abs(counts["c20"] / len(src) - 0.22) < 0.01
    allrows = pd.concat([src, unseen])
    assert abs((allrows["class"] == "KO").mean() - KO_SHARE) < 0.03
    assert set(allrows["resolution"].map(tuple)) == {(160, 90), (80, 45)}


def test_real_ood_photos_differ(synth, both):
    # OOD photos (dark, bright, glare, occlusion, motion blur) sit at the extremes more often
    def lum(path):
        return cv2.imread(str(path), cv2.IMREAD_GRAYSCALE).mean() / 255 * 100

    def extreme(values):
        return np.mean([(v < 16) | (v > 78) for v in values])
    ood = [lum(p) for p in photo_files(synth.ood)]
    assert extreme(ood) > extreme(both[0]["luminosity_level"]) + 0.2


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes(tmp_path):
    a = generate_dataset(tmp_path / "a", n=30, seed=5, resolution=(96, 54), workers=2, progress=False)
    b = generate_dataset(tmp_path / "b", n=30, seed=5, resolution=(96, 54), workers=1, progress=False)
    assert _files(a.store) == _files(b.store)
    c = generate_dataset(tmp_path / "c", n=30, seed=6, resolution=(96, 54), progress=False)
    assert set(_meta(c.source)["sha256"]).isdisjoint(_meta(a.source)["sha256"])


def test_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(ChallengeError, match="not empty"):
        generate_dataset(tmp_path / "x", n=2, progress=False)
