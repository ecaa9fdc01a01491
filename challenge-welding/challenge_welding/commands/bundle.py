"""Make the Codabench competition bundle zip."""

from challenge_welding.contract.errors import ChallengeError, exit_status_help

HELP = "Make the Codabench competition bundle zip (checked by our validator before it is written)."


def add_arguments(parser):
    parser.epilog = exit_status_help() + (
        " With --strict, 2 also when a choice is still competition.yaml's placeholder "
        "(the image, the contact e-mail, a Final phase on the development sets).")
    parser.add_argument("--data", metavar="DATA",
                        help="evaluation data folder written by build-sets")
    parser.add_argument("--output", default="bundle.zip", metavar="ZIP",
                        help="bundle to write (default: bundle.zip)")
    parser.add_argument("--final-data", metavar="DATA2",
                        help="a second build-sets folder for the final phase (default: DATA)")
    parser.add_argument("--solution", metavar="DIR",
                        help="reference solution folder (default: reference-solutions/Solution-1)")
    parser.add_argument("--no-solution", action="store_true",
                        help="no reference solution in the bundle and its starting kit")
    parser.add_argument("--no-public-data", action="store_true",
                        help="leave DATA/training_data out (upload it separately when large)")
    parser.add_argument("--docker-image", metavar="NAME",
                        help="image the Codabench worker runs (default: competition.yaml's, "
                             "built from the Dockerfile with --build-arg APP_USER=root)")
    parser.add_argument("--contact-email", metavar="ADDRESS",
                        help="the address participants write to (default: competition.yaml's, "
                             "a placeholder at example.org)")
    parser.add_argument("--strict", action="store_true",
                        help="refuse to write the bundle while the image, the contact e-mail or "
                             "the Final phase's data are still placeholders (each is a warning "
                             "line without it)")
    parser.add_argument("--queue", metavar="VHOST",
                        help="a private queue's vhost (competition.yaml's queue): its workers "
                             "apply each phase's own time limit; without it Codabench's default "
                             "queue stops every step at 600 s")
    parser.add_argument("--wheelhouse-path", metavar="PATH",
                        help="for a private queue without network: the wheelhouse's path in "
                             "the container (e.g. /app/data/wheelhouse); the ingestion installs "
                             "submissions from it (CHALLENGE_WELDING_WHEELHOUSE)")
    parser.add_argument("--repo", metavar="DIR",
                        help="repository root (default: found from here or from the package)")
    parser.add_argument("--check", metavar="ZIP",
                        help="only validate an existing bundle zip and list its problems")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.bundle.bundle import make_bundle
    from challenge_welding.bundle.validate import validate_bundle

    if args.check:
        problems = validate_bundle(args.check)
        for p in problems:
            print(f"problem: {p}")
        if problems:
            raise ChallengeError(f"{args.check}: {len(problems)} problem(s)")
        print(f"{args.check}: no problem")
        return 0
    if not args.data:
        raise ChallengeError("bundle: --data DATA is required (the build-sets output folder)")
    solution = None if args.no_solution else (args.solution or "default")
    make_bundle(args.data, args.output, repo_root=args.repo, final_data=args.final_data,
                solution=solution, public_data=not args.no_public_data,
                docker_image=args.docker_image, queue=args.queue,
                wheelhouse_path=args.wheelhouse_path, contact_email=args.contact_email,
                strict=args.strict)
    return 0
