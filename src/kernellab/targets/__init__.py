"""Where a kernel runs. A target starts a kernel (or attaches to a running one) and hands
back its console: timestamped lines as they arrive, then an exit status. It knows nothing
of agents' records or verdicts: those are the measurement session's (guest.session).

targets.qemu boots a built kernel under QEMU (TCG or KVM) with the agent as its init;
targets.running measures the kernel a real machine runs (this one, or one over ssh) with
the agent as a program, and targets.kexec boots a built kernel there first; targets.lava
replays a board lab's job log. The tests have a fake that replays a script.

What the user types after --target is opened in one place, targets.registry: each kind of
target registers its scheme there (`qemu`, `local`, `ssh://`, `lava:`) and declares its
Capabilities, from which every constraint and refusal is derived (registry.check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .. import modes as _modes
from ..arches import ArchProfile

# A console and how it ended are the guest layer's (guest.console), which the session reads
# without knowing which target started the kernel; they are named here too, for the targets.
from ..guest.console import Console as Console
from ..guest.console import Exit as Exit

if TYPE_CHECKING:
    from ..guest.workloads import Packages
    from ..workloads import Instance
    from .fsimage import FsSpec
    from .running import RunningTarget


@dataclass(frozen=True)
class Capabilities:
    boots_kernels: bool      # it boots a kernel kernellab built
    measures_running: bool   # it measures the kernel a machine already runs
    deterministic: bool      # reruns give identical numbers (QEMU icount)
    # How the agent gets there: "init" (an initramfs with the agent as /init, booted with
    # the kernel) or "program" (the static binary, run on the machine as it is).
    agent: str = "init"
    vcpus: bool = False      # it gives a variant the vCPUs it asks for (vcpus:N)
    disks: bool = False      # it attaches a file-system image (fs:) and extra devices (devices:N)
    kexec: bool = False      # it boots built kernels by kexec from the kernel it runs (--power-cycle)
    accel: bool = False      # --accel chooses how it runs guests
    scratch_dir: bool = False  # block I/O on a scratch file in --block-dir (else a disk of its own)
    cluster: bool = False    # any Dask worker can be this target (--workers, --cluster)
    live: bool = True        # it starts kernels when asked (False: it reads what a board lab ran)
    # The host can reach what runs there over a network link (a workload's needs.network =
    # "host"): this machine, an ssh host, a QEMU guest in wall mode (a NIC and user
    # networking's port forward, on an arch whose profile names its net_device). Not a board
    # in a lab's rack.
    host_link: bool = False
    # What its messages call the machine a run measures, where a run has no name for it of
    # its own (a running machine's runs say which one: "this machine", "ssh://root@nas").
    machine: str = "the guest"

    @property
    def modes(self) -> tuple[str, ...]:
        """The timing modes it supports: all of them with deterministic time, else those
        that read the host's clock."""
        return tuple(m for m in _modes.NAMES if self.deterministic or not _modes.get(m).deterministic)


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


@runtime_checkable
class MachinePrograms(Protocol):
    """A target whose workloads run the programs its machine has installed (a running
    machine's, targets.running), in a directory of its own file systems: it says which
    Debian package each came from, and how much room that directory has."""

    def installed(self, instances: Sequence[Instance]) -> Packages: ...

    def workdir_free_mib(self) -> tuple[str, int]:
        """Where the workloads' {workdir} is made, and the MiB free there."""
        ...


@runtime_checkable
class HostLinked(Protocol):
    """A run's console whose machine the host reaches over a network link, for the
    workloads that talk to the host (needs.network = "host"; guest.workloads.Reader)."""

    def host_address(self, port: int) -> tuple[str, int]:
        """(address, port) where the host connects to the machine's TCP `port`: a QEMU
        guest's forward on 127.0.0.1, a machine's own address; a LabError without one."""
        ...


@runtime_checkable
class LinkDriver(Protocol):
    """A target whose host link comes through a device of the machine it boots (a QEMU
    guest's NIC): the kernel option of the device's driver, which a variant's kernel needs
    for a workload that talks to the host (experiments.lab: else its metrics are n/a)."""
    link_driver: str


@dataclass(frozen=True)
class Capacity:
    """The CPUs and memory the workloads of a run get where they run, for their
    needs.vcpus and needs.memory_mib: a QEMU guest's, or a real machine's."""
    where: str         # "the guest", "the machine": for messages
    vcpus: int
    memory_mib: int


@runtime_checkable
class HasCapacity(Protocol):
    """A target that says what CPUs and memory its workloads get (a QEMU guest as the
    variant boots it, a running machine as it is). A LAVA board's log says nothing of it: there
    the agent checks (agent/workload.c: too_small)."""

    def capacity(self) -> Capacity: ...


@dataclass(frozen=True)
class TargetOptions:
    """What the user said of the target besides its spec (--accel, --ssh-config, ...)."""
    target: str = "qemu"                 # the spec: qemu | local | ssh://[user@]host[:port] | ...
    accel: str = "auto"                  # the qemu target's accelerator
    ssh_config: Path | None = None       # ssh -F
    accept_new_host_key: bool = False
    block_dir: str | None = None         # where block I/O metrics may write a file
    power_cycle: str | None = None       # a command that power-cycles the ssh target (kexec)
    arch: str | None = None              # --arch as the user gave it
    come_back_s: float = 300.0           # how long a kexec'd (or rebooted) ssh target may take


@dataclass(frozen=True)
class Want:
    """The machine one variant asks for: its arch, its kernel (None: the running one) and,
    on a target that can give them, vCPUs, extra devices and a file system."""
    profile: ArchProfile
    mode: str
    image: Path | None = None
    scratch_mib: int = 64   # wall mode's raw scratch disk, the agent's block metrics'
    vcpus: int | None = None
    devices: int | None = None
    fs: FsSpec | None = None
    disk_mib: int = 0       # the room the run's workloads need on a disk's file system (needs.disk_mib)
    host_ports: tuple[int, ...] = ()   # the TCP ports the host reaches its workloads' servers on (needs.network)


class Site(Protocol):
    """A target as the user named it (`targets.open`): its capabilities, the real machine
    whose running kernel `running` means (None: none), and the Target one variant runs on."""
    spec: str
    name: str
    capabilities: Capabilities

    @property
    def machine(self) -> RunningTarget | None: ...

    def target(self, want: Want, log: Callable[[str], None]) -> Target: ...


def open(spec: str, options: TargetOptions | None = None) -> Site:  # noqa: A001 - targets.open
    """The one place a target is made from what the user typed (targets.registry)."""
    from . import registry
    return registry.open(spec, options)
