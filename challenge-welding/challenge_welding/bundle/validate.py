"""Our own check of a Codabench (v2) competition bundle, before it is uploaded.

Codabench reports a broken bundle only after the upload, one problem at a time,
and some problems (a leaderboard column that no score fills, a scoring program
that cannot start) only when the first submission runs. This module lists every
problem at once. The rules follow Codabench's v2 unpacker and models
(competitions/unpackers/v2.py, leaderboards/models.py: column key and title
<= 36 characters, leaderboard key <= 36, title <= 64; unique column indexes and
keys; sequential phases, each but the last with an end) plus our own contracts
(leaderboard keys == constants.SCORE_KEYS, the six sets present, the vendored
package in each program).

``validate_bundle(path)`` accepts the bundle zip or an unpacked folder and
returns a list of problems (empty: the bundle is fine).
"""

from __future__ import annotations

import datetime as dt
import io
import re
import tempfile
import uuid
import zipfile
from pathlib import Path, PurePosixPath

import yaml

from challenge_welding.constants import SCORE_KEYS, SET_NAMES

REQUIRED_KEYS = ("title", "image", "terms", "pages", "tasks", "phases", "leaderboards")
MAX_COLUMN_KEY = 36
MAX_COLUMN_TITLE = 36
MAX_LEADERBOARD_KEY = 36
MAX_LEADERBOARD_TITLE = 64
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


class _Tree:
    """Read access to the files of a bundle folder, and of the zips inside it."""

    def __init__(self, root: Path):
        self.root = root

    def kind(self, rel: str) -> str | None:
        """"file", "dir" or None; paths must stay inside the bundle."""
        p = (self.root / rel).resolve()
        if self.root.resolve() not in (p, *p.parents):
            return None
        return "dir" if p.is_dir() else "file" if p.is_file() else None

    def members(self, rel: str) -> dict[str, int] | None:
        """Files (relative path -> size) of a data/program entry: a zip or a folder.

        None when the entry is missing or a zip cannot be read.
        """
        p = self.root / rel
        if p.is_dir():
            return {f.relative_to(p).as_posix(): f.stat().st_size
                    for f in p.rglob("*") if f.is_file()}
        if p.is_file():
            try:
                with zipfile.ZipFile(p) as zf:
                    return {i.filename: i.file_size for i in zf.infolist() if not i.is_dir()}
            except zipfile.BadZipFile:
                return None
        return None

    def read(self, rel: str, member: str) -> bytes:
        p = self.root / rel
        if p.is_dir():
            return (p / member).read_bytes()
        with zipfile.ZipFile(p) as zf:
            return zf.read(member)


def validate_bundle(path: str | Path) -> list[str]:
    """Every problem of the bundle at ``path`` (zip or folder), one line each."""
    path = Path(path)
    if path.is_dir():
        return _validate_tree(_Tree(path))
    if not path.is_file():
        return [f"{path}: no such file or folder"]
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        return [f"{path}: not a zip file"]
    with zf, tempfile.TemporaryDirectory(prefix="bundle-check-") as tmp:
        names = zf.namelist()
        bad = [n for n in names if n.startswith("/") or ".." in PurePosixPath(n).parts]
        if bad:
            return [f"{path}: unsafe member paths {bad[:3]}"]
        if "competition.yaml" not in names:
            nested = [n for n in names if n.endswith("/competition.yaml")]
            hint = (f" (found {nested[0]}: zip the folder's contents, not the folder)"
                    if nested else "")
            return [f"{path}: competition.yaml is not at the zip root{hint}"]
        zf.extractall(tmp)
        return _validate_tree(_Tree(Path(tmp)))


def _validate_tree(tree: _Tree) -> list[str]:
    problems: list[str] = []
    if tree.kind("competition.yaml") != "file":
        return ["competition.yaml is missing at the bundle root"]
    try:
        comp = yaml.safe_load((tree.root / "competition.yaml").read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return [f"competition.yaml: not valid YAML ({exc})"]
    if not isinstance(comp, dict):
        return ["competition.yaml: the top level must be a mapping"]

    if comp.get("version") != 2:
        problems.append(f"competition.yaml: version must be 2 (found {comp.get('version')!r})")
    for key in REQUIRED_KEYS:
        if key not in comp or (comp[key] in (None, "") and key != "pages"):
            problems.append(f"competition.yaml: required key '{key}' is missing")
    if not comp.get("docker_image"):
        problems.append("competition.yaml: docker_image is not set (Codabench would use its "
                        "default image, which lacks our dependencies)")
    if comp.get("enable_detailed_results") is not True:
        problems.append("competition.yaml: enable_detailed_results must be true "
                        "(the scoring program writes detailed_results.html)")

    image = comp.get("image")
    if image:
        problems += _check_file(tree, image, "image")
        if tree.kind(image) == "file" and not (tree.root / image).read_bytes()[:8].startswith(
                IMAGE_MAGIC):
            problems.append(f"image '{image}': not a PNG, JPEG or GIF file")
    if comp.get("terms"):
        problems += _check_file(tree, comp["terms"], "terms")
    pages = comp.get("pages") or []
    if not isinstance(pages, list):
        problems.append("pages: must be a list")
        pages = []
    for i, page in enumerate(pages):
        if not isinstance(page, dict) or not page.get("title") or not page.get("file"):
            problems.append(f"pages[{i}]: needs a title and a file")
            continue
        problems += _check_file(tree, page["file"], f"page '{page['title']}'")

    task_indexes = _check_tasks(tree, comp.get("tasks"), problems)
    _check_solutions(tree, comp.get("solutions"), task_indexes, problems)
    _check_phases(tree, comp.get("phases"), task_indexes, problems)
    _check_leaderboards(comp.get("leaderboards"), problems)
    return problems


def _check_file(tree: _Tree, rel: str, what: str) -> list[str]:
    kind = tree.kind(str(rel))
    if kind is None:
        return [f"{what}: file '{rel}' is missing from the bundle"]
    if kind == "dir":
        return [f"{what}: '{rel}' is a folder, a file is expected"]
    if (tree.root / rel).stat().st_size == 0:
        return [f"{what}: file '{rel}' is empty"]
    return []


def _check_entry(tree: _Tree, rel, what: str) -> dict[str, int] | None:
    """A zip or folder entry: must exist, be readable and hold at least one non-empty file.

    None (nothing to check) for a dataset key: Codabench's unpacker takes a UUID that
    is not a file of the bundle as the key of a dataset already uploaded to the server
    (the way to reference data too large for the bundle).
    """
    if not isinstance(rel, str) or not rel:
        return None
    if tree.kind(rel) is None and _is_uuid(rel):
        return None
    members = tree.members(rel)
    if members is None:
        raise _Problem(f"{what}: '{rel}' is missing from the bundle or is not a readable zip")
    if not any(size > 0 for size in members.values()):
        raise _Problem(f"{what}: '{rel}' is empty")
    return members


class _Problem(Exception):
    pass


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
        return True
    except ValueError:
        return False


def _check_tasks(tree: _Tree, tasks, problems: list[str]) -> set:
    indexes: set = set()
    if not isinstance(tasks, list) or not tasks:
        problems.append("tasks: at least one task is needed")
        return indexes
    for i, task in enumerate(tasks):
        if not isinstance(task, dict):
            problems.append(f"tasks[{i}]: must be a mapping")
            continue
        where = f"task {task.get('index', i)}"
        if "index" not in task:
            problems.append(f"tasks[{i}]: no index")
        elif task["index"] in indexes:
            problems.append(f"tasks[{i}]: duplicate index {task['index']}")
        else:
            indexes.add(task["index"])
        if "key" in task:  # an existing task on the server: nothing to check here
            continue
        if not task.get("name"):
            problems.append(f"{where}: no name")
        if not task.get("scoring_program"):
            problems.append(f"{where}: no scoring_program")
        for field in ("ingestion_program", "scoring_program"):
            if task.get(field):
                try:
                    members = _check_entry(tree, task[field], f"{where} {field}")
                    if members is not None:
                        problems += _program_problems(tree, task[field], members,
                                                      f"{where} {field}")
                except _Problem as exc:
                    problems.append(str(exc))
        for field, needed in (("input_data", _input_files), ("reference_data", _reference_files)):
            if not task.get(field):
                problems.append(f"{where}: no {field}")
                continue
            try:
                members = _check_entry(tree, task[field], f"{where} {field}")
            except _Problem as exc:
                problems.append(str(exc))
                continue
            if members is None:  # a dataset key on the server
                continue
            missing = [f for f in needed() if not members.get(f)]
            if missing:
                problems.append(f"{where} {field} '{task[field]}': missing or empty "
                                f"{', '.join(missing)} (files must be at the zip root)")
    return indexes


def _input_files() -> list[str]:
    return [f"{s}/metadata.parquet" for s in SET_NAMES]


def _reference_files() -> list[str]:
    return [f"{s}.parquet" for s in SET_NAMES] + ["scoring.yaml"]


def _program_problems(tree: _Tree, rel: str, members: dict[str, int], what: str) -> list[str]:
    if "metadata.yaml" not in members:
        if "metadata" in members:
            return []  # the legacy name Codabench also reads
        top = sorted({m.split("/")[0] for m in members})[:5]
        return [f"{what} '{rel}': no metadata.yaml at its root (found {top})"]
    try:
        meta = yaml.safe_load(tree.read(rel, "metadata.yaml"))
    except yaml.YAMLError as exc:
        return [f"{what} '{rel}': metadata.yaml is not valid YAML ({exc})"]
    command = meta.get("command") if isinstance(meta, dict) else None
    if not isinstance(command, str) or not command.strip():
        return [f"{what} '{rel}': metadata.yaml has no command"]
    out = []
    for script in re.findall(r"/app/program/(\S+)", command):
        if not members.get(script):
            out.append(f"{what} '{rel}': its command runs /app/program/{script}, "
                       "which the program does not contain")
    if not members.get("vendor/challenge_welding/cli.py"):
        out.append(f"{what} '{rel}': vendor/challenge_welding/ is missing (the package is "
                   "vendored so that the program runs on an image holding only the dependencies)")
    return out


def _check_solutions(tree: _Tree, solutions, task_indexes: set, problems: list[str]) -> None:
    for i, sol in enumerate(solutions or []):
        if not isinstance(sol, dict):
            problems.append(f"solutions[{i}]: must be a mapping")
            continue
        if "index" not in sol:
            problems.append(f"solutions[{i}]: no index")
        unknown = [t for t in sol.get("tasks") or [] if t not in task_indexes]
        if not sol.get("tasks") or unknown:
            problems.append(f"solutions[{i}]: tasks {sol.get('tasks')} must list existing task "
                            f"indexes {sorted(task_indexes)}")
        if "key" not in sol:
            try:
                _check_entry(tree, sol.get("path"), f"solutions[{i}]")
                if not sol.get("path"):
                    problems.append(f"solutions[{i}]: no path")
            except _Problem as exc:
                problems.append(str(exc))


def _as_datetime(value) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.strip()).replace(tzinfo=None)
        except ValueError:
            return None
    return None


def _check_phases(tree: _Tree, phases, task_indexes: set, problems: list[str]) -> None:
    if not isinstance(phases, list) or not phases:
        problems.append("phases: at least one phase is needed")
        return
    ordered = sorted((p for p in phases if isinstance(p, dict)), key=lambda p: p.get("index", 0))
    if len(ordered) != len(phases):
        problems.append("phases: every phase must be a mapping")
    previous = None
    for i, phase in enumerate(ordered):
        name = phase.get("name") or f"phases[{i}]"
        if not phase.get("name"):
            problems.append(f"phases[{i}]: no name")
        start = _as_datetime(phase.get("start"))
        end = _as_datetime(phase.get("end")) if phase.get("end") is not None else None
        if start is None:
            problems.append(f"phase '{name}': start {phase.get('start')!r} is missing or not a "
                            "date (YYYY-MM-DD HH:MM:SS)")
        if phase.get("end") is not None and end is None:
            problems.append(f"phase '{name}': end {phase.get('end')!r} is not a date")
        if start and end and end <= start:
            problems.append(f"phase '{name}': ends ({end}) before it starts ({start})")
        tasks = phase.get("tasks")
        if not tasks or any(t not in task_indexes for t in tasks):
            problems.append(f"phase '{name}': tasks {tasks} must list existing task indexes "
                            f"{sorted(task_indexes)}")
        limit = phase.get("execution_time_limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                                  or limit <= 0):
            problems.append(f"phase '{name}': execution_time_limit must be a positive number of "
                            f"seconds (found {limit!r})")
        for field in ("starting_kit", "public_data"):
            if phase.get(field):
                try:
                    _check_entry(tree, phase[field], f"phase '{name}' {field}")
                except _Problem as exc:
                    problems.append(str(exc))
        if previous is not None:
            prev_name, prev_end = previous
            if prev_end is None:
                problems.append(f"phase '{prev_name}': needs an end, phase '{name}' follows it")
            elif start is not None and start <= prev_end:
                problems.append(f"phase '{name}': starts ({start}) before phase '{prev_name}' has "
                                f"ended ({prev_end}); phases must be sequential")
        previous = (name, end)


def _check_leaderboards(boards, problems: list[str]) -> None:
    if not isinstance(boards, list) or not boards:
        problems.append("leaderboards: at least one leaderboard is needed (the first one is "
                        "attached to every phase)")
        return
    for b, board in enumerate(boards):
        if not isinstance(board, dict):
            problems.append(f"leaderboards[{b}]: must be a mapping")
            continue
        where = f"leaderboard '{board.get('key', b)}'"
        title, key = str(board.get("title") or ""), str(board.get("key") or "")
        if not title or not key:
            problems.append(f"{where}: needs a title and a key")
        if len(title) > MAX_LEADERBOARD_TITLE:
            problems.append(f"{where}: title longer than {MAX_LEADERBOARD_TITLE} characters")
        if len(key) > MAX_LEADERBOARD_KEY:
            problems.append(f"{where}: key longer than {MAX_LEADERBOARD_KEY} characters")
        columns = board.get("columns")
        if not isinstance(columns, list) or not columns:
            problems.append(f"{where}: needs at least one column")
            continue
        indexes, keys = [], []
        for c, col in enumerate(columns):
            if not isinstance(col, dict):
                problems.append(f"{where} columns[{c}]: must be a mapping")
                continue
            ckey, ctitle = str(col.get("key") or ""), str(col.get("title") or "")
            cwhere = f"{where} column '{ckey or c}'"
            if not ckey or not ctitle or "index" not in col:
                problems.append(f"{cwhere}: needs a key, a title and an index")
            if len(ckey) > MAX_COLUMN_KEY:
                problems.append(f"{cwhere}: key is {len(ckey)} characters, at most "
                                f"{MAX_COLUMN_KEY}")
            if len(ctitle) > MAX_COLUMN_TITLE:
                problems.append(f"{cwhere}: title '{ctitle}' is {len(ctitle)} characters, at most "
                                f"{MAX_COLUMN_TITLE}")
            if col.get("sorting", "desc") not in ("asc", "desc"):
                problems.append(f"{cwhere}: sorting must be asc or desc")
            if col.get("computation"):
                problems.append(f"{cwhere}: computed columns are not filled by scores.json; "
                                "this bundle expects none")
            indexes.append(col.get("index"))
            keys.append(ckey)
        if len(set(indexes)) != len(indexes):
            problems.append(f"{where}: column indexes are not unique")
        if len(set(keys)) != len(keys):
            problems.append(f"{where}: column keys are not unique")
        primary = board.get("primary_index", 0)
        if primary not in indexes:
            problems.append(f"{where}: primary_index {primary} is not a column index")
        if b == 0:
            by_index = [k for _, k in sorted(zip(indexes, keys),
                                             key=lambda t: t[0] if isinstance(t[0], int) else 1e9)]
            missing = [k for k in SCORE_KEYS if k not in keys]
            extra = [k for k in keys if k not in SCORE_KEYS]
            if missing or extra:
                problems.append(f"{where}: column keys must be exactly the keys of scores.json; "
                                f"missing {missing}, unknown {extra}")
            elif by_index != list(SCORE_KEYS):
                problems.append(f"{where}: columns are not in the order of scores.json "
                                f"({list(SCORE_KEYS)})")
            if keys and primary in indexes and keys[indexes.index(primary)] != "score":
                problems.append(f"{where}: the primary column must be 'score'")


def read_competition(bundle_zip: str | Path) -> dict:
    """competition.yaml of a bundle zip, parsed (for tests and tools)."""
    with zipfile.ZipFile(bundle_zip) as zf:
        return yaml.safe_load(io.BytesIO(zf.read("competition.yaml")))
