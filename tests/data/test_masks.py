"""Defect masks: synth -> build-sets carries each KO image's mask into reference_data/masks,
moved exactly like its image (rotation, translation), and nowhere public.

The source's KO images are replaced by hand-drawn ones (flat grey, one black disk off the
centre) with the disk as mask, so the dark pixels of every evaluation image are known.
"""

import hashlib
import shutil

import cv2
import numpy as np
import pandas as pd
import pytest

from challenge_welding.data.build_sets import build_sets, move_mask, training_meta_path

GREY, DARK = 180, 20


def _drawn(w, h, rng):
    """(image, mask): a black disk (radius h/10) on grey, 15-20 % of the width right or left
    of the centre (inside the image after a 20 px shift, moved visibly by a rotation)."""
    cx = int(w / 2 + rng.choice([-1, 1]) * rng.uniform(0.15, 0.2) * w)
    cy = int(h / 2 + rng.uniform(-0.1, 0.1) * h)
    mask = np.zeros((h, w), np.uint8)
    cv2.circle(mask, (cx, cy), max(3, h // 10), 255, -1)
    img = np.full((h, w, 3), GREY, np.uint8)
    img[mask > 0] = DARK
    return img, mask


@pytest.fixture(scope="module")
def drawn_build(synth, tmp_path_factory, cfg_module):
    root = tmp_path_factory.mktemp("masks")
    store = root / "store"
    shutil.copytree(synth.store, store)
    src = store / synth.source.relative_to(synth.store)
    meta = pd.read_parquet(src / "metadata" / "ds_meta.parquet")
    rng = np.random.default_rng(0)
    for i, row in meta.iterrows():
        if row["class"] != "KO":
            continue
        w, h = row["resolution"]
        img, mask = _drawn(int(w), int(h), rng)
        data = cv2.imencode(".jpeg", img, [cv2.IMWRITE_JPEG_QUALITY, 98])[1].tobytes()
        (store / row["path"]).write_bytes(data)
        mask_path = row["path"].replace(".jpeg", "_mask.png")  # beside the image, as synth writes it
        (store / mask_path).write_bytes(cv2.imencode(".png", mask)[1].tobytes())
        meta.at[i, "mask_path"] = mask_path  # also on the rare OK weld an operator marked KO
        meta.at[i, "sha256"] = hashlib.sha256(data).digest()
    meta.to_parquet(src / "metadata" / "ds_meta.parquet", index=False)
    out = build_sets(src, root / "data", seed=2, config=cfg_module, progress=False,
                     unseen_sources=[store / synth.unseen.relative_to(synth.store)],
                     ood_source=store / "ood_photos")
    return out, meta


@pytest.fixture(scope="module")
def cfg_module():
    from challenge_welding.data.build_sets import load_build_config

    return load_build_config().replaced(
        {"robustness": {"size": 40}, "ood_synthetic": {"size_per_class": 25}, "drift": {"size": 60}})


def _iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def test_masks_line_up_with_the_dark_defect_pixels(drawn_build):
    data, _ = drawn_build
    checked = {}
    for name in ("performance", "robustness"):
        ref = pd.read_parquet(data / "reference_data" / f"{name}.parquet")
        inp = pd.read_parquet(data / "input_data" / name / "metadata.parquet").set_index("sample_id")
        for row in ref.itertuples():
            mask_file = data / "reference_data" / "masks" / name / f"{row.sample_id}.png"
            assert mask_file.is_file() == (row._2 == "KO")  # every KO sample has one, no OK sample
            if row._2 != "KO":
                continue
            kind = getattr(row, "perturbation", "none")
            if kind not in ("none", "rotation", "translation"):
                continue  # blur and luminance change the pixels' values, not their place
            grey = cv2.imread(str(data / "input_data" / name / inp.loc[row.sample_id, "path"]),
                              cv2.IMREAD_GRAYSCALE)
            mask = cv2.imread(str(mask_file), cv2.IMREAD_UNCHANGED)
            assert mask.shape == grey.shape and set(np.unique(mask)) <= {0, 255}
            assert _iou(grey < (GREY + DARK) / 2, mask > 0) > 0.85, (name, kind, row.level)
            checked[kind] = checked.get(kind, 0) + 1
    assert checked.get("rotation", 0) >= 6 and checked.get("translation", 0) >= 4 and checked["none"] >= 10


def test_an_unmoved_mask_would_not_line_up():
    """The check above can fail: a 20-degree rotation's image against the unrotated mask."""
    img, mask = _drawn(160, 90, np.random.default_rng(1))
    from challenge_welding.data import perturbations as pt

    turned = cv2.cvtColor(pt.rotation(img, 20), cv2.COLOR_BGR2GRAY) < (GREY + DARK) / 2
    assert _iou(turned, mask > 0) < 0.5
    assert _iou(turned, move_mask(mask, ("rotation", 20.0)) > 0) > 0.9
    assert move_mask(mask, ("blur", 20.0)) is mask and move_mask(mask, ("luminance", -2.0)) is mask


def test_masks_stay_private(drawn_build):
    data, _ = drawn_build
    public = [p for p in (data / "input_data").rglob("*") if p.is_file()]
    assert public and not [p for p in public if p.suffix == ".png" or "mask" in p.name]
    train = pd.read_parquet(training_meta_path(data))
    assert "mask_path" not in train.columns
    assert not list((data / "training_data").rglob("*_mask.png"))
    # ood_synthetic and drift masks exist for their KO samples (same place as the image)
    for name in ("ood_synthetic", "drift"):
        ref = pd.read_parquet(data / "reference_data" / f"{name}.parquet")
        files = {p.stem for p in (data / "reference_data" / "masks" / name).glob("*.png")}
        assert files == set(ref.loc[ref["class"] == "KO", "sample_id"])
