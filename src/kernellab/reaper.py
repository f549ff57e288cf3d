"""The process groups kernellab starts (make with its compilers, QEMU) are registered in the
cache while they run. A kernellab that dies without cleaning up (kill -9, an OOM kill, a
power-cut of its terminal) leaves them running, writing into a build tree the next build
uses or holding a CPU: the next kernellab command reaps what a dead one left behind.

A process is identified by its pid and its start time (field 22 of /proc/PID/stat), so a
recycled pid is never taken for the process that once had it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

from . import paths


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses.
    return int(stat[stat.rindex(")") + 2:].split()[19])


def alive(pid: int, started: int | None) -> bool:
    return started is not None and start_time(pid) == started


def _folder() -> Path:
    return paths.cache_dir("children")


def register(pgid: int, what: str) -> Path:
    """Records a process group this kernellab leads; `pgid` is its leader's pid."""
    me = os.getpid()
    entry = {"what": what, "pgid": pgid, "started": start_time(pgid), "owner": me, "owner_started": start_time(me)}
    path = _folder() / f"{pgid}.json"
    path.write_text(json.dumps(entry))
    return path


@contextlib.contextmanager
def tracked(pgid: int, what: str) -> Iterator[None]:
    """The group is registered while the block runs, and forgotten after it (its owner has
    stopped it or seen it end)."""
    path = register(pgid, what)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def reap(log: Callable[[str], None]) -> list[str]:
    """Kills the process groups whose kernellab is gone; returns what it reaped."""
    reaped = []
    for path in sorted(_folder().glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)   # half-written by a kernellab killed as it wrote it
            continue
        if alive(entry["owner"], entry["owner_started"]):
            continue   # another kernellab command, still running
        if alive(entry["pgid"], entry["started"]):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(entry["pgid"], signal.SIGKILL)
            what = f"{entry['what']} (process group {entry['pgid']})"
            log(f"reaped {what}, left running by a kernellab (pid {entry['owner']}) that was killed")
            reaped.append(what)
        path.unlink(missing_ok=True)
    return reaped
