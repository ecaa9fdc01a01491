"""Run the end-to-end demo: synth, build-sets, train, evaluate, leaderboard."""

from challenge_welding.errors import ChallengeError

HELP = "Run the end-to-end demo: synth, build-sets, train, evaluate, leaderboard."


def add_arguments(parser):
    parser.add_argument("rest", nargs="*", help="[--workdir DIR] [--quick]")


def run(args):
    raise ChallengeError("not implemented yet")
