"""Debian packages as files: downloaded with `apt-get download` and unpacked into
kernellab's cache as `dpkg-deb -x` would, by kernellab.archive (which lets nothing in a
package write outside the directory it unpacks into). Nothing is installed (a kernel
package's hooks would write /boot and run update-initramfs) and no root privileges are needed.

Used for Debian's prebuilt kernels (kernellab.prebuilt), the workloads' guest userland
(kernellab.userland, through a private view of another architecture's packages: `private`)
and for the tests' ssh guest.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import archive
from .errors import LabError
from .proc import require_tool


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """apt's commands go through here: the tests replace it with a fake apt."""
    require_tool(argv[0])
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True)


def _checked(argv: list[str], cwd: Path | None = None, advice: str = "run `apt-get update` if the package "
             "is not known") -> str:
    result = run(argv, cwd)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        why = lines[-1] if lines else f"exit {result.returncode}"
        shown = " ".join(a for a in argv if not a.startswith("-o"))   # a private view's options are noise
        raise LabError(f"`{shown}` failed: {why}; {advice}")
    return result.stdout


# A Debian package's name (Debian Policy 5.6.1): it also keeps a name from reading as an option.
PACKAGE_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")


def private(debian_arch: str, state: Path) -> list[str]:
    """apt's options for a view of Debian's packages for `debian_arch` alone, kept in
    `state`: the host's sources and keys, but its own package lists, cache and an empty
    list of installed packages. The host's dpkg architectures and apt state stay untouched
    (no `dpkg --add-architecture`), and no root privileges are needed."""
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    status = state / "status"
    if not status.exists():
        status.touch()
    return ["-o", f"APT::Architecture={debian_arch}", "-o", f"APT::Architectures={debian_arch}",
            "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}",
            "-o", f"Dir::State::status={status}",
            # The files are ours: apt need not drop to its _apt user, who cannot write them.
            "-o", "APT::Sandbox::User=root",
            # Only the Packages indexes: no translations, no AppStream metadata.
            "-o", "Acquire::Languages=none", "-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            "-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
            "-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"]


def has_lists(state: Path) -> bool:
    """Whether a private view (`private`) has its package lists."""
    return any((state / "lists").glob("*_Packages*"))


def update(options: Sequence[str]) -> None:
    """`apt-get update` of a private view: its package lists, fetched from the host's sources."""
    _checked(["apt-get", *options, "update"], advice="check the network and the host's apt sources")


def recursive_depends(packages: Sequence[str], options: Sequence[str] = ()) -> str:
    """`apt-cache depends --recurse` of `packages`: Depends and Pre-Depends only, as apt prints them."""
    bad = [p for p in packages if not PACKAGE_NAME.fullmatch(p)]
    if bad:
        raise LabError(f"{bad[0]!r} is not a Debian package name (lower-case letters, digits, '+', '-', '.')")
    return _checked(["apt-cache", *options, "depends", "--recurse", "--no-recommends", "--no-suggests",
                     "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                    advice="check the package names (`apt-cache search NAME`)")


def depends(package: str) -> list[str]:
    """The packages `package` depends on, as `apt-cache depends` lists them."""
    out = _checked(["apt-cache", "depends", package])
    return [line.split(":", 1)[1].strip() for line in out.splitlines()
            if line.strip().startswith("Depends:") and not line.strip().startswith("Depends: <")]


def _by_name(where: Path) -> dict[str, Path]:
    # A .deb is NAME_VERSION_ARCH.deb.
    return {p.name.split("_")[0]: p for p in where.glob("*.deb")}


def download(packages: Sequence[str], where: Path, options: Sequence[str] = ()) -> dict[str, Path]:
    """name -> its .deb in `where`, downloaded only if `where` has none of that name.
    `options`: a private view's (`private`)."""
    missing = [name for name in packages if name not in _by_name(where)]
    if missing:
        _checked(["apt-get", *options, "download", *missing], cwd=where)
    found = _by_name(where)
    lost = [name for name in packages if name not in found]
    if lost:
        raise LabError(f"apt-get download left no .deb of {', '.join(lost)} in {where}")
    return {name: found[name] for name in packages}


def field(deb: Path, name: str) -> str:
    """A control field of a .deb (Package, Version, ...)."""
    return _checked(["dpkg-deb", "-f", str(deb), name]).strip()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unpack(debs: Sequence[Path], dest: Path) -> Path:
    """The files of `debs` under `dest`, unpacked once: into a temporary directory beside
    it, renamed into place when complete, so an interrupted unpack is never taken as one."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        for deb in debs:
            archive.extract_deb(deb, tmp, f"remove {deb} so that it is downloaded again")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(dest)
    except OSError:  # another process unpacked them first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
