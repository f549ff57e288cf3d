"""Unpacking archives: the one routine every archive kernellab unpacks goes through (kernel
tarballs, Debian packages).

kernellab runs as root on lab machines and unpacks archives that other people give it, so
an archive may only add files to the directory it is unpacked into, whatever it holds:

- only regular files, directories, symlinks and hard links; device nodes, FIFOs and
  anything else are refused, and so are setuid and setgid files;
- a member's path is relative, without `..`, and every directory on it is a real directory
  of this extraction: nothing is ever written through a symlink;
- a symlink's target is relative and stays inside the tree: it may climb (`../..`) only at
  its start, and no higher than the link's own directory's depth. So it resolves inside the
  tree however later members are added. An absolute target (`/lib/x/ld.so`, common in
  Debian packages) means the package's root: it is made relative to the destination;
- a hard link names a regular file this extraction already wrote;
- a name is written once: an existing entry is never opened, replaced or written through
  (the hard-link attack: link `x` to an outside file, then write a member `x`);
- files belong to whoever runs kernellab (never chowned to the archive's owners), are not
  writable by group or others, and keep their modification time.

tarfile's extraction filters are not used: Python 3.11.7's `tar` filter does not check
hard-link targets, and the `data` filter's checks have had bypasses since. Everything is
written through directory descriptors opened with O_NOFOLLOW, which cannot be misled.

A refusal, or an archive that ends early, is a LabError naming the archive and the
member, on one line. The caller removes what was unpacked (its staging directory).
"""

from __future__ import annotations

import errno
import hashlib
import io
import lzma
import math
import os
import stat
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, BinaryIO, Self, TypeVar

from .errors import LabError

_T = TypeVar("_T")
_CHUNK = 1 << 20
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_NAME_SHOWN = 120
# What a damaged or truncated compressed stream raises while it is read.
_DAMAGED = (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error)


class _Refused(Exception):
    """Why one member may not be unpacked."""


def extract_tarball(tarball: Path, dest: Path, advice: str) -> str:
    """Unpack a tar archive (plain, gzip, bzip2 or xz) into the directory dest; the sha256
    of the bytes unpacked, so that the caller knows what it extracted even if the file was
    replaced meanwhile. `advice`: what the user should do if the archive is refused."""
    try:
        handle = tarball.open("rb")
    except OSError as exc:
        raise LabError(f"could not read {tarball}: {exc.strerror}") from None
    with handle:
        hashing = _HashingReader(handle)
        _extract_stream(tarball, hashing, dest, advice)
        hashing.read_to_end()
        return hashing.sha256.hexdigest()


def extract_deb(deb: Path, dest: Path, advice: str) -> None:
    """Unpack the files of a Debian package (its data.tar member) into the directory dest:
    what `dpkg-deb -x` does, by the rules above."""
    try:
        handle = deb.open("rb")
    except OSError as exc:
        raise LabError(f"could not read {deb}: {exc.strerror}") from None
    with handle:
        size = _seek_to_data_member(deb, handle, advice)
        _extract_stream(deb, _Window(handle, size), dest, advice)


# -- reading ------------------------------------------------------------------------------

class _HashingReader(io.RawIOBase):
    """A file read once, start to end, hashing what passes."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self.raw.read(-1 if size is None else size)
        self.sha256.update(data)
        return data

    def read_to_end(self) -> None:
        while self.read(_CHUNK):
            pass


class _Window(io.RawIOBase):
    """The next `size` bytes of a file: one member of an ar archive."""

    def __init__(self, raw: BinaryIO, size: int) -> None:
        self.raw, self.left = raw, size

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        wanted = self.left if size is None or size < 0 else min(size, self.left)
        data = self.raw.read(wanted)
        self.left -= len(data)
        return data


def _seek_to_data_member(deb: Path, handle: BinaryIO, advice: str) -> int:
    """A .deb is an ar archive: debian-binary, control.tar.*, data.tar.*. Leaves the file
    at the start of data.tar.*; its size."""
    def damaged(why: str) -> LabError:
        return LabError(f"could not unpack {deb}: {why}; {advice}")

    if handle.read(8) != b"!<arch>\n":
        raise damaged("not a Debian package (no ar header)")
    total = os.fstat(handle.fileno()).st_size
    while True:
        header = handle.read(60)
        if not header:
            raise damaged("it has no data.tar member")
        if len(header) < 60 or header[58:60] != b"`\n":
            raise damaged("its ar header is damaged or the file ends early")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii"))
        except ValueError:
            raise damaged(f"member {_shown(name)} has no valid size") from None
        start = handle.tell()
        if size < 0 or start + size > total:
            raise damaged(f"member {_shown(name)} ends after the file (truncated)")
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                raise damaged("its data.tar is compressed with zstd, which kernellab does not read")
            return size
        handle.seek(start + size + (size & 1))  # members are 2-byte aligned


# -- unpacking ----------------------------------------------------------------------------

class _EndSeen(tarfile.TarInfo):
    """A TarInfo that notes the end-of-archive block: an archive cut at a member boundary
    otherwise just ends early, silently, with members missing."""

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tar)
        except tarfile.EOFHeaderError:  # type: ignore[attr-defined]  # a zero block: the proper end
            tar.kernellab_end_seen = True  # type: ignore[attr-defined]
            raise


def _extract_stream(archive: Path, stream: io.RawIOBase, dest: Path, advice: str) -> None:
    member_name = "(its first member)"
    try:
        with tarfile.open(fileobj=stream, mode="r|*", tarinfo=_EndSeen) as tar, _Tree(dest) as tree:
            for member in tar:
                member_name = member.name
                _unpack_member(tar, member, tree)
            if not getattr(tar, "kernellab_end_seen", False):
                raise tarfile.ReadError("no end-of-archive block")
    except _Refused as why:
        raise LabError(f"refusing {archive}: member {_shown(member_name)} {why}; kernellab unpacks only "
                       f"files, directories and links that stay inside the tree; {advice}") from None
    except tarfile.ReadError as exc:
        if member_name == "(its first member)":
            raise LabError(f"could not extract {archive}: not a tar archive (plain, gzip, bzip2 or xz) "
                           f"({_first_line(exc)}); {advice}") from None
        raise LabError(f"could not extract {archive}: it ends early or is damaged, at member "
                       f"{_shown(member_name)} ({_first_line(exc)}); {advice}") from None
    except _DAMAGED as exc:
        raise LabError(f"could not extract {archive}: it ends early or is damaged, at member "
                       f"{_shown(member_name)} ({_first_line(exc)}); {advice}") from None
    except OSError as exc:
        raise LabError(f"could not extract {archive}: writing member {_shown(member_name)} into {dest}: "
                       f"{exc.strerror or exc}; check the free space there") from None


def _unpack_member(tar: tarfile.TarFile, member: tarfile.TarInfo, tree: _Tree) -> None:
    tree.next_member()
    parts = _member_parts(member.name)
    if member.isdir():                  # "./" (no parts): the archive's root, dest itself
        tree.directory(parts, _dir_mode(member.mode))
        return
    if not parts:
        raise _Refused("has no name")
    if member.isreg():
        _refuse_special_bits(member.mode)
        source = tar.extractfile(member)
        assert source is not None       # a regular member always has contents
        tree.file(parts, source, _file_mode(member.mode), member.mtime)
    elif member.issym():
        tree.symlink(parts, _link_target(parts, member.linkname), member.mtime)
    elif member.islnk():
        tree.hardlink(parts, _member_parts(member.linkname, whose="its hard link's target"))
    else:
        raise _Refused(f"is {_kind(member)}")


def _member_parts(name: str, whose: str = "its path") -> tuple[str, ...]:
    """A member's path as components below dest; a refusal for anything that could leave it."""
    if "\0" in name:
        raise _Refused(f"has a NUL byte in {whose}")
    if name.startswith("/"):
        raise _Refused(f"has an absolute path ({whose} must be relative)")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _Refused(f"has '..' in {whose}")
    return parts


def _link_target(parts: tuple[str, ...], target: str) -> str:
    """A symlink's target, relative and inside the tree (see the module's docstring)."""
    if not target or "\0" in target:
        raise _Refused("is a symlink with an empty or NUL target")
    depth = len(parts) - 1              # of the link's directory below dest
    if target.startswith("/"):          # the package's root: dest
        target = "../" * depth + target.lstrip("/")
    names = [p for p in target.split("/") if p not in ("", ".")]
    climbs = next((i for i, p in enumerate(names) if p != ".."), len(names))
    if ".." in names[climbs:]:
        raise _Refused(f"is a symlink to {_shown(target)}: '..' after a name")
    if climbs > depth:
        raise _Refused(f"is a symlink to {_shown(target)}, outside the tree")
    return "/".join(names) or "."


def _refuse_special_bits(mode: int) -> None:
    if mode & (stat.S_ISUID | stat.S_ISGID):
        raise _Refused("is setuid or setgid")


def _file_mode(mode: int) -> int:
    """rw for the owner, never writable by others, executable as the archive says."""
    return (mode & 0o755) | 0o600


def _dir_mode(mode: int) -> int:
    return (mode & 0o755) | 0o700


def _sane_time(mtime: float) -> bool:
    """A time os.utime takes (an archive may say NaN, or year 10^12): else the file keeps now."""
    return math.isfinite(mtime) and 0 <= mtime < 2**34


def _kind(member: tarfile.TarInfo) -> str:
    if member.ischr() or member.isblk():
        return "a device node"
    if member.isfifo():
        return "a FIFO"
    return f"of tar type {member.type!r}"


def _shown(name: str) -> str:
    return repr(name if len(name) <= _MAX_NAME_SHOWN else name[:_MAX_NAME_SHOWN] + "...")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


class _Tree:
    """The destination directory, written only through directory descriptors opened
    without following symlinks: a path that would go through a symlink or a file fails."""

    _MAX_OPEN = 128

    def __init__(self, root: Path) -> None:
        self.root = root

    def __enter__(self) -> _Tree:
        self.fds: dict[tuple[str, ...], int] = {(): os.open(self.root, _OPEN_DIR)}
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds.values():
            os.close(fd)

    def _dir_fd(self, parts: tuple[str, ...], create: bool = True) -> int:
        """The descriptor of the directory at parts (made if missing and `create`)."""
        if parts in self.fds:
            return self.fds[parts]
        parent = self._dir_fd(parts[:-1], create)
        name = parts[-1]
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, _OPEN_DIR, dir_fd=parent)
        except FileNotFoundError:
            raise _Refused(f"needs {'/'.join(parts)!r}, which is not in the archive before it") from None
        except (NotADirectoryError, OSError) as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):   # a file or a symlink is on the path
                raise _Refused(f"goes through {'/'.join(parts)!r}, which is not a directory") from None
            raise
        self.fds[parts] = fd
        return fd

    def next_member(self) -> None:
        """Closes the directories kept open when they are many: between members only, as
        a member may use two at once (a hard link's and its target's)."""
        if len(self.fds) > self._MAX_OPEN:
            for parts, fd in list(self.fds.items()):
                if parts:
                    os.close(fd)
                    del self.fds[parts]

    def directory(self, parts: tuple[str, ...], mode: int) -> None:
        os.fchmod(self._dir_fd(parts), mode)

    def file(self, parts: tuple[str, ...], contents: IO[bytes], mode: int, mtime: float) -> None:
        parent = self._dir_fd(parts[:-1])
        fd = self._create(parts, lambda: os.open(parts[-1], _OPEN_NEW_FILE, 0o600, dir_fd=parent))
        with os.fdopen(fd, "wb") as out:
            while block := contents.read(_CHUNK):
                out.write(block)
            os.fchmod(fd, mode)
            if _sane_time(mtime):
                os.utime(fd, (mtime, mtime))

    def symlink(self, parts: tuple[str, ...], target: str, mtime: float) -> None:
        parent = self._dir_fd(parts[:-1])
        self._create(parts, lambda: os.symlink(target, parts[-1], dir_fd=parent))
        if _sane_time(mtime):
            os.utime(parts[-1], (mtime, mtime), dir_fd=parent, follow_symlinks=False)

    def hardlink(self, parts: tuple[str, ...], target: tuple[str, ...]) -> None:
        source_dir = self._written_file_dir(target)
        parent = self._dir_fd(parts[:-1])
        self._create(parts, lambda: os.link(target[-1], parts[-1], src_dir_fd=source_dir, dst_dir_fd=parent,
                                            follow_symlinks=False))

    def _written_file_dir(self, target: tuple[str, ...]) -> int:
        """The directory of a regular file already in the tree (a hard link's target)."""
        refused = _Refused(f"is a hard link to {_shown('/'.join(target))}, which is no file the archive "
                           "wrote before it")
        if not target:
            raise refused
        try:
            source_dir = self._dir_fd(target[:-1], create=False)
            found = os.stat(target[-1], dir_fd=source_dir, follow_symlinks=False)
        except (_Refused, FileNotFoundError, NotADirectoryError):
            raise refused from None
        if not stat.S_ISREG(found.st_mode):
            raise refused
        return source_dir

    @staticmethod
    def _create(parts: tuple[str, ...], make: Callable[[], _T]) -> _T:
        try:
            return make()
        except FileExistsError:
            raise _Refused("is a second entry of that name (an entry is never replaced)") from None

