"""What moves on the screen while kernellab works: rich progress bars on stderr, one line
per thing that takes time (a build's objects, a boot's milestones, a run's metrics, an
experiment's variants, a study's or sweep's probes).

Shown only while `display()` is open and stderr is a terminal; everywhere else every
call here does nothing, and the log lines on stderr are the whole story. The display is
one per process, like the terminal it draws on: the stages that take time open their
tasks here rather than threading a display through every call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

_lock = threading.Lock()
_shown: Progress | None = None


class Task:
    """One line of the display. Without a display, a task that records nothing."""

    def __init__(self, progress: Progress | None, task_id: TaskID | None) -> None:
        self._progress, self._id = progress, task_id

    def advance(self, steps: float = 1) -> None:
        if self._progress is not None and self._id is not None:
            self._progress.advance(self._id, steps)

    def update(self, *, completed: float | None = None, total: float | None = None,
               description: str | None = None, note: str | None = None) -> None:
        if self._progress is None or self._id is None:
            return
        fields: dict[str, Any] = {} if note is None else {"note": note}
        self._progress.update(self._id, completed=completed, total=total, description=description, **fields)


@contextmanager
def display(console: Console | None = None) -> Iterator[None]:
    """Shows the tasks opened inside it, on `console` (default: stderr, when it is a
    terminal). Writes to stderr meanwhile (the log lines) appear above the bars."""
    global _shown
    console = console or Console(stderr=True)
    if not console.is_terminal or _shown is not None:
        yield
        return
    bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[note]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console, transient=True, redirect_stdout=False, redirect_stderr=True)
    with bars:
        with _lock:
            _shown = bars
        try:
            yield
        finally:
            with _lock:
                _shown = None


def close() -> None:
    """Takes the bars off the screen for good: before a report is written to stdout,
    which the display does not own."""
    global _shown
    with _lock:
        bars, _shown = _shown, None
    if bars is not None:
        bars.stop()


@contextmanager
def task(description: str, total: float | None = None, note: str = "") -> Iterator[Task]:
    """A line for the duration of the block. `total` None: the amount is not known yet
    (a pulsing bar); a later update(total=...) can say it."""
    with _lock:
        bars = _shown
    if bars is None:
        yield Task(None, None)
        return
    task_id = bars.add_task(description, total=total, note=note)
    try:
        yield Task(bars, task_id)
    finally:
        bars.remove_task(task_id)
