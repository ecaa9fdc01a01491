"""The exceptions the command line turns into a single clear line and an exit status.

Exit statuses, the same for every command: 0 ok, 1 = the submission failed
(:class:`SubmissionFailed`), 2 = bad input or usage (any other
:class:`ChallengeError`).
"""


class ChallengeError(Exception):
    """A user-facing error: bad input, a faulty submission, a missing file.

    The message must name the file, the set, the sample or the field at fault.
    The CLI prints ``error: <message>`` and exits with ``exit_code``.
    """

    exit_code = 2


class SubmissionFailed(ChallengeError):
    """The submission failed: its ingestion failed, or its predictions cannot be scored (exit status 1)."""

    exit_code = 1


def exit_status_help(failed: str | None = None) -> str:
    """The exit-status line of a command's --help; ``failed`` says when this command's submission fails."""
    one = f", 1 = the submission failed ({failed})" if failed else ""
    return f"exit status: 0 = ok{one}, 2 = bad input or usage; errors go to stderr as 'error: ...'."
