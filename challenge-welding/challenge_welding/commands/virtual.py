"""Write the predictions of a virtual reference solution."""

from challenge_welding.errors import ChallengeError

HELP = "Write the predictions of a virtual reference solution."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--reference DIR --kind K --output PRED [--seed S]")


def run(args):
    raise ChallengeError("not implemented yet")
