"""Directory locks, so two kernellab processes never share a build tree at once."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """The directory's lock. A build tree can be renamed while a process waits for its lock
    (kernellab.treepool parks trees): the lock counts only if its file is still the one at
    the path when it is granted, else it is taken again at the path."""
    while True:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / ".kernellab.lock"
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                if _same_file(handle.fileno(), path):
                    yield
                    return
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _same_file(fd: int, path: Path) -> bool:
    try:
        here = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (here.st_dev, here.st_ino)


@contextlib.contextmanager
def locked_if_free(directory: Path) -> Iterator[bool]:
    """The lock when nobody holds it (True), else at once False: for work that may be
    skipped rather than waited for."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".kernellab.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
