"""The fs: axis's disk: an ext4 file system made on the host with `mke2fs -t ext4 -b BLOCK
-d DIR`, DIR holding one file of 1 GiB (tst.dd, as on the seed's NAS) whose every block is
allocated: a sparse file would read holes, never the disk, and mke2fs -d leaves a block of
zeros out, so the file holds a pattern, not zeros.

The image is made once per parameters (file system, block size, file size, mke2fs version,
this recipe) and kept in kernellab's cache under a name derived from them. QEMU attaches it
with snapshot=on: a run's writes go to a temporary overlay, and every run sees the image as it
was made, without copying 1 GiB per run. The agent finds the disk by its superblock, mounts it
read-write (KL_FS=ext4 on the kernel command line) and measures file.* on the file.

The workloads that need a disk (needs.disk_mib) work on this file system too: the image
then has room for the largest of them (room_mib, free space beyond the file), and a run in
wall mode whose variant names no fs: gets one all the same (`for_workloads`: ext4 with 4 KiB
blocks, without the file, which only file.* reads). The agent mounts it as for the fs: axis
and makes their directories there (agent/file.c: workload_disk_dir).

Wall mode only: a disk's I/O completes in host time, which icount's determinism cannot have
(QEMU attaches no disk in icount mode at all).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from .. import paths
from ..errors import LabError
from ..locks import locked
from ..proc import require_tool, run_checked

FILE_NAME = "tst.dd"          # the seed's
FILE_MIB = 1024               # the seed's dd count=1K bs=1M
# v1: ext4, a 1 MiB pattern repeated (never a block of zeros), fixed UUID, hash seed and times.
RECIPE = "kernellab-fs-v1"
BLOCKS = {"1k": 1024, "2k": 2048, "4k": 4096, "16k": 16384, "64k": 65536}
_FS = re.compile(r"ext4-(?P<block>\d+k)")
_FIXED_TIME = "946684800"     # 2000-01-01: the file system's times and the file's mtime
WORKLOADS_DEFAULT = "ext4-4k"   # the workloads' file system when the variant names none (fs:)


@dataclass(frozen=True)
class FsSpec:
    """A file system on a disk of its own, as the fs: axis names it (ext4-4k), with room
    for the workloads' files."""
    name: str
    kind: str
    block: int
    file_mib: int = FILE_MIB   # 0: no file (an image for the workloads alone)
    room_mib: int = 0          # free space for the workloads that need a disk (needs.disk_mib)

    @property
    def kernel_word(self) -> str:
        """What the agent reads from the kernel command line."""
        return f"KL_FS={self.kind}"

    def describe(self) -> str:
        file = f"/{FILE_NAME} {self.file_mib} MiB allocated" if self.file_mib else f"no /{FILE_NAME}"
        room = f", {self.room_mib} MiB free for the workloads' files" if self.room_mib else ""
        return (f"{self.kind}, {self.block // 1024} KiB blocks, {file}{room}, made by {mke2fs_version()}, "
                "attached snapshot=on")


def choices() -> list[str]:
    return [f"ext4-{b}" for b in BLOCKS]


def parse(name: str, file_mib: int | None = None) -> FsSpec:
    """fs:ext4-4k's value as an FsSpec (its file FILE_MIB unless said), or a one-line error
    listing what there is."""
    match = _FS.fullmatch(name)
    if match is None or match["block"] not in BLOCKS:
        raise LabError(f"unknown file system {name!r}: use one of {', '.join(choices())} "
                       "(ext4 with that block size, made on the host)")
    return FsSpec(name, "ext4", BLOCKS[match["block"]], FILE_MIB if file_mib is None else file_mib)


def for_workloads(spec: FsSpec | None, room_mib: int) -> FsSpec:
    """The file system of a run whose workloads need `room_mib` on a disk: the fs: axis's
    (`spec`) with that room, so that they run on the file system being compared; without
    one, WORKLOADS_DEFAULT."""
    return replace(spec or parse(WORKLOADS_DEFAULT, file_mib=0), room_mib=room_mib)


@cache
def mke2fs_version() -> str:
    """`mke2fs 1.47.0 (5-Feb-2023)`: part of the image's key. mke2fs -V writes it to stderr."""
    result = subprocess.run([require_tool("mke2fs"), "-V"], capture_output=True, text=True)
    lines = (result.stderr + result.stdout).strip().splitlines()
    if result.returncode != 0 or not lines:
        raise LabError(f"mke2fs -V failed: {lines[-1] if lines else 'exit ' + str(result.returncode)}")
    return lines[0].strip()


def image_key(spec: FsSpec) -> str:
    """The image's name in the cache: a digest of everything that decides its content."""
    room = (f"room={spec.room_mib}",) if spec.room_mib else ()   # the fs: axis's images keep their keys
    words = (RECIPE, spec.kind, str(spec.block), str(spec.file_mib), mke2fs_version(), *room)
    return hashlib.sha256("\0".join(words).encode()).hexdigest()[:16]


def image_mib(spec: FsSpec) -> int:
    """Room for the file and the workloads' files, the journal (64 MiB at most at these
    sizes), inode tables and bitmaps, with a margin."""
    data = spec.file_mib + spec.room_mib
    return data + data // 4 + 128


def image(spec: FsSpec) -> Path:
    """The image for `spec`, made if the cache does not have it yet (seconds for 1 GiB)."""
    require_tool("mke2fs")
    key = image_key(spec)
    folder = paths.cache_dir("fs-images")
    room = f"+{spec.room_mib}m" if spec.room_mib else ""
    path = folder / f"{spec.name}-{spec.file_mib}m{room}-{key}.img"
    if path.exists():
        return path
    with locked(folder):   # two runs that want one image make it once
        if path.exists():
            return path
        with tempfile.TemporaryDirectory(dir=folder, prefix=".make-") as tmp:
            content = Path(tmp) / "content"
            content.mkdir()
            if spec.file_mib:
                _write_file(content / FILE_NAME, spec.file_mib)
            made = Path(tmp) / "image"
            with made.open("wb") as f:
                f.truncate(image_mib(spec) << 20)
            fixed = str(uuid.UUID(hex=key.ljust(32, "0")))
            env = {**os.environ, "E2FSPROGS_FAKE_TIME": _FIXED_TIME}
            # -F: a block larger than this host's page is what the study asks for, not a mistake.
            run_checked(["mke2fs", "-q", "-F", "-t", spec.kind, "-b", str(spec.block), "-m", "0",
                         "-U", fixed, "-E", f"hash_seed={fixed}", "-L", "kernellab",
                         "-d", str(content), str(made)], f"mke2fs for the {spec.name} image", env=env)
            os.replace(made, path)
    return path


def _write_file(path: Path, mib: int) -> None:
    """mib MiB of a pattern with no block of zeros: each 8 bytes hold their offset in the MiB."""
    chunk = bytearray(1 << 20)
    for at in range(0, len(chunk), 8):
        chunk[at:at + 8] = (at | 0x5A5A000000000000).to_bytes(8, "little")
    with path.open("wb") as f:
        for _ in range(mib):
            f.write(chunk)
        os.utime(f.fileno(), (int(_FIXED_TIME), int(_FIXED_TIME)))


def drive_args(disk_args: tuple[str, ...], image_path: Path) -> list[str]:
    """The machine's scratch-disk arguments for the image: a drive of its own (id fsdisk),
    snapshot=on so writes go to a temporary overlay and the cached image stays as made."""
    out = []
    for arg in disk_args:
        if "{path}" in arg:
            arg = arg.replace("{path}", str(image_path)) + ",snapshot=on"
        out.append(arg.replace("id=scratch", "id=fsdisk").replace("drive=scratch", "drive=fsdisk"))
    return out
