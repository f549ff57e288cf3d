"""A minimal initramfs: the agent as /init, in the kernel's `newc` cpio format, with the
kernel modules it loads before measuring (a prebuilt kernel's, see kernellab.prebuilt).

Written directly (the format is a fixed ASCII header per entry) so that no root
privileges, cpio binary or device nodes are needed, and the archive is byte-identical
for the same agent: mtimes and inode numbers are fixed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from . import paths

_TRAILER = "TRAILER!!!"
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


def agent_initramfs(init_binary: Path, modules: Sequence[tuple[str, bytes]] = ()) -> Path:
    """The cpio with `init_binary` as /init, cached by its content. `modules`: (name, .ko)
    in load order, which the file names keep (01-af_alg.ko, 02-...)."""
    data = init_binary.read_bytes()
    files = {"init": (0o100755, data), "dev": (0o040755, b""), "proc": (0o040755, b""),
             "sys": (0o040755, b""), "tmp": (0o041777, b"")}
    digest = hashlib.sha256(data)
    if modules:
        files[MODULES_DIR] = (0o040755, b"")
        for i, (name, ko) in enumerate(modules, start=1):
            files[f"{MODULES_DIR}/{i:02d}-{name}.ko"] = (0o100644, ko)
            digest.update(f"\0{name}\0".encode() + hashlib.sha256(ko).digest())
    target = paths.cache_dir("initramfs") / f"{digest.hexdigest()[:20]}.cpio"
    if not target.exists():
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(build_cpio(files))
        tmp.replace(target)
    return target
