"""The compiler a build uses, and the make variables that select it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from .arches import ArchProfile
from .proc import require_tool, run_checked


@dataclass(frozen=True)
class Toolchain:
    cc: str
    cross_compile: str
    version_text: str  # first line of `cc --version`: part of every build's cache key

    @property
    def id(self) -> str:
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", self.version_text)
        return f"{self.cross_compile}gcc-{m.group(1) if m else 'unknown'}"


def detect(profile: ArchProfile) -> Toolchain:
    require_tool(profile.cc)
    first = run_checked([profile.cc, "--version"], what=f"{profile.cc} --version").splitlines()[0]
    return Toolchain(profile.cc, profile.cross_compile, first.strip())


def make_vars(profile: ArchProfile, toolchain: Toolchain, use_ccache: bool = False) -> list[str]:
    cc = toolchain.cc
    if use_ccache and shutil.which("ccache"):
        cc = f"ccache {cc}"
    return [f"ARCH={profile.kernel_arch}", f"CROSS_COMPILE={toolchain.cross_compile}", f"CC={cc}"]


def ccache_version() -> str | None:
    if not shutil.which("ccache"):
        return None
    out = subprocess.run(["ccache", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else None


def ccache_counts(ccache_dir: str) -> tuple[int, int]:
    """(hits, misses) so far in a ccache directory; (0, 0) without ccache."""
    if not shutil.which("ccache"):
        return 0, 0
    out = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                         env={"CCACHE_DIR": ccache_dir, "PATH": "/usr/bin:/bin"}).stdout
    stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    hits = int(stats.get("direct_cache_hit", 0)) + int(stats.get("preprocessed_cache_hit", 0))
    return hits, int(stats.get("cache_miss", 0))
