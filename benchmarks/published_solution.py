"""The published reference solution's cost per image on the CPU, through the real ingestion.

    git clone https://github.com/confianceai/Challenge-Welding-Reference-Solution-1 REPO
    python benchmarks/published_solution.py --repo REPO [--n 200] [--keep DIR]

Copies the solution (setup.py, requirements.txt, MANIFEST.in, challenge_solution/ with its
weights), drops from its requirements the packages its code never imports (torch and
onnxruntime: gigabytes of CUDA wheels on Linux), installs it with `ingest` in its own
environment under the sandbox, runs it on the CPU over --n full-HD weld-like JPEGs
(benchmarks/ingestion.make_images: not real welds, so its answers carry no meaning, its
cost does), and prints its per-image time as the ingestion measures it (median and p95,
batches of 10) beside the same-run baseline: reference-solutions/cnn-small, the repository's
stand-in for a deep-learning component, through the same ingestion on the same images.
Without --repo it says how to get the solution and exits 0 (`make bench` runs every script).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingestion import make_images  # benchmarks/ingestion.py

from challenge_welding.ingestion.run.ingest import ingest

ROOT = Path(__file__).resolve().parents[1]
UNUSED = {"torch", "onnxruntime"}  # pinned by the solution, imported by none of its code
REPO_URL = "https://github.com/confianceai/Challenge-Welding-Reference-Solution-1"


def copy_solution(repo: Path, dest: Path) -> list[str]:
    """The submission folder from a checkout; returns the requirements dropped."""
    dest.mkdir(parents=True)
    for name in ("setup.py", "MANIFEST.in"):
        if (repo / name).is_file():
            shutil.copy(repo / name, dest / name)
    shutil.copytree(repo / "challenge_solution", dest / "challenge_solution")
    kept, dropped = [], []
    for line in (repo / "requirements.txt").read_text().splitlines():
        name = line.split("==")[0].split(">=")[0].strip().lower()
        (dropped if name in UNUSED else kept).append(line.strip())
    (dest / "requirements.txt").write_text("\n".join(line for line in kept if line) + "\n")
    return [line for line in dropped if line]


def run(sub: Path, data: Path, out: Path) -> dict:
    report = ingest(sub, data, out, device="cpu", sets=["performance"], progress=False,
                    verbose=False)
    if report["status"] != "ok":
        raise SystemExit(f"error: {sub.name}: the ingestion failed: {report['errors']}")
    t = report["timings"]
    return {"median": t["sets"]["performance"]["time_median"],
            "p95": t["sets"]["performance"]["time_p95"],
            "img_s": t["sets"]["performance"]["images_per_s"],
            "start": t["start_s"], "load": t["load_model_s"], "install": t["install_s"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, help=f"a checkout of {REPO_URL}")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--keep", default=None, help="keep the images and predictions here")
    args = ap.parse_args(argv)
    if args.repo is None:
        print(f"published_solution.py: skipped (needs a checkout: git clone {REPO_URL} REPO; "
              "then --repo REPO)")
        return 0
    root = Path(args.keep or tempfile.mkdtemp(prefix="cw-bench-published-"))
    try:
        dropped = copy_solution(args.repo, root / "published")
        make_images(root / "input_data", args.n)
        figures = {"published (TensorFlow)": run(root / "published", root / "input_data",
                                                 root / "pred-published"),
                   "cnn-small (baseline)": run(ROOT / "reference-solutions" / "cnn-small",
                                               root / "input_data", root / "pred-cnn")}
        print(f"{args.n} full-HD JPEGs, CPU, batches of 10; requirements dropped: "
              f"{', '.join(dropped) or 'none'}")
        print(f"{'':24s} {'median ms':>10s} {'p95 ms':>8s} {'img/s':>7s} {'start s':>8s} "
              f"{'load s':>7s} {'install s':>9s}")
        for name, f in figures.items():
            print(f"{name:24s} {1000 * f['median']:10.1f} {1000 * f['p95']:8.1f} "
                  f"{f['img_s']:7.1f} {f['start']:8.1f} {f['load']:7.2f} {f['install']:9.1f}")
        pub, base = figures["published (TensorFlow)"], figures["cnn-small (baseline)"]
        print(f"published / cnn-small per image: median {pub['median'] / base['median']:.2f}x, "
              f"p95 {pub['p95'] / base['p95']:.2f}x; the challenge's budget 1/12 s = 83.3 ms: "
              f"the published solution's p95 is {pub['p95'] / (1 / 12):.0%} of it")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
