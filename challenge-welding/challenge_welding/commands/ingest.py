"""Install a submission in an isolated environment and run it over the evaluation sets."""

import argparse

# stdlib only: --help stays instant. Every default below is IngestOptions' (its one home).
from challenge_welding.ingestion.options import IngestOptions as D

HELP = "Install a submission in an isolated environment and run it over the evaluation sets."
EPILOG = """\
exit status:
  0  every set ran; PRED/<set>.parquet and PRED/ingestion.json (status "ok") written
  1  the submission failed (layout, install, import, load_model, predict, invalid output,
     time limit); ingestion.json says where, with the submission's traceback
  2  bad input or usage: options, a missing or unreadable input-data folder, set or image;
     or no layer would confine the submission's files (no Landlock, no mount namespace)
     and --unsafe-unconfined was not given
  3  the output could not be written (no space left, read-only, a file where a folder is
     needed, no permission): checked before the submission runs where it can be; when it
     fails at the end, the run's files are kept in the temporary folder the line names
  130, 143  interrupted (Ctrl-C, SIGTERM): the sets finished and the logs are written,
     ingestion.json says status "interrupted"; a re-run redoes every set

The set files and ingestion.json are written last, from memory, after every process the
submission started is killed; ingestion.json's "manifest" holds each file's sha256.
compute_time is measured by the evaluator (hand-over to answer), never by the submission.
"""


# over 60 lines: one declaration per option, a list rather than logic
def add_arguments(parser):
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--submission", required=True, metavar="PATH",
                        help="submission zip (contents at its root or in one top folder) or folder")
    parser.add_argument("--input-data", required=True, metavar="DIR",
                        help="evaluation input data: DIR/<set>/metadata.parquet + images")
    parser.add_argument("--output", required=True, metavar="PRED",
                        help="where to write <set>.parquet and ingestion.json")
    parser.add_argument("--batch-size", type=int, default=D.batch_size,
                        help="images per predict() call (default %(default)s, the starter kit's default)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=D.device,
                        help="device passed to predict() (default: cuda if a GPU is visible)")
    parser.add_argument("--sets", nargs="+", metavar="SET", default=D.sets,
                        help="run only these sets (default: every set present)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="developers: run the submission folder in this environment, no install")
    parser.add_argument("--installer", choices=("auto", "uv", "pip"), default=D.installer,
                        help="environment builder (default %(default)s: uv when available, else pip)")
    parser.add_argument("--env-cache", metavar="DIR", default=D.cache_dir,
                        help="cache of environments keyed by the requirements' hash "
                             "(default ~/.cache/challenge-welding/envs)")
    parser.add_argument("--wheelhouse", metavar="DIR", default=D.wheelhouse,
                        help="extra folder of wheels to install from (pip/uv --find-links)")
    parser.add_argument("--no-index", action="store_true",
                        help="install only from --wheelhouse (workers without internet)")
    parser.add_argument("--allow-source-builds", action="store_true",
                        help="a pinned dependency without a wheel is built from its source "
                             "(fetched by the evaluator, built offline in the sandbox)")
    parser.add_argument("--batch-timeout", type=float, default=D.batch_timeout, metavar="S",
                        help="seconds allowed per predict() call (default %(default)g)")
    parser.add_argument("--total-timeout", type=float, default=D.total_timeout, metavar="S",
                        help="seconds allowed for all predict() calls together (default: none)")
    parser.add_argument("--load-timeout", type=float, default=D.load_timeout, metavar="S",
                        help="seconds allowed for import + load_model() (default %(default)g)")
    parser.add_argument("--install-timeout", type=float, default=D.install_timeout, metavar="S",
                        help="seconds allowed per install step (default %(default)g)")
    parser.add_argument("--workers", type=int, default=D.workers,
                        help="JPEG decoding threads (default: all cores)")
    parser.add_argument("--max-log-mb", type=float, default=D.max_log_mb,
                        help="cap of the submission's stdout/stderr log (default %(default)g MB)")
    parser.add_argument("--no-warmup", action="store_true",
                        help="no untimed warm-up predict() call (on noise images shaped like "
                             "the first batch) before the first timed call")
    parser.add_argument("--exclusive-predict", nargs="?", choices=("timed", "all", "none"),
                        const="all", default=D.exclusive_predict,
                        help="sets in which no decoding runs while predict() runs: 'timed' "
                             "(default: the performance set, whose time is scored), 'all' "
                             "(also without a value), 'none'")
    parser.add_argument("--decode-stock-mb", type=float, default=D.decode_stock_mb, metavar="MB",
                        help="memory for the batches decoded in one all-core burst between "
                             "timed predict() calls (default %(default)g; 0: one batch at a time)")
    # sandbox (docs/integrity.md)
    parser.add_argument("--no-network", action="store_true",
                        help="no TCP at install time either (Landlock ABI >= 4; the run never "
                             "has it unless --run-network)")
    parser.add_argument("--run-network", action="store_true",
                        help="organisers: allow the submission TCP connections while it runs")
    parser.add_argument("--max-processes", type=int, default=D.max_processes, metavar="N",
                        help="processes the submission may run at once; more is a fork storm "
                             "that fails the run (default %(default)s)")
    parser.add_argument("--unsafe-unconfined", action="store_true",
                        help="organisers: run the submission even where no layer confines its "
                             "files (no Landlock, no mount namespace): it could read the "
                             "reference data; ingestion.json and the results say so")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bars (drawn only on a terminal; a log gets one line "
                             "per set)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.ingestion.run.ingest import ingest

    report = ingest(args.submission, args.input_data, args.output, D.from_args(args))
    return 0 if report["status"] == "ok" else 1
