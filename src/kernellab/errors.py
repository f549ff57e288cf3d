"""The one exception type the CLI turns into a one-line message."""

from .printable import printable


class LabError(Exception):
    """A failure the user can act on; the message says what to do, on one line.

    Anything else escaping to the CLI is a bug in kernellab.
    """

    exit_status = 2   # usage or input: see cli.EXIT_CODES

    def __init__(self, message: str = "", *rest: object) -> None:
        # Messages quote what the user gave (a variant, a config line, a file name): a newline
        # or an escape sequence in it must neither break the message nor reach the terminal.
        super().__init__(printable(str(message), one_line=True), *rest)


class RunLost(LabError):
    """Runs could not go on (their machine was lost); those measured are in the store."""

    exit_status = 1   # a run failed
