"""Compiling the agent into a static binary, cached per source and compiler."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import tomllib
from pathlib import Path

from .. import paths
from ..errors import LabError
from ..proc import require_tool, run_checked

SOURCE = Path(__file__).with_name("agent.c")
CROSS = Path(__file__).with_name("cross.toml")
# Static, because the initramfs holds the agent and nothing else.
FLAGS = ("-static", "-O2", "-Wall", "-Wextra")


def agent_binary(cc: str = "gcc", arch_id: str = "x86_64") -> Path:
    """Return the agent compiled by `cc`, compiling it only if source or compiler changed."""
    require_tool(cc, _apt_package(cc))
    version = run_checked([cc, "--version"], f"{cc} --version").splitlines()[0]
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes(), version.encode(), " ".join(FLAGS).encode()):
        digest.update(len(part).to_bytes(8, "little") + part)
    binary = paths.cache_dir("agent") / f"agent-{arch_id}-{digest.hexdigest()[:16]}"
    if binary.exists():
        return binary

    # Compile beside the target and rename, so a reader never sees half a binary.
    with tempfile.TemporaryDirectory(dir=binary.parent, prefix=".build-") as tmp:
        output = Path(tmp) / "agent"
        result = subprocess.run([cc, *FLAGS, "-o", str(output), str(SOURCE)], capture_output=True, text=True)
        if result.returncode != 0:
            raise LabError(f"compiling the agent with {cc} failed: {_first_error(result.stderr)}")
        os.replace(output, binary)
    return binary


def _apt_package(cc: str) -> str:
    # Debian names cross compilers gcc-<triplet> for the <triplet>-gcc command.
    name = Path(cc).name
    if name.endswith("-gcc"):
        return "gcc-" + name.removesuffix("-gcc")
    return name


def _first_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    # A missing static libc shows up as ld's "cannot find -lc", ahead of collect2's generic error.
    for line in lines:
        if "error:" in line or "cannot find" in line:
            return line.strip()
    return lines[-1].strip() if lines else "no diagnostics"


def cross_targets() -> dict[str, dict]:
    """arch -> {cc, packages, elf, qemu_user}: how the agent is built for each arch."""
    return tomllib.loads(CROSS.read_text())
