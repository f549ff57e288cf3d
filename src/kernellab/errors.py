"""The one exception type the CLI turns into a one-line message, and the one suggestion
an error about a mistyped name gives."""

import difflib
from collections.abc import Iterable

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


def did_you_mean(word: str, known: Iterable[str], n: int = 3, prefix: str = "") -> str:
    """"did you mean A, B?" with the `known` names closest to `word`, or "" when none is
    close: what every error about a name the user typed (an option, a base, a metric)
    suggests. A name that ends in `word` after a dot comes first (proc.fork_exit for
    fork_exit: the group left out is the commonest slip). `prefix` is compared without and
    shown with (CONFIG_, which every option name would otherwise share)."""
    names = list(dict.fromkeys(known))
    bare = word.removeprefix(prefix)
    dotted = [k for k in names if k.endswith("." + bare)]
    # The word itself is no suggestion (a name known here but refused for another reason).
    close = list(dict.fromkeys(c for c in dotted + difflib.get_close_matches(bare, names, n=n + 1) if c != bare))
    return f"did you mean {', '.join(prefix + c for c in close[:n])}?" if close else ""
