"""The end-to-end demo: synthetic data -> evaluation sets -> Solution-1 -> leaderboard.

The data take the organisers' path: synth writes a storage root in the published layout
(a source dataset, a dataset of unseen seams, a folder of OOD photos) and build-sets
reads it with --source, --unseen-source and --ood-source.

Every step writes into WORKDIR and leaves a marker (WORKDIR/.steps/<step>.json
holding the step's parameters) once its output is complete; a re-run skips the
steps whose marker matches, and redoes a step (and every later one) whose
parameters changed, e.g. after switching between --quick and the default size.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from challenge_welding.bundle.bundle import find_repo_root
from challenge_welding.contract.checked import FileRefused, json_text, read_json
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import write_atomic
from challenge_welding.data.build_sets import build_sets
from challenge_welding.data.synth import generate_dataset, synth_output
from challenge_welding.flows.evaluate import evaluate
from challenge_welding.flows.leaderboard import leaderboard, output_paths, text_table

NAIVE = ("full-unknown", "always-ok", "always-ko", "random")
STEPS = ("synth", "build-sets", "train", "evaluate", "leaderboard")
SIZES = {"default": {"n": 2000}, "quick": {"n": 600}}
KO_SHARE = 0.08  # a few more KO than the synth default, so that Solution-1 has some to learn from
# Smaller evaluation sets than the builder's defaults keep the demo within its time budget
# (every solution runs over every set); build-sets' own defaults are for real evaluations.
DEMO_BUILD_CONFIG = {
    "default": """\
robustness: {size: 60, min_ko_per_level: 8}
ood_synthetic: {size_per_class: 80}
ood_real: {max_ood: 80}
drift: {size: 200}
generalization: {max_size: 300}
""",
    "quick": """\
robustness: {size: 30, min_ko_per_level: 5}
ood_synthetic: {size_per_class: 40}
ood_real: {max_ood: 40}
drift: {size: 100}
generalization: {max_size: 150}
""",
}


def _say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _marker(path: Path):
    """A step marker's parameters; None when absent or unreadable (the step is then run again)."""
    try:
        return read_json(path)
    except FileRefused:
        return None


def solutions_dir() -> Path:
    """reference-solutions/ of the repository (bundle.find_repo_root: from a clone, installed or not)."""
    return find_repo_root(needs=("reference-solutions/Solution-1/train.py",),
                          fix="the demo runs from a clone of the repository (`make demo`)") / "reference-solutions"


class Steps:
    """Markers of completed steps; a changed parameter invalidates that step and the later ones."""

    def __init__(self, workdir: Path):
        self.dir = workdir / ".steps"
        self.dir.mkdir(parents=True, exist_ok=True)

    def done(self, step: str, params: dict) -> bool:
        path = self.dir / f"{step}.json"
        if _marker(path) == params:
            return True
        for later in STEPS[STEPS.index(step):]:
            (self.dir / f"{later}.json").unlink(missing_ok=True)
        return False

    def mark(self, step: str, params: dict) -> None:
        write_atomic(self.dir / f"{step}.json", json_text(params, sort_keys=True))


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def train_solution(training_data: Path, target: Path) -> None:
    """Train Solution-1 into ``target`` (a copy of the submission folder) with its own command."""
    cmd = [sys.executable, str(solutions_dir() / "Solution-1" / "train.py"), "--data", str(training_data),
           "--out", str(target)]
    if subprocess.run(cmd).returncode != 0:
        raise ChallengeError(f"training Solution-1 failed: {' '.join(cmd)}")


def no_trust_copy(trained: Path, target: Path) -> None:
    """Solution-1-no-trust: the same trained model with its trust mechanisms switched off."""
    _fresh(target)
    shutil.copytree(trained, target, ignore=shutil.ignore_patterns("__pycache__"))
    write_atomic(target / "challenge_solution" / "settings.json", json_text({"trust": False}, indent=None))


def run_demo(workdir, quick: bool = False, seed: int = 0, n: int | None = None):
    """Run (or resume) the demo in ``workdir``; return the leaderboard DataFrame."""
    solutions_dir()  # before any work: the reference solutions are in a clone, not in the package
    workdir = Path(workdir).resolve()
    steps = Steps(workdir)
    size = dict(SIZES["quick" if quick else "default"])
    if n is not None:
        size["n"] = int(n)
    params = {"seed": seed, **size}
    store, data = workdir / "store", workdir / "data"
    solutions, results = workdir / "solutions", workdir / "results"
    t0 = time.perf_counter()

    _say(f"1/5 synthetic welds ({size['n']} images, published layout) -> {store}")
    if steps.done("synth", params):
        _say("    reused")
        synth = synth_output(store)
    else:
        synth = generate_dataset(_fresh(store), n=size["n"], seed=seed, ko_share=KO_SHARE)
        steps.mark("synth", params)

    _say(f"2/5 evaluation sets -> {data}")
    if steps.done("build-sets", params):
        _say("    reused")
    else:
        config = workdir / "demo_build_config.yaml"
        config.write_text(DEMO_BUILD_CONFIG["quick" if quick else "default"])
        _say(f"    build-sets --source {synth.source} --unseen-source {synth.unseen} "
             f"--ood-source {synth.ood}")
        build_sets(out=_fresh(data), seed=seed, config=config, **synth.build_args())
        steps.mark("build-sets", params)

    _say(f"3/5 training Solution-1 on {data / 'training_data'} -> {solutions}")
    if steps.done("train", params):
        _say("    reused")
    else:
        _fresh(solutions).mkdir(parents=True)
        train_solution(data / "training_data", solutions / "Solution-1")
        no_trust_copy(solutions / "Solution-1", solutions / "Solution-1-no-trust")
        steps.mark("train", params)

    entries = [("Solution-1", solutions / "Solution-1"),
               ("Solution-1-no-trust", solutions / "Solution-1-no-trust")]
    entries += [(name, solutions_dir() / name) for name in NAIVE]
    _say(f"4/5 evaluating {len(entries)} reference solutions -> {results}")
    _evaluate_all(entries, data, results, steps, params)

    _say("5/5 leaderboard (with the nine virtual solutions as reference rows)")
    board = workdir / "leaderboard"
    frame = leaderboard([results / name for name, _ in entries], board, virtual_data=data,
                        virtual_dir=_fresh(workdir / "virtual"), title="Demo leaderboard")
    steps.mark("leaderboard", params)
    print(text_table(frame))
    html_path, csv_path = output_paths(board)
    _say(f"done in {time.perf_counter() - t0:.0f} s; leaderboard: {html_path} (and {csv_path.name}); "
         f"detailed pages: {results}/<solution>/detailed_results.html")
    return frame


def _evaluate_all(entries, data: Path, results: Path, steps: Steps, params: dict) -> None:
    """Evaluate each (name, folder) into results/<name>, reusing a solution already scored with these params."""
    failures = []
    for i, (name, folder) in enumerate(entries, 1):
        step_params = {**params, "solution": name}
        path = steps.dir / f"evaluate-{name}.json"
        if _marker(path) == step_params and \
                (results / name / "scores.json").exists() and steps.done("evaluate", params):
            _say(f"    [{i}/{len(entries)}] {name}: reused")
            continue
        _say(f"    [{i}/{len(entries)}] {name}")
        try:
            scores = evaluate(folder, data, _fresh(results / name), progress=True, verbose=False)
        except ChallengeError as exc:
            failures.append(f"{name}: {exc}")
            _say(f"    {name} FAILED: {exc}")
            continue
        write_atomic(path, json_text(step_params, sort_keys=True))
        _say(f"    {name}: score {scores['score']:.2f}")
    if failures:
        raise ChallengeError("demo: evaluation failed for " + "; ".join(failures))
    steps.mark("evaluate", params)
