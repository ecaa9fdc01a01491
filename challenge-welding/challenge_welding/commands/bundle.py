"""Make the Codabench competition bundle zip."""

from challenge_welding.errors import ChallengeError

HELP = "Make the Codabench competition bundle zip."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--data DATA --output bundle.zip")


def run(args):
    raise ChallengeError("not implemented yet")
