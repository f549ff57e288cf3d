"""Where kernellab keeps its cache (sources, build trees, artifacts, ccache, store)."""

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import platformdirs

from .errors import LabError


def cache_root() -> Path:
    env = os.environ.get("KERNELLAB_CACHE")
    root = Path(env) if env else Path(platformdirs.user_cache_dir("kernellab"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_store() -> Path:
    return cache_root() / "kernellab.sqlite"


# The cache's use lock: every command holds it shared while it runs; `cache prune` makes it
# exclusive (flock converts the lock on the same open file), so it prunes nothing another
# command is using and never waits behind one.
_in_use: list[IO[str]] = []


@contextlib.contextmanager
def in_use() -> Iterator[None]:
    handle = (cache_root() / ".in-use").open("a")
    fcntl.flock(handle, fcntl.LOCK_SH)
    _in_use.append(handle)
    try:
        yield
    finally:
        _in_use.remove(handle)
        handle.close()


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """The cache for this command only; a LabError if another kernellab command uses it."""
    handle = _in_use[-1] if _in_use else (cache_root() / ".in-use").open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LabError("another kernellab command is using the cache: prune it when that command "
                       "has finished") from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_SH if _in_use else fcntl.LOCK_UN)
        if not _in_use:
            handle.close()
