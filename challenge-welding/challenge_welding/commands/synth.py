"""Generate a synthetic source dataset in the challenge's published format."""

from challenge_welding.errors import ChallengeError

HELP = "Generate a synthetic source dataset in the challenge's published format."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--out DIR [--n N] [--seed S] [--resolution WxH]")


def run(args):
    raise ChallengeError("not implemented yet")
