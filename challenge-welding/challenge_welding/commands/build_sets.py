"""Build the six evaluation sets (and calibrate the scoring config) from a source dataset."""

from challenge_welding.errors import ChallengeError

HELP = "Build the six evaluation sets (and calibrate the scoring config) from a source dataset."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--source DIR --out DATA [--seed S]")


def run(args):
    raise ChallengeError("not implemented yet")
