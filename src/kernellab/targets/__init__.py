"""Where a kernel runs. A target starts a kernel (or attaches to a running one) and hands
back its console: timestamped lines as they arrive, then an exit status. It knows nothing
of agents' records or verdicts: those are the measurement session's (guest.session).

targets.qemu boots a built kernel under QEMU (TCG or KVM) with the agent as its init;
targets.running measures the kernel a real machine runs (this one, or one over ssh) with
the agent as a program, and targets.kexec boots a built kernel there first; targets.lava
replays a board lab's job log. The tests have a fake that replays a script.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

# A console and how it ended are the guest layer's (guest.console), which the session reads
# without knowing which target started the kernel; they are named here too, for the targets.
from ..guest.console import Console as Console
from ..guest.console import Exit as Exit


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
