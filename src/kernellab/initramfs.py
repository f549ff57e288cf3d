"""A minimal initramfs: the agent as /init, in the kernel's `newc` cpio format, with the
kernel modules it loads before measuring (a prebuilt kernel's, see kernellab.prebuilt)
and the files of the workloads it runs (kernellab/workloads and the user's own programs,
see kernellab.guest.workloads). More segments (the workloads' userland from Debian's
packages) are appended to it by `with_segments`: the kernel unpacks concatenated cpio
archives one after the other.

Written directly (the format is a fixed ASCII header per entry) so that no root
privileges, cpio binary or device nodes are needed, and the archive is byte-identical
for the same agent: mtimes and inode numbers are fixed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import paths

_TRAILER = "TRAILER!!!"
_HEADER = 110   # "070701" and 13 fields of 8 hex digits
# The agent loads every file of this directory in the order of their names (pid1.c).
MODULES_DIR = "kl-modules"


def _entry(name: str, mode: int, data: bytes, ino: int) -> bytes:
    fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
    header = "070701" + "".join(f"{v:08x}" for v in fields)
    blob = header.encode() + name.encode() + b"\0"
    blob += b"\0" * (-len(blob) % 4)
    blob += data + b"\0" * (-len(data) % 4)
    return blob


def build_cpio(files: dict[str, tuple[int, bytes]]) -> bytes:
    """files: archive path -> (mode including file type bits, content)."""
    out = b""
    for ino, (name, (mode, data)) in enumerate(sorted(files.items()), start=1):
        out += _entry(name, mode, data, ino)
    return out + _entry(_TRAILER, 0, b"", 0)


def agent_initramfs(init_binary: Path, modules: Sequence[tuple[str, bytes]] = (),
                    extra: Mapping[str, tuple[int, bytes]] | None = None) -> Path:
    """The cpio with `init_binary` as /init, cached by its content. `modules`: (name, .ko)
    in load order, which the file names keep (01-af_alg.ko, 02-...). `extra`: more files,
    archive path -> (mode, content), such as the workloads'."""
    data = init_binary.read_bytes()
    files = {"init": (0o100755, data), "dev": (0o040755, b""), "proc": (0o040755, b""),
             "sys": (0o040755, b""), "tmp": (0o041777, b"")}
    digest = hashlib.sha256(data)
    if modules:
        files[MODULES_DIR] = (0o040755, b"")
        for i, (name, ko) in enumerate(modules, start=1):
            files[f"{MODULES_DIR}/{i:02d}-{name}.ko"] = (0o100644, ko)
            digest.update(f"\0{name}\0".encode() + hashlib.sha256(ko).digest())
    for path, (mode, content) in sorted((extra or {}).items()):
        if path in files:
            raise ValueError(f"initramfs: {path} is the agent's own")
        files[path] = (mode, content)
        digest.update(f"\1{path}\0{mode:o}\0".encode() + hashlib.sha256(content).digest())
    target = paths.cache_dir("initramfs") / f"{digest.hexdigest()[:20]}.cpio"
    if not target.exists():
        tmp = _private_tmp(target)
        tmp.write_bytes(build_cpio(files))
        tmp.replace(target)
    return paths.mark_used(target)


def with_segments(initrd: Path, segments: Sequence[Path]) -> Path:
    """`initrd` with each of `segments` (cpio archives) appended, cached by their contents."""
    if not segments:
        return initrd
    parts = [initrd, *segments]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part.read_bytes()).digest())
    target = paths.cache_dir("initramfs") / f"{digest.hexdigest()[:20]}.cpio"
    if not target.exists():
        tmp = _private_tmp(target)
        with tmp.open("wb") as out:
            for part in parts:
                data = part.read_bytes()
                out.write(data + b"\0" * (-len(data) % 4))
        tmp.replace(target)
    return paths.mark_used(target)


def init_of(archive: Path) -> bytes | None:
    """The /init of an initramfs written here (the agent, in its first archive); None for a
    file that holds none or is no newc archive (damaged, or not kernellab's)."""
    try:
        with archive.open("rb") as f:
            while len(header := f.read(_HEADER)) == _HEADER and header.startswith(b"070701"):
                size, name_size = int(header[54:62], 16), int(header[94:102], 16)
                name = f.read(name_size).rstrip(b"\0")
                f.seek(-(_HEADER + name_size) % 4, os.SEEK_CUR)
                if name == b"init":
                    data = f.read(size)
                    return data if len(data) == size else None
                if name == _TRAILER.encode():
                    return None
                f.seek(size + -size % 4, os.SEEK_CUR)
    except (OSError, ValueError):
        return None
    return None


def _private_tmp(target: Path) -> Path:
    """Where this process writes `target` before renaming it into place: its own name, so
    that two processes making the same archive at once (two Dask workers, two commands)
    never rename each other's half-written file."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")
