"""Boot a kernel under QEMU (TCG) and read its console as it arrives.

Timing modes:
  icount  `-icount shift=0,sleep=off`: guest time follows the instruction count
          (1 instruction = 1 ns of guest time), so reruns give identical numbers
          whatever the host is doing. A proxy for CPU work, blind to caches and memory.
  wall    guest time is host time: noisy, needs repetitions and statistics.
Neither is a hardware figure: reports say which mode produced each number.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..arches import ArchProfile
from ..errors import LabError
from ..measure.console import ConsoleLine, is_panic
from ..measure.records import Record, RecordStream

MODES = ("icount", "wall")
# The default; a profile whose machine needs other arguments says so (icount_args).
# -seed: what QEMU hands the guest as randomness (the s390x TRNG instruction, the `virt`
# machine's rng-seed and kaslr-seed) comes from a fixed-seed generator, not the host's:
# random layouts and hash seeds would change the instruction counts run to run.
ICOUNT_ARGS = ("-icount", "shift=0,sleep=off", "-rtc", "base=2000-01-01T00:00:00,clock=vm",
               "-seed", "1")
# After the agent's last record, QEMU should exit by itself (-no-reboot); after a panic,
# let the backtrace reach the log before stopping it.
EXIT_GRACE_S = 5.0
PANIC_GRACE_S = 1.0
# The kernel's last words on the agent's reboot (kernel/reboot.c). Some machines ignore
# the reset request (QEMU 7.2's bamboo keeps running after the 440 kernel's DBCR0 system
# reset), and QEMU would spin until the grace ran out: after this line there is nothing
# left to read.
FINAL_LINE = re.compile(r"^reboot: (Restarting system|Power down|System halted)")


@dataclass
class BootResult:
    status: str            # ok | panic | timeout | incomplete
    reason: str
    command: list[str]
    lines: list[ConsoleLine] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    stderr: str = ""

    @property
    def console_log(self) -> str:
        return "".join(f"[host {l.host_s:9.6f}] {l.text}\n" for l in self.lines)


def command(profile: ArchProfile, image: Path, initrd: Path, mode: str,
            cmdline_extra: str = "", scratch: Path | None = None) -> list[str]:
    if mode not in MODES:
        raise LabError(f"unknown timing mode {mode!r}: use one of {', '.join(MODES)}")
    machine = profile.require_machine()
    words = [f"console={machine.console}", machine.kernel_args, "printk.time=1 panic=-1 loglevel=7", cmdline_extra]
    cmdline = " ".join(w for w in words if w)
    argv = [machine.binary, *machine.args, "-accel", "tcg",
            "-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio",
            "-no-reboot", "-kernel", str(image), "-initrd", str(initrd), "-append", cmdline]
    if scratch is not None:
        argv += [a.replace("{path}", str(scratch)) for a in machine.disk_args]
    if mode == "icount":
        argv += ICOUNT_ARGS if machine.icount_args is None else machine.icount_args
    return argv


def scratch_disk(directory: Path, mib: int) -> Path:
    """A sparse raw image for the agent's block I/O metrics: costs no disk until written."""
    path = directory / "scratch.img"
    with path.open("wb") as f:
        f.truncate(mib << 20)
    return path


def boot(profile: ArchProfile, image: Path, initrd: Path, mode: str, timeout_s: float,
         cmdline_extra: str = "", on_record=None, on_line=None, scratch: Path | None = None) -> BootResult:
    argv = command(profile, image, initrd, mode, cmdline_extra, scratch)
    if shutil.which(argv[0]) is None:
        raise LabError(f"{argv[0]} not found: run `apt-get install -y {profile.require_machine().package}`")
    result = BootResult("incomplete", "", argv)
    stream = RecordStream()
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    stop_at = start + timeout_s
    pending = b""
    pending_t = 0.0
    rebooted = False  # the kernel said its last words (FINAL_LINE)
    stderr_chunks: list[bytes] = []
    try:
        fds = [proc.stdout.fileno(), proc.stderr.fileno()]
        while fds:
            now = time.monotonic()
            if now >= stop_at:
                if result.status == "incomplete" and not rebooted:
                    result.status, result.reason = "timeout", f"no end record after {timeout_s:.0f} s; killed"
                break
            ready, _, _ = select.select(fds, [], [], min(0.2, stop_at - now))
            for fd in ready:
                chunk = os.read(fd, 65536)
                arrived = time.monotonic() - start
                if not chunk:
                    fds.remove(fd)
                    continue
                if fd == proc.stderr.fileno():
                    stderr_chunks.append(chunk)
                    continue
                if not pending:
                    pending_t = arrived
                pending += chunk
                while b"\n" in pending:
                    raw, pending = pending.split(b"\n", 1)
                    line = ConsoleLine(pending_t, _text(raw))
                    pending_t = arrived
                    _take(line, result, stream, on_record, on_line)
                    if result.status == "panic" and stop_at > time.monotonic() + PANIC_GRACE_S:
                        stop_at = time.monotonic() + PANIC_GRACE_S
                    if stream.ended and result.status == "incomplete":
                        result.status = "ok"
                        stop_at = time.monotonic() + EXIT_GRACE_S
                    if FINAL_LINE.match(line.message):
                        rebooted, stop_at = True, time.monotonic()
        if _text(pending):  # a last line without its newline; a lone "\r" is no line
            _take(ConsoleLine(pending_t, _text(pending)), result, stream, on_record, on_line)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        result.stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    result.wall_s = time.monotonic() - start
    result.records, result.rejected = stream.records, stream.rejected
    if result.status == "incomplete" and rebooted:
        result.reason = "the guest rebooted before the agent finished"
    elif result.status == "incomplete":
        last_err = result.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        result.reason = f"QEMU exited before the agent finished ({last_err[0]})"
    elif result.status == "ok" and stream.rejected:
        result.reason = f"{len(stream.rejected)} damaged record(s) rejected"
    return result


def _text(raw: bytes) -> str:
    """A console line without its carriage returns: serial drivers end lines with "\r\n",
    some early ones (powermac's udbg_scc) with "\n\r", which leaves the "\r" in front."""
    return raw.decode("utf-8", "replace").strip("\r")


def _take(line: ConsoleLine, result: BootResult, stream: RecordStream, on_record, on_line) -> None:
    result.lines.append(line)
    if on_line:
        on_line(line)
    if is_panic(line.text) and result.status == "incomplete":
        result.status, result.reason = "panic", line.message.strip()
    record = stream.feed(line.text)
    if record is not None and on_record:
        on_record(record)
