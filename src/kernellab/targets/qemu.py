"""QEMU (TCG) as a target: start a kernel, hand back its serial console as it arrives.

Timing modes (see modes.toml):
  icount  `-icount shift=0,sleep=off`: guest time follows the instruction count
          (1 instruction = 1 ns of guest time), so reruns give identical numbers
          whatever the host is doing. A proxy for CPU work, blind to caches and memory.
  wall    guest time is host time: noisy, needs repetitions and statistics.
Neither is a hardware figure: every run records this target's description.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from .. import modes
from ..arches import ArchProfile
from ..errors import LabError
from ..guest.console import ConsoleLine
from ..proc import require_tool
from . import Capabilities, Exit, TargetInfo

# The default; a profile whose machine needs other arguments says so (icount_args).
# -seed: what QEMU hands the guest as randomness (the s390x TRNG instruction, the `virt`
# machine's rng-seed and kaslr-seed) comes from a fixed-seed generator, not the host's:
# random layouts and hash seeds would change the instruction counts run to run.
ICOUNT_ARGS = ("-icount", "shift=0,sleep=off", "-rtc", "base=2000-01-01T00:00:00,clock=vm",
               "-seed", "1")
SCRATCH_MIB = 64  # the agent's block metrics use the first 32 MiB by default


class QemuTarget:
    name = "qemu"

    def __init__(self, profile: ArchProfile, scratch_mib: int = SCRATCH_MIB):
        self.profile = profile
        self.machine = profile.require_machine()
        self.scratch_mib = scratch_mib
        self.capabilities = Capabilities(boots_kernels=True, measures_running=False,
                                         deterministic=True)

    def describe(self, mode: str) -> TargetInfo:
        args = list(self.machine.args)
        details = {"accelerator": "tcg", "arch": self.profile.name,
                   "machine": _arg_after(args, "-machine") or _arg_after(args, "-M") or "default",
                   "cpu": _arg_after(args, "-cpu") or "the machine's default",
                   "emulator": qemu_version(self.machine.binary)}
        return TargetInfo(f"QEMU TCG {mode}", details)

    def command(self, kernel: Path, initramfs: Path | None, cmdline: str, mode: str,
                scratch: Path | None = None) -> list[str]:
        modes.get(mode)
        machine = self.machine
        words = [f"console={machine.console}", machine.kernel_args, "printk.time=1 panic=-1 loglevel=7",
                 cmdline]
        argv = [machine.binary, *machine.args, "-accel", "tcg",
                "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
                "-no-reboot", "-kernel", str(kernel), "-append", " ".join(w for w in words if w)]
        if initramfs is not None:
            argv += ["-initrd", str(initramfs)]
        if scratch is not None:
            argv += [a.replace("{path}", str(scratch)) for a in machine.disk_args]
        if mode == "icount":
            argv += ICOUNT_ARGS if machine.icount_args is None else machine.icount_args
        return argv

    @contextmanager
    def start(self, kernel: Path | None, initramfs: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> Iterator[QemuConsole]:
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
            console = QemuConsole(self.command(kernel, initramfs, cmdline, mode, scratch), timeout_s)
            try:
                yield console
            finally:
                console.close()


class QemuConsole:
    """QEMU's serial console on stdout, read line by line with host timestamps."""

    def __init__(self, command: list[str], timeout_s: float):
        self.command = command
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s
        self.stop_at = self.deadline
        self._exit: Exit | None = None
        self._stderr: list[bytes] = []
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)

    def stop_in(self, seconds: float) -> None:
        self.stop_at = min(self.stop_at, time.monotonic() + seconds)

    def lines(self) -> Iterator[ConsoleLine]:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        out, err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        fds = [out, err]
        pending, pending_t = b"", 0.0
        while fds:
            now = time.monotonic()
            if now >= self.stop_at:
                break
            ready, _, _ = select.select(fds, [], [], min(0.2, self.stop_at - now))
            for fd in ready:
                chunk = os.read(fd, 65536)
                arrived = time.monotonic() - self.start
                if not chunk:
                    fds.remove(fd)
                    continue
                if fd == err:
                    self._stderr.append(chunk)
                    continue
                if not pending:
                    pending_t = arrived
                pending += chunk
                while b"\n" in pending:
                    raw, pending = pending.split(b"\n", 1)
                    line = ConsoleLine(pending_t, _text(raw))
                    pending_t = arrived
                    yield line
                    if time.monotonic() >= self.stop_at:
                        break
        if _text(pending):  # a last line without its newline; a lone "\r" is no line
            yield ConsoleLine(pending_t, _text(pending))
        self._finish(timed_out=time.monotonic() >= self.deadline)

    @property
    def exit(self) -> Exit:
        if self._exit is None:
            self._finish(timed_out=False)
        assert self._exit is not None
        return self._exit

    def _finish(self, timed_out: bool) -> None:
        if self._exit is not None:
            return
        stopped = self.proc.poll() is None
        if stopped:
            self.proc.kill()
        self.proc.wait()
        assert self.proc.stderr is not None
        rest = self.proc.stderr.read() or b""
        stderr = (b"".join(self._stderr) + rest).decode("utf-8", "replace")
        self._exit = Exit(None if stopped else self.proc.returncode, timed_out and stopped, stderr,
                          time.monotonic() - self.start)

    def close(self) -> None:
        self._finish(timed_out=False)


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


def _arg_after(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def _text(raw: bytes) -> str:
    """A console line without its carriage returns: serial drivers end lines with "\r\n",
    some early ones (powermac's udbg_scc) with "\n\r", which leaves the "\r" in front."""
    return raw.decode("utf-8", "replace").strip("\r")
