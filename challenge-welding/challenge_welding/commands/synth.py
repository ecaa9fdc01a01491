"""Generate synthetic welds in the challenge's published format and layout."""

from challenge_welding.contract.errors import ChallengeError

HELP = "Generate synthetic welds in the challenge's published format and layout (a storage root)."


def _resolution(text):
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ChallengeError(f"--resolution must look like 480x270, got {text!r}") from None
    return w, h


def add_arguments(parser):
    parser.add_argument("--out", required=True, metavar="STORE",
                        help="output folder, a storage root: STORE/challenge-welding/datasets/"
                             "{synthetic,synthetic_unseen} and STORE/ood_photos")
    parser.add_argument("--n", type=int, default=3000, help="number of images in all (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resolution", default="480x270",
                        help="full resolution WxH; half of the images are at half of it")
    parser.add_argument("--ko-share", type=float, default=0.05, help="share of KO welds")
    parser.add_argument("--unseen-share", type=float, default=0.12,
                        help="share of the unseen seams c19/c34/c101 (the synthetic_unseen dataset)")
    parser.add_argument("--ood-share", type=float, default=0.03,
                        help="share of real-OOD photos (the ood_photos folder)")
    parser.add_argument("--workers", type=int, default=None)


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.data.synth import generate_dataset

    out = generate_dataset(args.out, n=args.n, seed=args.seed,
                           resolution=_resolution(args.resolution), ko_share=args.ko_share,
                           unseen_share=args.unseen_share, ood_share=args.ood_share,
                           workers=args.workers)
    print(f"synthetic welds ({args.n} images) in the storage root {out.store}:")
    print(f"  source dataset   {out.source}")
    print(f"  unseen seams     {out.unseen}")
    print(f"  real-OOD photos  {out.ood}")
    print("  defect masks     sample_<n>_mask.png beside each defective image (column mask_path)")
    print(f"next: challenge-welding build-sets --source {out.source} --unseen-source {out.unseen} "
          f"--ood-source {out.ood} --out DATA")
    return 0
