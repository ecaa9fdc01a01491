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

import hashlib
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import yaml

from challenge_welding.contract.names import INPUT_COLUMNS, SET_NAMES, SOURCE_META
from challenge_welding.data import perturbations as pt
from challenge_welding.data.parallel import run_parallel
from challenge_welding.data.parquet_io import write_parquet
from challenge_welding.data.source import (
    PHOTO_SUFFIXES, REQUIRED_COLUMNS, dataset_path, file_candidates, find_meta, missing_file_cause,
    normal_resolution, normal_sha256, normalise_columns, parse_timestamp, photo_files, published_path)
from challenge_welding.data.synth import MASK_COLUMN
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.scoring.calibrate import calibrate
# the schema engine the scoring config uses too: one validation style for both configs
from challenge_welding.contract.schema import Section, key, number, schema_error, validate

DEFAULT_CONFIG_PATH = Path(__file__).with_name("build_config.yaml")

MAX_LISTED = 10


def _listing(items):
    items = list(items)
    shown = ", ".join(str(x) for x in items[:MAX_LISTED])
    return shown + (f" (and {len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else "")


# ----------------------------------------------------------------------------- config
# The builder config is checked like the scoring config (scoring/config.py): one frozen dataclass
# per YAML mapping, contract/schema.py's engine, "<file>: key 'a.b' must be ..., got X" on the
# first bad value. Every default lives in build_config.yaml (no key has a default here: a file
# given with --config is overlaid on it before the check), so there is one home for each.
def _numbers(value):
    return isinstance(value, (list, tuple)) and \
        all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def _seams(value, where):
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) and x for x in value):
        raise schema_error(where, f"must be a list of seam names, got {value!r}")
    return tuple(value)


def _kinds(value, where):
    if not isinstance(value, (list, tuple)) or not value or any(k not in pt.OOD_SYNTHETIC_KINDS for k in value):
        raise schema_error(where, f"must be a non-empty list of {', '.join(pt.OOD_SYNTHETIC_KINDS)}, got {value!r}")
    return tuple(value)


def _stops(value, where):
    if not (_numbers(value) and len(value) == 2):
        raise schema_error(where, f"must be [darker, brighter] stops, got {value!r}")
    return tuple(float(x) for x in value)


def _levels(bound=None, positive=False):
    """A ladder: distinct non-zero numbers (level 0 is the shared clean copy), within the ODD."""
    def check(value, where):
        if not _numbers(value) or not value:
            raise schema_error(where, f"must be a non-empty list of numbers, got {value!r}")
        if 0 in value or len(set(value)) != len(value):
            raise schema_error(where, f"must be distinct and non-zero (level 0 is the shared clean copy), got {value!r}")
        if bound is not None and max(abs(x) for x in value) > bound:
            raise schema_error(where, f"must stay within the ODD's bound of {bound}, got {value!r}")
        if positive and min(value) < 0:
            raise schema_error(where, f"must be positive (sigma in px), got {value!r}")
        return tuple(value)
    return check


def _cap(value, where):
    return None if value is None else number(lo=1, integer=True)(value, where)


FRACTION = number(lo=0.0, hi=1.0, lo_open=True, hi_open=True)
COUNT = number(lo=1, integer=True)
POSITIVE = number(lo=0.0, lo_open=True)


# --- the config, one dataclass per YAML mapping (field order = the YAML's order; what each key
# means is said once, in build_config.yaml). Adding a key: one field below, one line in the YAML.
@dataclass(frozen=True)
class Performance(Section):
    fraction: float = key(FRACTION)


@dataclass(frozen=True)
class Generalization(Section):
    max_size: int = key(COUNT)


@dataclass(frozen=True)
class Levels(Section):
    """The robustness ladders (their order is the order the copies are planned in)."""

    blur: tuple = key(_levels(positive=True))
    luminance: tuple = key(_levels())
    rotation: tuple = key(_levels(bound=30))
    translation: tuple = key(_levels(bound=20))


@dataclass(frozen=True)
class Robustness(Section):
    size: int = key(COUNT)
    min_ko_per_level: int = key(COUNT)
    levels: Levels = key(Levels)


@dataclass(frozen=True)
class OodSynthetic(Section):
    size_per_class: int = key(COUNT)
    kinds: tuple = key(_kinds)
    extreme_blur: float = key(POSITIVE)
    abnormal_stops: tuple = key(_stops)
    noise_sigma: float = key(POSITIVE)
    dead_fraction: float = key(FRACTION)


@dataclass(frozen=True)
class OodReal(Section):
    max_ood: int = key(COUNT)
    min_ood: int = key(COUNT)


@dataclass(frozen=True)
class Drift(Section):
    size: int = key(number(lo=2, integer=True))
    ood_fraction: float = key(FRACTION)
    max_ko_share: float = key(FRACTION)
    max_noise_sigma: float = key(POSITIVE)
    max_dead_fraction: float = key(FRACTION)
    max_darkening_stops: float = key(POSITIVE)


@dataclass(frozen=True)
class MaxPerSet(Section):
    """Organisers' caps on each set's image count (None: no cap), see docs/data.md; one field per
    name of contract.names.SET_NAMES, in its order."""

    performance: int | None = key(_cap)
    robustness: int | None = key(_cap)
    ood_real: int | None = key(_cap)
    ood_synthetic: int | None = key(_cap)
    generalization: int | None = key(_cap)
    drift: int | None = key(_cap)


@dataclass(frozen=True)
class BuildConfig(Section):
    """The whole builder config, validated once (load_build_config / check_build_config)."""

    in_domain_seams: tuple = key(_seams)
    unseen_seams: tuple = key(_seams)
    jpeg_quality: int = key(number(lo=1, hi=100, integer=True))
    performance: Performance = key(Performance)
    generalization: Generalization = key(Generalization)
    robustness: Robustness = key(Robustness)
    ood_synthetic: OodSynthetic = key(OodSynthetic)
    ood_real: OodReal = key(OodReal)
    drift: Drift = key(Drift)
    max_per_set: MaxPerSet = key(MaxPerSet)


def check_build_config(raw, source="build config") -> BuildConfig:
    """Check a whole builder config (parsed YAML, every key written) against BuildConfig; return
    the typed, frozen config."""
    where = (str(source),)
    config = validate(raw, BuildConfig, where)
    both = set(config.in_domain_seams) & set(config.unseen_seams)
    if not config.in_domain_seams:
        raise schema_error(where + ("in_domain_seams",), "must name at least one seam, got []")
    if both:
        raise schema_error(where + ("unseen_seams",), f"must not repeat in_domain_seams, got {', '.join(sorted(both))} "
                   "in both")
    rr = config.ood_real
    if rr.min_ood > rr.max_ood:
        raise schema_error(where + ("ood_real", "min_ood"), f"must be <= max_ood ({rr.max_ood}), got {rr.min_ood}")
    return config


def _merge(base, extra):
    """``base`` overlaid with ``extra``'s keys (nested mappings merged, unknown keys kept for the
    schema to name)."""
    out = dict(base)
    for name, value in extra.items():
        if isinstance(base.get(name), dict) and isinstance(value, dict):
            out[name] = _merge(base[name], value)
        else:
            out[name] = value
    return out


def load_build_config(path=None) -> BuildConfig:
    """The default builder config (build_config.yaml), overlaid with the keys of ``path`` (YAML)
    if given, checked once."""
    config = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    if path is None:
        return check_build_config(config, DEFAULT_CONFIG_PATH)
    path = Path(path)
    try:
        extra = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ChallengeError(f"build config {path}: cannot read it ({exc})") from None
    if not isinstance(extra, dict):
        raise ChallengeError(f"build config {path}: expected a mapping at the top level, got {extra!r}")
    return check_build_config(_merge(config, extra), path)


# ----------------------------------------------------------------------------- source
def _check_file(task):
    """(fault or '', [w, h] or None) for one image: found, matching its sha256, decodable.

    ``candidates`` are the places the file may be (storage root, dataset folder); the size
    is measured (full decode) only when ``measure`` is set (no resolution in the metadata).
    """
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
    if MASK_COLUMN in meta.columns:
        meta["_mask"], faults = _find_masks(folder, meta)
        problems += faults
    if problems:
        raise ChallengeError(f"{option} {folder}: {len(problems)} bad rows: {_listing(problems)}")
    meta["OOD_class"] = meta["OOD_class"].astype(int) if "OOD_class" in meta.columns else 0
    return meta


def _find_masks(folder, meta):
    """(absolute mask file or None per row, faults) for the optional mask_path column: a
    listed mask must exist (its size is checked when it is drawn)."""
    found, faults = [], []
    for sid, rel in zip(meta["sample_id"], meta[MASK_COLUMN]):
        if not isinstance(rel, str) or not rel:
            found.append(None)
            continue
        hit = next((str(c) for c in file_candidates(folder, rel) if c.is_file()), None)
        found.append(hit)
        if hit is None:
            faults.append(f"{sid} ({MASK_COLUMN} {rel}): {missing_file_cause(folder, rel)}")
    return found, faults


def _read_photos(folder, workers, progress):
    """The real-OOD photos of a plain folder as metadata rows (OOD_class = 1, size measured)."""
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
    in_dom, held = list(config.in_domain_seams), list(config.unseen_seams)

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
        idx = frame.index[frame["welding-seams"] == seam].to_numpy(copy=True)  # may be read-only
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


def _item(row, op=("none", 0.0), **labels):
    """One planned image: source row, operation (name, parameter), reference labels."""
    return dict(row=row, op=op, labels=labels)


def _pools(meta, config):
    """(in-domain rows, unseen-seam rows, real-OOD row indices); every missing input named."""
    in_dom = list(config.in_domain_seams)
    normal = meta[meta["OOD_class"] == 0]
    from_source = normal["_origin"] == "source" if "_origin" in normal.columns else True
    domain = normal[from_source & normal["welding-seams"].isin(in_dom)]
    unseen = normal["_origin"] == "unseen" if "_origin" in normal.columns else False
    gen = normal[unseen | (from_source & normal["welding-seams"].isin(config.unseen_seams))]
    ood_rows = meta.index[meta["OOD_class"] == 1].to_numpy()
    rr = config.ood_real
    lacking = []
    if gen.empty:
        lacking.append("no data for the generalization set: pass --unseen-source DIR (a dataset in the "
                       "published format of seams the source does not have), or hold out seams of the "
                       "source with unseen_seams in the build config (now "
                       f"{', '.join(config.unseen_seams) or '[]'}, none in the source)")
    if len(ood_rows) < rr.min_ood:
        lacking.append(f"no real OOD photos for the ood_real set ({len(ood_rows)} found, "
                       f"ood_real.min_ood = {rr.min_ood}): pass --ood-source DIR (a folder of "
                       "JPEG/PNG photos out of the operating domain)")
    if lacking:
        raise ChallengeError("; ".join(lacking))
    return domain, gen, ood_rows


def plan_performance(meta, domain, config, rng):
    """(performance items, training rows): a stratified held-out share of the in-domain rows."""
    in_dom = list(config.in_domain_seams)
    held = _stratified_split(domain, config.performance.fraction, rng,
                             config.robustness.min_ko_per_level, in_dom)
    perf = meta.loc[held]
    n_ko = int((perf["class"] == "KO").sum())
    if len(perf) == 0 or n_ko == 0:
        raise ChallengeError(f"source: the performance set ({len(perf)} rows) gets no KO row; "
                             "the source has too few KO in the in-domain seams "
                             f"{', '.join(in_dom)}")
    return [_item(i) for i in held], domain.drop(index=held).index.tolist()


def _floor_snippet(min_ko):
    """The builder-config YAML (one line, flow style) that sets the robustness KO floor."""
    return f"`robustness: {{min_ko_per_level: {min_ko}}}`"


def plan_robustness(perf, config, rng, exact_base=None):
    """Seam-balanced base images (the class mix of performance, >= min KO per level), each
    once clean and once per ladder level.

    The base is ``max(robustness.size, ceil(min_ko / share))`` images, ``share`` the KO share
    of ``perf``. ``exact_base``: a base the user asked for by name (--robustness-base); it is
    refused, not raised, when the floor needs more (the raise would silently break the budget
    the user sized it for).
    """
    rc = config.robustness
    min_ko = rc.min_ko_per_level
    n_ko = int((perf["class"] == "KO").sum())
    if n_ko < min_ko:
        raise ChallengeError(
            f"source: too few KO for the robustness set: the performance split holds {n_ko} KO, "
            f"each level needs robustness.min_ko_per_level = {min_ko}: lower it with --config FILE, "
            f"FILE holding {_floor_snippet(n_ko)}, or use a source with more KO (synth: a larger "
            "--n or --ko-share)")
    share = n_ko / len(perf)
    floor = math.ceil(min_ko / share)
    if exact_base is not None and floor > exact_base:
        raise RobustnessBaseTooSmall(exact_base, floor, n_ko, len(perf), min_ko)
    total = max(rc.size, floor)
    k_ko = min(n_ko, max(min_ko, int(round(total * share))))
    k_ok = min(len(perf) - n_ko, total - k_ko)
    in_dom = list(config.in_domain_seams)
    base = _round_robin(perf[perf["class"] == "KO"], k_ko, rng, in_dom) + \
        _round_robin(perf[perf["class"] == "OK"], k_ok, rng, in_dom)
    items = [_item(i, perturbation="none", level=0.0) for i in base]
    for name, levels in rc.levels.as_dict().items():
        for level in levels:
            items += [_item(i, (name, float(level)), perturbation=name, level=float(level)) for i in base]
    return items


class RobustnessBaseTooSmall(ChallengeError):
    """--robustness-base N below what the KO floor needs; build_sets turns it into the line of
    robustness_base_refusal (with a floor that fits, found by planning again)."""

    def __init__(self, asked, floor, n_ko, n_perf, min_ko):
        self.facts = dict(asked=asked, floor=floor, n_ko=n_ko, n_perf=n_perf, min_ko=min_ko)
        super().__init__(robustness_base_refusal(**self.facts))


def robustness_base_refusal(asked, floor, n_ko, n_perf, min_ko, lower=None):
    """The line refusing ``--robustness-base asked`` when the KO floor needs ``floor`` base images
    (``n_ko`` KO in the ``n_perf`` performance rows, ``floor = ceil(min_ko * n_perf / n_ko)``).

    ``lower``: a robustness.min_ko_per_level with which ``asked`` is planned as it is (found by
    fitting_floor), offered as the other way out; None: none found.
    """
    other = (f", or lower the floor with --config FILE, FILE holding {_floor_snippet(lower)}"
             if lower else "")
    return (f"--robustness-base {asked}: the robustness set needs at least {floor} base images, so "
            f"that each level holds robustness.min_ko_per_level = {min_ko} KO at the performance "
            f"split's KO share ({n_ko} of {n_perf}); nothing written: pass --robustness-base {floor} "
            f"or more{other}")


def fitting_floor(meta, config, seed, asked):
    """The largest robustness.min_ko_per_level below the config's with which a base of ``asked``
    images is planned, or None.

    Planned again, not computed: the floor also decides how many KO the performance split holds
    (_stratified_split), so the share the base is measured against moves with it.
    """
    for m in range(config.robustness.min_ko_per_level - 1, 0, -1):
        trial = config.replaced({"robustness": {"min_ko_per_level": m}})
        try:
            plan_sets(meta, trial, seed, asked)
        except ChallengeError:
            continue
        return m
    return None


def plan_ood_synthetic(perf, config, rng):
    """Balanced clean / strongly perturbed copies, distinct images where possible."""
    oc = config.ood_synthetic
    k = max(1, min(oc.size_per_class, len(perf) // 2))
    rows = _draw_rows(perf.index, 2 * k, rng)
    kinds = list(oc.kinds)
    return [_item(i, ood=0) for i in rows[:k]] + \
        [_item(i, ("ood_synthetic", kinds[j % len(kinds)]), ood=1) for j, i in enumerate(rows[k:])]


def plan_ood_real(perf, ood_rows, config, rng):
    """The source's real-OOD rows (at most max_ood) and as many normal held-out rows."""
    ood_rows = list(rng.permutation(ood_rows)[: config.ood_real.max_ood])
    return [_item(i, ood=1) for i in ood_rows] + \
        [_item(i, ood=0) for i in _draw_rows(perf.index, len(ood_rows), rng)]


def plan_generalization(gen, config, rng):
    """The unseen seams' rows (at most max_size)."""
    rows = sorted(rng.permutation(gen.index.to_numpy())[: config.generalization.max_size])
    return [_item(i) for i in rows]


def plan_drift(meta, perf, config, rng):
    """An ordered sequence, perturbation growing with the position, the end labelled OOD."""
    dc = config.drift
    n = dc.size
    rows = _draw_rows(perf.index, n, rng)
    ko_share = float((meta.loc[rows, "class"] == "KO").mean())
    if ko_share > dc.max_ko_share:
        raise ChallengeError(f"source: the drift sequence would be {ko_share:.0%} KO "
                             f"(drift.max_ko_share = {dc.max_ko_share})")
    first_ood = n - int(round(dc.ood_fraction * n))
    return [_item(i, ("drift", pos / max(n - 1, 1)), ood=int(pos >= first_ood), position=pos)
            for pos, i in enumerate(rows)]


def plan_sets(meta, config, seed, robustness_base=None):
    """({set: list of items}, training rows); item = dict(row=source index, op=(name, param),
    labels={...}). One generator drawn in this order (the order fixes the sets for a seed);
    the caps of config.max_per_set are applied by capped_config before planning.
    ``robustness_base``: an exact ladder base asked by the user (plan_robustness)."""
    rng = np.random.default_rng([seed, 0x5E75])
    domain, gen, ood_rows = _pools(meta, config)
    performance, training = plan_performance(meta, domain, config, rng)
    perf = meta.loc[[item["row"] for item in performance]]
    sets = {"performance": performance,
            "robustness": plan_robustness(perf, config, rng, robustness_base),
            "ood_synthetic": plan_ood_synthetic(perf, config, rng),
            "ood_real": plan_ood_real(perf, ood_rows, config, rng),
            "generalization": plan_generalization(gen, config, rng),
            "drift": plan_drift(meta, perf, config, rng)}
    cap = config.max_per_set.performance
    if cap is not None and len(performance) > cap:
        # drawn after the others (same sets for the other five): a stratified subsample
        sets["performance"] = [_item(i) for i in _stratified_subsample(perf, cap, rng)]
    return sets, training


def _stratified_subsample(frame, k, rng):
    """k row indices of ``frame``, each (seam, class) group kept in proportion (largest
    remainder), sorted."""
    groups = [g.index.to_numpy() for _, g in frame.groupby(["welding-seams", "class"], sort=True)]
    raw = np.array([len(g) for g in groups], float) * k / len(frame)
    counts = np.floor(raw).astype(int)
    for j in np.argsort(-(raw - counts), kind="stable")[: k - counts.sum()]:
        counts[j] += 1
    return sorted(int(i) for g, c in zip(groups, counts) for i in rng.permutation(g)[:c])


def capped_config(config, caps):
    """The config whose set sizes respect ``caps`` ({set: max images or None}) on top of its own
    max_per_set: each set's own size key lowered where the cap asks for less (performance is
    subsampled in plan_sets)."""
    config = config.replaced({"max_per_set": {k: v for k, v in caps.items() if v is not None}})
    cap = config.max_per_set
    n_copies = 1 + sum(len(v) for v in config.robustness.levels.as_dict().values())
    changes = {}
    for name, size_key, per in (("robustness", "size", n_copies), ("ood_synthetic", "size_per_class", 2),
                                ("ood_real", "max_ood", 2), ("generalization", "max_size", 1),
                                ("drift", "size", 1)):
        if getattr(cap, name) is not None:
            size = getattr(getattr(config, name), size_key)
            changes[name] = {size_key: min(size, max(1, getattr(cap, name) // per))}
    return config.replaced(changes)


def check_caps(sets, caps):
    """One line per set above its cap (only robustness can be: it is raised so that every
    level holds robustness.min_ko_per_level KO)."""
    over = []
    for name in SET_NAMES:
        if caps.get(name) is None or len(sets[name]) <= caps[name]:
            continue
        why = ""
        if name == "robustness":
            base = sum(item["labels"]["perturbation"] == "none" for item in sets[name])
            why = (f" ({base} base images x {len(sets[name]) // base} copies: the fewest that hold "
                   "robustness.min_ko_per_level KO per level)")
        over.append(f"max_per_set: {name}: {len(sets[name])} images planned{why}, cap {caps[name]}: "
                    "raise the cap or lower robustness.min_ko_per_level")
    if over:
        raise ChallengeError("\n".join(over))


def size_table(meta, sets, training):
    """Per set (and training): images, KO, megapixels (from the metadata's resolutions)."""
    def row(name, rows):
        res = meta.loc[rows, "resolution"]
        mpix = sum(int(r[0]) * int(r[1]) for r in res if r is not None) / 1e6
        return {"set": name, "images": len(rows), "KO": int((meta.loc[rows, "class"] == "KO").sum()),
                "megapixels": round(mpix, 1)}

    table = [row(name, [item["row"] for item in sets[name]]) for name in SET_NAMES]
    return pd.DataFrame(table + [row("training_data", list(training))])


# What brings a KO into each set that may end up without one (performance and robustness
# are refused without KO): the sets' own inputs or size keys.
_KO_SOURCES = {
    "ood_synthetic": "raise ood_synthetic.size_per_class in --config FILE (its rows are drawn "
                     "from the performance split)",
    "generalization": "add KO welds of the unseen seams to --unseen-source (ML_g, the F1 of KO, "
                      "is undefined without them)",
    "drift": "raise drift.size in --config FILE (its rows are drawn from the performance split)",
}


def ko_warnings(table) -> list[str]:
    """One ``warning:`` line per set of the size table that holds no KO, saying what to add.

    ood_real pairs each real-OOD photo with one in-domain row drawn from the performance split
    (images // 2 of them); with no KO among them, an OOD score that flags every anomaly,
    defects included, is never caught confusing the two. A photo more brings one row, KO with
    the performance split's KO share, so ``ceil(images / KO)`` photos give one KO on average.
    """
    rows = table.set_index("set")
    perf_images, perf_ko = int(rows.loc["performance", "images"]), int(rows.loc["performance", "KO"])
    lines = []
    for name in ("ood_real", *_KO_SOURCES):
        images = int(rows.loc[name, "images"])
        if images == 0 or int(rows.loc[name, "KO"]) > 0:
            continue
        if name == "ood_real":
            per_ko = math.ceil(perf_images / perf_ko) if perf_ko else None
            what = ("add real-OOD photos to --ood-source: each brings one in-domain row"
                    + (f", about one KO per {per_ko} photos at the performance split's KO share "
                       f"({perf_ko} of {perf_images})" if per_ko else ""))
            why = (f" (its {images // 2} in-domain rows are all OK: whether defects are taken for "
                   "OOD is not measured)")
        else:
            what, why = _KO_SOURCES[name], ""
        lines.append(f"warning: {name}: {images} images, 0 KO{why}: {what}")
    return lines


def format_size_table(table) -> str:
    lines = [f"  {'set':15s} {'images':>8s} {'KO':>6s} {'megapixels':>11s}"]
    lines += [f"  {r.set:15s} {r.images:8d} {r.KO:6d} {r.megapixels:11.1f}" for r in table.itertuples()]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- drawing
def _apply(img, op, seed, config):
    name, param = op
    if name == "none":
        return img
    if name in pt.ROBUSTNESS_FUNCS:
        return pt.robustness(img, name, param)
    rng = np.random.default_rng(seed)
    if name == "ood_synthetic":
        return pt.ood_synthetic(img, param, rng, config.ood_synthetic)
    if name == "drift":
        return pt.drift(img, param, rng, config.drift)
    raise ValueError(name)


MOVING = ("rotation", "translation")  # the operations that move pixels (and so the mask)


def move_mask(mask, op):
    """The defect mask (uint8 0/255) of an image transformed by ``op``: rotated or shifted
    by the very warp of the image (same matrix, border and interpolation), then binarised
    at 128; every other operation (blur, luminance, OOD, drift) leaves it in place."""
    name, param = op
    if name not in MOVING:
        return mask
    return np.where(pt.robustness(mask, name, param) >= 128, 255, 0).astype(np.uint8)


def _render_group(task):
    """Decode one source image once and write every copy derived from it (and its mask)."""
    src, mask_src, copies, config = task
    img = cv2.imread(src, cv2.IMREAD_COLOR)
    mask = None
    if mask_src is not None:
        mask = cv2.imread(mask_src, cv2.IMREAD_GRAYSCALE)
        if mask is None or mask.shape != img.shape[:2]:
            got = "not a decodable image" if mask is None else f"{mask.shape[1]}x{mask.shape[0]}"
            return f"mask {mask_src}: expected a {img.shape[1]}x{img.shape[0]} image, got {got}"
        mask = np.where(mask >= 128, 255, 0).astype(np.uint8)
    params = [cv2.IMWRITE_JPEG_QUALITY, config.jpeg_quality]
    for out, op, seed, mask_out in copies:
        ok, buf = cv2.imencode(".jpeg", _apply(img, op, seed, config), params)
        with open(out, "wb") as fh:
            fh.write(buf.tobytes())
        if mask_out is not None and mask is not None:
            with open(mask_out, "wb") as fh:
                fh.write(cv2.imencode(".png", move_mask(mask, op))[1].tobytes())
    return ""


def _resolution(value):
    return [int(x) for x in value] if value is not None else None


TRAINING_NAME = "training_data"
MASKS = "masks"  # DATA/reference_data/masks/<set>/<sample_id>.png (private: the scorer's side)
# Masks stay private: the training split keeps the published format (no mask_path).
TRAINING_DROP = ("OOD_class", "_file", "_origin", "_mask", MASK_COLUMN)


def training_frame(meta):
    """The public training split in the published format and layout.

    Paths become challenge-welding/datasets/training_data/<seam>/<labelling_type>/<file>
    (relative to DATA/training_data, the storage root), sha256 the 32 raw bytes,
    resolution ints; every other column of the source is kept as it was.
    """
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
               unseen_sources=(), ood_source=None, max_per_set=None, report=None,
               plan_only=False, robustness_base=None) -> Path:
    """Write DATA/{input_data,reference_data,training_data} from ``source``; return DATA.

    ``unseen_sources``: published-format datasets of other seams (generalization set);
    ``ood_source``: a folder of real out-of-distribution photos (ood_real set);
    ``max_per_set``: {set: max images} on top of the config's max_per_set; ``report``:
    called with the size table (see size_table) before anything is written;
    ``plan_only``: stop there (nothing written); ``robustness_base``: the ladder's base
    images asked by name (--robustness-base): never raised, refused when the KO floor needs
    more (plan_robustness).
    """
    source, out = Path(source), Path(out)
    # checked once: a BuildConfig already is, a file (or the default) by load_build_config
    cfg = config if isinstance(config, BuildConfig) else load_build_config(config)
    cfg = capped_config(cfg, max_per_set or {})
    meta = read_sources(source, cfg, unseen_sources, ood_source, workers, progress)
    source_rows = meta.attrs.pop("source_rows")
    if robustness_base is not None:
        cfg = cfg.replaced({"robustness": {"size": int(robustness_base)}})
    try:
        sets, training = plan_sets(meta, cfg, seed, robustness_base)
    except RobustnessBaseTooSmall as exc:
        lower = fitting_floor(meta, cfg, seed, robustness_base)
        raise ChallengeError(robustness_base_refusal(**exc.facts, lower=lower)) from None
    check_caps(sets, cfg.max_per_set.as_dict())
    if report is not None:
        report(size_table(meta, sets, training))
    if plan_only:
        return out

    out.mkdir(parents=True, exist_ok=True)
    work = out / f".build-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        tables, tasks = _plan_files(meta, sets, work, seed, cfg)
        faults = [f for f in run_parallel(_render_group, tasks, workers, desc="build sets",
                                          progress=progress) if f]
        if faults:
            raise ChallengeError(f"--source {source}: {len(faults)} bad masks: {_listing(faults)}")
        for name, table in tables.items():
            write_parquet(table[list(INPUT_COLUMNS)], work / "input_data" / name / "metadata.parquet")
            ref_cols = ["sample_id", "class", "welding-seams"] + \
                [c for c in ("perturbation", "level", "ood", "position", "labelling_type") if c in table.columns]
            write_parquet(table[ref_cols], work / "reference_data" / f"{name}.parquet")
        _write_training(source_rows.loc[training], work / TRAINING_NAME)
        _move_into_place(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    calibrate(out / "reference_data")
    return out


def _plan_files(meta, sets, work, seed, cfg):
    """({set: reference+input table}, render tasks): random ids and file names from the seeded
    generator, rows shuffled (drift keeps its order), one task per source image."""
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
    has_masks = "_mask" in meta.columns
    for set_idx, name in enumerate(SET_NAMES):
        items = sets[name]
        order = np.arange(len(items)) if name == "drift" else id_rng.permutation(len(items))
        folder = work / "input_data" / name
        (folder / "images").mkdir(parents=True)
        mask_dir = work / "reference_data" / MASKS / name
        records = []
        for j in order:
            item = items[j]
            row = meta.loc[item["row"]]
            sid, fname = token(), token()
            rel = f"images/{fname}.jpeg"
            # a KO sample whose source row has a mask gets it, moved like its image
            mask_out = None
            if has_masks and row["class"] == "KO" and isinstance(row["_mask"], str):
                mask_dir.mkdir(parents=True, exist_ok=True)
                mask_out = str(mask_dir / f"{sid}.png")
            groups.setdefault(item["row"], []).append(
                (str(folder / rel), item["op"], [seed, set_idx, int(j)], mask_out))
            records.append({"sample_id": sid, "path": rel, "welding-seams": row["welding-seams"],
                            "resolution": _resolution(row.get("resolution")),
                            "class": row["class"], **item["labels"],
                            # who labelled it (expert / operator): the analyses' expert-only KPIs
                            **({"labelling_type": str(row["labelling_type"])}
                               if isinstance(row.get("labelling_type"), str) else {})})
        tables[name] = pd.DataFrame(records)
    (work / "reference_data").mkdir(exist_ok=True)
    tasks = [(meta.loc[r, "_file"], meta.loc[r, "_mask"] if has_masks and any(c[3] for c in copies) else None,
              copies, cfg) for r, copies in sorted(groups.items())]
    return tables, tasks


def _write_training(rows, store):
    """The public training split (published format and layout) under ``store``."""
    train, files = training_frame(rows)
    (dataset_path(store, TRAINING_NAME) / "metadata").mkdir(parents=True)
    for rel, src in zip(train["path"], files):
        dst = store / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    write_parquet(train, dataset_path(store, TRAINING_NAME) / SOURCE_META)


def training_meta_path(data) -> Path:
    """DATA/training_data/challenge-welding/datasets/training_data/metadata/ds_meta.parquet."""
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


def _move_into_place(work, out):
    (out / "input_data").mkdir(exist_ok=True)
    (out / "reference_data").mkdir(exist_ok=True)
    for name in SET_NAMES:
        # Images first, the reference last: a set only looks complete once both are in.
        _replace(work / "input_data" / name, out / "input_data" / name)
        _replace(work / "reference_data" / f"{name}.parquet", out / "reference_data" / f"{name}.parquet")
    # the masks of this build (none: the folder of an older build goes, they would not match)
    if (work / "reference_data" / MASKS).is_dir():
        _replace(work / "reference_data" / MASKS, out / "reference_data" / MASKS)
    elif (out / "reference_data" / MASKS).exists():
        shutil.rmtree(out / "reference_data" / MASKS)
    _replace(work / "training_data", out / "training_data")
