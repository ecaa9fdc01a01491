"""Rehearse the whole competition at a chosen size, measured stage by stage."""

HELP = ("Rehearse the competition on synthetic welds (synth, build-sets, bundle, every reference "
        "solution, scoring, leaderboard), measure each stage and fit how it grows with the size.")


def _ints(text):
    from challenge_welding.contract.errors import ChallengeError

    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ChallengeError(f"--sizes: comma-separated image counts, got {text!r}") from None


def add_arguments(parser):
    parser.add_argument("--workdir", default="rehearsal-work", metavar="DIR",
                        help="where every size is built (DIR/n<N>/; emptied first)")
    parser.add_argument("--images", type=int, default=600,
                        help="source images of a single-size rehearsal (default 600)")
    parser.add_argument("--sizes", type=_ints, default=None, metavar="N,N,...",
                        help="several sizes (e.g. 200,600,2000): fits how each cost grows; "
                             "overrides --images")
    parser.add_argument("--mix", default="1920x1080:2,960x540:1", metavar="WxH:w,...",
                        help="resolution mix: one resolution and optionally its half, with weights "
                             "(default: the published dataset's, two thirds full HD)")
    parser.add_argument("--runs", type=int, default=50,
                        help="leaderboard rows: the reference solutions, then virtual ones (default 50)")
    parser.add_argument("--solutions", default=None, metavar="A,B,...",
                        help="reference solutions to evaluate (default: Solution-1, Solution-1-no-trust, "
                             "always-ko, always-ok, full-unknown, random, cnn-small)")
    parser.add_argument("--ko-share", type=float, default=0.05, help="share of KO welds (default 0.05)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="figures as JSON (default DIR/rehearsal.json; written even after a failure)")
    parser.add_argument("--keep", action="store_true", help="keep each size's data (default: removed "
                                                           "once measured, to free the disk)")


def run(args):
    from challenge_welding.flows.rehearse import run_rehearsal, text_report

    solutions = [s.strip() for s in args.solutions.split(",")] if args.solutions else None
    result = run_rehearsal(args.workdir, args.sizes or [args.images], args.mix, seed=args.seed,
                           runs=args.runs, ko_share=args.ko_share, solutions=solutions,
                           keep=args.keep, json_path=args.json)
    print(text_report(result))
    return 0
