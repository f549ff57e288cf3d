"""Where a kernel runs. A target starts a kernel (or attaches to a running one) and hands
back its console: timestamped lines as they arrive, then an exit status. It knows nothing
of agents' records or verdicts: those are the measurement session's (guest.session).

targets.qemu boots a built kernel under QEMU (TCG or KVM) with the agent as its init;
targets.running measures the kernel a real machine runs (this one, or one over ssh) with
the agent as a program, and targets.kexec boots a built kernel there first; targets.lava
replays a board lab's job log. The tests have a fake that replays a script.
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
    # How the agent gets there: "init" (an initramfs with the agent as /init, booted with
    # the kernel) or "program" (the static binary, run on the machine as it is).
    agent: str = "init"


@dataclass(frozen=True)
class TargetInfo:
    """What every figure measured on this target is labelled with."""
    label: str                                  # "QEMU TCG icount", ...
    details: dict[str, str] = field(default_factory=dict)  # accelerator, CPU model, emulator version
    timing: str = ""   # how its numbers are obtained, for report headers

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Exit:
    code: int | None   # the process's exit code; None when kernellab stopped it
    timed_out: bool    # stopped because the time limit ran out
    stderr: str        # what the target said besides the console (QEMU's own errors)
    wall_s: float
    ended: str = "the kernel stopped before the agent finished"   # an early end, on this target


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

    def unavailable(self) -> dict[str, str]:
        """Metrics (or metric prefixes ending in ".") the target could not give, and why:
        boot milestones from a kernel log root may not read."""
        ...

    def facts_after(self) -> dict[str, str]:
        """What the target learned by the end of the run (a real machine's load average)."""
        ...


class Target(Protocol):
    name: str
    capabilities: Capabilities

    def describe(self, mode: str) -> TargetInfo: ...

    def start(self, kernel: Path | None, agent: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> AbstractContextManager[Console]:
        """Boots `kernel` (None: the kernel the machine runs) and runs `agent` (an initramfs
        or a program, as capabilities.agent says) with the agent's options and boot
        parameters in `cmdline`."""
        ...
