"""What reaches the terminal: text that came from a report, a console log or the store,
made printable; standard output, whose reader may go away; the screen a view is fitted
to (Screen: its width, and whether it takes colours); and a table's header folded to its
column (fold_header), so that a screen's tables are as narrow as their figures.

A report travels through CI artifacts and a console log is whatever the guest printed:
an escape sequence in either would, printed raw, retitle the window, hide lines or move
the cursor over what kernellab said. Every such text goes through `printable` (or
`printable_tree`) before it is written, so that what the user reads is what is there.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from typing import Any, TextIO

from rich.cells import cell_len

from ..printable import printable

__all__ = ["GuardedOutput", "OutputLost", "Screen", "fold_header", "header_pieces", "printable", "printable_tree"]


@dataclass(frozen=True)
class Screen:
    """Where a view goes. `width`: the columns it must fit, None for the full width (a file
    or a pipe keeps every column and every header line: nothing is left out where nobody
    sees that it was); `colour`: a terminal, which shows the verdicts' colours."""
    width: int | None = None
    colour: bool = False

    @classmethod
    def of(cls, stream: Any) -> Screen:
        """The screen `stream` writes to. COLUMNS, when set, is a width asked for, on a
        terminal or not (`COLUMNS=80 kernellab compare | less`); else a terminal's own
        width; else (a file, a pipe) the full width. NO_COLOR turns colours off (rich)."""
        asked = os.environ.get("COLUMNS", "")
        terminal = _is_terminal(stream)
        if asked.isdigit() and int(asked) > 0:
            return cls(int(asked), terminal)
        if terminal:
            return cls(_columns(stream), True)
        return cls()


def _columns(stream: Any) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return shutil.get_terminal_size().columns


# A file's: the full width, no colours.
FULL_SCREEN = Screen()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):   # a closed or replaced stream
        return False


def header_pieces(header: str) -> list[str]:
    """A header's pieces: broken after each hyphen or space ("Δ slow-code" -> "Δ ", "slow-",
    "code"), where it may fold; the widest one is the narrowest its column can be."""
    return [p for p in re.findall(r"[^-\s]*[-\s]?", header) if p]


def fold_header(header: str, width: int) -> str:
    """`header` in lines as wide as `width` (or its widest piece), folded only between its
    pieces: every word whole, so that none reads as another ("AES-256-" over "CBC", never
    "AES-256…"), and a long name does not widen a column of short figures."""
    pieces = header_pieces(header)
    width = max(width, *(cell_len(p.rstrip()) for p in pieces)) if pieces else width
    lines = [""]
    for piece in pieces:
        if lines[-1] and cell_len((lines[-1] + piece).rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


def printable_tree(value: Any) -> Any:
    """A parsed JSON document with `printable` applied to every string, keys included."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: printable_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_tree(v) for v in value]
    return value


class OutputLost(Exception):
    """Standard output cannot be written: its reader went away (`| head`), or its file
    system is full (`> /dev/full`). Not an OSError, so that no handler of a command's own
    file errors takes it for one of them."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error

    @property
    def reader_gone(self) -> bool:
        return isinstance(self.error, BrokenPipeError)


class GuardedOutput:
    """A text stream that raises OutputLost for an error of its own writes: main() wraps
    sys.stdout in it, so that an error of the output is told apart from every other
    OSError (a pipe to a child, a full cache) and handled once."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as exc:
            raise OutputLost(exc) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            raise OutputLost(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
