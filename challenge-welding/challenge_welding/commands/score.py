"""Score predictions: the six trust KPIs, the leaderboard score and the detailed results page."""

from challenge_welding.errors import ChallengeError

HELP = "Score predictions: the six trust KPIs, the leaderboard score and the detailed results page."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="--reference DIR --predictions PRED --output OUT")


def run(args):
    raise ChallengeError("not implemented yet")
