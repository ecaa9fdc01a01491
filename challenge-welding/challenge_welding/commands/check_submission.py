"""Check a submission folder or zip before uploading it."""

from challenge_welding.errors import ChallengeError

HELP = "Check a submission folder or zip before uploading it."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="PATH")


def run(args):
    raise ChallengeError("not implemented yet")
