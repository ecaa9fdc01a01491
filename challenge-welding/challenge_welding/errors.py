"""The one exception the command line turns into a single clear line."""


class ChallengeError(Exception):
    """A user-facing error: bad input, a faulty submission, a missing file.

    The message must name the file, the set, the sample or the field at fault.
    The CLI prints ``error: <message>`` and exits with status 2.
    """
