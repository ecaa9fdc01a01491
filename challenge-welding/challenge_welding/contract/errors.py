"""The exceptions the command line turns into a single clear line and an exit status.

Exit statuses, the same for every command (docs/contracts.md states them once): 0 ok,
1 = the submission failed (:class:`SubmissionFailed`), 2 = bad input or usage (any other
:class:`ChallengeError`), 3 = the evaluator could not write its output (:class:`OutputError`:
no space left, a read-only file system, a file where a folder is needed, no permission),
128 + the signal's number when interrupted (:class:`Interrupted`: 130 for Ctrl-C, 143 for
SIGTERM).
"""

import signal


class ChallengeError(Exception):
    """A user-facing error: bad input, a faulty submission, a missing file.

    The message must name the file, the set, the sample or the field at fault.
    The CLI prints ``error: <message>`` and exits with ``exit_code``.
    """

    exit_code = 2


class SubmissionFailed(ChallengeError):
    """The submission failed: its ingestion failed, or its predictions cannot be scored (exit status 1)."""

    exit_code = 1


class OutputError(ChallengeError):
    """An output of ours could not be written: the evaluator's side, not the submission's (exit status 3).

    Raised by contract.files (:func:`~challenge_welding.contract.files.writing`) with a line
    naming the path, the cause and what was needed; ``os_error``: the OSError it explains."""

    exit_code = 3

    def __init__(self, line: str, os_error: OSError | None = None):
        super().__init__(line)
        self.os_error = os_error


class Interrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM: the run stops; the exit status is 128 + the signal's number."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.exit_code = 128 + self.signum
        self.said = False  # True once a line on the terminal said it (the CLI adds none)


def exit_status_help(failed: str | None = None) -> str:
    """The exit-status line of a command's --help; ``failed`` says when this command's submission fails."""
    one = f", 1 = the submission failed ({failed})" if failed else ""
    return (f"exit status: 0 = ok{one}, 2 = bad input or usage, 3 = an output could not be "
            "written (no space left, read-only, a file where a folder is needed, no "
            "permission), 130/143 = interrupted (Ctrl-C/SIGTERM); errors go to stderr as "
            "'error: ...'.")
