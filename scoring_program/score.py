"""Codabench scoring entry point: a thin wrapper around `challenge-welding score`.

Argv (set by metadata.yaml): INPUT OUTPUT, where INPUT holds `ref`
(reference_data) and `res` (the ingestion output); or options of
`challenge-welding score` (e.g. `--help`). Exits non-zero when the
score cannot be computed, so that Codabench marks the submission failed.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE / "vendor").is_dir():
    sys.path.insert(0, str(HERE / "vendor"))

from challenge_welding.commands.cli import main  # noqa: E402 - after vendor/ joins sys.path

if __name__ == "__main__":
    if "--unverified" in sys.argv[1:]:  # Codabench scores only what its ingestion wrote
        print("error: the scoring program never scores unverified predictions", file=sys.stderr)
        sys.exit(2)
    if len(sys.argv) > 1 and sys.argv[1].startswith("-"):  # options: --help, or a local run
        sys.exit(main(["score", *sys.argv[1:]]))
    input_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "/app/input")
    output = sys.argv[2] if len(sys.argv) > 2 else "/app/output"
    sys.exit(main([
        "score",
        "--reference", str(input_dir / "ref"),
        "--predictions", str(input_dir / "res"),
        "--output", output,
    ]))
