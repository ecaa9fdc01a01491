"""Codabench ingestion entry point: a thin wrapper around `challenge-welding ingest`.

Argv (set by metadata.yaml): INPUT_DATA OUTPUT PROGRAM SUBMISSION; or options of
`challenge-welding ingest` (e.g. `--help`).
The package is taken from the image, or from `vendor/` beside this file when
the bundle vendored it.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE / "vendor").is_dir():
    sys.path.insert(0, str(HERE / "vendor"))

from challenge_welding.commands.cli import main  # noqa: E402 - after vendor/ joins sys.path

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("-"):  # options: --help, or a local run
        sys.exit(main(["ingest", *sys.argv[1:]]))
    input_data, output, _program, submission = (sys.argv[1:] + [None] * 4)[:4]
    sys.exit(main([
        "ingest",
        "--submission", submission or "/app/ingested_program",
        "--input-data", input_data or "/app/input_data",
        "--output", output or "/app/output",
    ]))
