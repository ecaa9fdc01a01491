"""Ingest then score one submission."""

from pathlib import Path

from challenge_welding.commands.check_submission import add_environment_arguments
from challenge_welding.contract.errors import exit_status_help
from challenge_welding.contract.names import KPI_KEYS
from challenge_welding.ingestion.options import IngestOptions

HELP = "Ingest then score one submission (OUT/predictions, then OUT/scores.json and the page)."


def add_arguments(parser):
    parser.epilog = exit_status_help("the ingestion failed or its predictions cannot be scored")
    parser.add_argument("--submission", required=True, metavar="PATH", help="submission zip or folder")
    parser.add_argument("--data", required=True, metavar="DATA",
                        help="build-sets output: DATA/input_data and DATA/reference_data")
    parser.add_argument("--output", required=True, metavar="OUT",
                        help="OUT/predictions (ingestion) and OUT/scores.json, details.json, "
                             "detailed_results.html")
    parser.add_argument("--batch-size", type=int, default=IngestOptions.batch_size,
                        help="images per predict() call (default %(default)s)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="developers: run the folder in this environment, no install")
    add_environment_arguments(parser)
    parser.add_argument("--no-draws", action="store_true",
                        help="do not write the per-resample values OUT.draws.npz (used by `leaderboard` "
                             "for paired significance)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.flows.evaluate import evaluate

    scores = evaluate(args.submission, args.data, args.output, draws=not args.no_draws,
                      options=IngestOptions.from_args(args))
    print(f"score {scores['score']:.2f}   " + "  ".join(f"{k} {scores[k]:.3f}" for k in KPI_KEYS))
    print(f"written: {Path(args.output) / 'scores.json'}, {Path(args.output) / 'detailed_results.html'}")
    return 0
