"""Ingest then score one submission."""

from challenge_welding.errors import ChallengeError

HELP = "Ingest then score one submission."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--submission PATH --data DATA --output OUT")


def run(args):
    raise ChallengeError("not implemented yet")
