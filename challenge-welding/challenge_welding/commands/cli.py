"""``challenge-welding`` command line: a thin dispatcher over the table COMMANDS.

Each sub-command is a module of ``challenge_welding.commands`` defining ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; ``run`` calls one flow
(``challenge_welding.flows``) or one engine function. Command modules import the
engine inside ``run`` so that ``--help`` stays instant (the engine loads pandas,
matplotlib, pyarrow: seconds).
"""

from __future__ import annotations

import argparse
import sys

from challenge_welding import __version__
from challenge_welding.commands import (
    build_sets, bundle, cache, calibrate, check_submission, demo, dry_run, evaluate, ingest, leaderboard, rehearse, score,
    synth,
    virtual,
)
from challenge_welding.contract.errors import ChallengeError, exit_status_help

# command name -> its module (in --help order)
COMMANDS = {
    "synth": synth,
    "build-sets": build_sets,
    "ingest": ingest,
    "check-submission": check_submission,
    "score": score,
    "virtual": virtual,
    "calibrate": calibrate,
    "evaluate": evaluate,
    "leaderboard": leaderboard,
    "demo": demo,
    "bundle": bundle,
    "dry-run": dry_run,
    "rehearse": rehearse,
    "cache": cache,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="challenge-welding",
        description="Evaluation platform of the trustworthy-AI welding challenge.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        if p.epilog is None:  # every command documents its exit status, the same way
            p.epilog = exit_status_help(getattr(module, "FAILED", None))
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except ChallengeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code  # 1: the submission failed, 2: bad input or usage
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
