"""Build the six evaluation sets (and the public training split) from a source dataset.

Input: any dataset in the challenge's published format (ROOT/metadata/ds_meta.parquet +
images). Output: the layout of docs/contracts.md ("Evaluation data"). Steps:

1. read and check the source (columns, classes, seams, files, sha256, decodability):
   every fault found is reported at once, before anything is written;
2. plan the sets in the parent process from one seeded generator;
3. draw the images in a process pool, one task per source image (decoded once, every
   copy derived from it), each copy with its own seed ``[seed, set, row]``;
4. move each finished set into place (os.replace of a folder built inside DATA), then
   calibrate the scoring config on the reference data.

Label hygiene: input_data holds only the contract's columns, random ids and file names
from the seeded generator, shuffled rows (drift keeps its order), and images re-encoded
by cv2 (which writes no EXIF or other metadata).
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import shutil
from pathlib import Path

import numpy as np

from challenge_welding.contract.names import INPUT_COLUMNS, SET_NAMES, SOURCE_META
from challenge_welding.contract.errors import ChallengeError

DEFAULT_CONFIG_PATH = Path(__file__).with_name("build_config.yaml")
from challenge_welding.data.source import REQUIRED_COLUMNS  # noqa: E402

# Every config value's check: (path, kind, low, high); kind int / float / list.
# One line per refusal, naming the key (a value outside these would fail later, deep inside).
_CHECKS = (
    ("jpeg_quality", int, 1, 100), ("performance.fraction", float, 0, 1),
    ("generalization.max_size", int, 1, None), ("robustness.size", int, 1, None),
    ("robustness.min_ko_per_level", int, 1, None), ("ood_synthetic.size_per_class", int, 1, None),
    ("ood_synthetic.extreme_blur", float, 0, None), ("ood_synthetic.noise_sigma", float, 0, None),
    ("ood_synthetic.dead_fraction", float, 0, 1), ("ood_real.max_ood", int, 1, None),
    ("ood_real.min_ood", int, 1, None), ("drift.size", int, 2, None),
    ("drift.ood_fraction", float, 0, 1), ("drift.max_ko_share", float, 0, 1),
    ("drift.max_noise_sigma", float, 0, None), ("drift.max_dead_fraction", float, 0, 1),
    ("drift.max_darkening_stops", float, 0, None),
)
MAX_LISTED = 10


def _listing(items):
    items = list(items)
    shown = ", ".join(str(x) for x in items[:MAX_LISTED])
    return shown + (f" (and {len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else "")


# ----------------------------------------------------------------------------- config
def _merge(base, extra, where=""):
    for key, value in extra.items():
        if key not in base:
            raise ChallengeError(f"build config: unknown key {where}{key}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ChallengeError(f"build config: {where}{key} must be a mapping")
            _merge(base[key], value, f"{where}{key}.")
        else:
            base[key] = value
    return base


def load_build_config(path=None) -> dict:
    """The default builder config, overlaid with the keys of ``path`` (YAML) if given."""
    import yaml

    config = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    if path is not None:
        path = Path(path)
        try:
            extra = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ChallengeError(f"build config {path}: cannot read it ({exc})") from None
        if not isinstance(extra, dict):
            raise ChallengeError(f"build config {path}: expected a mapping at the top level")
        config = _merge(config, extra)
    _check_config(config)
    return config


def _check_config(config):
    def get(path):
        value = config
        for key in path.split("."):
            value = value[key]
        return value

    for path, kind, low, high in _CHECKS:
        value = get(path)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (kind is int and float(value) != int(value)):
            raise ChallengeError(f"build config: {path} must be {'an integer' if kind is int else 'a number'}"
                                 f", got {value!r}")
        if low is not None and (value < low if kind is int else value <= low) or \
                high is not None and (value > high if kind is int else value >= high):
            bound = f">= {low}" if high is None else f"in [{low}, {high}]" if kind is int else f"in ({low}, {high})"
            raise ChallengeError(f"build config: {path} must be {bound}, got {value!r}")
    for key in ("in_domain_seams", "unseen_seams"):
        seams = config[key]
        if not isinstance(seams, list) or not all(isinstance(x, str) and x for x in seams):
            raise ChallengeError(f"build config: {key} must be a list of seam names, got {seams!r}")
    if not config["in_domain_seams"]:
        raise ChallengeError("build config: in_domain_seams is empty")
    both = set(config["in_domain_seams"]) & set(config["unseen_seams"])
    if both:
        raise ChallengeError(f"build config: seams {', '.join(sorted(both))} are both in_domain_seams "
                             "and unseen_seams")
    if int(config["ood_real"]["min_ood"]) > int(config["ood_real"]["max_ood"]):
        raise ChallengeError("build config: ood_real.min_ood is above ood_real.max_ood")
    from challenge_welding.data import perturbations as pt

    kinds = config["ood_synthetic"]["kinds"]
    if not isinstance(kinds, list) or not kinds or any(k not in pt.OOD_SYNTHETIC_KINDS for k in kinds):
        raise ChallengeError(f"build config: ood_synthetic.kinds must be a non-empty list of "
                             f"{', '.join(pt.OOD_SYNTHETIC_KINDS)}, got {kinds!r}")
    stops = config["ood_synthetic"]["abnormal_stops"]
    if not (isinstance(stops, list) and len(stops) == 2 and all(isinstance(x, (int, float)) for x in stops)):
        raise ChallengeError(f"build config: ood_synthetic.abnormal_stops must be [darker, brighter] "
                             f"stops, got {stops!r}")
    r = config["robustness"]
    if set(r["levels"]) != set(pt.ROBUSTNESS_FUNCS):
        raise ChallengeError(f"build config: robustness.levels must name exactly "
                             f"{', '.join(sorted(pt.ROBUSTNESS_FUNCS))}")
    for name, levels in r["levels"].items():
        if not isinstance(levels, list) or not levels or \
                not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in levels):
            raise ChallengeError(f"build config: robustness.levels.{name} must be a list of numbers, "
                                 f"got {levels!r}")
        if 0 in levels or len(set(levels)) != len(levels):
            raise ChallengeError(f"build config: robustness.levels.{name} must be distinct and "
                                 "non-zero (level 0 is the shared clean copy)")
    if max(abs(x) for x in r["levels"]["translation"]) > 20:
        raise ChallengeError("build config: translation levels beyond the ODD's 20 px bound")
    if max(abs(x) for x in r["levels"]["rotation"]) > 30:
        raise ChallengeError("build config: rotation levels beyond the ODD's 30 degree bound")
    if min(r["levels"]["blur"]) < 0:
        raise ChallengeError("build config: robustness.levels.blur must be positive (sigma in px)")


# ----------------------------------------------------------------------------- source
def _check_file(task):
    """(fault or '', [w, h] or None) for one image: found, matching its sha256, decodable.

    ``candidates`` are the places the file may be (storage root, dataset folder); the size
    is measured (full decode) only when ``measure`` is set (no resolution in the metadata).
    """
    import cv2

    candidates, expected, measure, missing_cause = task
    found = next((c for c in candidates if os.path.isfile(c)), None)
    if found is None:
        return missing_cause, None, None
    try:
        data = Path(found).read_bytes()
    except OSError as exc:
        return f"unreadable file {found} ({exc.strerror or exc})", None, None
    if expected:
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            return f"sha256 mismatch (file {digest[:12]}..., metadata {expected[:12]}...)", None, None
    flags = cv2.IMREAD_COLOR if measure else cv2.IMREAD_REDUCED_COLOR_8
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if img is None:
        return f"not a decodable image ({found})", None, None
    size = [int(img.shape[1]), int(img.shape[0])] if measure else None
    return "", size, found


def _read_meta(folder, option):
    import pandas as pd

    from challenge_welding.data.source import find_meta, normalise_columns

    meta_path = find_meta(Path(folder), option)
    try:
        meta = pd.read_parquet(meta_path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise ChallengeError(f"{option} {meta_path}: unreadable parquet ({exc})") from None
    meta = normalise_columns(meta)
    missing = [c for c in REQUIRED_COLUMNS if c not in meta.columns]
    if missing:
        raise ChallengeError(f"{option} {meta_path}: missing columns {', '.join(missing)}")
    if meta.empty:
        raise ChallengeError(f"{option} {meta_path}: no rows")
    return meta.reset_index(drop=True)


def _row_faults(meta, option_seams):
    """Problems of the metadata values (no file access); normalises sha256/resolution in place."""
    from challenge_welding.data.source import normal_resolution, normal_sha256, parse_timestamp

    problems = []
    dup = meta["sample_id"][meta["sample_id"].duplicated()]
    problems += [f"{s}: duplicated sample_id" for s in dup]
    sha, res = [], []
    for i, sid in enumerate(meta["sample_id"]):
        cls = meta["class"].iat[i]
        if cls not in ("OK", "KO"):
            problems.append(f"{sid}: class {cls!r} not OK/KO")
        seam_fault = option_seams(meta["welding-seams"].iat[i])
        if seam_fault:
            problems.append(f"{sid}: {seam_fault}")
        try:
            sha.append(normal_sha256(meta["sha256"].iat[i]))
        except ValueError as exc:
            sha.append("")
            problems.append(f"{sid}: {exc}")
        value = meta["resolution"].iat[i] if "resolution" in meta.columns else None
        try:
            res.append(normal_resolution(value) if value is not None else None)
        except ValueError as exc:
            res.append(None)
            problems.append(f"{sid}: {exc}")
        if "timestamp" in meta.columns:
            try:
                parse_timestamp(meta["timestamp"].iat[i])
            except ValueError as exc:
                problems.append(f"{sid}: {exc}")
        if "OOD_class" in meta.columns and meta["OOD_class"].iat[i] not in (0, 1):
            problems.append(f"{sid}: OOD_class {meta['OOD_class'].iat[i]!r} not 0/1")
    meta["sha256"] = sha
    meta["resolution"] = res
    return problems


def _read_dataset(folder, option, origin, seam_fault, workers, progress):
    """One published-format dataset, checked; adds ``_file`` (absolute image path) and ``_origin``."""
    from challenge_welding.data.parallel import run_parallel
    from challenge_welding.data.source import file_candidates, missing_file_cause

    folder = Path(folder)
    meta = _read_meta(folder, option)
    problems = _row_faults(meta, seam_fault)
    tasks = [([str(c) for c in file_candidates(folder, p)], h, r is None, missing_file_cause(folder, p))
             for p, h, r in zip(meta["path"], meta["sha256"], meta["resolution"])]
    results = run_parallel(_check_file, tasks, workers, desc=f"check {folder.name}", progress=progress)
    problems += [f"{s} ({p}): {f}" for s, p, (f, _, _) in zip(meta["sample_id"], meta["path"], results) if f]
    meta["resolution"] = [r if r is not None else size for r, (_, size, _) in zip(meta["resolution"], results)]
    meta["_file"] = [found for _, _, found in results]
    meta["_origin"] = origin
    if problems:
        raise ChallengeError(f"{option} {folder}: {len(problems)} bad rows: {_listing(problems)}")
    meta["OOD_class"] = meta["OOD_class"].astype(int) if "OOD_class" in meta.columns else 0
    return meta


def _read_photos(folder, workers, progress):
    """The real-OOD photos of a plain folder as metadata rows (OOD_class = 1, size measured)."""
    import pandas as pd

    from challenge_welding.data.parallel import run_parallel
    from challenge_welding.data.source import PHOTO_SUFFIXES, photo_files

    folder = Path(folder)
    if not folder.is_dir():
        raise ChallengeError(f"--ood-source {folder}: no such folder")
    files = photo_files(folder)
    if not files:
        raise ChallengeError(f"--ood-source {folder}: no photo ({'/'.join(PHOTO_SUFFIXES)}) in it")
    tasks = [([str(p)], "", True, "missing file") for p in files]
    results = run_parallel(_check_file, tasks, workers, desc="check ood photos", progress=progress)
    bad = [f"{p.relative_to(folder)}: {f}" for p, (f, _, _) in zip(files, results) if f]
    if bad:
        raise ChallengeError(f"--ood-source {folder}: {len(bad)} bad photos: {_listing(bad)}")
    rels = [p.relative_to(folder).as_posix() for p in files]
    return pd.DataFrame({"sample_id": [f"ood_photo:{r}" for r in rels], "class": "OK",
                         "welding-seams": "", "path": rels, "sha256": "",
                         "resolution": [size for _, size, _ in results],
                         "_file": [str(p) for p in files], "_origin": "ood", "OOD_class": 1})


def read_sources(source, config, unseen_sources=(), ood_source=None, workers=None, progress=True):
    """Load and check every input; raise one ChallengeError listing every fault of a dataset.

    Rows (one frame, index = row number): the source's, each unseen source's, then the OOD
    photos'; ``_origin`` says which (source / unseen / ood), ``_file`` is the image found.
    """
    import pandas as pd

    in_dom, held = list(config["in_domain_seams"]), list(config["unseen_seams"])

    def source_seam(seam):
        if seam in in_dom or seam in held:
            return ""
        return (f"unknown seam {seam!r} (build config: in_domain_seams {', '.join(in_dom)}; "
                f"unseen_seams {', '.join(held) or '[]'})")

    frames = [_read_dataset(source, "--source", "source", source_seam, workers, progress)]
    src_seams = set(frames[0]["welding-seams"]) & set(in_dom)

    def unseen_seam(seam):
        if seam in src_seams:
            return (f"seam {seam!r} is also a training seam of --source (the generalization set "
                    "needs seams the source does not train on)")
        return ""

    for folder in unseen_sources or ():
        frames.append(_read_dataset(folder, "--unseen-source", "unseen", unseen_seam, workers, progress))
    if ood_source is not None:
        photos = _read_photos(ood_source, workers, progress)
        rng = np.random.default_rng([len(photos), 0x00D])
        # Each photo is shown to the component as if taken on one of the in-domain seams.
        photos["welding-seams"] = [in_dom[k] for k in rng.integers(0, len(in_dom), len(photos))]
        frames.append(photos)
    meta = pd.concat(frames, ignore_index=True)
    meta["OOD_class"] = meta["OOD_class"].fillna(0).astype(int)
    # The source's own rows (first in ``meta``, same index) with its own columns and dtypes,
    # untouched by the other datasets' columns: the training split is taken from them.
    meta.attrs["source_rows"] = frames[0]
    return meta


# ----------------------------------------------------------------------------- planning
def _round_robin(frame, k, rng, seams):
    """k row indices of ``frame``, as equal per seam as the seams allow (seam-balanced)."""
    pools = []
    for seam in seams:
        idx = frame.index[frame["welding-seams"] == seam].to_numpy()
        pools.append(list(rng.permutation(idx)))
    out = []
    while len(out) < k and any(pools):
        for pool in pools:
            if pool and len(out) < k:
                out.append(pool.pop())
    return out


def _stratified_split(frame, fraction, rng, min_ko, seams):
    """Indices held out: round(fraction * n) of every (seam, class) group.

    If that leaves fewer than ``min_ko`` KO (small sources), more KO are held out,
    seam-balanced, up to half of all KO, so the robustness levels can reach their minimum.
    """
    held = []
    for _, group in frame.groupby(["welding-seams", "class"], sort=True):
        idx = rng.permutation(group.index.to_numpy())
        held += list(idx[: int(round(fraction * len(idx)))])
    ko = frame[frame["class"] == "KO"]
    n_held_ko = int(ko.index.isin(held).sum())
    extra = min(min_ko, len(ko) // 2) - n_held_ko
    if extra > 0:
        held += _round_robin(ko.drop(index=held, errors="ignore"), extra, rng, seams)
    return sorted(held)


def _draw_rows(pool, k, rng):
    """k indices from pool, without replacement while it lasts."""
    pool = np.asarray(pool)
    reps = [rng.permutation(pool) for _ in range(max(1, math.ceil(k / max(len(pool), 1))))]
    return list(np.concatenate(reps)[:k])


def plan_sets(meta, config, seed):
    """{set: list of items}; item = dict(row=source index, op=(name, param), labels={...})."""
    rng = np.random.default_rng([seed, 0x5E75])
    in_dom = list(config["in_domain_seams"])
    normal = meta[meta["OOD_class"] == 0]
    from_source = normal["_origin"] == "source" if "_origin" in normal.columns else True
    domain = normal[from_source & normal["welding-seams"].isin(in_dom)]
    unseen = normal["_origin"] == "unseen" if "_origin" in normal.columns else False
    gen = normal[unseen | (from_source & normal["welding-seams"].isin(config["unseen_seams"]))]
    ood_rows = meta.index[meta["OOD_class"] == 1].to_numpy()
    rr = config["ood_real"]
    lacking = []
    if gen.empty:
        lacking.append("no data for the generalization set: pass --unseen-source DIR (a dataset in the "
                       "published format of seams the source does not have), or hold out seams of the "
                       "source with unseen_seams in the build config (now "
                       f"{', '.join(config['unseen_seams']) or '[]'}, none in the source)")
    if len(ood_rows) < int(rr["min_ood"]):
        lacking.append(f"no real OOD photos for the ood_real set ({len(ood_rows)} found, "
                       f"ood_real.min_ood = {rr['min_ood']}): pass --ood-source DIR (a folder of "
                       "JPEG/PNG photos out of the operating domain)")
    if lacking:
        raise ChallengeError("; ".join(lacking))
    held = _stratified_split(domain, float(config["performance"]["fraction"]), rng,
                             int(config["robustness"]["min_ko_per_level"]), in_dom)
    perf = meta.loc[held]
    training = domain.drop(index=held).index.tolist()
    n_ko = int((perf["class"] == "KO").sum())
    if len(perf) == 0 or n_ko == 0:
        raise ChallengeError(f"source: the performance set ({len(perf)} rows) gets no KO row; "
                             "the source has too few KO in the in-domain seams "
                             f"{', '.join(in_dom)}")
    sets = {"performance": [dict(row=i, op=("none", 0.0), labels={}) for i in held]}

    # robustness: seam-balanced, class mix of performance kept, >= min KO per level.
    rc = config["robustness"]
    min_ko = int(rc["min_ko_per_level"])
    if n_ko < min_ko:
        raise ChallengeError(
            f"source: too few KO for the robustness set: the performance split holds {n_ko} KO, "
            f"each level needs robustness.min_ko_per_level = {min_ko} (use a larger source, a larger "
            "KO share or lower that setting in the build config)")
    share = n_ko / len(perf)
    total = max(int(rc["size"]), math.ceil(min_ko / share))
    k_ko = min(n_ko, max(min_ko, int(round(total * share))))
    k_ok = min(len(perf) - n_ko, total - k_ko)
    base = _round_robin(perf[perf["class"] == "KO"], k_ko, rng, in_dom) + \
        _round_robin(perf[perf["class"] == "OK"], k_ok, rng, in_dom)
    rob = [dict(row=i, op=("none", 0.0), labels={"perturbation": "none", "level": 0.0}) for i in base]
    for name, levels in rc["levels"].items():
        for level in levels:
            rob += [dict(row=i, op=(name, float(level)),
                         labels={"perturbation": name, "level": float(level)}) for i in base]
    sets["robustness"] = rob

    # ood_synthetic: balanced clean / strongly perturbed, distinct images where possible.
    oc = config["ood_synthetic"]
    k = max(1, min(int(oc["size_per_class"]), len(perf) // 2))
    rows = _draw_rows(perf.index, 2 * k, rng)
    kinds = list(oc["kinds"])
    sets["ood_synthetic"] = [dict(row=i, op=("none", 0.0), labels={"ood": 0}) for i in rows[:k]] + [
        dict(row=i, op=("ood_synthetic", kinds[j % len(kinds)]), labels={"ood": 1})
        for j, i in enumerate(rows[k:])]

    # ood_real: the source's OOD_class = 1 rows and as many normal held-out rows.
    ood_rows = list(rng.permutation(ood_rows)[: int(rr["max_ood"])])
    sets["ood_real"] = [dict(row=i, op=("none", 0.0), labels={"ood": 1}) for i in ood_rows] + [
        dict(row=i, op=("none", 0.0), labels={"ood": 0}) for i in _draw_rows(perf.index, len(ood_rows), rng)]

    # generalization: the unseen seams.
    gen_rows = sorted(rng.permutation(gen.index.to_numpy())[: int(config["generalization"]["max_size"])])
    sets["generalization"] = [dict(row=i, op=("none", 0.0), labels={}) for i in gen_rows]

    # drift: an ordered sequence, perturbation growing with the position, the end labelled OOD.
    dc = config["drift"]
    n = int(dc["size"])
    rows = _draw_rows(perf.index, n, rng)
    ko_share = float((meta.loc[rows, "class"] == "KO").mean())
    if ko_share > float(dc["max_ko_share"]):
        raise ChallengeError(f"source: the drift sequence would be {ko_share:.0%} KO "
                             f"(drift.max_ko_share = {dc['max_ko_share']})")
    first_ood = n - int(round(float(dc["ood_fraction"]) * n))
    sets["drift"] = [dict(row=i, op=("drift", pos / max(n - 1, 1)),
                          labels={"ood": int(pos >= first_ood), "position": pos})
                     for pos, i in enumerate(rows)]
    return sets, training


# ----------------------------------------------------------------------------- drawing
def _apply(img, op, seed, config):
    from challenge_welding.data import perturbations as pt

    name, param = op
    if name == "none":
        return img
    if name in pt.ROBUSTNESS_FUNCS:
        return pt.robustness(img, name, param)
    rng = np.random.default_rng(seed)
    if name == "ood_synthetic":
        return pt.ood_synthetic(img, param, rng, config["ood_synthetic"])
    if name == "drift":
        return pt.drift(img, param, rng, config["drift"])
    raise ValueError(name)


def _render_group(task):
    """Decode one source image once and write every copy derived from it."""
    import cv2

    src, copies, config = task
    img = cv2.imread(src, cv2.IMREAD_COLOR)
    params = [cv2.IMWRITE_JPEG_QUALITY, int(config["jpeg_quality"])]
    for out, op, seed in copies:
        ok, buf = cv2.imencode(".jpeg", _apply(img, op, seed, config), params)
        with open(out, "wb") as fh:
            fh.write(buf.tobytes())
    return len(copies)


def _resolution(value):
    return [int(x) for x in value] if value is not None else None


TRAINING_NAME = "training_data"
TRAINING_DROP = ("OOD_class", "_file", "_origin")


def training_frame(meta):
    """The public training split in the published format and layout.

    Paths become challenge-welding/datasets/training_data/<seam>/<labelling_type>/<file>
    (relative to DATA/training_data, the storage root), sha256 the 32 raw bytes,
    resolution ints; every other column of the source is kept as it was.
    """
    from challenge_welding.data.source import published_path

    train = meta.drop(columns=[c for c in TRAINING_DROP if c in meta.columns]).reset_index(drop=True)
    labelling = train["labelling_type"].fillna("unlabelled").astype(str) \
        if "labelling_type" in train.columns else ["unlabelled"] * len(train)
    names = [Path(str(p)).name for p in train["path"]]
    if len(set(zip(train["welding-seams"], labelling, names))) < len(train):
        # file names repeat inside a seam folder: name the copies after their (unique) sample_id
        names = [f"{sid}{Path(n).suffix or '.jpeg'}" for sid, n in zip(train["sample_id"], names)]
    files = meta["_file"].tolist() if "_file" in meta.columns else [None] * len(train)
    train["path"] = [published_path(TRAINING_NAME, seam, lab, n)
                     for seam, lab, n in zip(train["welding-seams"], labelling, names)]
    train["sha256"] = [bytes.fromhex(h) for h in train["sha256"]]
    train["resolution"] = [_resolution(r) for r in train["resolution"]]
    return train, files


def build_sets(source, out, seed=0, config=None, workers=None, progress=True, *,
               unseen_sources=(), ood_source=None) -> Path:
    """Write DATA/{input_data,reference_data,training_data} from ``source``; return DATA.

    ``unseen_sources``: published-format datasets of other seams (generalization set);
    ``ood_source``: a folder of real out-of-distribution photos (ood_real set).
    """
    import pandas as pd

    from challenge_welding.data.parallel import run_parallel
    from challenge_welding.data.parquet_io import write_parquet
    from challenge_welding.data.source import dataset_path

    source, out = Path(source), Path(out)
    cfg = config if isinstance(config, dict) else load_build_config(config)
    cfg = copy.deepcopy(cfg)
    _check_config(cfg)
    meta = read_sources(source, cfg, unseen_sources, ood_source, workers, progress)
    source_rows = meta.attrs.pop("source_rows")
    sets, training = plan_sets(meta, cfg, seed)

    out.mkdir(parents=True, exist_ok=True)
    work = out / f".build-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        id_rng = np.random.default_rng([seed, 0x1D5])
        used = set()

        def token():
            while True:
                t = id_rng.bytes(8).hex()
                if t not in used:
                    used.add(t)
                    return t

        groups = {}   # source row -> list of copies
        tables = {}
        for set_idx, name in enumerate(SET_NAMES):
            items = sets[name]
            order = np.arange(len(items)) if name == "drift" else id_rng.permutation(len(items))
            folder = work / "input_data" / name
            (folder / "images").mkdir(parents=True)
            records = []
            for j in order:
                item = items[j]
                row = meta.loc[item["row"]]
                sid, fname = token(), token()
                rel = f"images/{fname}.jpeg"
                groups.setdefault(item["row"], []).append(
                    (str(folder / rel), item["op"], [seed, set_idx, int(j)]))
                records.append({"sample_id": sid, "path": rel, "welding-seams": row["welding-seams"],
                                "resolution": _resolution(row.get("resolution")),
                                "class": row["class"], **item["labels"]})
            tables[name] = pd.DataFrame(records)

        tasks = [(meta.loc[r, "_file"], copies, cfg) for r, copies in sorted(groups.items())]
        run_parallel(_render_group, tasks, workers, desc="build sets", progress=progress)

        (work / "reference_data").mkdir()
        for name, table in tables.items():
            write_parquet(table[list(INPUT_COLUMNS)], work / "input_data" / name / "metadata.parquet")
            ref_cols = ["sample_id", "class", "welding-seams"] + \
                [c for c in ("perturbation", "level", "ood", "position") if c in table.columns]
            write_parquet(table[ref_cols], work / "reference_data" / f"{name}.parquet")

        train, files = training_frame(source_rows.loc[training])
        store = work / TRAINING_NAME
        (dataset_path(store, TRAINING_NAME) / "metadata").mkdir(parents=True)
        for rel, src in zip(train["path"], files):
            dst = store / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        write_parquet(train, dataset_path(store, TRAINING_NAME) / SOURCE_META)

        _install(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _calibrate(out / "reference_data")
    return out


def training_meta_path(data) -> Path:
    """DATA/training_data/challenge-welding/datasets/training_data/metadata/ds_meta.parquet."""
    from challenge_welding.data.source import dataset_path

    return dataset_path(Path(data) / TRAINING_NAME, TRAINING_NAME) / SOURCE_META


def _replace(src: Path, dst: Path):
    """Atomic swap of a finished file or folder into place (an old one is removed after)."""
    trash = None
    if dst.exists():
        trash = dst.with_name(f".old-{dst.name}-{os.getpid()}")
        os.replace(dst, trash)
    os.replace(src, dst)
    if trash is not None:
        shutil.rmtree(trash) if trash.is_dir() else trash.unlink()


def _install(work, out):
    (out / "input_data").mkdir(exist_ok=True)
    (out / "reference_data").mkdir(exist_ok=True)
    for name in SET_NAMES:
        # Images first, the reference last: a set only looks complete once both are in.
        _replace(work / "input_data" / name, out / "input_data" / name)
        _replace(work / "reference_data" / f"{name}.parquet", out / "reference_data" / f"{name}.parquet")
    _replace(work / "training_data", out / "training_data")


def _calibrate(reference_dir):
    """Calibrated scoring config in reference_data/scoring.yaml.

    An existing scoring.yaml (an organiser's settings) is kept and only its breakpoints
    change; otherwise the packaged default is copied first, so the file exists even
    when the scoring package has no calibrate step.
    """
    target = reference_dir / "scoring.yaml"
    if not target.exists():
        shutil.copyfile(Path(__file__).resolve().parent.parent / "scoring" / "default_scoring.yaml",
                        target)
    try:
        from challenge_welding.scoring.calibrate import calibrate
    except ImportError:  # no calibrate step: the default config (alphas unset) stays
        return None
    return calibrate(reference_dir)
