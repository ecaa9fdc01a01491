"""Build the six evaluation sets (and calibrate the scoring config) from a source dataset."""

import time

from challenge_welding.contract.names import SET_NAMES

HELP = "Build the six evaluation sets (and calibrate the scoring config) from a source dataset."


def add_arguments(parser):
    parser.add_argument("--source", required=True, metavar="DIR",
                        help="dataset in the published format: STORE/challenge-welding/datasets/<name> "
                             "(DIR/metadata/ds_meta.parquet; images at STORE/<path> or DIR/<path>)")
    parser.add_argument("--unseen-source", action="append", default=[], metavar="DIR",
                        help="a published-format dataset of seams the source has not (the "
                             "generalization set); repeat for several")
    parser.add_argument("--ood-source", default=None, metavar="DIR",
                        help="a folder of real out-of-distribution photos, JPEG or PNG, any names and "
                             "sizes (the ood_real set)")
    parser.add_argument("--out", required=True, metavar="DATA",
                        help="output folder: input_data/, reference_data/, training_data/")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="builder config YAML overriding data/build_config.yaml")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    import pandas as pd

    from challenge_welding.data.build_sets import build_sets, training_meta_path

    t0 = time.time()
    out = build_sets(args.source, args.out, seed=args.seed, config=args.config, workers=args.workers,
                     unseen_sources=args.unseen_source, ood_source=args.ood_source)
    print(f"evaluation data built in {time.time() - t0:.1f} s -> {out}")
    for name in SET_NAMES:
        ref = pd.read_parquet(out / "reference_data" / f"{name}.parquet")
        extra = f", ood {int(ref['ood'].sum())}" if "ood" in ref.columns else ""
        print(f"  {name:15s} {len(ref):6d} images, KO {int((ref['class'] == 'KO').sum()):5d}{extra}")
    train = pd.read_parquet(training_meta_path(out))
    print(f"  {'training_data':15s} {len(train):6d} images, KO {int((train['class'] == 'KO').sum()):5d}")
    print(f"  scoring config (calibrated): {out / 'reference_data' / 'scoring.yaml'}")
    return 0
