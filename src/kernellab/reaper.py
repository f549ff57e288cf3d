"""The process groups kernellab starts (make with its compilers, QEMU) are registered in the
cache while they run. A kernellab that dies without cleaning up (kill -9, an OOM kill, a
power-cut of its terminal) leaves them running, writing into a build tree the next build
uses or holding a CPU: the next kernellab command reaps what a dead one left behind.

A process is identified by its pid and its start time (field 22 of /proc/PID/stat), so a
recycled pid is never taken for the process that once had it.

A record is only a claim, and SIGKILL to a whole process group is not undone: a record
forged by whoever can write in the cache (a shared or group-writable cache, a cache
copied from elsewhere) must not make kernellab, often root, kill a process group of that
writer's choosing. Everything a record says (pid, start time, command line) can be read
from /proc by anyone, so none of it proves the group is kernellab's. What proves it is a
secret only kernellab's children hold: each kernellab puts a random token into its own
environment, which every child it starts inherits, and /proc/PID/environ is readable
only by the process's owner (and root). A group is killed only when its leader is alive
with the recorded start time, leads its own process group (kernellab starts every group
so), is not in this kernellab's own group or session, runs as this user and carries the
recorded token; and only from a record this user wrote. Any other record is dropped with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import paths

# The environment variable that carries this kernellab's token to every process it starts
# (make, the compilers, QEMU); set once, when kernellab first imports this module, before
# it starts any.
TOKEN_VARIABLE = "KERNELLAB_CHILD_OF"
os.environ[TOKEN_VARIABLE] = secrets.token_hex(16)


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
    entry = {"what": what, "pgid": pgid, "started": start_time(pgid), "owner": me, "owner_started": start_time(me),
             "token": os.environ[TOKEN_VARIABLE]}
    path = paths.cache_file("children", f"{int(pgid)}.json")
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
        entry = _entry(path, log)
        if entry is None:
            path.unlink(missing_ok=True)
            continue
        if alive(entry["owner"], entry["owner_started"]):
            continue   # another kernellab command, still running
        if alive(entry["pgid"], entry["started"]):
            what = f"{entry['what']} (process group {entry['pgid']})"
            if not _ours(entry):
                log(f"warning: not reaping process group {entry['pgid']}: {path} names a group this user's "
                    "kernellab did not start (a forged or foreign record); record dropped")
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(entry["pgid"], signal.SIGKILL)
                log(f"reaped {what}, left running by a kernellab (pid {entry['owner']}) that was killed")
                reaped.append(what)
        path.unlink(missing_ok=True)
    return reaped


# What register writes; a start time is None where the process had already ended.
_FIELDS: dict[str, tuple[type, ...]] = {"what": (str,), "pgid": (int,), "started": (int, type(None)), "owner": (int,),
                                        "owner_started": (int, type(None)), "token": (str,)}


def _entry(path: Path, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The record, if this user wrote it and it says what register writes; else None."""
    try:
        if path.stat().st_uid != os.geteuid():
            log(f"warning: dropped {path}: written by another user (uid {path.stat().st_uid}), not by this "
                "user's kernellab")
            return None
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None   # half-written by a kernellab killed as it wrote it
    if not isinstance(entry, dict) or any(type(entry.get(k)) not in t for k, t in _FIELDS.items()):
        log(f"warning: dropped {path}: not a record kernellab writes")
        return None
    if entry["pgid"] <= 1 or entry["owner"] <= 0:
        log(f"warning: dropped {path}: process group {entry['pgid']} is none kernellab starts")
        return None
    return entry


def _ours(entry: dict[str, Any]) -> bool:
    """Whether the group's leader is a process this user's kernellab started (module doc)."""
    pgid = entry["pgid"]
    try:
        if os.getpgid(pgid) != pgid or pgid in (os.getpgid(0), os.getsid(0)):
            return False
        proc = Path(f"/proc/{pgid}")
        if proc.stat().st_uid != os.geteuid():
            return False
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{TOKEN_VARIABLE}={entry['token']}".encode() in environ
