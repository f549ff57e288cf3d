"""Compiling the agent into a static binary, cached per source and compiler."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from .. import datafile, paths
from ..errors import LabError
from ..proc import require_tool, run_checked

AGENT_DIR = Path(__file__).parent
CROSS = AGENT_DIR / "cross.toml"
# Static, because the initramfs holds the agent and nothing else.  No -flto: each source
# is compiled on its own, and the helpers the timed loops call are static in the files that
# use them (util.h), so GCC compiles those loops as it did when the agent was one file.
FLAGS = ("-static", "-O2", "-Wall", "-Wextra")


def sources(agent_dir: Path | None = None) -> list[Path]:
    """Every C source and header of the agent, sorted by name: what the binary is built from."""
    directory = AGENT_DIR if agent_dir is None else agent_dir
    return sorted((p for p in directory.iterdir() if p.suffix in (".c", ".h") and p.is_file()),
                  key=lambda p: p.name)


def cache_key(compiler_version: str, files: list[Path]) -> str:
    """A digest of the files (names and contents, in order), the compiler version and the flags."""
    digest = hashlib.sha256()
    parts = [part for f in files for part in (f.name.encode(), f.read_bytes())]
    for part in (*parts, compiler_version.encode(), " ".join(FLAGS).encode()):
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:16]


# The agent a command measures with, per compiler and arch: the first it asked for, kept for
# the rest of the command (one_agent). Under icount a figure depends on the agent binary
# itself (88 bytes more moved fork+exit on one kernel by 5.4%), so a source that changes
# under a long command (an upgrade, an edit in a working tree) must not give half its runs
# another instrument. None: outside a command (tests, Dask workers), every call as asked.
_pinned: dict[tuple[str, str], Path] | None = None


@contextlib.contextmanager
def one_agent() -> Iterator[None]:
    """Within: agent_binary gives each compiler and arch the binary of its first call."""
    global _pinned
    saved, _pinned = _pinned, {}
    try:
        yield
    finally:
        _pinned = saved


def agent_binary(cc: str = "gcc", arch_id: str = "x86_64") -> Path:
    """Return the agent compiled by `cc`, compiling it only if a source, header or the compiler
    changed; within one_agent, the binary this command took first."""
    pinned = _pinned.get((cc, arch_id)) if _pinned is not None else None
    if pinned is not None:
        if not pinned.exists():
            raise LabError(f"the agent this command started with ({pinned.name}) is gone from the cache "
                           "(pruned?): run the command again")
        return paths.mark_used(pinned)
    binary = _agent_binary(cc, arch_id)
    if _pinned is not None:
        _pinned[(cc, arch_id)] = binary
    return binary


def _agent_binary(cc: str, arch_id: str) -> Path:
    require_tool(cc)
    version = run_checked([cc, "--version"], f"{cc} --version").splitlines()[0]
    files = sources()
    binary = paths.cache_dir("agent") / f"agent-{arch_id}-{cache_key(version, files)}"
    if binary.exists():
        return paths.mark_used(binary)

    # Compile beside the target and rename, so a reader never sees half a binary.
    # One static binary from all the .c files; the headers are found beside them.
    with tempfile.TemporaryDirectory(dir=binary.parent, prefix=".build-") as tmp:
        output = Path(tmp) / "agent"
        units = [str(f) for f in files if f.suffix == ".c"]
        result = subprocess.run([cc, *FLAGS, "-o", str(output), *units], capture_output=True, text=True)
        if result.returncode != 0:
            raise LabError(f"compiling the agent with {cc} failed: {_first_error(result.stderr)}")
        os.replace(output, binary)
    return binary


def _first_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    # A missing static libc shows up as ld's "cannot find -lc", ahead of collect2's generic error.
    for line in lines:
        if "error:" in line or "cannot find" in line:
            return line.strip()
    return lines[-1].strip() if lines else "no diagnostics"


@dataclass(frozen=True)
class Elf:
    """What the compiled binary must be (checked by the tests, under qemu-user)."""
    class_: Literal[32, 64]
    endian: Literal["little", "big"]
    machine: str


@dataclass(frozen=True)
class CrossTarget:
    cc: str          # the compiler command; packages.txt names its Debian package
    elf: Elf
    qemu_user: str   # the user-mode emulator the tests run it with


@cache
def cross_targets() -> dict[str, CrossTarget]:
    """arch -> how the agent is built for it (agent/cross.toml)."""
    data = datafile.read_toml(CROSS, "agent/cross.toml")
    return {arch: datafile.load(CrossTarget, table, f"agent/cross.toml [{arch}]") for arch, table in data.items()}
