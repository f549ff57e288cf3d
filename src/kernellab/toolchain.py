"""The compiler a build uses, and the make variables that select it.

Two toolchains: GCC (the profile's cross compiler, the default) and Clang with the LLVM
binutils (`make LLVM=1`), on the arches whose profile says `llvm = true`. The choice is
part of a variant: Kconfig sees it (CC_IS_CLANG, CLANG_VERSION), so it changes the
resolved config, and the compiler's version text is part of every build key.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from . import arches
from .arches import ArchProfile
from .errors import LabError
from .proc import require_tool, run_checked

TOOLCHAINS = ("gcc", "clang")
DEFAULT = "gcc"

# What `make LLVM=1` runs besides clang (Linux's top-level Makefile: LD, AR, NM, OBJCOPY,
# ...): checked up front, so a missing one is a line naming its package, not a failed build.
LLVM_TOOLS = ("clang", "ld.lld", "llvm-ar", "llvm-nm", "llvm-objcopy", "llvm-objdump",
              "llvm-readelf", "llvm-strip")


@dataclass(frozen=True)
class Toolchain:
    cc: str
    cross_compile: str
    version_text: str  # first line of `cc --version`: part of every build's cache key
    kind: str = DEFAULT  # "gcc" or "clang" (make LLVM=1)

    @property
    def llvm(self) -> bool:
        return self.kind == "clang"

    @property
    def id(self) -> str:
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", self.version_text)
        version = m.group(1) if m else "unknown"
        # One clang targets every arch (the build tree's name already has the arch).
        return f"clang-{version}" if self.llvm else f"{self.cross_compile}gcc-{version}"


def detect(profile: ArchProfile, kind: str = DEFAULT) -> Toolchain:
    """The toolchain `kind` for `profile`, or a one-line error saying what to do."""
    check(kind)
    if kind == "clang":
        return _clang(profile)
    require_tool(profile.cc)
    return Toolchain(profile.cc, profile.cross_compile, _version_text(profile.cc))


def check(kind: str) -> str:
    if kind not in TOOLCHAINS:
        raise LabError(f"unknown toolchain {kind!r}: use one of {', '.join(TOOLCHAINS)}")
    return kind


def _clang(profile: ArchProfile) -> Toolchain:
    if not profile.llvm:
        able = ", ".join(_llvm_arches())
        raise LabError(f"kernellab builds {profile.name} with gcc only (Linux supports LLVM=1 on "
                       f"{able}): drop cc:clang / toolchain = \"clang\" for {profile.name}")
    for tool in LLVM_TOOLS:
        require_tool(tool)
    # CROSS_COMPILE stays the profile's: with LLVM=1 the kernel derives clang's --target
    # from it (scripts/Makefile.clang), and the build runs no GNU tool of that prefix.
    return Toolchain("clang", profile.cross_compile, _version_text("clang"), "clang")


def _llvm_arches() -> list[str]:
    return [n for n in arches.available() if arches.load(n).llvm]


def _version_text(cc: str) -> str:
    return _version_of(cc, file_identity(shutil.which(cc)))


@functools.cache
def _version_of(cc: str, identity: str) -> str:
    """`cc --version` once per compiler file: an upgrade or another PATH is another file."""
    return run_checked([cc, "--version"], what=f"{cc} --version").splitlines()[0].strip()


def file_identity(path: str | None) -> str:
    """Which file a tool is, and which version of it (an upgrade replaces the file)."""
    try:
        st = os.stat(path) if path is not None else None
    except OSError:
        st = None
    if path is None or st is None:
        return "absent"
    return f"{os.path.realpath(path)} {st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns}"


def make_vars(profile: ArchProfile, toolchain: Toolchain, use_ccache: bool = False) -> list[str]:
    """The variables of every make call, resolve and build alike: Kconfig evaluates the
    compiler (CC_IS_CLANG, cc-option), so a config resolved with other variables would
    not be the config the build sees."""
    cc = toolchain.cc
    if use_ccache and shutil.which("ccache"):
        cc = f"ccache {cc}"
    llvm = ["LLVM=1"] if toolchain.llvm else []
    return [f"ARCH={profile.kernel_arch}", *llvm, f"CROSS_COMPILE={toolchain.cross_compile}", f"CC={cc}"]


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
