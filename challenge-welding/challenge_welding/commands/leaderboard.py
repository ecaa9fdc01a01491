"""Rank scored submissions into an HTML and CSV leaderboard."""

HELP = "Rank scored submissions into a colour-coded HTML table and a CSV (FILE.html, FILE.csv)."


def add_arguments(parser):
    parser.add_argument("folders", nargs="*", metavar="OUT",
                        help="scored folders (each with scores.json); rows are named after them")
    parser.add_argument("--output", required=True, metavar="FILE",
                        help="writes FILE.html and FILE.csv (a .html/.csv suffix is dropped)")
    parser.add_argument("--virtual", metavar="DATA", default=None,
                        help="also score the nine virtual solutions on DATA/reference_data "
                             "(reference rows, not ranked)")
    parser.add_argument("--title", default="Leaderboard")
    sig = parser.add_mutually_exclusive_group()
    sig.add_argument("--significance", dest="significance", action="store_true", default=None,
                     help="paired comparisons from each OUT.draws.npz: P(A > B) matrices, 95 %% rank "
                          "intervals, groups not distinguishable (Holm); default: on when every OUT has one")
    sig.add_argument("--no-significance", dest="significance", action="store_false")
    parser.add_argument("--baseline", metavar="NAME", default=None,
                        help="a ranked row (e.g. Solution-1's folder name): robustness relative to it "
                             "(mCE-style column mce; reported, not ranked)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.flows.leaderboard import leaderboard, output_paths, text_table

    frame = leaderboard(args.folders, args.output, virtual_data=args.virtual, title=args.title,
                        significance=args.significance, baseline=args.baseline)
    print(text_table(frame))
    html_path, csv_path = output_paths(args.output)
    pairwise = csv_path.with_name(csv_path.stem + ".pairwise.csv")
    print(f"written: {html_path}, {csv_path}" + (f", {pairwise}" if pairwise.is_file() else ""))
    return 0
