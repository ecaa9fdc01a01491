"""build-sets on a tiny synthetic storage root: sizes, balance, ladders, labels, hygiene, errors."""

import hashlib
import math
import re
import shutil

import cv2
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from challenge_welding.contract.names import INPUT_COLUMNS, SET_NAMES, UNSEEN_SEAMS
from challenge_welding.data import perturbations as pt
from challenge_welding.data.build_sets import build_sets, training_meta_path
from challenge_welding.data.source import photo_files
from challenge_welding.contract.errors import ChallengeError



def ref(data, name):
    return pd.read_parquet(data / "reference_data" / f"{name}.parquet")


def inp(data, name):
    return pd.read_parquet(data / "input_data" / name / "metadata.parquet")


def image(data, name, path, flags=cv2.IMREAD_COLOR):
    return cv2.imread(str(data / "input_data" / name / path), flags)


@pytest.fixture(scope="module")
def src(source):
    return pd.read_parquet(source / "metadata" / "ds_meta.parquet")


@pytest.fixture(scope="module")
def unseen(synth):
    return pd.read_parquet(synth.unseen / "metadata" / "ds_meta.parquet")


def in_domain_normal(src):
    assert not set(src["welding-seams"]) & set(UNSEEN_SEAMS)  # the unseen seams are elsewhere
    return src


def test_layout_and_columns(built):
    for name in SET_NAMES:
        meta, r = inp(built, name), ref(built, name)
        assert list(meta.columns) == list(INPUT_COLUMNS)
        assert list(r.columns[:3]) == ["sample_id", "class", "welding-seams"]
        assert sorted(meta["sample_id"]) == sorted(r["sample_id"])
        assert all((built / "input_data" / name / p).is_file() for p in meta["path"])
        assert len(list((built / "input_data" / name / "images").iterdir())) == len(meta)
    assert (built / "reference_data" / "scoring.yaml").is_file()
    assert not [p for p in built.iterdir() if p.name.startswith(".")]  # no temp dir left


def test_performance_is_a_stratified_20_percent(built, src):
    dom = in_domain_normal(src)
    expected = {k: round(0.2 * len(g)) for k, g in dom.groupby(["welding-seams", "class"])}
    got = ref(built, "performance").groupby(["welding-seams", "class"]).size().to_dict()
    assert got == expected  # 20 % of every (seam, class) group; enough KO here, no top-up


def test_training_is_the_rest_and_disjoint_from_performance(built, src, synth):
    meta_path = training_meta_path(built)
    assert meta_path == built / "training_data/challenge-welding/datasets/training_data/metadata/ds_meta.parquet"
    train = pd.read_parquet(meta_path)
    dom = in_domain_normal(src)
    assert len(train) == len(dom) - len(ref(built, "performance"))
    assert set(train["sample_id"]) <= set(dom["sample_id"])
    # the published format, nothing added; the masks (mask_path) stay on the private side
    assert list(train.columns) == [c for c in src.columns if c != "mask_path"]
    for row in train.itertuples():
        # the published layout: path relative to the storage root DATA/training_data
        assert re.fullmatch(r"challenge-welding/datasets/training_data/c(102|20|33)/(expert|operator)/"
                            r"sample_\d+\.jpeg", row.path)
        assert row.path.split("/")[3:5] == [getattr(row, "_4"), row.labelling_type]
        data = (built / "training_data" / row.path).read_bytes()
        assert hashlib.sha256(data).digest() == row.sha256  # raw bytes, as published
    # Independent route: no performance image is (up to re-encoding) a training image,
    # and every one is some source image.
    def thumbs(paths):
        return np.stack([cv2.resize(cv2.imread(str(p)), (16, 9), interpolation=cv2.INTER_AREA)
                         .astype(np.float32).ravel() for p in paths])
    perf = thumbs(built / "input_data" / "performance" / p for p in inp(built, "performance")["path"])
    tr = thumbs(built / "training_data" / p for p in train["path"])
    allsrc = thumbs(synth.store / p for p in src["path"])
    def dist(a, b):
        return np.abs(a[:, None, :] - b[None, :, :]).mean(axis=2).min(axis=1)
    assert dist(perf, allsrc).max() < 1.5
    assert dist(perf, tr).min() > 3.0


def test_generalization_is_the_unseen_seams(built, unseen):
    g = ref(built, "generalization")
    assert set(unseen["welding-seams"]) == set(UNSEEN_SEAMS)
    assert len(g) == len(unseen)  # below generalization.max_size: every row
    assert sorted(g["class"]) == sorted(unseen["class"])
    assert sorted(g["welding-seams"]) == sorted(unseen["welding-seams"])
    # who labelled each photo travels with it (private reference side: expert-only KPIs)
    assert sorted(zip(g["class"], g["labelling_type"])) == \
        sorted(zip(unseen["class"], unseen["labelling_type"]))
    assert "labelling_type" not in inp(built, "generalization").columns


def test_robustness_ladders_balance_and_levels(built, cfg):
    cfg = cfg.robustness
    r = ref(built, "robustness")
    perf = ref(built, "performance")
    clean = r[r["perturbation"] == "none"]
    assert set(clean["level"]) == {0.0}
    levels = {(p, float(lv)) for p, lvs in cfg.levels.as_dict().items() for lv in lvs} | {("none", 0.0)}
    assert set(zip(r["perturbation"], r["level"])) == levels
    assert r["level"].min() == -30 and r[r["perturbation"] == "translation"]["level"].max() == 20
    # every level holds the same images (same class and seam counts) with >= 10 KO
    base_counts = clean.groupby(["class", "welding-seams"]).size()
    for _, group in r.groupby(["perturbation", "level"]):
        assert group.groupby(["class", "welding-seams"]).size().equals(base_counts)
        assert (group["class"] == "KO").sum() >= cfg.min_ko_per_level
    # size and class mix: max(size, ceil(10 / KO share)) with the performance KO share
    share = (perf["class"] == "KO").mean()
    assert len(clean) == max(cfg.size, math.ceil(10 / share))
    assert abs((clean["class"] == "KO").mean() - share) <= 1.0 / len(clean) + 1e-9
    # seam-balanced within each class (as far as the performance set allows)
    for cls, group in clean.groupby("class"):
        counts = group["welding-seams"].value_counts()
        avail = perf[perf["class"] == cls]["welding-seams"].value_counts()
        short = [s for s in counts.index if counts[s] == avail[s]]
        full = counts.drop(short)
        assert full.max() - full.min() <= 1 and (not short or counts[short].max() <= full.max())


def _rows(built, name, perturbation, level):
    r, meta = ref(built, name), inp(built, name)
    ids = set(r[(r["perturbation"] == perturbation) & (r["level"] == level)]["sample_id"])
    return meta[meta["sample_id"].isin(ids)]


@pytest.mark.parametrize("perturbation,level", [("rotation", -30.0), ("translation", 20.0),
                                                ("luminance", -3.0), ("blur", 45.0)])
def test_robustness_images_are_the_clean_ones_perturbed(built, perturbation, level):
    clean = [image(built, "robustness", p).astype(np.float32)
             for p in _rows(built, "robustness", "none", 0.0)["path"]]
    for path in _rows(built, "robustness", perturbation, level)["path"][:8]:
        img = image(built, "robustness", path).astype(np.float32)
        best = min(np.abs(pt.robustness(c.astype(np.uint8), perturbation, level).astype(np.float32)
                          - img).mean() for c in clean if c.shape == img.shape)
        assert best < 3.0  # JPEG re-encoding only (tiny 160x90 images: large relative error)
        assert min(np.abs(c - img).mean() for c in clean if c.shape == img.shape) > best + 1.0


def test_ood_sets_are_balanced(built, src, synth):
    syn = ref(built, "ood_synthetic")
    assert (syn["ood"] == 1).sum() == (syn["ood"] == 0).sum() == 25
    real = ref(built, "ood_real")
    photos = photo_files(synth.ood)
    assert len(photos) == round(0.08 * 360)
    assert (real["ood"] == 1).sum() == (real["ood"] == 0).sum() == len(photos)
    # the OOD rows are the photos (re-encoded), shown with their own size and an in-domain seam
    real_in = inp(built, "ood_real").merge(real[["sample_id", "ood"]], on="sample_id")
    sizes = sorted(tuple(cv2.imread(str(p)).shape[1::-1]) for p in photos)
    assert sorted(tuple(r) for r in real_in[real_in["ood"] == 1]["resolution"]) == sizes
    assert set(real_in["welding-seams"]) <= {"c102", "c20", "c33"}
    # Independent route: a normal image is a source image re-encoded, an OOD one is far
    # from every source image of its size (blur, exposure, colour or noise changed it).
    # (normal source photos only: a real-OOD dark photo is as black as a synthetic one)
    originals = [cv2.imread(str(synth.store / p)).astype(np.float32) for p in src["path"]]
    meta = inp(built, "ood_synthetic").merge(syn, on="sample_id")
    for path, ood in zip(meta["path"], meta["ood"]):
        img = image(built, "ood_synthetic", path).astype(np.float32)
        nearest = min(np.abs(o - img).mean() for o in originals if o.shape == img.shape)
        assert (nearest > 4.0) if ood else (nearest < 2.5), (path, ood, nearest)


def test_drift_is_an_ordered_growing_sequence(built):
    r, meta = ref(built, "drift"), inp(built, "drift")
    assert list(r["position"]) == list(range(60))
    assert list(meta["sample_id"]) == list(r["sample_id"])  # input rows in sequence order
    assert list(r["ood"]) == [0] * 42 + [1] * 18  # last 30 %
    assert (r["class"] == "KO").mean() <= 0.5
    lum = [image(built, "drift", p, cv2.IMREAD_GRAYSCALE).mean() for p in meta["path"]]
    assert np.mean(lum[:10]) > 2.5 * np.mean(lum[-10:])  # darkening grows (3 stops at the end)


def _jpeg_segments(data):
    """Marker codes of a JPEG up to the start of scan (independent little parser)."""
    assert data[:2] == b"\xff\xd8"
    i, markers = 2, []
    while i < len(data):
        assert data[i] == 0xFF
        marker = data[i + 1]
        markers.append(marker)
        if marker == 0xDA:
            return markers
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return markers


def _auroc_bound(n_ko, n_ok):
    # 4 standard deviations of the AUROC of an uninformative score (Mann-Whitney null,
    # Hanley & McNeil): a leak gives an AUROC near 0 or 1, chance a value near 0.5.
    return 4 * math.sqrt((n_ko + n_ok + 1) / (12 * n_ko * n_ok))


def test_label_hygiene(built, source, src):
    source_ids = set(src["sample_id"])
    seen = set()
    for name in SET_NAMES:
        meta, r = inp(built, name), ref(built, name)
        assert meta["sample_id"].map(lambda s: bool(re.fullmatch(r"[0-9a-f]{16}", s))).all()
        assert meta["path"].map(lambda s: bool(re.fullmatch(r"images/[0-9a-f]{16}\.jpeg", s))).all()
        assert not (set(meta["sample_id"]) & (source_ids | seen))
        seen |= set(meta["sample_id"])
        for p in meta["path"][:20]:
            markers = _jpeg_segments((built / "input_data" / name / p).read_bytes())
            assert 0xE1 not in markers and 0xFE not in markers  # no EXIF/XMP, no comment
        if name == "robustness":  # every level repeats the same images: count each once
            meta = meta[meta["sample_id"].isin(r[r["perturbation"] == "none"]["sample_id"])]
        y = (meta.merge(r, on="sample_id")["class"] == "KO").to_numpy()
        if y.sum() < 10 or (~y).sum() < 10:
            continue
        features = {
            "file size": [(built / "input_data" / name / p).stat().st_size for p in meta["path"]],
            "row order": np.arange(len(meta)),
            "sample_id": [int(s, 16) for s in meta["sample_id"]],
            "file name": [int(p[7:23], 16) for p in meta["path"]],
        }
        # robustness holds every clean image once per level: the independent samples are
        # the clean images, so the chance band is that of the clean subset
        copies = len(r) / (r["perturbation"] == "none").sum() if name == "robustness" else 1
        bound = _auroc_bound(y.sum() / copies, (~y).sum() / copies)
        for feature, values in features.items():
            if name == "drift" and feature == "row order":
                continue  # the sequence order is the point of drift; checked below
            auc = roc_auc_score(y, values)
            assert abs(auc - 0.5) < bound, (name, feature, auc, bound)
    # drift's order is about the perturbation, not the class
    y = (ref(built, "drift")["class"] == "KO").to_numpy()
    assert abs(roc_auc_score(y, np.arange(len(y))) - 0.5) < _auroc_bound(y.sum(), (~y).sum())


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes(built, synth, tmp_path, cfg):
    again = build_sets(out=tmp_path / "again", seed=7, config=cfg, workers=1, progress=False,
                       **synth.build_args())
    a, b = _files(built), _files(again)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def _broken_copy(synth, tmp_path):
    """A copy of the whole storage root; returns (the source dataset folder in it, its metadata)."""
    store = tmp_path / "store"
    shutil.copytree(synth.store, store)
    dst = store / synth.source.relative_to(synth.store)
    return dst, pd.read_parquet(dst / "metadata" / "ds_meta.parquet")


def _expect_error(src_dir, tmp_path, pattern, config, **inputs):
    out = tmp_path / "out"
    inputs.setdefault("source", src_dir)
    with pytest.raises(ChallengeError, match=pattern) as info:
        build_sets(out=out, seed=1, config=config, progress=False, **inputs)
    assert not out.exists() or not any(out.iterdir())  # nothing half-written
    return str(info.value)


def test_bad_files_are_all_listed(synth, tmp_path, cfg):
    src_dir, meta = _broken_copy(synth, tmp_path)
    store = src_dir.parents[2]
    (store / meta["path"][0]).unlink()
    (store / meta["path"][1]).write_bytes(b"not a jpeg")
    meta.loc[2, "sha256"] = bytes(32)
    meta.to_parquet(src_dir / "metadata" / "ds_meta.parquet", index=False)
    msg = _expect_error(src_dir, tmp_path, "3 bad rows", cfg)
    assert f"{meta['sample_id'][0]} ({meta['path'][0]}): missing file (not at {store / meta['path'][0]}" in msg
    assert f"{meta['sample_id'][1]}" in msg and "sha256 mismatch" in msg
    assert f"{meta['sample_id'][2]} ({meta['path'][2]}): sha256 mismatch (file " in msg


def test_unknown_seams_capped_listing(synth, tmp_path, cfg):
    src_dir, meta = _broken_copy(synth, tmp_path)
    meta.loc[:14, "welding-seams"] = "c999"
    meta.to_parquet(src_dir / "metadata" / "ds_meta.parquet", index=False)
    msg = _expect_error(src_dir, tmp_path, "15 bad rows", cfg)
    assert "unknown seam 'c999'" in msg and "(and 5 more)" in msg
    assert msg.count("'c999'") == 10


def test_missing_columns(synth, tmp_path, cfg):
    src_dir, meta = _broken_copy(synth, tmp_path)
    meta.drop(columns=["sha256", "class"]).to_parquet(src_dir / "metadata" / "ds_meta.parquet")
    _expect_error(src_dir, tmp_path, "missing columns class, sha256", cfg)


def test_too_few_ko(synth, tmp_path, cfg):
    cfg = cfg.replaced({"robustness": {"min_ko_per_level": 500}})
    _expect_error(tmp_path / "unused", tmp_path, "too few KO for the robustness set", config=cfg,
                  **synth.build_args())


def test_a_failed_rebuild_leaves_the_old_build(built, synth, tmp_path, cfg):
    before = _files(built / "reference_data")
    cfg = cfg.replaced({"robustness": {"min_ko_per_level": 500}})
    with pytest.raises(ChallengeError):
        build_sets(out=built, seed=7, config=cfg, progress=False, **synth.build_args())
    assert _files(built / "reference_data") == before


@pytest.mark.parametrize("edit,message", [
    ({"jpeg_quality": 101}, "key 'jpeg_quality' must be <= 100, got 101"),
    ({"performance": {"fraction": 1.0}}, "key 'performance.fraction' must be < 1.0, got 1.0"),
    ({"robustness": {"size": "many"}}, "key 'robustness.size' must be a number, got 'many'"),
    ({"robustness": {"levels": {"rotation": [10, 45]}}},
     "key 'robustness.levels.rotation' must stay within the ODD's bound of 30, got [10, 45]"),
    ({"robustness": {"levels": {"blur": [0, 6]}}}, "key 'robustness.levels.blur' must be distinct and non-zero"),
    ({"drift": {"sise": 10}}, "key 'drift.sise' is unknown (allowed here: size, "),
    ({"max_per_set": {"drift": 0}}, "key 'max_per_set.drift' must be >= 1, got 0"),
    ({"unseen_seams": ["c102"]}, "key 'unseen_seams' must not repeat in_domain_seams, got c102 in both"),
])
def test_config_errors_name_the_key_expected_and_got(tmp_path, edit, message):
    """The builder config is checked by the scoring config's schema engine: the file, the
    key, what is expected and what was given, in one line."""
    import yaml

    from challenge_welding.data.build_sets import load_build_config

    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(edit))
    with pytest.raises(ChallengeError) as info:
        load_build_config(path)
    assert str(info.value).startswith(f"{path}: {message}")
    assert "\n" not in str(info.value)


def test_the_config_is_frozen_and_a_change_is_a_new_config(tmp_path):
    """A change goes through replaced (dataclasses.replace at each level): the original stays as
    it was, and the result is the config a --config FILE with the same keys gives (an
    independent route: the YAML overlay and the check)."""
    import dataclasses

    import yaml

    from challenge_welding.data.build_sets import load_build_config

    base = load_build_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.drift.size = 40
    changes = {"drift": {"size": 40}, "robustness": {"levels": {"blur": (6, 12)}}}
    changed = base.replaced(changes)
    assert (base.drift.size, base.robustness.levels.blur) == (300, (6, 12, 20, 30, 45))  # build_config.yaml
    assert (changed.drift.size, changed.robustness.levels.blur) == (40, (6, 12))
    assert changed.drift.ood_fraction == 0.3 and changed.robustness.levels.rotation == base.robustness.levels.rotation
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"drift": {"size": 40}, "robustness": {"levels": {"blur": [6, 12]}}}))
    assert load_build_config(path) == changed
    with pytest.raises(TypeError):
        base.replaced({"drift": {"sise": 40}})  # a misspelt key is not silently added


def test_every_default_has_one_home_the_yaml():
    """The code names no default: build_config.yaml without any one of its keys is refused, so
    what a key defaults to is read from the YAML only."""
    import yaml

    from challenge_welding.data.build_sets import DEFAULT_CONFIG_PATH, check_build_config

    full = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    for name, value in full.items():
        subkeys = list(value) if isinstance(value, dict) else [None]
        for sub in subkeys:
            raw = {k: dict(v) if isinstance(v, dict) else v for k, v in full.items()}
            if sub is None:
                del raw[name]
            else:
                del raw[name][sub]
            with pytest.raises(ChallengeError) as info:
                check_build_config(raw, "b.yaml")
            where = name if sub is None else f"{name}.{sub}"
            assert str(info.value) == f"b.yaml: key '{where}' is missing"
