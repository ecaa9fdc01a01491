"""Synthetic welds in the challenge's published format and layout.

``generate_dataset(STORE)`` writes what the organisers have for the real challenge:
- STORE/challenge-welding/datasets/synthetic/: the source dataset (in-domain seams c102,
  c20, c33) - metadata/ds_meta.parquet and <seam>/<labelling_type>/sample_<n>.jpeg;
- STORE/challenge-welding/datasets/synthetic_unseen/: a second dataset of the seams
  the source has not (c19, c34, c101), for --unseen-source;
- STORE/ood_photos/: a plain folder of out-of-distribution photos (JPEG and PNG, no
  metadata), for --ood-source;
- STORE/challenge-welding/datasets_list.yml: the list of the datasets (the starter kit's
  ChallengeUI.list_datasets() reads it).
Every published column is filled in its published form: ``path`` relative to STORE,
``sha256`` the 32 raw bytes, ``data_origin`` "synthetic", ``blur_level`` the Laplacian
variance and ``blur_class`` blur/clean at 950, ``luminosity_level`` in percent,
``external_path`` an http URL, ``storage_type`` "s3", timestamps in the two published
forms (expert rows "22/01/20 12:49", operator rows "18/07/2022 20:18").

The plan (seam, class, defects, resolution, OOD kind) is drawn up front from one seeded
generator; each image is then drawn from its own generator (seeded by (seed, index)), so
the bytes do not depend on worker scheduling.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np

from challenge_welding.data.parallel import run_parallel
from challenge_welding.data.render import render_weld_and_mask
from challenge_welding.contract.errors import ChallengeError

IN_DOMAIN_SHARES = {"c102": 0.39, "c20": 0.22, "c33": 0.39}
UNSEEN = ("c19", "c34", "c101")
BLUR_THRESHOLD = 950.0
JPEG_QUALITY = 92
SOURCE_NAME, UNSEEN_NAME, OOD_FOLDER = "synthetic", "synthetic_unseen", "ood_photos"
URL_BASE = "https://synthetic-welds.invalid/"  # external_path: URL form, never a real server
MASK_SUFFIX = "_mask.png"  # sample_<n>.jpeg -> sample_<n>_mask.png, beside the image
MASK_COLUMN = "mask_path"  # optional column: the mask's path (relative to STORE), null without one
TIMESTAMP_FORMS = {"expert": "%d/%m/%y %H:%M", "operator": "%d/%m/%Y %H:%M"}


class SynthOutput(NamedTuple):
    """What ``generate_dataset`` wrote (the three inputs of build-sets)."""
    store: Path
    source: Path
    unseen: Path
    ood: Path

    def build_args(self) -> dict:
        """Keyword arguments of build_sets for these inputs."""
        return {"source": self.source, "unseen_sources": [self.unseen], "ood_source": self.ood}


def image_measures(jpeg_bytes):
    """blur_level = variance of the Laplacian of the grey image (the challenge's
    measure); luminosity_level = mean grey level in percent of 255; both on the file
    decoded in grey, as anyone re-measuring the published images would."""
    grey = cv2.imdecode(np.frombuffer(jpeg_bytes, np.uint8), cv2.IMREAD_GRAYSCALE)
    # cv2.meanStdDev: the same variance as numpy's .var() (to ~1e-15), in half the time
    std = cv2.meanStdDev(cv2.Laplacian(grey, cv2.CV_64F))[1][0, 0]
    return float(std * std), float(grey.mean()) / 255.0 * 100.0


def _allocate(names, shares, n):
    raw = np.asarray(shares, float) / sum(shares) * n
    counts = np.floor(raw).astype(int)
    for j in np.argsort(-(raw - counts), kind="stable")[: n - counts.sum()]:
        counts[j] += 1
    return [name for name, c in zip(names, counts) for _ in range(c)]


def _plan(n, seed, resolution, ko_share, unseen_share, ood_share, half_share):
    rng = np.random.default_rng([seed, 0xD1A9])
    from challenge_welding.data.render import DEFECTS, REAL_OOD_KINDS

    n_unseen = int(round(n * unseen_share))
    n_ood = int(round(n * ood_share))
    n_in = n - n_unseen - n_ood
    if n_in < 3:
        raise ChallengeError(f"synth: n={n} is too small for the requested shares")
    # Exact allocation (largest remainder), then shuffled: the shares hold at any n.
    seams = _allocate(list(IN_DOMAIN_SHARES), list(IN_DOMAIN_SHARES.values()), n_in)
    seams += _allocate(list(UNSEEN), [1 / 3] * 3, n_unseen)
    seams += _allocate(list(IN_DOMAIN_SHARES), list(IN_DOMAIN_SHARES.values()), n_ood)
    ood = [0] * (n_in + n_unseen) + [1] * n_ood
    order = rng.permutation(n)
    seams = [seams[i] for i in order]
    ood = [ood[i] for i in order]
    ko_rows = set(rng.choice(n, int(round(n * ko_share)), replace=False).tolist())
    w, h = resolution
    rows = []
    t = datetime(2024, 3, 4, 6, 0, 0)
    for i in range(n):
        ko = i in ko_rows
        defects = []
        if ko:
            k = 1 + int(rng.uniform() < 0.2)
            for name in rng.choice(DEFECTS, k, replace=False):
                defects.append((str(name), float(rng.uniform(0.1, 1.0))))
        half = rng.uniform() < half_share
        expert = rng.uniform() < 0.4
        label = "KO" if ko else "OK"
        # Operators miss some subtle defects and rarely flag a good weld.
        if not expert:
            if ko and min(s for _, s in defects) < 0.35 and rng.uniform() < 0.3:
                label = "OK"
            elif not ko and rng.uniform() < 0.002:
                label = "KO"
        t += timedelta(seconds=float(rng.uniform(20, 400)))
        rows.append({
            "index": i, "seam": seams[i], "label": label, "defects": defects,
            "res": (w // 2, h // 2) if half else (w, h), "expert": expert,
            "ood_kind": str(rng.choice(REAL_OOD_KINDS)) if ood[i] else None,
            "time": t,
        })
    return rows


def mask_file(rel):
    """The mask beside an image: .../sample_<n>.jpeg -> .../sample_<n>_mask.png."""
    p = Path(rel)
    return str(p.with_name(f"{p.stem}{MASK_SUFFIX}"))


def encode_and_measure(img, png=False):
    """(file bytes, sha256 raw bytes, blur_level, luminosity_level) of one drawn image."""
    ok, buf = cv2.imencode(".png" if png else ".jpeg", img,
                           [] if png else [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    data = buf.tobytes()
    blur, lum = image_measures(data)
    return data, hashlib.sha256(data).digest(), blur, lum


def _render_one(args):
    """Draw, encode and write one image (and the mask of its defects, if it has any)."""
    root, seed, row, rel = args
    rng = np.random.default_rng([seed, row["index"]])
    img, mask = render_weld_and_mask(rng, row["seam"], row["res"][0], row["res"][1],
                                     defects=row["defects"], ood_kind=row["ood_kind"])
    data, digest, blur, lum = encode_and_measure(img, png=rel.endswith(".png"))
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if row["defects"] and row["ood_kind"] is None:
        (Path(root) / mask_file(rel)).write_bytes(cv2.imencode(".png", mask.astype(np.uint8) * 255)[1])
    return digest, blur, lum


def synth_output(store) -> SynthOutput:
    """The parts of a storage root written by generate_dataset."""
    from challenge_welding.data.source import dataset_path

    store = Path(store)
    return SynthOutput(store, dataset_path(store, SOURCE_NAME), dataset_path(store, UNSEEN_NAME),
                       store / OOD_FOLDER)


def _metadata(rows, rels, results, name):
    import pandas as pd

    from challenge_welding.data.source import published_path

    labelling = ["expert" if r["expert"] else "operator" for r in rows]
    paths = [published_path(name, r["seam"], lab, f) for r, lab, f in zip(rows, labelling, rels)]
    return pd.DataFrame({
        "sample_id": [f"data_{r['index']}" for r in rows],
        "class": [r["label"] for r in rows],
        "timestamp": [r["time"].strftime(TIMESTAMP_FORMS[lab]) for r, lab in zip(rows, labelling)],
        "welding-seams": [r["seam"] for r in rows],
        "labelling_type": labelling,
        "resolution": [list(r["res"]) for r in rows],
        "path": paths,
        "sha256": [x[0] for x in results],
        "storage_type": "s3",
        "data_origin": "synthetic",
        "blur_level": [x[1] for x in results],
        "blur_class": ["blur" if x[1] < BLUR_THRESHOLD else "clean" for x in results],
        "luminosity_level": [x[2] for x in results],
        "external_path": [URL_BASE + p for p in paths],
        # not in the published format (it has no masks): an optional column, see docs/data.md
        MASK_COLUMN: [mask_file(p) if r["defects"] else None for r, p in zip(rows, paths)],
    })


def generate_dataset(out_dir, n=3000, seed=0, resolution=(480, 270), *, ko_share=0.05,
                     unseen_share=0.12, ood_share=0.03, half_share=0.5, workers=None,
                     progress=True) -> SynthOutput:
    """Write the synthetic storage root ``out_dir`` (see the module docstring); return its parts.

    ``n`` images in all. Shares: ``ko_share`` of KO welds, ``unseen_share`` of rows on the
    unseen seams (c19, c34, c101: the second dataset), ``ood_share`` of real-OOD photos
    (the photo folder), ``half_share`` of half-resolution images.
    """
    from challenge_welding.contract.names import SOURCE_META
    from challenge_welding.data.parquet_io import write_parquet
    from challenge_welding.data.source import dataset_path, published_path

    for name, val in (("ko_share", ko_share), ("unseen_share", unseen_share),
                      ("ood_share", ood_share), ("half_share", half_share)):
        if not 0 <= val <= 1:
            raise ChallengeError(f"synth: {name} must be in [0, 1], got {val}")
    if unseen_share + ood_share >= 1:
        raise ChallengeError("synth: unseen_share + ood_share must be below 1")
    w, h = map(int, resolution)
    if w < 32 or h < 18:
        raise ChallengeError(f"synth: resolution {w}x{h} is too small")
    store = Path(out_dir)
    if store.exists() and any(store.iterdir()):
        raise ChallengeError(f"synth: output folder {store} is not empty")
    rows = _plan(int(n), int(seed), (w, h), ko_share, unseen_share, ood_share, half_share)
    # file names: sample_<n> inside each dataset; OOD photos in a plain folder, every
    # other one a PNG (the organisers' photos may be either)
    rels, k = [], 0
    for r in rows:
        if r["ood_kind"] is not None:
            rels.append(f"{OOD_FOLDER}/photo_{k:04d}.{'png' if k % 2 else 'jpg'}")
            k += 1
        else:
            rels.append(f"sample_{r['index']}.jpeg")
    groups = {SOURCE_NAME: [], UNSEEN_NAME: []}
    disk = []
    for r, rel in zip(rows, rels):
        if r["ood_kind"] is not None:
            disk.append(rel)
            continue
        name = UNSEEN_NAME if r["seam"] in UNSEEN else SOURCE_NAME
        groups[name].append(len(disk))
        lab = "expert" if r["expert"] else "operator"
        disk.append(published_path(name, r["seam"], lab, rel))
    tasks = [(str(store), int(seed), r, d) for r, d in zip(rows, disk)]
    (store / OOD_FOLDER).mkdir(parents=True, exist_ok=True)
    results = run_parallel(_render_one, tasks, workers=workers, desc="synth", progress=progress)
    for name, idx in groups.items():
        folder = dataset_path(store, name)
        (folder / "metadata").mkdir(parents=True, exist_ok=True)
        meta = _metadata([rows[i] for i in idx], [rels[i] for i in idx], [results[i] for i in idx], name)
        write_parquet(meta, folder / SOURCE_META)
    write_datasets_list(store, list(groups))
    return synth_output(store)


def write_datasets_list(store, names) -> Path:
    """STORE/challenge-welding/datasets_list.yml: the YAML list of the store's datasets, which
    the starter kit's ``ChallengeUI.list_datasets()`` reads (contract.names.DATASETS_LIST)."""
    import yaml

    from challenge_welding.contract.names import DATASETS_LIST

    path = Path(store) / DATASETS_LIST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump([str(n) for n in names]), encoding="utf-8")
    return path
