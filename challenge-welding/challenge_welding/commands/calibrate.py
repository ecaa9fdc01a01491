"""Compute the rescaling breakpoints from virtual solutions and write them into scoring.yaml."""

from challenge_welding.contract.errors import exit_status_help

HELP = "Compute the rescaling breakpoints from virtual solutions and write them into scoring.yaml."


def add_arguments(parser):
    parser.epilog = exit_status_help()
    parser.add_argument("--reference", required=True, metavar="DIR",
                        help="reference_data folder; its scoring.yaml is (re)written")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="config to start from (default: DIR/scoring.yaml, else the packaged default)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.scoring.calibrate import calibrate

    alphas = calibrate(args.reference, args.config)
    print(f"{'KPI':<15}{'alpha1 (full_unknown)':>22}{'alpha2 (good)':>16}")
    for kpi, a in alphas.items():
        note = "" if a["alpha1"] < a["alpha2"] < 1 else "   <- left unscaled (alpha2 <= alpha1 or >= 1)"
        print(f"{kpi:<15}{a['alpha1']:>22.4f}{a['alpha2']:>16.4f}{note}")
    print(f"written: {args.reference}/scoring.yaml")
    return 0
