"""Rank scored submissions into an HTML and CSV leaderboard."""

from challenge_welding.errors import ChallengeError

HELP = "Rank scored submissions into an HTML and CSV leaderboard."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="OUT... --output FILE")


def run(args):
    raise ChallengeError("not implemented yet")
