"""Build the six evaluation sets (and the public training split) from a source dataset.

Input: any dataset in the challenge's published format (ROOT/metadata/ds_meta.parquet +
images). Output: the layout of shared/CONTRACTS.md ("Evaluation data"). Steps:

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

from challenge_welding.constants import INPUT_COLUMNS, SET_NAMES, SOURCE_META
from challenge_welding.errors import ChallengeError

DEFAULT_CONFIG_PATH = Path(__file__).with_name("build_config.yaml")
REQUIRED_COLUMNS = ("sample_id", "class", "welding-seams", "path", "sha256")
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
    r = config["robustness"]
    if int(r["min_ko_per_level"]) < 1:
        raise ChallengeError("build config: robustness.min_ko_per_level must be >= 1")
    if not 0 < float(config["performance"]["fraction"]) < 1:
        raise ChallengeError("build config: performance.fraction must be in (0, 1)")
    if not 0 < float(config["drift"]["ood_fraction"]) < 1:
        raise ChallengeError("build config: drift.ood_fraction must be in (0, 1)")
    if max(abs(x) for x in r["levels"]["translation"]) > 20:
        raise ChallengeError("build config: translation levels beyond the ODD's 20 px bound")
    if max(abs(x) for x in r["levels"]["rotation"]) > 30:
        raise ChallengeError("build config: rotation levels beyond the ODD's 30 degree bound")
    for name, levels in r["levels"].items():
        if 0 in levels or len(set(levels)) != len(levels):
            raise ChallengeError(f"build config: robustness.levels.{name} must be distinct and "
                                 "non-zero (level 0 is the shared clean copy)")
    return config


# ----------------------------------------------------------------------------- source
def _check_file(task):
    """'' if the file is present, matches its sha256 and decodes, else the fault."""
    import cv2

    path, expected = task
    try:
        data = Path(path).read_bytes()
    except OSError:
        return "missing or unreadable file"
    if expected and hashlib.sha256(data).hexdigest() != str(expected).lower():
        return "sha256 mismatch"
    if cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_REDUCED_COLOR_8) is None:
        return "not a decodable image"
    return ""


def read_source(source, config, workers=None, progress=True):
    """Load and check the source metadata and files; raise one ChallengeError listing every fault."""
    import pandas as pd

    from challenge_welding.data.parallel import run_parallel

    source = Path(source)
    meta_path = source / SOURCE_META
    if not meta_path.is_file():
        raise ChallengeError(f"source {source}: no {SOURCE_META} (not a dataset in the published format)")
    try:
        meta = pd.read_parquet(meta_path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise ChallengeError(f"source {meta_path}: unreadable parquet ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in meta.columns]
    if missing:
        raise ChallengeError(f"source {meta_path}: missing columns {', '.join(missing)}")
    if meta.empty:
        raise ChallengeError(f"source {meta_path}: no rows")
    meta = meta.reset_index(drop=True)
    if "OOD_class" not in meta.columns:
        meta["OOD_class"] = 0
    problems = []
    dup = meta["sample_id"][meta["sample_id"].duplicated()]
    problems += [f"{s}: duplicated sample_id" for s in dup]
    bad_class = meta[~meta["class"].isin(["OK", "KO"])]
    problems += [f"{r.sample_id}: class {getattr(r, '_2')!r} not OK/KO"
                 for r in bad_class[["sample_id", "class"]].itertuples()]
    known = set(config["in_domain_seams"]) | set(config["unseen_seams"])
    bad_seam = meta[~meta["welding-seams"].isin(known)]
    problems += [f"{s}: unknown seam {seam!r}" for s, seam in
                 zip(bad_seam["sample_id"], bad_seam["welding-seams"])]
    bad_ood = meta[~meta["OOD_class"].isin([0, 1])]
    problems += [f"{s}: OOD_class {v!r} not 0/1" for s, v in zip(bad_ood["sample_id"], bad_ood["OOD_class"])]
    tasks = [(str(source / p), h) for p, h in zip(meta["path"], meta["sha256"])]
    faults = run_parallel(_check_file, tasks, workers, desc="check source", progress=progress)
    problems += [f"{s} ({p}): {f}" for s, p, f in zip(meta["sample_id"], meta["path"], faults) if f]
    if problems:
        raise ChallengeError(f"source {source}: {len(problems)} bad rows: {_listing(problems)}")
    meta["OOD_class"] = meta["OOD_class"].astype(int)
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
    domain = normal[normal["welding-seams"].isin(in_dom)]
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
    rr = config["ood_real"]
    ood_rows = meta.index[meta["OOD_class"] == 1].to_numpy()
    if len(ood_rows) < int(rr["min_ood"]):
        raise ChallengeError(f"source: {len(ood_rows)} rows with OOD_class = 1, the ood_real set "
                             f"needs at least ood_real.min_ood = {rr['min_ood']}")
    ood_rows = list(rng.permutation(ood_rows)[: int(rr["max_ood"])])
    sets["ood_real"] = [dict(row=i, op=("none", 0.0), labels={"ood": 1}) for i in ood_rows] + [
        dict(row=i, op=("none", 0.0), labels={"ood": 0}) for i in _draw_rows(perf.index, len(ood_rows), rng)]

    # generalization: the unseen seams.
    gen = normal[normal["welding-seams"].isin(config["unseen_seams"])]
    if gen.empty:
        raise ChallengeError(f"source: no normal row of the unseen seams {', '.join(config['unseen_seams'])} "
                             "for the generalization set")
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


def build_sets(source, out, seed=0, config=None, workers=None, progress=True) -> Path:
    """Write DATA/{input_data,reference_data,training_data} from ``source``; return DATA."""
    import pandas as pd

    from challenge_welding.data.parallel import run_parallel

    source, out = Path(source), Path(out)
    cfg = config if isinstance(config, dict) else load_build_config(config)
    cfg = copy.deepcopy(cfg)
    meta = read_source(source, cfg, workers, progress)
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

        tasks = [(str(source / meta.loc[r, "path"]), copies, cfg) for r, copies in sorted(groups.items())]
        run_parallel(_render_group, tasks, workers, desc="build sets", progress=progress)

        (work / "reference_data").mkdir()
        for name, table in tables.items():
            table[list(INPUT_COLUMNS)].to_parquet(work / "input_data" / name / "metadata.parquet", index=False)
            ref_cols = ["sample_id", "class", "welding-seams"] + \
                [c for c in ("perturbation", "level", "ood", "position") if c in table.columns]
            table[ref_cols].to_parquet(work / "reference_data" / f"{name}.parquet", index=False)

        train = meta.loc[training].reset_index(drop=True)
        (work / "training_data" / "metadata").mkdir(parents=True)
        for rel in train["path"]:
            dst = work / "training_data" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, dst)
        train.to_parquet(work / "training_data" / SOURCE_META, index=False)

        _install(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _calibrate(out / "reference_data")
    return out


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
