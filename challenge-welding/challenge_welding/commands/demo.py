"""Run the end-to-end demo: synth, build-sets, train, evaluate, leaderboard."""

HELP = "Run the end-to-end demo: synth, build-sets, train Solution-1, evaluate, leaderboard."


def add_arguments(parser):
    parser.add_argument("--workdir", default="demo-work", metavar="DIR",
                        help="where everything is built (default ./demo-work); re-runs reuse it")
    parser.add_argument("--quick", action="store_true",
                        help="a smaller dataset (under 3 minutes) instead of the default (under 10)")
    parser.add_argument("--n", type=int, default=None, help="source images (overrides the size)")
    parser.add_argument("--seed", type=int, default=0)


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.flows.demo import run_demo

    run_demo(args.workdir, quick=args.quick, seed=args.seed, n=args.n)
    return 0
