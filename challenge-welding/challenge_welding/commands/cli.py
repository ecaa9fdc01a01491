"""``challenge-welding`` command line: a thin dispatcher over the table COMMANDS.

Each sub-command is a module of ``challenge_welding.commands`` defining ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; ``run`` calls one flow
(``challenge_welding.flows``) or one engine function. Command modules import the
engine inside ``run`` so that ``--help`` stays instant (the engine loads pandas,
matplotlib, pyarrow: seconds).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from challenge_welding import __version__
from challenge_welding.commands import (
    build_sets, bundle, cache, calibrate, check_submission, demo, dry_run, evaluate, ingest, leaderboard, rehearse, score,
    synth,
    virtual,
)
from challenge_welding.contract.errors import ChallengeError, Interrupted, exit_status_help

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


def _terminate(signum, _frame):
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C: the finally blocks run (a temporary file goes, ingest
    # writes what it finished); Python's default would end the process on the spot
    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        return int(args._run(args) or 0)
    except ChallengeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code  # 1: the submission failed, 2: bad input or usage, 3: no output
    except KeyboardInterrupt as exc:
        if not getattr(exc, "said", False):
            print(f"error: interrupted ({exc or 'SIGINT'})", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    except OSError as exc:  # a file fault no writer explained: still one line, never a traceback
        if exc.filename is None:
            raise  # not a file's: a defect of ours, shown in full
        from challenge_welding.contract.files import WRITE_ERRNOS

        print(f"error: {os.fsdecode(exc.filename)}: {exc.strerror}", file=sys.stderr)
        return 3 if exc.errno in WRITE_ERRNOS else 2
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
