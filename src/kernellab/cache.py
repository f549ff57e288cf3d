"""What kernellab's cache holds, how much space each part takes, and pruning it.

Source trees, build trees, build artifacts, Debian's kernel packages and file-system images
fill a disk; the rest (kconfig trees, resolved configs, agents, initramfs files) is small and
rebuilt in seconds. Each kind's entries are the folders or files directly under its folder;
an entry is "used" when a run in the store measured it: its build's artifacts, and the source
tree and build trees of its source (their names carry the source's content hash).

Every kernellab command holds the cache shared while it runs (paths.in_use); pruning takes it
exclusively, so it never removes what another command is using, and refuses while one runs.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .errors import LabError
from .store import Store

# The kinds pruning may remove; the rest it only shows, with why it leaves them.
PRUNABLE = ("sources", "build", "artifacts", "debian-image", "fs-images")
KEPT = {"ccache": "ccache keeps it under its own limit (CCACHE_MAXSIZE, 5G)",
        "floors": "measured noise floors: `kernellab noise-floor` takes builds to remake"}
KEPT_OTHERWISE = "small, remade in seconds when needed"
DAY_S = 86400.0


@dataclass
class Entry:
    kind: str
    path: Path
    bytes: int
    modified: float          # the newest modification under it: when it was last built or used
    used_by: list[int]       # the store's runs that measured it (the most recent ones)

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "path": str(self.path), "bytes": self.bytes, "modified": self.modified,
                "used_by": self.used_by}


def _size_and_newest(path: Path) -> tuple[int, float]:
    if path.is_symlink() or not path.is_dir():
        stat = path.lstat()
        return stat.st_size, stat.st_mtime
    total, newest = 0, path.lstat().st_mtime
    for child in path.rglob("*"):
        try:
            stat = child.lstat()
        except FileNotFoundError:   # removed while we looked
            continue
        total += stat.st_size
        newest = max(newest, stat.st_mtime)
    return total, newest


def _uses(store: Store | None, recent: int) -> dict[str, list[int]]:
    """Name fragments of cache entries -> the recent runs that used them: a build key's
    first 20 characters (artifacts), a source's content hash's first 12 (its tree and its
    build trees)."""
    if store is None:
        return {}
    rows = store.db.execute(
        "SELECT r.id, r.build_key, s.content_hash FROM runs r JOIN variants v ON v.id = r.variant_id"
        " LEFT JOIN sources s ON s.id = v.source_id ORDER BY r.id DESC LIMIT ?", (recent,)).fetchall()
    uses: dict[str, list[int]] = {}
    for run_id, build_key, content_hash in rows:
        for fragment in (build_key[:20] if build_key else None, content_hash[:12] if content_hash else None):
            if fragment:
                uses.setdefault(fragment, []).append(run_id)
    return uses


def entries(store: Store | None, recent: int = 50) -> list[Entry]:
    root = paths.cache_root()
    uses = _uses(store, recent)
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "children"):
        for path in sorted(folder.iterdir()):
            size, modified = _size_and_newest(path)
            used = sorted({run for fragment, runs in uses.items() if fragment in path.name for run in runs})
            out.append(Entry(folder.name, path, size, modified, used))
    return out


@dataclass
class Kind:
    kind: str
    entries: int = 0
    bytes: int = 0
    used: int = 0          # entries the store's recent runs used

    @property
    def kept_because(self) -> str | None:
        """Why pruning leaves this kind alone; None if it may prune it."""
        return None if self.kind in PRUNABLE else KEPT.get(self.kind, KEPT_OTHERWISE)

    def to_dict(self) -> dict[str, object]:
        return {**self.__dict__, "prunable": self.kept_because is None, "kept_because": self.kept_because}


def summary(found: list[Entry]) -> list[Kind]:
    """Per kind, largest first."""
    kinds: dict[str, Kind] = {}
    for e in found:
        k = kinds.setdefault(e.kind, Kind(e.kind))
        k.entries += 1
        k.bytes += e.bytes
        k.used += bool(e.used_by)
    return sorted(kinds.values(), key=lambda k: -k.bytes)


def select(found: list[Entry], older_than_days: float | None = None, source_hashes: Sequence[str] | None = None,
           unused: bool = False, now: float | None = None) -> list[Entry]:
    """The prunable entries every given criterion picks; `source_hashes`: the content
    hashes of one source (sources.identify), whose trees and build trees are named by them."""
    if older_than_days is None and source_hashes is None and not unused:
        raise LabError("cache prune: say what to prune: --older-than DAYS, --source SPEC or --unused")
    now = time.time() if now is None else now
    picked = []
    for e in found:
        if e.kind not in PRUNABLE:
            continue
        if older_than_days is not None and now - e.modified < older_than_days * DAY_S:
            continue
        if source_hashes is not None and not (e.kind in ("sources", "build") and _named_by(e, source_hashes)):
            continue
        if unused and e.used_by:
            continue
        picked.append(e)
    return picked


def _named_by(entry: Entry, hashes: Sequence[str]) -> bool:
    return any(h[:12] in entry.path.name for h in hashes if h)


def remove(picked: list[Entry]) -> int:
    """Deletes the entries (the caller holds the cache exclusively); the bytes freed."""
    freed = 0
    for e in picked:
        if e.path.is_dir() and not e.path.is_symlink():
            shutil.rmtree(e.path)
        else:
            e.path.unlink()
        freed += e.bytes
    return freed


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
