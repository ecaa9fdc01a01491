"""Build the six evaluation sets (and calibrate the scoring config) from a source dataset."""

import time

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.files import writing
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
    parser.add_argument("--max-per-set", default=None, metavar="SET=N,...",
                        help="cap sets' image counts, e.g. performance=5000,robustness=2000 "
                             f"(sets: {', '.join(SET_NAMES)}); the sizes are printed before writing")
    parser.add_argument("--robustness-base", type=str, default=None, metavar="N",
                        help="how many clean images get the full perturbation ladder (the "
                             "config's robustness.size, which is raised if min_ko_per_level needs "
                             "it; N given here is refused instead, before anything is written)")
    parser.add_argument("--plan-only", action="store_true",
                        help="print the sizes of the sets and stop (nothing written)")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")


def parse_caps(text, base=None):
    """{set: N} from "set=N,set=N" (and --robustness-base); one line per bad value."""
    caps, bad = {}, []
    for part in [p.strip() for p in (text or "").split(",") if p.strip()]:
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            bad.append(f"--max-per-set {part!r}: expected SET=N, got no '='")
        elif name not in SET_NAMES:
            bad.append(f"--max-per-set {name!r}: expected one of {', '.join(SET_NAMES)}, got {name!r}")
        elif not value.strip().isdigit() or int(value) < 1:
            bad.append(f"--max-per-set {name}: expected a positive integer, got {value.strip()!r}")
        elif name in caps:
            bad.append(f"--max-per-set {name}: expected once, got twice")
        else:
            caps[name] = int(value)
    ladder = None
    if base is not None:
        if not base.strip().isdigit() or int(base) < 1:
            bad.append(f"--robustness-base: expected a positive integer, got {base!r}")
        else:
            ladder = int(base)
    if bad:
        raise ChallengeError("\n".join(bad))
    return caps, ladder


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    import pandas as pd

    from challenge_welding.data.build_sets import build_sets, format_size_table, ko_warnings, training_meta_path
    from challenge_welding.scoring.inputs import read_reference

    caps, ladder = parse_caps(args.max_per_set, args.robustness_base)

    def report(table):
        print(("planned sizes (nothing written):" if args.plan_only else "planned sizes (writing now):"))
        print("\n".join([format_size_table(table), *ko_warnings(table)]), flush=True)

    t0 = time.time()
    # a write fault in DATA (no space, read-only, a file in the way) is one line, exit 3; the
    # sets are made in a work folder inside DATA and moved in once complete (data/build_sets.py)
    with writing(args.out, "the evaluation sets"):
        out = build_sets(args.source, args.out, seed=args.seed, config=args.config, workers=args.workers,
                         unseen_sources=args.unseen_source, ood_source=args.ood_source,
                         max_per_set=caps, report=report, plan_only=args.plan_only,
                         robustness_base=ladder)
    if args.plan_only:
        return 0
    print(f"evaluation data built in {time.time() - t0:.1f} s -> {out}")
    for name in SET_NAMES:
        # the reference format's one reader (scoring.inputs): what the scoring will refuse is said now
        ref = read_reference(out / "reference_data", name)
        extra = f", ood {int(ref['ood'].sum())}" if "ood" in ref.columns else ""
        masks = out / "reference_data" / "masks" / name
        n_masks = len(list(masks.glob("*.png"))) if masks.is_dir() else 0
        print(f"  {name:15s} {len(ref):6d} images, KO {int((ref['class'] == 'KO').sum()):5d}{extra}"
              f"{f', masks {n_masks}' if n_masks else ''}")
    train = pd.read_parquet(training_meta_path(out), columns=["class"])  # data/'s format: its labels only
    print(f"  {'training_data':15s} {len(train):6d} images, KO {int((train['class'] == 'KO').sum()):5d}")
    print(f"  scoring config (calibrated): {out / 'reference_data' / 'scoring.yaml'}")
    return 0
