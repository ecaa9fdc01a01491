"""Make the Codabench competition bundle zip from the repository and a DATA folder.

Layout of the zip (every entry that competition.yaml names is a zip with its
contents at the root, which is what the compute worker unpacks into /app/...):

    competition.yaml            the repository's template, with per-phase time limits filled in
    logo.png, pages/*.md
    ingestion_program.zip       metadata.yaml + ingestion.py + vendor/challenge_welding/
    scoring_program.zip         metadata.yaml + score.py + vendor/challenge_welding/
    input_data.zip              DATA/input_data (the six sets, no labels)
    reference_data.zip          DATA/reference_data (labels + the calibrated scoring.yaml)
    public_data.zip             DATA/training_data (the public training split)
    starting_kit.zip            interface, Solution-1, the package, Dockerfile, dry run, README
    solutions/solution-1.zip    Solution-1, ready to submit

The package is vendored into each program, so the programs run the bundle's own
code on any image that holds the dependencies (our Dockerfile's image does).
Inner zips are written with a fixed timestamp and sorted names, so the same
inputs give the same bytes.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import tempfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import yaml

import challenge_welding
from challenge_welding.bundle.codabench_rules import DEFAULT_QUEUE_LIMIT_S, valid_email
from challenge_welding.bundle.logo import make_logo
from challenge_welding.bundle.validate import validate_bundle
from challenge_welding.contract.names import BUDGET_S_PER_IMAGE, SET_NAMES
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import atomic_path

# Files already compressed: stored as they are (deflating them again costs time, gains nothing).
_STORED = {".jpeg", ".jpg", ".png", ".parquet", ".zip", ".whl", ".gz", ".npz", ".joblib"}
_SKIP_DIRS = {"__pycache__", ".pytest_cache", "build", "dist", ".git", ".venv"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info")
_SKIP_NAMES = {".evaluator-requirements.txt", ".DS_Store"}
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)

# Time-limit model (see README "Scaling"): the challenge's budget of 1/12 s per image,
# times a safety factor for slower workers, decoding and I/O, plus a fixed allowance
# for installing the submission's environment (large wheels such as torch) and loading
# its model. Scoring runs under the same limit and takes seconds. The budget is the
# contract's (contract.names.BUDGET_S_PER_IMAGE).
SAFETY_FACTOR = 3.0
SETUP_ALLOWANCE_S = 1200
MINIMUM_LIMIT_S = 1800


def execution_time_limit(n_images: int, *, budget_s: float = BUDGET_S_PER_IMAGE,
                         safety: float = SAFETY_FACTOR, setup_s: float = SETUP_ALLOWANCE_S,
                         minimum_s: int = MINIMUM_LIMIT_S) -> int:
    """Seconds for one submission: ``setup_s + safety * n_images * budget_s``.

    Rounded up to whole 5 minutes and at least ``minimum_s``. Example: 20,000
    images -> 1200 + 3 * 20000 / 12 = 6200 s -> 6300 s (1 h 45).
    """
    if n_images < 0:
        raise ValueError("n_images must be >= 0")
    seconds = setup_s + safety * n_images * budget_s
    return int(max(minimum_s, math.ceil(seconds / 300) * 300))


def needed_time(n_images: int, *, budget_s: float = BUDGET_S_PER_IMAGE,
                safety: float = SAFETY_FACTOR, setup_s: float = SETUP_ALLOWANCE_S) -> dict:
    """A phase's needed time, in its parts: install allowance, images at the budget, margin.

    ``total = setup_s + n * budget_s * safety`` (the margin is the safety factor's share:
    slower workers, decoding, I/O). 1,200 images: 1200 + 100 + 200 = 1500 s.
    """
    images = n_images * budget_s
    margin = images * (safety - 1)
    return {"install": setup_s, "images": images, "margin": margin,
            "total": setup_s + images + margin}


def queue_warning(needs: dict[str, dict], queue: str | None,
                  default_limit: int = DEFAULT_QUEUE_LIMIT_S) -> str | None:
    """One line when a phase needs more than the default queue gives and no queue is set.

    On Codabench's default queue the worker stops every run at min(MAX_EXECUTION_TIME_LIMIT
    (600 s on a default install), the phase's limit) (competitions/tasks.py).
    """
    over = {name: need["total"] for name, need in needs.items() if need["total"] > default_limit}
    if queue or not over:
        return None
    listed = ", ".join(f"{name} {total:.0f} s" for name, total in over.items())
    return (f"warning: no queue set: on Codabench's default queue every step is stopped at "
            f"min({default_limit} s, the phase's limit) = {default_limit} s, but the phases "
            f"need {listed}: such submissions fail with \"Execution Time Limit exceeded\" "
            "(give --queue VHOST of a private queue, whose workers apply the phase's limit)")


# Domains reserved for examples (RFC 2606, RFC 6761): an address there reaches no one, so it
# is a placeholder left in competition.yaml, not the organisers' address.
_EXAMPLE_DOMAINS = ("example.org", "example.com", "example.net")
_EXAMPLE_TLDS = ("example", "test", "invalid", "localhost")


def placeholder_email(address: str | None) -> bool:
    """True when ``address`` is missing or its domain is reserved for examples.

    ``organisers@example.org`` and ``a@mail.example.com`` are placeholders; ``a@example.fr``
    is not (a real domain); an empty or missing address is one too (no one to write to).
    """
    if not address:
        return True
    domain = str(address).rpartition("@")[2].strip().lower().rstrip(".")
    return (any(domain == d or domain.endswith("." + d) for d in _EXAMPLE_DOMAINS)
            or domain.rpartition(".")[2] in _EXAMPLE_TLDS)


def organiser_decisions(template: dict, *, docker_image: str | None = None,
                        contact_email: str | None = None, final_data: bool = False) -> list[str]:
    """One ``warning:`` line per choice the bundle would still make in the organiser's place.

    ``template``: the repository's competition.yaml (parsed); the options are the bundle's.
    The lines, in this order, each naming the option that settles it:
    - no ``docker_image`` given: the template's image is named (an image someone else may
      never have pushed, or one that is not built from this repository's Dockerfile);
    - the contact e-mail (given, else the template's) is a placeholder (placeholder_email);
    - two phases or more and no ``final_data``: the last phase scores the development sets
      again, whatever its description says.
    ``bundle --strict`` refuses a bundle for which this list is not empty.
    """
    lines = []
    if not docker_image:
        lines.append(f"warning: docker_image: no --docker-image given, so the worker runs "
                     f"competition.yaml's {template.get('docker_image')!r}: build and push the "
                     "image of the Dockerfile, then give --docker-image NAME (docs/codabench.md)")
    email = contact_email or template.get("contact_email")
    if placeholder_email(email):
        lines.append(f"warning: contact_email: {email!r} is a placeholder (a domain reserved for "
                     "examples) and participants would write to no one: give --contact-email ADDRESS")
    phases = sorted(template.get("phases") or [], key=lambda p: p.get("index", 0))
    if len(phases) >= 2 and not final_data:
        last = phases[-1]
        said = " ".join(str(last.get("description", "")).split()).split(". ")[0]
        lines.append(f"warning: phase {last.get('name')!r}: no --final-data, so it scores the "
                     f"development sets again while its description says \"{said}\": give "
                     "--final-data DATA2 (a second build-sets output from photos kept out of DATA)")
    return lines


# What marks the repository for the bundle: competition.yaml and the program folders
REPO_MARKS = ("competition.yaml", "scoring_program/metadata.yaml")


def find_repo_root(start: str | Path | None = None, needs=REPO_MARKS,
                   fix: str = "the bundle needs competition.yaml, pages/, ingestion_program/ and "
                              "scoring_program/ (pass --repo)") -> Path:
    """The one finder of the repository (or an unpacked starting kit): the nearest folder holding
    every path of ``needs``, at ``start`` or above it; without ``start``, at the current folder or
    above, then above this package.

    The current folder comes first so that an installed package (site-packages, no checkout
    above it) works when run from inside a clone or a kit; a checkout installed in editable
    mode is found from anywhere. ChallengeError naming where it looked and ``fix`` otherwise.
    """
    candidates = [Path(start)] if start else [Path.cwd(), Path(challenge_welding.__file__).parent]
    for cand in candidates:
        for p in [cand.resolve(), *cand.resolve().parents]:
            if all((p / need).exists() for need in needs):
                return p
    where = start or f"{Path.cwd()} or above (nor above the package)"
    raise ChallengeError(f"no {', '.join(needs)} found at {where}: {fix}")


def check_data(data_dir: Path) -> None:
    """The DATA layout of docs/contracts.md; one error listing every missing file."""
    if not data_dir.is_dir():
        raise ChallengeError(f"{data_dir}: no such folder (run `challenge-welding build-sets`)")
    needed = [data_dir / "input_data" / s / "metadata.parquet" for s in SET_NAMES]
    needed += [data_dir / "reference_data" / f"{s}.parquet" for s in SET_NAMES]
    needed.append(data_dir / "reference_data" / "scoring.yaml")
    missing = [str(p.relative_to(data_dir)) for p in needed if not p.is_file()]
    if missing:
        raise ChallengeError(f"{data_dir}: not an evaluation-data folder (build-sets output); "
                             f"missing {', '.join(missing)}")


def count_images(data_dir: Path) -> int:
    """Rows of every input_data/<set>/metadata.parquet (read from the parquet footers)."""
    return sum(pq.ParquetFile(data_dir / "input_data" / s / "metadata.parquet").metadata.num_rows
               for s in SET_NAMES)


def _keep(path: Path) -> bool:
    return (path.name not in _SKIP_NAMES and not path.name.endswith(_SKIP_SUFFIXES)
            and not any(part in _SKIP_DIRS or part.endswith(".egg-info") for part in path.parts))


def _add_file(zf: zipfile.ZipFile, src: Path, arcname: str) -> None:
    info = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
    info.external_attr = (0o755 if os.access(src, os.X_OK) else 0o644) << 16
    info.compress_type = (zipfile.ZIP_STORED if src.suffix.lower() in _STORED
                          else zipfile.ZIP_DEFLATED)
    with open(src, "rb") as fh, zf.open(info, "w", force_zip64=True) as out:
        shutil.copyfileobj(fh, out, 1 << 20)


def _add_tree(zf: zipfile.ZipFile, src: Path, prefix: str = "") -> int:
    """Add the files under ``src`` (sorted, junk skipped) at ``prefix``; return their count."""
    files = sorted(p for p in src.rglob("*") if p.is_file() and _keep(p.relative_to(src)))
    for p in files:
        _add_file(zf, p, prefix + p.relative_to(src).as_posix())
    return len(files)


def zip_tree(src: Path, out: Path, extra: dict[str, Path] | None = None) -> Path:
    """Zip the contents of ``src`` (at the zip root) plus ``extra`` {prefix: folder}."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        n = _add_tree(zf, src) if src is not None else 0
        for prefix, folder in (extra or {}).items():
            n += _add_tree(zf, folder, prefix)
    if n == 0:
        raise ChallengeError(f"{src}: nothing to zip (empty folder)")
    return out


def package_source() -> Path:
    return Path(challenge_welding.__file__).resolve().parent


def program_zip(program_dir: Path, out: Path, env: dict[str, str] | None = None) -> Path:
    """A program folder with the package vendored under vendor/challenge_welding/.

    ``env``: variables set for the program by its command (``env NAME=VALUE command``;
    the worker passes no variable of ours, and runs the command without a shell).
    """
    if not (program_dir / "metadata.yaml").is_file():
        raise ChallengeError(f"{program_dir}: no metadata.yaml")
    staging = Path(tempfile.mkdtemp(prefix="program-", dir=out.parent))
    try:
        for p in program_dir.iterdir():
            if p.name != "vendor" and _keep(Path(p.name)):
                (shutil.copytree if p.is_dir() else shutil.copy2)(p, staging / p.name)
        if env:
            meta = yaml.safe_load((staging / "metadata.yaml").read_text())
            pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            meta["command"] = f"env {pairs} {meta['command']}"
            (staging / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        return zip_tree(staging, out, {"vendor/challenge_welding/": package_source()})
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def check_solution(solution: Path) -> None:
    """A submission folder whose MANIFEST.in files exist (a trained model, not just code)."""
    missing = [n for n in ("setup.py", "requirements.txt") if not (solution / n).is_file()]
    if not (solution / "challenge_solution" / "AIComponent.py").is_file():
        missing.append("challenge_solution/AIComponent.py")
    if missing and not (solution / "pyproject.toml").is_file():
        raise ChallengeError(f"{solution}: not a submission folder; missing {', '.join(missing)}")
    manifest = solution / "MANIFEST.in"
    if manifest.is_file():
        for line in manifest.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "include":
                for pattern in words[1:]:
                    if not list(solution.glob(pattern)):
                        raise ChallengeError(
                            f"{solution}: MANIFEST.in includes '{pattern}', which does not exist "
                            "(train it first: `challenge-welding demo` trains one into "
                            "demo-work/solutions/Solution-1, then pass --solution with it; or --no-solution)")


def starting_kit(repo: Path, data_dir: Path, solution: Path | None, out: Path) -> Path:
    """The participants' kit: mirrors the repository layout so its commands work as they are."""
    kit = Path(tempfile.mkdtemp(prefix="kit-", dir=out.parent))
    try:
        shutil.copy2(Path(__file__).with_name("starting_kit_README.md"), kit / "README.md")
        src = package_source()
        iface = kit / "interface" / "challenge_welding"
        iface.mkdir(parents=True)
        for name in ("ai_component_interface.py", "AIComponent_interface.py"):
            shutil.copy2(src / name, iface / name)
        (iface / "__init__.py").write_text('"""The participant interface (numpy only)."""\n')
        pkg = kit / "challenge-welding"
        pkg.mkdir()
        for name in ("pyproject.toml", "README.md", "requirements.lock"):
            if (repo / "challenge-welding" / name).is_file():
                shutil.copy2(repo / "challenge-welding" / name, pkg / name)
        shutil.copytree(src, pkg / "challenge_welding", ignore=_ignore)
        for name in ("ingestion_program", "scoring_program"):
            shutil.copytree(repo / name, kit / name, ignore=_ignore_with_vendor)
        for name in ("Dockerfile", ".dockerignore"):
            if (repo / name).is_file():
                shutil.copy2(repo / name, kit / name)
        if (repo / "scripts" / "dry_run.sh").is_file():
            (kit / "scripts").mkdir()
            shutil.copy2(repo / "scripts" / "dry_run.sh", kit / "scripts" / "dry_run.sh")
        shutil.copy2(data_dir / "reference_data" / "scoring.yaml", kit / "scoring.yaml")
        if solution is not None:
            shutil.copytree(solution, kit / "Solution-1", ignore=_ignore)
            zip_tree(solution, kit / "Solution-1.zip")
        return zip_tree(kit, out)
    finally:
        shutil.rmtree(kit, ignore_errors=True)


def _ignore(directory, names):
    return [n for n in names if not _keep(Path(n))]


def _ignore_with_vendor(directory, names):
    return [n for n in names if n == "vendor" or not _keep(Path(n))]


def render_competition(template: Path, limits: dict[str, int], *, public_data: bool,
                       solution: bool, final_data: bool, docker_image: str | None = None,
                       queue: str | None = None, contact_email: str | None = None) -> dict:
    """The template's content with the bundle's choices applied."""
    comp = yaml.safe_load(template.read_text())
    if docker_image:
        comp["docker_image"] = docker_image
    if contact_email:
        comp["contact_email"] = contact_email
    if queue:
        comp["queue"] = queue
    phases = sorted(comp["phases"], key=lambda p: p.get("index", 0))
    if final_data:
        task = dict(comp["tasks"][0])
        task.update(index=1, name=f"{task['name']} - final sets",
                    input_data="input_data_final.zip", reference_data="reference_data_final.zip")
        comp["tasks"] = [comp["tasks"][0], task]
        phases[-1]["tasks"] = [1]
        if solution:
            comp["solutions"][0]["tasks"] = [0, 1]
    for phase in phases:
        final = final_data and phase is phases[-1]
        phase["execution_time_limit"] = limits["final" if final else "dev"]
        if not public_data:
            phase.pop("public_data", None)
    if not solution:
        comp.pop("solutions", None)
    return comp


def make_bundle(data_dir: str | Path, output_zip: str | Path, *,
                repo_root: str | Path | None = None,
                final_data: str | Path | None = None, solution: str | Path | None = "default",
                public_data: bool = True, docker_image: str | None = None,
                queue: str | None = None, wheelhouse_path: str | None = None,
                contact_email: str | None = None, strict: bool = False, log=print) -> Path:
    """Write the bundle zip and return its path; raise ChallengeError if the result is invalid.

    ``final_data``: a second DATA folder (e.g. a hidden build) for the final phase;
    without it both phases use ``data_dir``. ``solution``: the reference solution
    folder ("default": reference-solutions/Solution-1; None: no solution).
    ``docker_image``: the image the worker runs (default: competition.yaml's).
    ``queue``: the vhost of a private queue (competition.yaml's ``queue``; default: the
    template's, none: Codabench's default queue and its 600 s limit).
    ``wheelhouse_path``: for a private queue without network, the wheelhouse's path in
    the container (e.g. /app/data/wheelhouse, the worker's read-only data folder); the
    ingestion's command then sets CHALLENGE_WELDING_WHEELHOUSE to it.
    ``contact_email``: the address participants write to (default: competition.yaml's).
    ``strict``: refuse (ChallengeError, nothing written) while organiser_decisions lists a
    choice still open; without it those choices are logged as warning lines at the end.
    """
    data_dir, output_zip = Path(data_dir).resolve(), Path(output_zip).resolve()
    repo = find_repo_root(repo_root)
    final_data, solution = _checked_inputs(repo, data_dir, final_data, solution)
    if contact_email is not None and not valid_email(contact_email):
        raise ChallengeError(f"--contact-email {contact_email!r}: not an e-mail address "
                             "(expected name@domain)")
    decisions = organiser_decisions(yaml.safe_load((repo / "competition.yaml").read_text()),
                                    docker_image=docker_image, contact_email=contact_email,
                                    final_data=final_data is not None)
    if strict and decisions:
        for line in decisions:
            log(line)
        raise ChallengeError(f"bundle --strict: {len(decisions)} choice(s) above still left to "
                             "competition.yaml's placeholders; nothing written (give the options "
                             "named, or leave out --strict)")
    training = data_dir / "training_data"
    public_data = public_data and training.is_dir() and any(training.iterdir())

    output_zip.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".bundle-", dir=output_zip.parent))
    try:
        program_zip(repo / "ingestion_program", stage / "ingestion_program.zip",
                    env={"CHALLENGE_WELDING_WHEELHOUSE": wheelhouse_path} if wheelhouse_path
                    else None)
        program_zip(repo / "scoring_program", stage / "scoring_program.zip")
        counts = _stage_data(stage, data_dir, final_data)
        limits = {k: execution_time_limit(n) for k, n in counts.items()}
        if public_data:
            zip_tree(training, stage / "public_data.zip")
        if solution is not None:
            zip_tree(solution, stage / "solutions" / "solution-1.zip")
        starting_kit(repo, data_dir, solution, stage / "starting_kit.zip")
        shutil.copytree(repo / "pages", stage / "pages", ignore=_ignore)
        logo = repo / "logo.png"
        if logo.is_file():
            shutil.copy2(logo, stage / "logo.png")
        else:
            make_logo(stage / "logo.png")
        comp = render_competition(repo / "competition.yaml", limits, public_data=public_data,
                                  solution=solution is not None, final_data=final_data is not None,
                                  docker_image=docker_image, queue=queue,
                                  contact_email=contact_email)
        queue = comp.get("queue")
        needs = {k: needed_time(n) for k, n in counts.items()}
        _write_competition(stage / "competition.yaml", comp, counts, needs)
        with atomic_path(output_zip) as tmp_zip:  # the zip appears only once validated
            with zipfile.ZipFile(tmp_zip, "w") as zf:
                _add_tree(zf, stage)
            problems = validate_bundle(tmp_zip)
            if problems:
                raise ChallengeError("the bundle is not valid:\n  - " + "\n  - ".join(problems))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    image = (f"bundle: docker_image {comp.get('docker_image')} "
             + ("(given with --docker-image)" if docker_image else "(competition.yaml's: not given)"))
    _log_bundle(log, output_zip, limits, queue, counts, needs, image)
    for line in decisions:  # last, so they are what the organiser reads
        log(line)
    return output_zip


def _checked_inputs(repo: Path, data_dir: Path, final_data, solution):
    """Check the DATA folders and the solution; returns (final_data, solution) resolved (or None)."""
    check_data(data_dir)
    if final_data is not None:
        final_data = Path(final_data).resolve()
        check_data(final_data)
    if solution == "default":
        solution = repo / "reference-solutions" / "Solution-1"
    if solution is not None:
        solution = Path(solution).resolve()
        check_solution(solution)
    return final_data, solution


def _log_bundle(log, output_zip: Path, limits: dict, queue, counts: dict, needs: dict,
                image: str) -> None:
    size = output_zip.stat().st_size / 1e6
    log(f"bundle: {output_zip} ({size:.1f} MB), validator: no problem; execution_time_limit "
        + ", ".join(f"{k} {v} s" for k, v in limits.items())
        + (f"; queue {queue}" if queue else "; default queue"))
    for k in counts:
        log(f"bundle: phase {k} needs {_need_text(counts[k], needs[k])}")
    log(image)
    warning = queue_warning(needs, queue)
    if warning:
        log(warning)


def _stage_data(stage: Path, data_dir: Path, final_data: Path | None) -> dict:
    """The data zips of each phase into ``stage``; returns {phase: images to predict}."""
    zip_tree(data_dir / "input_data", stage / "input_data.zip")
    zip_tree(data_dir / "reference_data", stage / "reference_data.zip")
    counts = {"dev": count_images(data_dir)}
    if final_data is not None:
        zip_tree(final_data / "input_data", stage / "input_data_final.zip")
        zip_tree(final_data / "reference_data", stage / "reference_data_final.zip")
        counts["final"] = count_images(final_data)
    return counts


def _write_competition(path: Path, comp: dict, counts: dict, needs: dict) -> None:
    header = ("# Generated by `challenge-welding bundle` from the repository's "
              "competition.yaml\n"
              "# (execution_time_limit filled in from the evaluation sets' size).\n"
              + "".join(f"# {k}: {_need_text(counts[k], needs[k])}\n" for k in counts))
    path.write_text(header + yaml.safe_dump(comp, sort_keys=False, allow_unicode=True))


def _need_text(n_images: int, need: dict) -> str:
    return (f"{need['total']:.0f} s = install {need['install']:.0f} s + {n_images} images x "
            f"1/12 s ({need['images']:.0f} s) + margin {need['margin']:.0f} s")
