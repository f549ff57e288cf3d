"""The one run loop: boots of several kernels (an experiment's variants, a search's probes),
round after round, until each has the runs it needs.

A command says what to boot and what to do with each outcome; the order, how many boot at
once and when to stop are decided here, once, from the resolved timing mode and what the
target can do:

- Counterbalanced rounds (A B, B A, A B, ...): whoever boots first in a round has no
  systematic advantage from the host's state. One that already has a round's run (taken
  from the store, or booted while another variant built) sits that round out.
- Side by side when the mode is deterministic and so is the target's time (guest time
  then does not depend on what the host does); otherwise in turn, since each boot would
  slow the others down.
- At least `min_runs` rounds; in a deterministic mode no more (reruns are identical:
  another adds nothing); otherwise more while `imprecise()` names a metric whose median
  is not yet precise enough, up to `max_runs`.

One interface, Scheduler, with two implementations of `boots` (one round's boots):
Threads, on this machine's cores, and executor.DaskScheduler, on a Dask cluster's workers.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, nullcontext
from typing import Generic, TypeVar

from .. import progress
from ..modes import Mode
from ..store import Store
from ..targets import Capabilities
from .lab import Cancellation, RunOutcome

T = TypeVar("T")

# Boots one item against a store (each thread has its own connection); a side-by-side
# round hands it the round's Cancellation, which Ctrl-C uses to stop the others' boots.
BootOne = Callable[[T, Store, Cancellation | None], RunOutcome]


def _nothing_imprecise() -> list[str]:
    return []


def _quiet(message: str) -> None:
    pass


class Scheduler(ABC, Generic[T]):
    """Runs rounds of boots; an implementation says how one round's boots run (`boots`)."""

    def __init__(self, mode: Mode, capabilities: Capabilities) -> None:
        self.mode, self.capabilities = mode, capabilities

    @property
    def side_by_side(self) -> bool:
        """Whether the boots of a round may run at once: only when no boot's figures
        depend on what the host does meanwhile."""
        return self.mode.deterministic and self.capabilities.deterministic

    @abstractmethod
    def boots(self, order: list[T]) -> Iterator[RunOutcome]:
        """One boot of each of `order`, the outcomes in that order: side by side when
        side_by_side allows, else one after another, each started only when the caller
        asks for its outcome (a caller that stops reading starts no more)."""

    def run(self, items: Sequence[T], have: Callable[[T], int], record: Callable[[T, RunOutcome], None],
            min_runs: int, max_runs: int | None = None,
            imprecise: Callable[[], list[str]] = _nothing_imprecise,
            log: Callable[[str], None] = _quiet, label: str | None = None) -> None:
        """Rounds of boots of `items` until each has `min_runs` runs, then while
        `imprecise()` names metrics, up to `max_runs` (None: `min_runs`). `have(item)`
        counts its runs; `record` hears each outcome and must make `have` count it.
        `label`: the progress line of the boots, if they get one."""
        cap = min_runs if max_runs is None else max_runs
        planned = sum(max(min_runs - have(x), 0) for x in items)
        line: AbstractContextManager[progress.Task] = (
            progress.task(label, planned, f"boots ({self.mode.name})") if label is not None
            else nullcontext(progress.Task(None, None)))
        with line as bar:
            for i in range(cap if items else 0):
                due = [x for x in items if have(x) <= i]
                order = due if i % 2 == 0 else due[::-1]
                if i >= min_runs:
                    planned += len(order)
                    bar.update(total=planned)
                for x, outcome in zip(order, self.boots(order), strict=True):
                    record(x, outcome)
                    bar.advance()
                if i + 1 >= min_runs:
                    loose = [] if self.mode.deterministic else imprecise()
                    if not loose:
                        return
                    # Runs taken from the store may already reach the next round: no run, no word.
                    if i + 1 < cap and any(have(x) <= i + 1 for x in items):
                        log(f"another run: {len(loose)} metric(s) not yet within +-3% ({', '.join(loose[:4])}...)")


class Threads(Scheduler[T]):
    """Boots on this machine: side by side, one per core, each thread with its own
    connection to the store; else in turn."""

    def __init__(self, mode: Mode, capabilities: Capabilities, store: Store, boot: BootOne[T],
                 cores: int | None = None) -> None:
        super().__init__(mode, capabilities)
        self.store, self.boot = store, boot
        self.cores = cores or os.cpu_count() or 1

    def boots(self, order: list[T]) -> Iterator[RunOutcome]:
        workers = min(len(order), self.cores)
        if not self.side_by_side or workers < 2:
            for x in order:
                yield self.boot(x, self.store, None)
            return
        yield from self._side_by_side(order, workers)

    def _side_by_side(self, order: list[T], workers: int) -> list[RunOutcome]:
        cancellation = Cancellation()

        def in_thread(x: T) -> RunOutcome:
            own = Store(self.store.path)  # an SQLite connection belongs to the thread that opened it
            try:
                return self.boot(x, own, cancellation)
            finally:
                own.close()

        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(in_thread, x) for x in order]
            try:
                return [f.result() for f in futures]
            except KeyboardInterrupt as exc:
                # The signal reached this thread only: stop the boots the workers are reading,
                # which end as interrupted with what they measured; then stop too.
                cancellation.cancel(exc.args[0] if exc.args else "Ctrl-C")
                wait(futures)
                raise
