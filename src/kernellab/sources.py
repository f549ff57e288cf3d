"""Kernel source trees: Debian's linux-source packages or a local tree.

A source is identified by `make kernelversion` and a content hash, so two trees that
report the same version but differ in content never share a cached build.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import paths
from .errors import LabError
from .proc import run_checked

DEBIAN_SOURCES = {"6.1": "linux-source-6.1", "6.12": "linux-source-6.12"}


@dataclass(frozen=True)
class Source:
    spec: str          # what the user asked for: "debian:6.1" or a path
    kind: str          # "debian" or "path"
    version: str       # make kernelversion
    content_hash: str  # sha256 of the tarball, or of the tree's file metadata
    tree: Path

    @property
    def id(self) -> str:
        return f"{self.version}-{self.content_hash[:12]}"

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "version": self.version,
                "content_hash": self.content_hash, "tree": str(self.tree)}


def resolve(spec: str) -> Source:
    if spec.startswith("debian:"):
        return _debian(spec)
    path = Path(spec).expanduser()
    if path.is_dir():
        return _local(spec, path.resolve())
    known = ", ".join(f"debian:{v}" for v in DEBIAN_SOURCES)
    raise LabError(f"unknown source {spec!r}: use one of {known} or the path of a kernel tree")


def _debian(spec: str) -> Source:
    version = spec.split(":", 1)[1]
    package = DEBIAN_SOURCES.get(version)
    if package is None:
        known = ", ".join(f"debian:{v}" for v in DEBIAN_SOURCES)
        raise LabError(f"unknown source {spec!r}: use one of {known} or the path of a kernel tree")
    tarball = Path(f"/usr/src/{package}.tar.xz")
    if not tarball.exists():
        _install_package(package)
    digest = _file_sha256_cached(tarball)
    dest = paths.cache_dir("sources") / f"{package}-{digest[:12]}"
    marker = dest / ".kernellab-source.json"
    if not marker.exists():
        _extract(tarball, dest, package)
        tree = dest / package
        marker.write_text(json.dumps({"version": _kernelversion(tree)}))
    info = json.loads(marker.read_text())
    return Source(spec, "debian", info["version"], digest, dest / package)


def _local(spec: str, tree: Path) -> Source:
    if not (tree / "Makefile").exists() or not (tree / "Kconfig").exists():
        raise LabError(f"{tree} is not a kernel source tree (no top-level Makefile and Kconfig)")
    return Source(spec, "path", _kernelversion(tree), _tree_hash(tree), tree)


def _install_package(package: str) -> None:
    command = ["apt-get", "install", "-y", "--no-install-recommends", package]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise LabError(f"{package} is not installed: run `sudo {' '.join(command)}`")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LabError(f"could not install {package} ({last}): run `apt-get update && {' '.join(command)}`")


def _file_sha256_cached(path: Path) -> str:
    """Hashing a 140 MB tarball costs a second; remember it per (size, mtime)."""
    st = path.stat()
    index_path = paths.cache_root() / "source-hashes.json"
    index: dict[str, str] = json.loads(index_path.read_text()) if index_path.exists() else {}
    key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
    if key not in index:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        index[key] = h.hexdigest()
        tmp = index_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(index, indent=1))
        tmp.replace(index_path)
    return index[key]


def _extract(tarball: Path, dest: Path, package: str) -> None:
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(staging, filter="tar")
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise LabError(f"could not extract {tarball}: {exc}; check free space in {dest.parent}") from None
    if not (staging / package).is_dir():
        raise LabError(f"{tarball} does not contain {package}/: reinstall the package")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)


def _kernelversion(tree: Path) -> str:
    return run_checked(["make", "-s", "-C", str(tree), "kernelversion"],
                       what=f"`make kernelversion` in {tree}").strip()


def _tree_hash(tree: Path) -> str:
    """Metadata hash of a local tree: cheap, and changes whenever a file is edited."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            p = Path(root, name)
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p.relative_to(tree)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
