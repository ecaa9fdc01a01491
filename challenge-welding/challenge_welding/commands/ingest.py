"""Install a submission in an isolated environment and run it over the evaluation sets."""

from challenge_welding.errors import ChallengeError

HELP = "Install a submission in an isolated environment and run it over the evaluation sets."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--submission PATH --input-data DIR --output PRED")


def run(args):
    raise ChallengeError("not implemented yet")
