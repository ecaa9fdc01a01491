"""Write the predictions of a virtual reference solution."""

from challenge_welding.contract.errors import exit_status_help
from challenge_welding.contract.names import VIRTUAL_KINDS

HELP = "Write the predictions of a virtual reference solution."


def add_arguments(parser):
    parser.epilog = exit_status_help()

    parser.add_argument("--reference", required=True, metavar="DIR", help="reference_data folder")
    parser.add_argument("--kind", required=True, choices=VIRTUAL_KINDS, metavar="K",
                        help=f"one of {', '.join(VIRTUAL_KINDS)}")
    parser.add_argument("--output", required=True, metavar="PRED", help="predictions folder to write")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.scoring.virtual import make_virtual

    out = make_virtual(args.reference, args.kind, args.output, seed=args.seed)
    print(f"virtual solution {args.kind} (seed {args.seed}) written to {out}")
    return 0
