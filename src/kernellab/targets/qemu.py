"""QEMU as a target: start a kernel, hand back its serial console as it arrives. TCG
emulates the guest; KVM (targets.accel chooses) runs it on the host's CPU, wall mode only.

Timing modes (see modes.toml):
  icount  `-icount shift=0,sleep=off`: guest time follows the instruction count
          (1 instruction = 1 ns of guest time), so reruns give identical numbers
          whatever the host is doing. A proxy for CPU work, blind to caches and memory.
  wall    guest time is host time: noisy, needs repetitions and statistics.
Neither is a hardware figure: every run records this target's description.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from .. import arches, modes
from ..arches import ArchProfile
from ..errors import LabError
from ..proc import require_tool
from . import Capabilities, Capacity, Target, TargetInfo, TargetOptions, Want, fsimage, registry
from .accel import choose
from .stream import ProcessConsole

if TYPE_CHECKING:
    from ..workloads import Instance

# The default; a profile whose machine needs other arguments says so (icount_args).
# -seed: what QEMU hands the guest as randomness (the s390x TRNG instruction, the `virt`
# machine's rng-seed and kaslr-seed) comes from a fixed-seed generator, not the host's:
# random layouts and hash seeds would change the instruction counts run to run.
ICOUNT_ARGS = ("-icount", "shift=0,sleep=off", "-rtc", "base=2000-01-01T00:00:00,clock=vm",
               "-seed", "1")
SCRATCH_MIB = 64  # the raw scratch disk of the agent's block metrics (they use its first 32 MiB)
# The host link of the workloads that talk to the host: QEMU's user networking (slirp, no
# privileges, no host interface), whose guest address the agent gives the NIC (pid1.c), and
# a forward from a free port on the host's loopback to each server's port there.
GUEST_ADDRESS = "10.0.2.15"
LINK_HOST = "127.0.0.1"
NETDEV_ID = "kl-net"
# The driver of the arch profiles' net_device (virtio-net on PCI, MMIO or CCW): a variant
# without it has no NIC, and a workload that talks to the host is not run (experiments.lab).
LINK_DRIVER = "CONFIG_VIRTIO_NET"
KVM_TIMING = ("a KVM guest: the host's CPU runs it, guest clock = host clock; virtualized and noisy, "
              "not a hardware figure")


CAPABILITIES = Capabilities(boots_kernels=True, measures_running=False, deterministic=True, vcpus=True,
                            disks=True, accel=True, cluster=True, host_link=True)


class QemuSite:
    """--target qemu: a QEMU machine per variant, of its arch, vCPUs, devices and file
    system; the accelerator chosen once per arch (targets.accel)."""
    name = "qemu"
    machine = None   # `running` is this machine's kernel (targets.open("local"))

    def __init__(self, spec: str, options: TargetOptions):
        self.spec, self.options = spec, options
        self.capabilities = replace(CAPABILITIES, deterministic=options.accel != "kvm")
        self._accels: dict[str, str] = {}

    def target(self, want: Want, log: Callable[[str], None]) -> Target:
        accel = self._accels.get(want.profile.name)
        if accel is None:
            if self.options.accel == "tcg" or want.image is None:
                accel = "tcg"
            else:
                choice = choose(self.options.accel, want.profile, want.mode, want.image)
                if choice.why:
                    log(choice.why)
                accel = choice.accel
            self._accels[want.profile.name] = accel
        return QemuTarget(want.profile, want.scratch_mib, accel, vcpus=want.vcpus, devices=want.devices, fs=want.fs,
                          disk_mib=want.disk_mib, host_ports=want.host_ports)


class QemuTarget:
    name = "qemu"
    link_driver = LINK_DRIVER   # targets.LinkDriver

    def __init__(self, profile: ArchProfile, scratch_mib: int = SCRATCH_MIB, accel: str = "tcg",
                 vcpus: int | None = None, devices: int | None = None, fs: fsimage.FsSpec | None = None,
                 disk_mib: int = 0, host_ports: Sequence[int] = ()):
        self.profile = profile
        self.machine = profile.require_machine()
        self.vcpus = vcpus   # None: the machine's own -smp
        self.devices = devices or 0   # extra devices of the profile's extra_device (devices:N)
        self._device_args = extra_device_args(profile, self.devices)
        self.scratch_mib = scratch_mib
        # fs:ext4-4k: a second disk, holding a file system made on the host (targets.fsimage).
        self.fs = fs
        # The room the run's workloads need on a disk (their largest needs.disk_mib): on that
        # second disk, the fs: axis's or a default one (fsimage.for_workloads), in wall mode.
        self.disk_mib = disk_mib
        # The guest's ports the host reaches (its workloads' servers), through a NIC in wall mode.
        self.host_ports = tuple(sorted(set(host_ports)))
        self.accel = accel   # "tcg" or "kvm": chosen beforehand (targets.accel)
        self.capabilities = replace(CAPABILITIES, deterministic=accel == "tcg")

    def describe(self, mode: str) -> TargetInfo:
        args = self._machine_args()
        details = {"accelerator": self.accel, "arch": self.profile.name,
                   "machine": _arg_after(args, "-machine") or _arg_after(args, "-M") or "default",
                   "cpu": _arg_after(args, "-cpu") or "the machine's default",
                   "vcpus": _arg_after(args, "-smp") or "1",
                   "emulator": qemu_version(self.machine.binary)}
        if self.devices:
            details["extra_devices"] = f"{self.devices} {self.machine.extra_device}"
        fs = self._file_system(mode)
        if fs is not None:
            default = "" if self.fs is not None else " (the workloads' disk: the variant names no fs:)"
            details["file_system"] = f"{fs.name}{default}: {fs.describe()}"
        if self._linked(mode):
            ports = ", ".join(map(str, self.host_ports))
            details["host_link"] = (f"{self.machine.net_device}, QEMU user networking: the host reaches the guest's "
                                    f"{GUEST_ADDRESS} port {ports} through a port of its {LINK_HOST}")
        if self.accel == "kvm":
            return TargetInfo("KVM guest", details, KVM_TIMING)
        return TargetInfo(f"QEMU TCG {mode}", details, modes.get(mode).note)

    def capacity(self) -> Capacity:
        """The vCPUs the variant boots with (vcpus:N, else the machine's -smp, else 1) and the
        memory the arch profile gives the guest (its -m): the room _machine_args adds for a
        large initramfs is the initramfs's own, not the workloads'."""
        args = self._machine_args()
        smp = (_arg_after(args, "-smp") or "1").split(",")[0]
        given = _arg_after(list(self.machine.args), "-m")
        memory = _mib(given) if given is not None else None
        if not smp.isascii() or not smp.isdigit() or memory is None:
            raise LabError(f"arch profile {self.profile.name}: a workload's needs.vcpus and needs.memory_mib are "
                           f"checked against its machine's -smp N and -m SIZE (N MiB, NM or NG), which it gives as "
                           f"{smp!r} and {given!r}: give them so in its [qemu] args")
        return Capacity("the guest", int(smp), memory)

    def command(self, kernel: Path, initramfs: Path | None, cmdline: str, mode: str,
                scratch: Path | None = None, fs_image: Path | None = None,
                forwards: Sequence[tuple[int, int]] = ()) -> list[str]:
        """QEMU's argv; `forwards`: (host port, guest port) of the host link, each a port of
        the host's loopback forwarded to the guest's address."""
        modes.get(mode)
        machine = self.machine
        words = [f"console={machine.console}", machine.kernel_args, "printk.time=1 panic=-1 loglevel=7",
                 cmdline]
        fs = self._file_system(mode) if fs_image is not None else None
        if fs is not None:
            words.append(fs.kernel_word)   # KL_FS=ext4: the agent mounts it
        argv = [machine.binary, *self._machine_args(initramfs), "-accel", self.accel,
                "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
                "-no-reboot", "-kernel", str(kernel), "-append", " ".join(w for w in words if w)]
        if initramfs is not None:
            argv += ["-initrd", str(initramfs)]
        argv += self._device_args
        if scratch is not None:
            argv += [a.replace("{path}", str(scratch)) for a in machine.disk_args]
        if fs_image is not None:
            argv += fsimage.drive_args(machine.disk_args, fs_image)
        if forwards:
            netdev = ",".join([f"user,id={NETDEV_ID}", *(f"hostfwd=tcp:{LINK_HOST}:{host}-{GUEST_ADDRESS}:{guest}"
                                                         for host, guest in forwards)])
            argv += ["-netdev", netdev, "-device", f"{net_device(self.profile)},netdev={NETDEV_ID}"]
        if mode == "icount":
            argv += ICOUNT_ARGS if machine.icount_args is None else machine.icount_args
        return argv

    def _machine_args(self, initramfs: Path | None = None) -> list[str]:
        """The profile's machine arguments, with the variant's number of vCPUs and, for an
        initramfs too large for the machine's memory, more memory (memory_mib)."""
        args = list(self.machine.args)
        given = _arg_after(args, "-m")
        machine_mib = _mib(given) if given is not None else None
        if initramfs is not None and machine_mib is not None and initramfs.is_file():
            mib = memory_mib(machine_mib, initramfs.stat().st_size)
            if mib != machine_mib:
                args[args.index("-m") + 1] = f"{mib}M"
        if self.vcpus is None:
            return args
        if "-smp" in args:
            at = args.index("-smp")
            del args[at:at + 2]
        return [*args, "-smp", str(self.vcpus)]

    @contextmanager
    def start(self, kernel: Path | None, agent: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> Iterator[ProcessConsole]:
        if kernel is None:
            raise LabError("the qemu target boots a kernel kernellab built; it has no running kernel to measure")
        require_tool(self.machine.binary)
        with tempfile.TemporaryDirectory(prefix="kernellab-run-") as tmp:
            # No disk in icount mode: its I/O completes in host time, so its interrupts would
            # land at instruction counts that differ run to run and end the determinism.
            # The block metrics mean nothing under icount anyway.
            scratch = None
            if self.scratch_mib and not modes.get(mode).deterministic and self.machine.disk_args:
                scratch = scratch_disk(Path(tmp), self.scratch_mib)
            self._check_fs(mode)
            fs = self._file_system(mode)   # its image made once and cached
            fs_image = fsimage.image(fs) if fs is not None else None
            # A port of the host's per server, free now: QEMU binds it as it starts.
            forwards = [(free_port(), port) for port in self.host_ports] if self._linked(mode) else []
            console = ProcessConsole(self.command(kernel, agent, cmdline, mode, scratch, fs_image, forwards),
                                     timeout_s, links={guest: (LINK_HOST, host) for host, guest in forwards})
            try:
                yield console
            finally:
                console.close()

    def _file_system(self, mode: str) -> fsimage.FsSpec | None:
        """The file system on a disk of its own that a run in `mode` attaches: the fs:
        axis's, with room for the workloads that need a disk, or for those a default one
        (fsimage.for_workloads); None: none. Wall mode only, as the scratch disk: under
        icount the agent finds no file system for such a workload and does not run it
        (guest.workloads.Reader says why)."""
        if modes.get(mode).deterministic or not self.machine.disk_args or (self.fs is None and not self.disk_mib):
            return None
        return fsimage.for_workloads(self.fs, self.disk_mib) if self.disk_mib else self.fs

    def _linked(self, mode: str) -> bool:
        """Whether a run in `mode` has the host link: wall mode, for servers the host reaches
        (under icount the traffic would be host-timed: refused before, targets.registry)."""
        return bool(self.host_ports) and not modes.get(mode).deterministic

    def _check_fs(self, mode: str) -> None:
        """Refuse the fs: axis where its disk cannot be: icount mode, a machine without a virtio disk."""
        if self.fs is not None and modes.get(mode).deterministic:
            raise LabError(f"fs:{self.fs.name} needs --mode wall: {modes.DISK_WALL_ONLY}")
        if self.fs is not None and not self.machine.disk_args:
            raise LabError(f"fs:{self.fs.name}: the {self.profile.name} machine has no virtio disk to hold it; "
                           "leave fs: out")


def extra_device_args(profile: ArchProfile, count: int, variant: str = "") -> list[str]:
    """`-device KIND` `count` times, KIND the profile's extra_device; a one-line refusal
    where the profile has none (checked before any build: experiments.compare.plan)."""
    if not count:
        return []
    kind = profile.qemu.extra_device if profile.qemu is not None else ""
    if not kind:
        who = f"variant {variant}: " if variant else ""
        raise LabError(f"{who}devices:{count} is not available on {profile.name}: its arch profile names no "
                       "extra_device in [qemu] (a machine with room for that many devices); leave devices: out")
    return ["-device", kind] * count


def net_device(profile: ArchProfile, workload: str = "") -> str:
    """The NIC of the host link, the profile's net_device; a one-line refusal where it
    names none (checked before any build: experiments.placement.check_workloads)."""
    kind = profile.qemu.net_device if profile.qemu is not None else ""
    if not kind:
        who = f"workload {workload} talks to the host over a network link, and " if workload else ""
        linked = [a for a in arches.available() if (q := arches.load(a).qemu) is not None and q.net_device]
        raise LabError(f"{who}the {profile.name} QEMU machine has no network device for one (its arch profile names "
                       f"no net_device in [qemu]): run it on {', '.join(linked)}, or on --target local")
    return kind


def host_ports(instances: Sequence[Instance]) -> tuple[int, ...]:
    """The ports of the servers the host reaches, of the workloads that talk to the host."""
    return tuple(sorted({i.workload.server.port for i in instances
                         if i.workload.client_on_host and i.workload.server is not None}))


def free_port() -> int:
    """A TCP port of the host's loopback that no program holds now."""
    with socket.socket() as probe:
        probe.bind((LINK_HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def disk_mib(instances: Sequence[Instance]) -> int:
    """The room a run of these workloads needs on a disk's file system: the largest
    needs.disk_mib (0: none needs one)."""
    return max((i.workload.needs.disk_mib for i in instances), default=0)


def overlay_dir() -> str:
    """Where QEMU keeps a snapshot=on disk's writes: a temporary file in $TMPDIR, else
    /var/tmp (QEMU's get_tmp_filename)."""
    return os.environ.get("TMPDIR") or "/var/tmp"


def check_disk_room(instances: Sequence[Instance]) -> None:
    """Refuse, in one line before anything starts, workloads whose files the host cannot
    hold: what they write on their disk (snapshot=on) grows a temporary file in
    overlay_dir(), up to their needs.disk_mib."""
    largest = max(instances, key=lambda i: i.workload.needs.disk_mib, default=None)
    if largest is None or not largest.workload.needs.disk_mib:
        return
    need, where = largest.workload.needs.disk_mib, overlay_dir()
    try:
        free = shutil.disk_usage(where).free >> 20
    except OSError as exc:
        raise LabError(f"workload {largest.label} needs a disk, whose writes QEMU keeps under {where}, and that "
                       f"cannot be read ({exc.strerror}): set TMPDIR to a directory with room") from None
    if need > free:
        raise LabError(f"workload {largest.label} needs {need} MiB on its disk, whose writes QEMU keeps under "
                       f"{where}, which has {free} MiB free: free space there, or set TMPDIR to a directory "
                       "with room")


def scratch_disk(directory: Path, mib: int) -> Path:
    """A sparse raw image for the agent's block I/O metrics: costs no disk until written."""
    path = directory / "scratch.img"
    with path.open("wb") as f:
        f.truncate(mib << 20)
    return path


@cache
def qemu_version(binary: str) -> str:
    path = shutil.which(binary)
    if not path:
        return "not installed"
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "unknown"


# The kernel unpacks an initramfs into memory while the compressed one is still there: a
# workloads' userland (tens of MiB, about 3:1 compressed) does not fit in a 256 MiB machine,
# and the kernel then goes on without the files it could not write ("Initramfs unpacking
# failed: write error"). Room for the image and three times it unpacked; an agent-only
# initramfs (a few MiB) needs no more than the machine has, so its runs keep the arch's
# memory, and the agent's memory rows with it.
INITRAMFS_ROOM = 4


def memory_mib(machine_mib: int, initramfs_bytes: int) -> int:
    """The guest's memory for an initramfs of this size: the machine's own while the
    initramfs' room is under a quarter of it, else the machine's plus that room, in 64 MiB
    steps."""
    room = INITRAMFS_ROOM * initramfs_bytes / (1 << 20)
    if room <= machine_mib / 4:
        return machine_mib
    return machine_mib + 64 * math.ceil(room / 64)


def _mib(size: str) -> int | None:
    """QEMU's -m: a number of MiB, or with an M or G suffix; None for any other form
    (size=..., slots=...), which is left as the profile gives it."""
    number, unit = (size[:-1], size[-1].upper()) if size[-1:].isalpha() else (size, "M")
    if not number.isdigit() or unit not in ("M", "G"):
        return None
    return int(number) * {"M": 1, "G": 1024}[unit]


def _arg_after(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


registry.register("qemu", QemuSite, CAPABILITIES)
