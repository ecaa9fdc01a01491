"""Synthetic source dataset in the challenge's published format.

ROOT/metadata/ds_meta.parquet + ROOT/<path> JPEGs, every column of CONTRACTS.md
filled. The plan (seam, class, defects, resolution, OOD kind) is drawn up front
from one seeded generator; each image is then drawn from its own generator
(seeded by (seed, index)), so the bytes do not depend on worker scheduling.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from challenge_welding.data.parallel import run_parallel
from challenge_welding.errors import ChallengeError

IN_DOMAIN_SHARES = {"c102": 0.39, "c20": 0.22, "c33": 0.39}
UNSEEN = ("c19", "c34", "c101")
BLUR_THRESHOLD = 950.0
JPEG_QUALITY = 92


def image_measures(jpeg_bytes):
    """blur_level = variance of the Laplacian of the grey image (the challenge's
    measure); luminosity_level = mean grey level in [0, 255]; both on the file
    decoded in grey, as anyone re-measuring the published images would."""
    import cv2

    grey = cv2.imdecode(np.frombuffer(jpeg_bytes, np.uint8), cv2.IMREAD_GRAYSCALE)
    return float(cv2.Laplacian(grey, cv2.CV_64F).var()), float(grey.mean())


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
            "timestamp": t.isoformat(timespec="seconds"),
        })
    return rows


def _render_one(args):
    import cv2

    from challenge_welding.data.render import render_weld

    cv2.setNumThreads(1)
    root, seed, row, sample_id, rel = args
    rng = np.random.default_rng([seed, row["index"]])
    img = render_weld(rng, row["seam"], row["res"][0], row["res"][1], defects=row["defects"],
                      ood_kind=row["ood_kind"])
    ok, buf = cv2.imencode(".jpeg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    data = buf.tobytes()
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    blur, lum = image_measures(data)
    return hashlib.sha256(data).hexdigest(), blur, lum


def generate_dataset(out_dir, n=3000, seed=0, resolution=(480, 270), *, ko_share=0.05,
                     unseen_share=0.12, ood_share=0.03, half_share=0.5, workers=None,
                     progress=True) -> Path:
    """Write a synthetic source dataset to ``out_dir`` and return its path.

    Shares: ``ko_share`` of KO welds, ``unseen_share`` of rows on the unseen seams
    (c19, c34, c101), ``ood_share`` of real-OOD rows (OOD_class = 1), ``half_share``
    of half-resolution images.
    """
    import pandas as pd

    for name, val in (("ko_share", ko_share), ("unseen_share", unseen_share),
                      ("ood_share", ood_share), ("half_share", half_share)):
        if not 0 <= val <= 1:
            raise ChallengeError(f"synth: {name} must be in [0, 1], got {val}")
    if unseen_share + ood_share >= 1:
        raise ChallengeError("synth: unseen_share + ood_share must be below 1")
    w, h = map(int, resolution)
    if w < 32 or h < 18:
        raise ChallengeError(f"synth: resolution {w}x{h} is too small")
    root = Path(out_dir)
    if root.exists() and any(root.iterdir()):
        raise ChallengeError(f"synth: output folder {root} is not empty")
    rows = _plan(int(n), int(seed), (w, h), ko_share, unseen_share, ood_share, half_share)
    ids = [f"data_{i:06d}" for i in range(len(rows))]
    rels = [f"images/{r['seam']}/{sid}.jpeg" for r, sid in zip(rows, ids)]
    tasks = [(str(root), int(seed), r, sid, rel) for r, sid, rel in zip(rows, ids, rels)]
    results = run_parallel(_render_one, tasks, workers=workers, desc="synth", progress=progress)
    meta = pd.DataFrame({
        "sample_id": ids,
        "class": [r["label"] for r in rows],
        "timestamp": [r["timestamp"] for r in rows],
        "welding-seams": [r["seam"] for r in rows],
        "labelling_type": ["expert" if r["expert"] else "operator" for r in rows],
        "resolution": [list(r["res"]) for r in rows],
        "path": rels,
        "sha256": [x[0] for x in results],
        "storage_type": "filesystem",
        "data-origin": "synthetic",
        "blur_level": [x[1] for x in results],
        "blur_class": ["blurry" if x[1] < BLUR_THRESHOLD else "sharp" for x in results],
        "luminosity_level": [x[2] for x in results],
        "external_path": "",
        "OOD_class": [int(r["ood_kind"] is not None) for r in rows],
    })
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    meta.to_parquet(root / "metadata" / "ds_meta.parquet", index=False)
    return root
