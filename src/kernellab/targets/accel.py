"""Which QEMU accelerator runs a guest: TCG (emulation: the only one with icount) or KVM
(the host's CPU runs the guest: a "KVM guest" figure, never a hardware one).

`auto` uses KVM when the guest's arch is the host's, /dev/kvm opens and a probe guest
actually starts (a /dev/kvm that opens but cannot run a guest exists: nested
virtualization switched off, a sandbox), else TCG with one line saying why.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import modes
from ..arches import ArchProfile
from ..errors import LabError
from .stream import ProcessConsole

ACCELS = ("auto", "kvm", "tcg")
KVM_DEVICE = Path("/dev/kvm")
PROBE_TIMEOUT_S = 20.0   # a kernel prints its banner in well under a second under KVM
BANNER = re.compile(r"Linux version \d")


@dataclass(frozen=True)
class Choice:
    accel: str    # "kvm" or "tcg"
    why: str      # for auto falling back to TCG: the one line the user sees; else ""


def choose(requested: str, profile: ArchProfile, mode: str, kernel: Path, device: Path = KVM_DEVICE) -> Choice:
    """The accelerator for booting `kernel` (the probe guest, when KVM is a candidate)."""
    if requested not in ACCELS:
        raise LabError(f"unknown accelerator {requested!r}: use one of {', '.join(ACCELS)}")
    if requested == "tcg":
        return Choice("tcg", "")
    if modes.get(mode).deterministic:
        if requested == "kvm":
            raise LabError(f"--mode {mode} counts instructions, which only TCG can: use --mode wall with "
                           "--accel kvm, or --accel tcg")
        return Choice("tcg", "")  # icount is TCG by definition: nothing to say
    problem = kvm_problem(profile, kernel, device)
    if problem is None:
        return Choice("kvm", "")
    if requested == "kvm":
        raise LabError(f"--accel kvm: {problem}; use --accel tcg (or auto)")
    return Choice("tcg", f"--accel auto: running under TCG: {problem}")


def kvm_problem(profile: ArchProfile, kernel: Path, device: Path = KVM_DEVICE) -> str | None:
    """Why KVM cannot run this profile's guests here, or None when it can."""
    host = platform.machine()
    if host not in profile.uname:
        return f"KVM runs guests of the host's arch ({host}), not {profile.name}"
    try:
        fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"{device} cannot be opened ({exc.strerror})"
    os.close(fd)
    machine = profile.require_machine()
    failure = _probe((machine.binary, *machine.args), machine.console, str(kernel))
    return None if failure is None else f"{device} opens but no KVM guest starts ({failure})"


@cache
def _probe(qemu: tuple[str, ...], console: str, kernel: str) -> str | None:
    """Boots the kernel under KVM until it prints its banner. A paused guest, or a few
    instructions of firmware, are not enough: a /dev/kvm that runs SeaBIOS yet hangs a
    Linux kernel before its first line exists (nested virtualization in a sandbox)."""
    argv = [*qemu, "-accel", "kvm", "-nodefaults", "-no-user-config", "-display", "none",
            "-serial", "stdio", "-no-reboot", "-kernel", kernel,
            "-append", f"console={console} panic=-1 rdinit=/kernellab-kvm-probe"]
    if not shutil.which(qemu[0]):
        return f"{qemu[0]} not installed"
    console_ = ProcessConsole(argv, PROBE_TIMEOUT_S)
    try:
        for line in console_.lines():
            if BANNER.search(line.text):
                return None
    finally:
        console_.close()
    done = console_.exit
    if done.timed_out:
        return f"a kernel printed nothing within {PROBE_TIMEOUT_S:.0f} s"
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip() and "warning:" not in line]
    return lines[-1] if lines else f"exit code {done.code}"
