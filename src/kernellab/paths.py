"""Where kernellab keeps its cache (sources, build trees, artifacts, ccache, store)."""

import contextlib
import errno
import fcntl
import os
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import platformdirs

from .errors import LabError


def cache_root() -> Path:
    root = _cache_location()
    root.mkdir(parents=True, exist_ok=True)
    return root


def _cache_location() -> Path:
    env = os.environ.get("KERNELLAB_CACHE")
    return Path(env) if env else Path(platformdirs.user_cache_dir("kernellab"))


def no_space(exc: OSError) -> LabError | None:
    """What to tell the user when a write failed for want of space (ENOSPC, EDQUOT): mostly
    the cache, which kernel trees and builds fill; None for any other OSError."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    cache = _cache_location()
    where = Path(os.fsdecode(exc.filename)) if exc.filename else None
    if where is not None and not where.absolute().is_relative_to(cache.absolute()):
        return LabError(f"no space left on the device of {where}: free some space there")
    return LabError(f"no space left in {cache}: free space (`kernellab cache prune`) or set KERNELLAB_CACHE "
                    "to a directory on another disk")


# A component longer than this is refused: file systems allow 255 bytes, and a cache file
# name adds a hash and a suffix to the names it is made of.
MAX_COMPONENT_BYTES = 200


def component(kind: str, name: str) -> str:
    """`name` (an arch, a variant, a study, a source id, a toolchain...), checked to be one
    plain file name, or a one-line LabError naming it as `kind`.

    Every path kernellab builds from a name goes through here, so that no name, from the
    command line or from a file someone shared, can climb out of the cache (`../x`), start
    at the root (`/x`), reach into a subdirectory (`a/b`), hide among kernellab's own dot
    files (`.in-use`, `.lock-*`), pass for an option to the tools a path is handed to
    (`-rf`), or end a C string early (NUL)."""
    bad = _component_problem(name)
    if bad:
        raise LabError(f"bad {kind} {name!r}: {bad}")
    return name


def _component_problem(name: str) -> str:
    if not name:
        return "it is empty"
    if "/" in name or "\\" in name:
        return "a name cannot hold / or \\"
    if name.startswith((".", "-")):
        return "a name cannot start with . or -"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in name):
        return "a name cannot hold control characters"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
        return f"a name is at most {MAX_COMPONENT_BYTES} bytes long"
    return ""


def cache_dir(*parts: str) -> Path:
    """The cache's directory PARTS (each one name, checked by `component`), made if need be."""
    path = cache_root().joinpath(*(component("cache directory name", p) for p in parts))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_file(folder: str, name: str) -> Path:
    """The file NAME in the cache's directory FOLDER: the one way to put a name made of
    names (an arch's, a variant's...) under the cache (tests/faults/test_hostile_names.py
    checks that no other way is used)."""
    return cache_dir(folder) / component("cache file name", name)


# The per-user key that authenticates what kernellab pickles into the cache (kconfig's
# parsed trees). Unpickling runs whatever code the file names, so a pickle is only ever
# loaded when it carries this key's HMAC, made by this user's kernellab. The key is not
# in the cache: a cache is shared between users or copied from another machine (with
# whatever is in it), and whoever can write there could plant a key as easily as a
# pickle. It lives in the user's own state directory, owned by the user and writable by
# nobody else, in a file only the user can read.
KEY_BYTES = 32


def private_key() -> bytes | None:
    """This user's secret key, made at first use; None where it cannot be kept privately
    (a directory or file another user can write or read): then nothing is unpickled."""
    folder = Path(platformdirs.user_state_dir("kernellab"))
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(folder.stat(), 0o022):
            return None
        path = folder / "cache-key"
        if not path.exists():
            # Written whole under another name, then linked into place: a reader never
            # sees half a key, and of two first uses one key wins.
            tmp = folder / f"cache-key.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(KEY_BYTES))
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
            tmp.unlink()
        return _read_key(path)
    except OSError:
        return None


def _read_key(path: Path) -> bytes | None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        key = f.read(KEY_BYTES + 1)
        return key if _private(os.fstat(f.fileno()), 0o077) and len(key) == KEY_BYTES else None


def _private(st: os.stat_result, forbidden: int) -> bool:
    """Owned by this user, with none of the `forbidden` permission bits for others."""
    return st.st_uid == os.geteuid() and not st.st_mode & forbidden


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


def mark_used(entry: Path) -> Path:
    """`entry` of the cache, its modification time made now: `kernellab cache` tells when an
    entry was last built or used by it (and prunes by it)."""
    with contextlib.suppress(OSError):   # a cache entry another user owns: still used, only not dated
        os.utime(entry)
    return entry


def write_atomically(target: Path, data: bytes) -> None:
    """`target` holds `data` whole or not at all (a temporary file beside it, renamed): a
    reader, or a run that died midway, never sees half a cache file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        os.fchmod(f.fileno(), 0o644)
    os.replace(tmp, target)
