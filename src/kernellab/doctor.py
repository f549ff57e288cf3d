"""`kernellab doctor`: is every external tool the lab uses here, and if not, how to get it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from . import arches
from .agent.compile import cross_targets
from .sources import DEBIAN_SOURCES


@dataclass(frozen=True)
class Check:
    what: str
    package: str
    ok: bool
    found: str


# (what, a command on PATH or an absolute file, Debian package)
HOST_TOOLS = (
    ("make", "make", "make"),
    ("flex", "flex", "flex"),
    ("bison", "bison", "bison"),
    ("bc", "bc", "bc"),
    ("cpio", "cpio", "cpio"),
    ("ccache", "ccache", "ccache"),
    ("xz", "xz", "xz-utils"),
    ("libelf headers", "/usr/include/gelf.h", "libelf-dev"),
    ("openssl headers", "/usr/include/openssl/opensslv.h", "libssl-dev"),
)


def _probe(target: str) -> str | None:
    if target.startswith("/"):
        return target if Path(target).exists() else None
    return shutil.which(target)


def checks() -> list[Check]:
    out = []
    for what, target, package in HOST_TOOLS:
        found = _probe(target)
        out.append(Check(what, package, found is not None, found or "missing"))
    seen = set()
    for name in arches.available():
        p = arches.load(name)
        tools = [(f"{p.name} compiler", p.cc, p.compiler_package)]
        if not p.build_only:  # a build-only arch boots nothing: it needs no emulator
            tools.append((f"{p.name} emulator", p.qemu.binary, p.qemu.package))
        for what, target, package in tools:
            if target in seen:
                continue
            seen.add(target)
            found = _probe(target)
            out.append(Check(what, package, found is not None, found or "missing"))
    for arch, target in cross_targets().items():
        if target["cc"] in seen:
            continue
        seen.add(target["cc"])
        found = _probe(target["cc"])
        # The compiler package and the static C library the agent links against.
        out.append(Check(f"{arch} agent compiler", " ".join(target["packages"]), found is not None,
                         found or "missing"))
    for series, package in DEBIAN_SOURCES.items():
        tarball = f"/usr/src/{package}.tar.xz"
        out.append(Check(f"source debian:{series}", package, Path(tarball).exists(),
                         tarball if Path(tarball).exists() else "missing (installed on first use)"))
        config_dir = f"/usr/src/linux-config-{series}"
        out.append(Check(f"Debian configs {series}", f"linux-config-{series}", Path(config_dir).is_dir(),
                         config_dir if Path(config_dir).is_dir() else "missing (needed for base 'debian')"))
    return out


def install_command(failed: list[Check]) -> str:
    packages = sorted({p for c in failed for p in c.package.split()})
    return f"apt-get install -y --no-install-recommends {' '.join(packages)}"
