"""Our check of a Codabench (v2) competition bundle, before it is uploaded.

Codabench reports a broken bundle only after the upload, one problem at a time,
and some problems (a leaderboard column that no score fills, a scoring program
that cannot start) only when the first submission runs. This module lists every
problem at once:

- everything Codabench's unpacker and serializers refuse (codabench_rules.py names
  the sources; each such problem ends with Codabench's own message): the zip with
  competition.yaml at its root and ``version: 2``; pages, terms and the logo present,
  pages and terms not empty, the logo a JPEG/PNG/GIF/WebP; tasks with unique indexes
  and a scoring program (unless given by ``key``); solutions with an index, tasks that
  exist and a path or key; every phase with tasks, parsable dates, each but the last
  with an end and the next starting strictly after it; every file present (or the
  UUID of a dataset already uploaded); leaderboard title <= 64 and key <= 36, a valid
  ``submission_rule``; at least one column, unique column indexes and keys, valid
  ``computation`` references, column title and key <= 36, sorting asc/desc; title <=
  256, docker_image <= 128, a valid contact_email; no auto-migration to the first
  phase nor in a single-phase competition; names <= 256, page titles <= 255; the
  15 GB upload quota of an account;
- what Codabench accepts but would silently go wrong: a second leaderboard (only
  ``leaderboards[0]`` is attached to the phases), a phase that ends before it starts,
  an empty phase task list;
- our own contracts: leaderboard keys == contract.names.SCORE_KEYS in order, primary
  column ``score``, no computed column, the six sets present, each program's
  metadata.yaml with a command whose script exists, the vendored package,
  ``docker_image`` set and ``enable_detailed_results`` on.

``validate_bundle(path)`` accepts the bundle zip or an unpacked folder and
returns a list of problems (empty: the bundle is fine).
"""

from __future__ import annotations

import io
import re
import tempfile
import uuid
import zipfile
from pathlib import Path, PurePosixPath

import yaml

from challenge_welding.bundle import codabench_rules as cbr
from challenge_welding.bundle.codabench_rules import cb
from challenge_welding.contract.names import SCORE_KEYS, SET_NAMES


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


def validate_bundle(path: str | Path, *,
                    quota_bytes: int = cbr.DEFAULT_QUOTA_BYTES) -> list[str]:
    """Every problem of the bundle at ``path`` (zip or folder), one line each.

    ``quota_bytes``: a Codabench account's storage quota (15 GB by default); a
    folder is counted as the sum of its files (the inner zips dominate a bundle).
    """
    path = Path(path)
    if path.is_dir():
        upload = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        return _validate_tree(_Tree(path), upload, quota_bytes)
    if not path.is_file():
        return [f"{path}: no such file or folder"]
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        return [cb(f"{path}: not a zip file", "Bad zip file uploaded.")]
    with zf, tempfile.TemporaryDirectory(prefix="bundle-check-") as tmp:
        names = zf.namelist()
        bad = [n for n in names if n.startswith("/") or ".." in PurePosixPath(n).parts]
        if bad:
            return [f"{path}: unsafe member paths {bad[:3]}"]
        if "competition.yaml" not in names:
            nested = [n for n in names if n.endswith("/competition.yaml")]
            hint = (f" (found {nested[0]}: zip the folder's contents, not the folder)"
                    if nested else "")
            return [cb(f"{path}: competition.yaml is not at the zip root{hint}",
                       "competition.yaml is missing from zip, check your folder structure to "
                       "make sure it is in the root directory.")]
        zf.extractall(tmp)
        return _validate_tree(_Tree(Path(tmp)), path.stat().st_size, quota_bytes)


def _validate_tree(tree: _Tree, upload_bytes: int = 0,
                   quota_bytes: int = cbr.DEFAULT_QUOTA_BYTES) -> list[str]:
    problems: list[str] = []
    if tree.kind("competition.yaml") != "file":
        return [cb("competition.yaml is missing at the bundle root",
                   "competition.yaml is missing from zip, check your folder structure to make "
                   "sure it is in the root directory.")]
    try:
        comp = yaml.safe_load((tree.root / "competition.yaml").read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return [f"competition.yaml: not valid YAML ({exc})"]
    if not isinstance(comp, dict):
        return ["competition.yaml: the top level must be a mapping"]

    # tasks.py unpack_competition: str(version) picks the unpacker; 1/1.5 is another format.
    version = str(comp.get("version", "1"))
    if version in ("1", "1.5"):
        problems.append(f"competition.yaml: version must be 2 (found {comp.get('version')!r}; "
                        "Codabench would read it as a v1.5 bundle, a different layout)")
    elif version != "2":
        problems.append(cb(f"competition.yaml: version must be 2 (found {comp.get('version')!r})",
                           "A suitable version could not be found for this competition. Make "
                           "sure one is supplied in the yaml."))
    cbr.check_competition(comp, problems)
    if not comp.get("docker_image"):
        problems.append("competition.yaml: docker_image is not set (Codabench would use its "
                        "default image, which lacks our dependencies)")
    if comp.get("enable_detailed_results") is not True:
        problems.append("competition.yaml: enable_detailed_results must be true "
                        "(the scoring program writes detailed_results.html)")

    _check_image(tree, comp, problems)
    _check_terms(tree, comp, problems)
    _check_pages(tree, comp, problems)
    task_indexes = _check_tasks(tree, comp.get("tasks"), problems)
    _check_solutions(tree, comp.get("solutions"), task_indexes, problems)
    _check_phases(tree, comp.get("phases"), task_indexes, problems)
    _check_leaderboards(comp.get("leaderboards"), problems)
    problems += cbr.quota_problems(upload_bytes, _stored_bytes(tree, comp), quota_bytes)
    return problems


def _stored_bytes(tree: _Tree, comp: dict) -> int:
    """Bytes the unpacker stores as datasets: every task file, solution, kit, public data."""
    names = []
    for task in comp.get("tasks") or []:
        if isinstance(task, dict) and "key" not in task:
            names += [task.get(f) for f in ("ingestion_program", "input_data",
                                            "scoring_program", "reference_data")]
    names += [s.get("path") for s in comp.get("solutions") or [] if isinstance(s, dict)]
    for phase in comp.get("phases") or []:
        if isinstance(phase, dict):
            names += [phase.get("public_data"), phase.get("starting_kit")]
    total = 0
    for rel in names:
        if isinstance(rel, str) and tree.kind(rel) == "file":
            total += (tree.root / rel).stat().st_size
        elif isinstance(rel, str) and tree.kind(rel) == "dir":
            total += sum(f.stat().st_size for f in (tree.root / rel).rglob("*") if f.is_file())
    return total


def _check_image(tree: _Tree, comp: dict, problems: list[str]) -> None:
    image = comp.get("image")
    if not image:
        problems.append(cb("competition.yaml: required key 'image' is missing",
                           "An image for this competition could not be found in the yaml"))
        return
    if tree.kind(str(image)) != "file":
        problems.append(cb(f"image: file '{image}' is missing from the bundle",
                           f"Unable to find image: {image}"))
        return
    problem = cbr.logo_problem(str(image), (tree.root / image).read_bytes())
    if problem:
        problems.append(problem)


def _check_terms(tree: _Tree, comp: dict, problems: list[str]) -> None:
    terms = comp.get("terms")
    if not terms:
        problems.append(cb("competition.yaml: required key 'terms' is missing",
                           "A file containing the terms of this competition has not been "
                           "supplied in the required location"))
        return
    kind = tree.kind(str(terms))
    if kind != "file":
        problems.append(cb(f"terms: file '{terms}' is missing from the bundle",
                           f"Unable to find page: {terms}"))
    elif (tree.root / terms).stat().st_size == 0:
        problems.append(cb(f"terms: file '{terms}' is empty",
                           f"{terms} is empty, it must contain content."))


def _check_pages(tree: _Tree, comp: dict, problems: list[str]) -> None:
    pages = comp.get("pages")
    if not isinstance(pages, list):
        problems.append(cb("competition.yaml: required key 'pages' is missing or not a list",
                           "Unpacking the bundle failed. Here is the error log: 'NoneType' "
                           "object is not iterable"))
        return
    for i, page in enumerate(pages):
        if not isinstance(page, dict) or not page.get("file"):
            problems.append(f"pages[{i}]: needs a title and a file")
            continue
        name = page["file"]
        if not page.get("title"):
            problems.append(f"pages[{i}]: needs a title and a file")
        cbr.check_length(f"page '{name}'", "title", page.get("title"), cbr.MAX_PAGE_TITLE,
                         problems, nested_in="pages")
        kind = tree.kind(str(name))
        if kind != "file":
            problems.append(cb(f"page '{page.get('title')}': file '{name}' is missing from the "
                               "bundle", f"Unable to find page: {name}"))
        elif (tree.root / name).stat().st_size == 0:
            problems.append(cb(f"page '{page.get('title')}': file '{name}' is empty",
                               f"Page '{name}' is empty, it must contain content."))


def _check_entry(tree: _Tree, rel, what: str) -> dict[str, int] | None:
    """A zip or folder entry: must exist, be readable and hold at least one non-empty file.

    None (nothing to check) for a dataset key: Codabench's unpacker takes a UUID that
    is not a file of the bundle as the key of a dataset already uploaded to the server
    (the way to reference data too large for the bundle). Its existence on the server
    cannot be checked here ("Cannot find <type> with key" at upload otherwise).
    """
    if not isinstance(rel, str) or not rel:
        return None
    if tree.kind(rel) is None and _is_uuid(rel):
        return None
    if tree.kind(rel) is None:
        raise _Problem(cb(f"{what}: '{rel}' is missing from the bundle or is not a readable zip",
                          f'Cannot find dataset: "{rel}"'))
    members = tree.members(rel)
    if members is None:
        raise _Problem(f"{what}: '{rel}' is missing from the bundle or is not a readable zip "
                       "(Codabench stores it, the worker fails on it: \"Bad or empty zip file\")")
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
        problems.append(cb("tasks: at least one task is needed",
                           "No tasks listed in this competition"))
        return indexes
    for i, task in enumerate(tasks):
        if not isinstance(task, dict):
            problems.append(f"tasks[{i}]: must be a mapping")
            continue
        label = task.get("name") or task.get("key")
        where = f"task {task.get('index', i)}"
        if "index" not in task:
            problems.append(cb(f"tasks[{i}]: no index", f"ERROR: No index for task: {label}"))
        elif task["index"] in indexes:
            problems.append(cb(f"tasks[{i}]: duplicate index {task['index']}",
                               f"ERROR: Duplicate task indexes. Index: {task['index']}"))
        else:
            indexes.add(task["index"])
        if "key" in task:  # an existing task on the server: nothing to check here
            continue
        if not task.get("name"):
            problems.append(cb(f"{where}: no name", "name: This field may not be null."))
        cbr.check_length(where, "name", task.get("name"), cbr.MAX_TASK_NAME, problems)
        if not task.get("scoring_program"):
            problems.append(cb(f"{where}: no scoring_program",
                               f'ERROR: Task "{task.get("name") or task.get("index")}" does not '
                               "have a scoring program"))
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
    if not members.get("vendor/challenge_welding/commands/cli.py"):
        out.append(f"{what} '{rel}': vendor/challenge_welding/ is missing (the package is "
                   "vendored so that the program runs on an image holding only the dependencies)")
    return out


def _check_solutions(tree: _Tree, solutions, task_indexes: set, problems: list[str]) -> None:
    seen: set = set()
    for i, sol in enumerate(solutions or []):
        if not isinstance(sol, dict):
            problems.append(f"solutions[{i}]: must be a mapping")
            continue
        label = sol.get("name") or sol.get("key")
        if "index" not in sol:
            problems.append(cb(f"solutions[{i}]: no index",
                               f"ERROR: No index for solution: {label}"))
        elif sol["index"] in seen:
            problems.append(f"solutions[{i}]: duplicate index {sol['index']}")
        else:
            seen.add(sol["index"])
        tasks = sol.get("tasks")
        if "tasks" not in sol:
            problems.append(cb(f"solutions[{i}]: no tasks",
                               f"Could not find tasks for solution: {label}"))
        elif not tasks or not isinstance(tasks, list) or any(t not in task_indexes
                                                             for t in tasks):
            problems.append(cb(f"solutions[{i}]: tasks {tasks} must list existing task "
                               f"indexes {sorted(task_indexes)}",
                               f"ERROR: Solution: {sol.get('key')} missing task index pointers"))
        cbr.check_length(f"solutions[{i}]", "name", sol.get("name"), cbr.MAX_SOLUTION_NAME,
                         problems)
        if "key" in sol:
            continue
        if not sol.get("path"):
            problems.append(cb(f"solutions[{i}]: no path (nor key)",
                               f'Solution {sol.get("name")} missing "path"'))
            continue
        try:
            _check_entry(tree, sol["path"], f"solutions[{i}]")
        except _Problem as exc:
            problems.append(str(exc))


def _check_phases(tree: _Tree, phases, task_indexes: set, problems: list[str]) -> None:
    if not isinstance(phases, list) or not phases:
        problems.append(cb("phases: at least one phase is needed",
                           "Unable to find any phases for this competition"))
        return
    if any(not isinstance(p, dict) for p in phases):
        problems.append("phases: every phase must be a mapping")
    # The unpacker sorts by index, then renumbers 0..n-1.
    ordered = sorted((p for p in phases if isinstance(p, dict)), key=lambda p: p.get("index", 0))
    dates = []
    for i, phase in enumerate(ordered):
        name = cbr.phase_name(phase) if phase.get("name") else f"phases[{i}]"
        if not phase.get("name"):
            problems.append(cb(f"phases[{i}]: no name", "phases: name: This field may not be "
                                                        "null."))
        cbr.check_length(f"phase '{name}'", "name", phase.get("name"), cbr.MAX_PHASE_NAME,
                         problems, nested_in="phases")
        start = end = None
        for field in ("start", "end"):
            try:
                value = cbr.parse_date(phase.get(field))
            except ValueError as exc:
                problems.append(cb(f"phase '{name}': {field} {phase.get(field)!r} is not a date "
                                   "(YYYY-MM-DD HH:MM:SS)",
                                   f"Unpacking the bundle failed. Here is the error log: {exc}"))
                continue
            if field == "start":
                start = value
                if value is None:
                    problems.append(cb(f"phase '{name}': start is missing (YYYY-MM-DD HH:MM:SS)",
                                       "phases: start: This field may not be null."))
            else:
                end = value
        dates.append((start, end))
        if start and end and end <= start:
            problems.append(f"phase '{name}': ends ({end}) before it starts ({start})")
        _check_phase_tasks(name, phase, task_indexes, problems)
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
    cbr.check_phase_order(ordered, dates, problems)
    cbr.check_auto_migration(ordered, problems)


def _check_phase_tasks(name: str, phase: dict, task_indexes: set, problems: list[str]) -> None:
    if "tasks" not in phase:
        problems.append(cb(f"phase '{name}': no tasks",
                           "Phases must contain at least one task to be valid"))
        return
    tasks = phase["tasks"]
    if not isinstance(tasks, list) or not tasks:
        problems.append(f"phase '{name}': tasks {tasks!r} is empty (Codabench accepts it, "
                        "but no submission can run)")
        return
    unknown = [t for t in tasks if t not in task_indexes]
    if unknown:
        problems.append(cb(f"phase '{name}': tasks {tasks} must list existing task "
                           f"indexes {sorted(task_indexes)}",
                           f"Unpacking the bundle failed. Here is the error log: "
                           f"{unknown[0]}"))


def _check_leaderboards(boards, problems: list[str]) -> None:
    if not isinstance(boards, list) or not boards:
        problems.append(cb("leaderboards: at least one leaderboard is needed (the first one is "
                           "attached to every phase)",
                           "Could not find leaderboards in the competition yaml"))
        return
    if len(boards) > 1:
        problems.append(f"leaderboards: {len(boards)} leaderboards, but Codabench attaches only "
                        "leaderboards[0] to the phases (the others would be created and never "
                        "shown)")
    board = boards[0]
    if not isinstance(board, dict):
        problems.append("leaderboards[0]: must be a mapping")
        return
    where = f"leaderboard '{board.get('key', 0)}'"
    indexes = cbr.check_leaderboard(board, where, problems)
    columns = [c for c in board.get("columns") or [] if isinstance(c, dict)]
    if not columns:
        return
    keys = [str(c.get("key") or "") for c in columns]
    for c, col in enumerate(columns):
        if col.get("computation") or col.get("computation_indexes"):
            problems.append(f"{where} column '{col.get('key') or c}': computed columns are not "
                            "filled by scores.json; this bundle expects none")
    primary = board.get("primary_index", 0)
    if primary not in indexes:
        problems.append(f"{where}: primary_index {primary} is not a column index")
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
    if primary in indexes and keys[indexes.index(primary)] != "score":
        problems.append(f"{where}: the primary column must be 'score'")


def read_competition(bundle_zip: str | Path) -> dict:
    """competition.yaml of a bundle zip, parsed (for tests and tools)."""
    with zipfile.ZipFile(bundle_zip) as zf:
        return yaml.safe_load(io.BytesIO(zf.read("competition.yaml")))
