"""A console that is a process's stdout: lines as they arrive, host-timestamped, until the
process ends, the time limit runs out or the reader has heard enough."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from .. import reaper
from ..errors import LabError
from ..guest.console import ConsoleLine
from . import Exit

EXIT_WAIT_S = 5.0


class ProcessConsole:
    """A process's stdout, read line by line with host timestamps: QEMU's serial console,
    or an agent run as a program."""

    def __init__(self, command: list[str], timeout_s: float, proc: subprocess.Popen[bytes] | None = None,
                 links: Mapping[int, tuple[str, int]] | None = None):
        self.command = command
        # The machine's TCP ports the host reaches, and where: QEMU's forwards (targets.qemu).
        self.links = dict(links or {})
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s
        self.stop_at = self.deadline
        self._exit: Exit | None = None
        self._stderr: list[bytes] = []
        # Its own process group, registered while it runs: a kernellab killed outright
        # leaves it to the next command's reaper (kernellab.reaper), not running forever.
        self.proc = proc or subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, start_new_session=True)
        self._registration = reaper.register(self.proc.pid, f"{Path(command[0]).name} (a boot)")

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
        if not fds:
            # Both pipes closed: the process is ending on its own. Let it, so that its exit
            # code (a killed agent's 137) is what it said, not kernellab's kill.
            try:
                self.proc.wait(timeout=EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
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
            self.kill()
        self.proc.wait()
        self._registration.unlink(missing_ok=True)
        assert self.proc.stderr is not None
        rest = self.proc.stderr.read() or b""
        stderr = (b"".join(self._stderr) + rest).decode("utf-8", "replace")
        code = None if stopped else self.proc.returncode
        exit = Exit(code, timed_out and stopped, stderr, time.monotonic() - self.start)
        if code is not None and code < 0:
            # Killed by a signal that was not kernellab's: the emulator (or the agent run as
            # a program) died, whatever its kernel was doing.
            exit = replace(exit, ended=f"{Path(self.command[0]).name} died of {_signal_name(-code)}")
        self._exit = exit

    def unavailable(self) -> dict[str, str]:
        return {}

    def host_address(self, port: int) -> tuple[str, int]:
        """Where the host reaches the machine's TCP `port` (targets.HostLinked)."""
        if port not in self.links:
            raise LabError(f"the run has no link from the host to port {port}")
        return self.links[port]

    def facts_after(self) -> dict[str, str]:
        return {}

    def kill(self) -> None:
        """Stops the process kernellab stopped reading."""
        self.proc.kill()

    def close(self) -> None:
        self._finish(timed_out=False)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _text(raw: bytes) -> str:
    """A console line without its carriage returns: serial drivers end lines with "\r\n",
    some early ones (powermac's udbg_scc) with "\n\r", which leaves the "\r" in front."""
    return raw.decode("utf-8", "replace").strip("\r")
