"""Score predictions: the six trust KPIs, the leaderboard score and the detailed results page."""

from pathlib import Path

from challenge_welding.contract.errors import exit_status_help

HELP = "Score predictions: the six trust KPIs, the leaderboard score and the detailed results page."


def add_arguments(parser):
    parser.epilog = exit_status_help("its ingestion failed, or its predictions are missing, not the "
                                     "ingestion's, or invalid")
    parser.add_argument("--reference", required=True, metavar="DIR",
                        help="reference_data folder (<set>.parquet, scoring.yaml)")
    parser.add_argument("--predictions", required=True, metavar="PRED", help="predictions folder (<set>.parquet)")
    parser.add_argument("--output", required=True, metavar="OUT",
                        help="output folder: scores.json, details.json, detailed_results.html")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="scoring config (default: DIR/scoring.yaml, else the packaged default)")
    parser.add_argument("--draws", metavar="FILE", default=None,
                        help="organisers: also write the per-resample values (for `leaderboard` "
                             "significance) to FILE, outside OUT; `leaderboard` looks for OUT.draws.npz")
    parser.add_argument("--unverified", action="store_true",
                        help="local experiments only: score hand-made predictions without checking that the "
                             "ingestion wrote them (ingestion.json status and manifest); said in the output. "
                             "The Codabench scoring program refuses it")
    parser.add_argument("--traces", metavar="FILE", default=None,
                        help="organisers: also write per-sample traces (parquet: uncertainty, errors, OOD score "
                             "per sample) to FILE, which must be outside OUT (OUT is published)")
    parser.add_argument("--baseline", metavar="OUT", default=None,
                        help="a scored folder (e.g. Solution-1's OUT) to report robustness relative to it "
                             "(mCE-style, in details.json's analyses; never scored)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.flows.score import score_and_details

    _, details = score_and_details(args.reference, args.predictions, args.output, args.config,
                                   verify=not args.unverified, traces=args.traces, draws_path=args.draws,
                                   baseline=args.baseline)

    def ci(interval):
        return f"  [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""

    lo_hi = details.get("score_ci")
    print(f"score {details['score']:.2f}" + (f"  (95 % CI {lo_hi[0]:.2f} - {lo_hi[1]:.2f})" if lo_hi else ""))
    for key, kpi in details["kpis"].items():
        print(f"  {key:<15}{kpi['rescaled']:.3f}{ci(kpi['ci'])}   raw {kpi['raw']:.3f}  ({kpi['rescaling']})")
    print(f"written: {Path(args.output) / 'scores.json'}, details.json, detailed_results.html")
    return 0
