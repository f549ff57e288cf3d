"""Where a kernel runs. A target starts a kernel (or attaches to a running one) and hands
back its console: timestamped lines as they arrive, then an exit status. It knows nothing
of agents, records or verdicts: those are the measurement session's (guest.session).

QEMU implements it today (targets.qemu); the tests have a fake that replays a script.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from ..guest.console import ConsoleLine


@dataclass(frozen=True)
class Capabilities:
    boots_kernels: bool      # it boots a kernel kernellab built
    measures_running: bool   # it measures the kernel a machine already runs
    deterministic: bool      # reruns give identical numbers (QEMU icount)


@dataclass(frozen=True)
class TargetInfo:
    """What every figure measured on this target is labelled with."""
    label: str                                  # "QEMU TCG icount", ...
    details: dict[str, str] = field(default_factory=dict)  # accelerator, CPU model, emulator version

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Exit:
    code: int | None   # the process's exit code; None when kernellab stopped it
    timed_out: bool    # stopped because the time limit ran out
    stderr: str        # what the target said besides the console (QEMU's own errors)
    wall_s: float


class Console(Protocol):
    """One running kernel's console."""
    command: list[str]   # what was started, for the record

    def lines(self) -> Iterator[ConsoleLine]:
        """Lines as they arrive, host-timestamped; ends when the kernel is gone, the time
        limit runs out or a stop_in() delay has passed."""
        ...

    def stop_in(self, seconds: float) -> None:
        """The reader has heard what it needs: stop after `seconds` more (0: now)."""
        ...

    @property
    def exit(self) -> Exit:
        """How it ended; valid once lines() is exhausted."""
        ...


class Target(Protocol):
    name: str
    capabilities: Capabilities

    def describe(self, mode: str) -> TargetInfo: ...

    def start(self, kernel: Path | None, initramfs: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> AbstractContextManager[Console]: ...
