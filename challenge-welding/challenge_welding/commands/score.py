"""Score predictions: the six trust KPIs, the leaderboard score and the detailed results page."""

HELP = "Score predictions: the six trust KPIs, the leaderboard score and the detailed results page."


def add_arguments(parser):
    parser.add_argument("--reference", required=True, metavar="DIR",
                        help="reference_data folder (<set>.parquet, scoring.yaml)")
    parser.add_argument("--predictions", required=True, metavar="PRED", help="predictions folder (<set>.parquet)")
    parser.add_argument("--output", required=True, metavar="OUT",
                        help="output folder: scores.json, details.json, detailed_results.html")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="scoring config (default: DIR/scoring.yaml, else the packaged default)")


def run(args):
    from challenge_welding.scoring.score import score

    scores = score(args.reference, args.predictions, args.output, args.config)
    print(f"score {scores['score']:.2f}")
    for key in ("perf", "uncertainty", "robustness", "ood", "generalization", "drift"):
        print(f"  {key:<15}{scores[key]:.3f}")
    print(f"written: {args.output}/scores.json, details.json, detailed_results.html")
    return 0
