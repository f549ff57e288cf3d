"""Debian packages as files: downloaded with `apt-get download` and unpacked into
kernellab's cache as `dpkg-deb -x` would, by kernellab.archive (which lets nothing in a
package write outside the directory it unpacks into). Nothing is installed (a kernel
package's hooks would write /boot and run update-initramfs) and no root privileges are needed.

Used for Debian's prebuilt kernels (kernellab.prebuilt) and for the tests' ssh guest.
"""

from __future__ import annotations

import hashlib
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


def _checked(argv: list[str], cwd: Path | None = None) -> str:
    result = run(argv, cwd)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        why = lines[-1] if lines else f"exit {result.returncode}"
        raise LabError(f"`{' '.join(argv)}` failed: {why}; run `apt-get update` if the package is not known")
    return result.stdout


def depends(package: str) -> list[str]:
    """The packages `package` depends on, as `apt-cache depends` lists them."""
    out = _checked(["apt-cache", "depends", package])
    return [line.split(":", 1)[1].strip() for line in out.splitlines()
            if line.strip().startswith("Depends:") and not line.strip().startswith("Depends: <")]


def _by_name(where: Path) -> dict[str, Path]:
    # A .deb is NAME_VERSION_ARCH.deb.
    return {p.name.split("_")[0]: p for p in where.glob("*.deb")}


def download(packages: Sequence[str], where: Path) -> dict[str, Path]:
    """name -> its .deb in `where`, downloaded only if `where` has none of that name."""
    missing = [name for name in packages if name not in _by_name(where)]
    if missing:
        _checked(["apt-get", "download", *missing], cwd=where)
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
