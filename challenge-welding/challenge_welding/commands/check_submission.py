"""Check a submission folder or zip before uploading it."""

from challenge_welding.ingestion.options import IngestOptions

HELP = "Check a submission folder or zip before uploading it."
FAILED = "the check found an error: the submission or, when said, the evaluator image"


def add_environment_arguments(parser):
    """The submission environment's options, shared by check-submission and evaluate."""
    parser.add_argument("--env-cache", metavar="DIR", default=IngestOptions.cache_dir,
                        help="cache of environments (default ~/.cache/challenge-welding/envs; "
                             "`challenge-welding cache list|prune` manages it)")
    parser.add_argument("--python", metavar="PATH", default=IngestOptions.python,
                        help="the interpreter to install and run the submission on (default: "
                             "check-submission looks for one of the evaluator's version, "
                             "contract/target.py; evaluate uses this one)")
    parser.add_argument("--allow-source-builds", action="store_true",
                        help="organisers: a pinned dependency without a wheel is built from its "
                             "source (fetched by the evaluator, built offline in the sandbox); "
                             "default: wheels only, one error line naming it")


def add_arguments(parser):
    parser.add_argument("path", metavar="PATH", help="submission folder or zip")
    parser.add_argument("--images", type=int, default=4,
                        help="synthetic images for the dry predict() (default 4)")
    add_environment_arguments(parser)
    parser.add_argument("--no-isolation", action="store_true",
                        help="run in this environment from the folder (no install)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.ingestion.run.check import check_submission

    findings = check_submission(args.path, cache_dir=args.env_cache, n_images=args.images,
                                isolation=not args.no_isolation, python=args.python,
                                allow_source_builds=args.allow_source_builds)
    errors = sum(f.level == "error" for f in findings)
    warnings = sum(f.level == "warning" for f in findings)
    print(f"\n{args.path}: {errors} error(s), {warnings} warning(s)"
          + (" - ready to upload" if not errors else " - fix the errors before uploading"))
    return 1 if errors else 0
