"""The organisers' path: a dataset in the published format, as it is, builds all six sets.

The fixture is made in the published format's variants (raw-bytes and hex sha256,
storage-root and dataset-relative paths, string resolutions, both timestamp forms,
``data-origin``, optional columns missing or extra, a plain photo folder of any names
and sizes); the build runs through the command line with no edits. Each refusal names
its real cause.
"""

import hashlib
import json
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pandas as pd
import pytest

from challenge_welding.contract.names import SET_NAMES
from challenge_welding.data.build_sets import build_sets, load_build_config, training_meta_path
from challenge_welding.contract.errors import ChallengeError

SMALL = "robustness: {size: 40}\nood_synthetic: {size_per_class: 25}\ndrift: {size: 60}\n"


def _meta(folder):
    return pd.read_parquet(folder / "metadata" / "ds_meta.parquet")


def _write(meta, folder):
    meta.to_parquet(folder / "metadata" / "ds_meta.parquet", index=False)


@pytest.fixture(scope="module")
def published(synth, tmp_path_factory):
    """(source, unseen, photos): variants of the published format, made from the synth store."""
    base = tmp_path_factory.mktemp("published")
    store = base / "STORE"
    shutil.copytree(synth.store / "challenge-welding", store / "challenge-welding")
    source = store / "challenge-welding/datasets/synthetic"
    meta = _meta(source)
    # the docs' screenshot: resolution as strings; the docs' column name data-origin; an extra column
    meta["resolution"] = [[str(w), str(h)] for w, h in meta["resolution"]]
    meta = meta.rename(columns={"data_origin": "data-origin"})
    meta["comment"] = "kept as it is"
    assert {len(t) for t in meta["timestamp"]} == {14, 16}  # both timestamp forms present
    _write(meta, source)
    # the unseen seams: a dataset outside any storage root, paths relative to it, hex sha256,
    # the optional columns left out (the resolution is then measured on the images)
    unseen = base / "unseen copy"
    (unseen / "metadata").mkdir(parents=True)
    umeta = _meta(store / "challenge-welding/datasets/synthetic_unseen")
    rels = []
    for p in umeta["path"]:
        rel = "/".join(p.split("/")[3:])
        (unseen / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(store / p, unseen / rel)
        rels.append(rel)
    shutil.rmtree(store / "challenge-welding/datasets/synthetic_unseen")
    umeta["path"] = rels
    umeta["sha256"] = [h.hex() for h in umeta["sha256"]]
    umeta = umeta[["sample_id", "class", "welding-seams", "path", "sha256"]].assign(rig=7)  # + an extra column
    _write(umeta, unseen)
    # real OOD photos: any names, JPEG and PNG, any size
    photos = base / "ood photos"
    photos.mkdir()
    for i, p in enumerate(sorted(synth.ood.iterdir())):
        shutil.copyfile(p, photos / f"IMG {i:03d} (copy){p.suffix.upper()}")
    rng = np.random.default_rng(0)
    cv2.imwrite(str(photos / "big.png"), rng.integers(0, 255, (480, 640, 3), dtype=np.uint8))
    cv2.imwrite(str(photos / "tiny.jpeg"), rng.integers(0, 255, (30, 50, 3), dtype=np.uint8))
    return source, unseen, photos


@pytest.fixture(scope="module")
def published_build(published, tmp_path_factory):
    source, unseen, photos = published
    base = tmp_path_factory.mktemp("published_build")
    (base / "small.yaml").write_text(SMALL)
    out = base / "DATA"
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "build-sets", "--source", str(source),
                          "--unseen-source", str(unseen), "--ood-source", str(photos), "--out", str(out),
                          "--config", str(base / "small.yaml"), "--seed", "3", "--workers", "2"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return out, res.stdout


def test_the_published_format_builds_all_six_sets(published, published_build):
    source, unseen, photos = published
    out, stdout = published_build
    for name in SET_NAMES:
        assert name in stdout
        assert len(pd.read_parquet(out / "reference_data" / f"{name}.parquet")) > 0
    # generalization: every row of the unseen dataset, their sizes measured on the images
    gen = pd.read_parquet(out / "input_data/generalization/metadata.parquet")
    umeta = _meta(unseen)
    assert len(gen) == len(umeta)
    sizes = sorted(tuple(cv2.imread(str(unseen / p)).shape[1::-1]) for p in umeta["path"])
    assert sorted(tuple(r) for r in gen["resolution"]) == sizes
    # ood_real: every photo, each with its own size
    ref = pd.read_parquet(out / "reference_data/ood_real.parquet")
    real = pd.read_parquet(out / "input_data/ood_real/metadata.parquet").merge(ref[["sample_id", "ood"]])
    n_photos = len(list(photos.iterdir()))
    assert (real["ood"] == 1).sum() == n_photos
    assert {(640, 480), (50, 30)} <= {tuple(r) for r in real[real["ood"] == 1]["resolution"]}


def test_training_data_is_published_in_the_published_format(published, published_build):
    source, _, _ = published
    out, _ = published_build
    train = pd.read_parquet(training_meta_path(out))
    src = _meta(source)
    # the source's columns, normalised: data_origin, ints, raw sha256; its extra column kept,
    # none of the unseen dataset's ("rig")
    # (synth's mask_path stays on the private side: no masks in training_data)
    assert list(train.columns) == [c if c != "data-origin" else "data_origin" for c in src.columns
                                   if c != "mask_path"]
    assert train["blur_level"].dtype == src["blur_level"].dtype
    assert set(train["comment"]) == {"kept as it is"}
    assert all(isinstance(w, (int, np.integer)) for r in train["resolution"] for w in r)
    for row in train.itertuples():
        data = (out / "training_data" / row.path).read_bytes()
        assert hashlib.sha256(data).digest() == row.sha256


def test_every_parquet_file_reads_with_pyarrow_19(synth, published_build, pyarrow19):
    """The starter kit pins pyarrow==19.0.0: every file we publish or hand to a submission opens with it."""
    out, _ = published_build
    files = sorted(out.rglob("*.parquet")) + sorted(synth.store.rglob("*.parquet"))
    assert len(files) == 2 * len(SET_NAMES) + 1 + 2  # input + reference, training, synth's two
    script = ("import json, sys, pyarrow, pandas as pd, pyarrow.parquet as pq\n"
              "out = {}\n"
              "for f in sys.argv[1:]:\n"
              "    try:\n"
              "        out[f] = [pq.read_table(f).num_rows, len(pd.read_parquet(f))]\n"
              "    except Exception as exc:\n"
              "        out[f] = f'{type(exc).__name__}: {exc}'\n"
              "print(json.dumps({'version': pyarrow.__version__, 'files': out}))\n")
    res = subprocess.run([str(pyarrow19), "-c", script, *map(str, files)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(res.stdout)
    assert report["version"] == "19.0.0"
    expected = {str(f): [len(pd.read_parquet(f))] * 2 for f in files}
    assert report["files"] == expected


def test_the_footer_rewrite_is_what_makes_a_file_readable_by_pyarrow_19(tmp_path, pyarrow19):
    import pyarrow.parquet as pq

    from challenge_welding.data.parquet_io import write_parquet

    frame = pd.DataFrame({"sample_id": ["a", "b"], "resolution": [[1920, 1080], [960, 540]],
                          "sha256": [bytes(32), bytes(range(32))], "level": [0.5, None]})
    frame.to_parquet(tmp_path / "plain.parquet", index=False)
    write_parquet(frame, tmp_path / "fixed.parquet")
    back = pq.read_table(tmp_path / "fixed.parquet")
    assert back.equals(pq.read_table(tmp_path / "plain.parquet"))  # same data, same schema
    script = ("import sys, pyarrow.parquet as pq\n"
              "for f in sys.argv[1:]:\n"
              "    try:\n        print(pq.read_table(f).to_pylist())\n"
              "    except OSError as exc:\n        print('error', exc)\n")
    res = subprocess.run([str(pyarrow19), "-c", script, str(tmp_path / "plain.parquet"),
                          str(tmp_path / "fixed.parquet")], capture_output=True, text=True, check=True)
    plain, fixed = res.stdout.splitlines()
    assert plain == "error Repetition level histogram size mismatch"  # apache/arrow#45283
    assert fixed == str(back.to_pylist())


# ----------------------------------------------------------------------------- refusals
def _error(tmp_path, config=None, **inputs):
    with pytest.raises(ChallengeError) as info:
        build_sets(out=tmp_path / "out", seed=1, config=config or load_build_config(), progress=False,
                   **inputs)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    return str(info.value)


def test_storage_root_paths_out_of_their_store_name_that_cause(synth, tmp_path):
    alone = tmp_path / "synthetic"
    shutil.copytree(synth.source / "metadata", alone / "metadata")  # the images stay in the store
    msg = _error(tmp_path, source=alone, unseen_sources=[synth.unseen], ood_source=synth.ood)
    assert "path is relative to a storage root (challenge-welding/datasets/...)" in msg
    assert "missing file" not in msg and "unreadable" not in msg


def test_a_storage_root_given_as_the_source_is_named(synth, tmp_path):
    msg = _error(tmp_path, source=synth.store)
    assert "this is a storage root; pass the dataset folder itself" in msg and str(synth.source) in msg


def _variant(synth, tmp_path, edit):
    store = tmp_path / "store"
    shutil.copytree(synth.store, store)
    source = store / synth.source.relative_to(synth.store)
    meta = _meta(source)
    meta = edit(meta)
    _write(meta, source)
    return source


@pytest.mark.parametrize("column,value,cause", [
    ("sha256", bytes(31), "sha256 is 31 bytes, neither the 32 raw bytes of a digest nor 64 hex characters"),
    ("sha256", b"not-a-digest", "sha256 is 12 bytes, neither the 32 raw bytes"),
    ("timestamp", "2020/31/31 99h", "timestamp '2020/31/31 99h' is in neither published form"),
    ("resolution", "big", "resolution 'big' is not [width, height]"),
    ("class", "NOK", "class 'NOK' not OK/KO"),
])
def test_bad_values_name_their_cause(synth, tmp_path, column, value, cause):
    def edit(meta):
        if column == "resolution":  # a text column ("160x90"), accepted, but one value is not a size
            meta["resolution"] = [f"{w}x{h}" for w, h in meta["resolution"]]
        meta.at[0, column] = value
        return meta

    source = _variant(synth, tmp_path, edit)
    msg = _error(tmp_path, source=source)
    assert f"{_meta(source)['sample_id'][0]}: {cause}" in msg
    assert "1 bad rows" in msg and "mismatch" not in msg


def test_hex_sha256_and_the_docs_column_name_are_accepted(synth, tmp_path):
    from challenge_welding.data.build_sets import read_sources

    def edit(meta):
        meta["sha256"] = [h.hex().upper() if i % 2 else h.hex() for i, h in enumerate(meta["sha256"])]
        return meta.rename(columns={"data_origin": "data-origin"})

    meta = read_sources(_variant(synth, tmp_path, edit), load_build_config(), progress=False)
    assert "data_origin" in meta.columns and "data-origin" not in meta.columns
    assert meta["sha256"].str.fullmatch(r"[0-9a-f]{64}").all()


def test_unseen_seams_must_differ_from_the_source(synth, tmp_path):
    msg = _error(tmp_path, source=synth.source, unseen_sources=[synth.source], ood_source=synth.ood)
    assert "--unseen-source" in msg and "is also a training seam of --source" in msg


def test_missing_generalization_and_ood_data_name_the_options(synth, tmp_path):
    msg = _error(tmp_path, source=synth.source)
    assert "no data for the generalization set: pass --unseen-source DIR" in msg
    assert "or hold out seams of the source with unseen_seams in the build config" in msg
    assert "no real OOD photos for the ood_real set (0 found, ood_real.min_ood = 1): pass --ood-source DIR" in msg


def test_an_empty_photo_folder_is_named(synth, tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "notes.txt").write_text("no photo here")
    msg = _error(tmp_path, source=synth.source, unseen_sources=[synth.unseen], ood_source=tmp_path / "photos")
    assert msg.startswith(f"--ood-source {tmp_path / 'photos'}: no photo")


def test_holding_out_seams_of_the_source_by_config(synth, tmp_path):
    cfg = load_build_config().replaced({
        "in_domain_seams": ("c102", "c33"), "unseen_seams": ("c20",),
        "robustness": {"size": 20, "min_ko_per_level": 5}, "ood_synthetic": {"size_per_class": 10},
        "drift": {"size": 20}})
    out = build_sets(synth.source, tmp_path / "out", seed=1, config=cfg, progress=False, ood_source=synth.ood)
    gen = pd.read_parquet(out / "reference_data/generalization.parquet")
    src = _meta(synth.source)
    assert len(gen) == (src["welding-seams"] == "c20").sum() and set(gen["welding-seams"]) == {"c20"}
    assert "c20" not in set(pd.read_parquet(training_meta_path(out))["welding-seams"])


@pytest.mark.parametrize("override,cause", [
    ({"ood_real": {"min_ood": 0}}, "key 'ood_real.min_ood' must be >= 1, got 0"),
    ({"drift": {"size": "abc"}}, "key 'drift.size' must be a number, got 'abc'"),
    ({"performance": {"fraction": 1.5}}, "key 'performance.fraction' must be < 1.0, got 1.5"),
    ({"jpeg_quality": 0}, "key 'jpeg_quality' must be >= 1, got 0"),
    ({"ood_synthetic": {"kinds": ["fog"]}}, "key 'ood_synthetic.kinds' must be a non-empty list of"),
    ({"robustness": {"levels": {"blur": [0, 6]}}}, "key 'robustness.levels.blur' must be distinct and non-zero"),
    ({"unseen_seams": "c19"}, "key 'unseen_seams' must be a list of seam names, got 'c19'"),
    ({"in_domain_seams": ["c20"], "unseen_seams": ["c20"]}, "key 'unseen_seams' must not repeat in_domain_seams, got c20 in both"),
])
def test_every_config_value_works_or_is_refused_in_one_line(tmp_path, override, cause):
    import yaml

    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(override))
    with pytest.raises(ChallengeError) as info:
        load_build_config(path)
    # the scoring config's style: the file, the key, what is expected, what was given
    assert str(info.value).startswith(f"{path}: {cause}") and "\n" not in str(info.value)


def test_the_command_line_refuses_a_config_in_one_line(synth, tmp_path):
    (tmp_path / "cfg.yaml").write_text("ood_real: {min_ood: 0}\n")
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "build-sets", "--source", str(synth.source),
                          "--unseen-source", str(synth.unseen), "--ood-source", str(synth.ood),
                          "--out", str(tmp_path / "out"), "--config", str(tmp_path / "cfg.yaml")],
                         capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {tmp_path / 'cfg.yaml'}: key 'ood_real.min_ood' must be >= 1, got 0"
