"""Replay Codabench's compute worker on a submission (Docker or Podman's Docker API)."""

from pathlib import Path

from challenge_welding.contract.errors import ChallengeError

HELP = ("Replay Codabench's compute worker (prediction + scoring steps) on a submission, "
        "in containers through the Docker Engine API (Docker, or Podman's API service).")
FAILED = "the replayed worker marks the submission failed: an ingestion or scoring step failed or timed out"


def add_arguments(parser):
    parser.add_argument("--submission", required=True, metavar="ZIP|DIR",
                        help="the submission zip as uploaded (a folder is zipped)")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundle", metavar="ZIP", help="the competition bundle: its programs, "
                     "data, docker_image and the phase's time limit")
    src.add_argument("--data", metavar="DATA", help="a build-sets folder, with this "
                     "repository's programs (needs --image)")
    parser.add_argument("--image", metavar="NAME",
                        help="image to run (default: the bundle's docker_image)")
    parser.add_argument("--phase", type=int, default=0, metavar="N",
                        help="phase of the bundle (by order of index; default 0)")
    parser.add_argument("--out", default="dry-run", metavar="DIR",
                        help="outputs: predictions/, scores/, logs/ (default: dry-run)")
    parser.add_argument("--time-limit", type=int, metavar="S",
                        help="seconds per step (default: what the worker applies: the phase's "
                             "execution_time_limit, at most 600 s on the default queue)")
    parser.add_argument("--no-network", action="store_true",
                        help="containers without network (COMPETITION_CONTAINER_NETWORK_DISABLED"
                             "=true); give --wheelhouse")
    parser.add_argument("--wheelhouse", metavar="DIR",
                        help="wheels for offline installs: mounted read-only at "
                             "/app/data/wheelhouse, named by CHALLENGE_WELDING_WHEELHOUSE")
    parser.add_argument("--engine-url", metavar="URL",
                        help="Docker Engine API (default: DOCKER_HOST, /var/run/docker.sock, "
                             "/run/podman/podman.sock)")
    parser.add_argument("--network-mode", metavar="NAME",
                        help="container network (default: the engine's, as the worker); "
                             "e.g. host where bridges do not work")
    parser.add_argument("--mount", action="append", default=[], metavar="HOST:PATH[:ro]",
                        help="an extra bind mount (e.g. a proxy's CA bundle); repeatable")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="the worker's data folder, read-only at /app/data (default: empty)")
    parser.add_argument("--uv-cache", metavar="DIR",
                        help="keep submission environments between runs (not on Codabench)")
    parser.add_argument("--repo", metavar="DIR", help="repository root (with --data)")
    parser.add_argument("--keep", action="store_true", help="keep the worker's folders (run/)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.bundle.dry_run import parse_mount, run_dry_run

    if args.time_limit is not None and args.time_limit <= 0:
        raise ChallengeError(f"--time-limit {args.time_limit}: must be a positive number of "
                             "seconds")
    result = run_dry_run(
        submission=Path(args.submission), out=Path(args.out),
        bundle=Path(args.bundle) if args.bundle else None,
        data=Path(args.data) if args.data else None, image=args.image, phase=args.phase,
        time_limit_s=args.time_limit, no_network=args.no_network,
        wheelhouse=Path(args.wheelhouse) if args.wheelhouse else None, url=args.engine_url,
        network_mode=args.network_mode, mounts=[parse_mount(m) for m in args.mount],
        data_dir=Path(args.data_dir) if args.data_dir else None,
        uv_cache=Path(args.uv_cache) if args.uv_cache else None,
        repo=Path(args.repo) if args.repo else None, keep=args.keep)
    return result.status
