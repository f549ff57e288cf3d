"""What kernellab's cache holds, how much space each part takes, and pruning it.

Source trees, build trees, build artifacts, Debian's kernel packages and file-system images
fill a disk; the rest (kconfig trees, resolved configs, agents, initramfs files) is small and
rebuilt in seconds. Each kind's entries are the folders or files directly under its folder;
an entry is "used" when a run in the store measured it: its build's artifacts, its source's
tree (named by the source's content hash), and the build tree, kconfig and resolve entries of
its source, arch and toolchain (named `SOURCE-ID-ARCH-TOOLCHAIN-ID`, as build.build_tree names
them): another arch's or compiler's tree of the same source is not the run's. A git
source's builds are its repository's: the one checkout for builds (`git-repo-HASH`, in
sources) and the build trees named after it (sources.build_checkout) are used by a run of
any commit of the repository, on the run's arch and toolchain for a build tree. The run's
initramfs is the one the store names, its agent the one that initramfs holds as /init (or the
one a machine ran as a program), and a run whose workloads named Debian packages used the
userland of its arch's Debian architecture.

Every kernellab command holds the cache shared while it runs (paths.in_use); pruning takes it
exclusively, so it never removes what another command is using, and refuses while one runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import arches, initramfs, paths, sources
from .errors import LabError
from .store import Store
from .toolchain import Toolchain

# The kinds pruning may remove; the rest it only shows, with why it leaves them.
PRUNABLE = ("sources", "build", "artifacts", "debian-image", "fs-images", "userland")
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
    """Bytes under `path` and the newest change there, links not followed. os.scandir,
    not Path.rglob: a kernel source and build tree are 250,000 files, and rglob's
    per-file Path objects and second stat made `cache show` take 5 s on a warm cache."""
    top = path.lstat()
    if not stat.S_ISDIR(top.st_mode):
        return top.st_size, top.st_mtime
    total, newest, folders = 0, top.st_mtime, [os.fspath(path)]
    while folders:
        try:
            listing = os.scandir(folders.pop())
        except (FileNotFoundError, NotADirectoryError):   # removed or replaced while we looked
            continue
        with listing:
            for entry in listing:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                total += info.st_size
                newest = max(newest, info.st_mtime)
                if stat.S_ISDIR(info.st_mode):
                    folders.append(entry.path)
    return total, newest


@dataclass(frozen=True)
class _Use:
    """What one run measured, as the cache names it."""
    run: int
    artifacts: str | None   # the build key's first 20 characters: its artifacts' folder
    source_hash: str | None  # the source's content hash's first 12: in every name of its entries
    source_id: str | None   # the source's id (VERSION-HASH): what its per-arch entries start with
    tree: str | None        # SOURCE-ID-ARCH-TOOLCHAIN-ID, or SOURCE-ID-ARCH- when the compiler is unknown
    initramfs: str | None = None   # the initramfs file it booted, or the agent binary a machine ran
    agent: str | None = None       # the agent binary that initramfs holds
    userland: str | None = None    # the Debian architecture of its workloads' packages, if any
    repository: str | None = None  # a git source: its repository's checkout for builds (sources.repository_name)
    repository_tree: str | None = None   # ... and its build tree for the run's arch and toolchain

    def used(self, kind: str, name: str, arch_names: Sequence[str]) -> bool:
        if kind in ("initramfs", "agent"):
            return name in (self.initramfs, self.agent)
        if kind == "userland":   # an arch's folder (apt, packages), its requests and segments
            return self.userland is not None and (name == self.userland or name.startswith(f"{self.userland}-"))
        if self.artifacts and self.artifacts in name:
            return True
        if self.repository and name.startswith(self.repository):
            return name == self.repository if kind == "sources" else _of_tree(name, self.repository_tree)
        if not self.source_hash or self.source_hash not in name:
            return False
        if self.source_id is None or _arch_of(name, self.source_id, arch_names) is None:
            return True   # the source's own: its tree, its symbols
        # One source's entry per (arch, toolchain): the run's only if both are the run's.
        return _of_tree(name, self.tree)


def _of_tree(name: str, tree: str | None) -> bool:
    """Whether `name` is the build tree `tree` (SOURCE-ID-ARCH-TOOLCHAIN-ID, or a prefix of
    every toolchain's ending in -) or an entry named after it (its pool: .pool; a kconfig file: -...)."""
    if tree is None or not name.startswith(tree):
        return False
    return name == tree or tree.endswith("-") or name[len(tree)] in ".-"


def _arch_of(name: str, source_id: str, arch_names: Sequence[str]) -> str | None:
    """The arch a name of SOURCE-ID-ARCH-... is for; None for a name of the source alone."""
    rest = name.removeprefix(f"{source_id}-")
    if rest == name:
        return None
    return next((a for a in arch_names if rest.startswith(f"{a}-")), None)


def _tree_name(source_id: str, arch: str, compiler: str | None) -> str:
    """The name build.build_tree gives the build tree of this source (its id, or a git
    source's repository's name), arch and compiler (the first line of its --version, as
    the build's record keeps it); without the compiler, the prefix every toolchain's tree
    of the source and arch shares."""
    try:
        profile = arches.load(arch)
    except LabError:   # an arch profile this kernellab no longer has: any toolchain's tree
        return f"{source_id}-{arch}-"
    if not compiler:
        return f"{source_id}-{arch}-"
    # The record keeps the compiler's words, not its kind: clang says its name in them.
    kind = "clang" if "clang" in compiler.lower() else "gcc"
    return f"{source_id}-{arch}-{Toolchain(profile.cc, profile.cross_compile, compiler, kind).id}"


def _uses(store: Store | None, recent: int, debian_arches: Mapping[str, str]) -> list[_Use]:
    """What the store's `recent` latest runs measured. `debian_arches`: arch profile -> the
    Debian architecture its workloads' userland is named by."""
    if store is None:
        return []
    rows = store.db.execute(
        "SELECT r.id, r.build_key, v.source_id, s.content_hash, v.arch, s.kind, s.tree,"
        " CASE WHEN json_valid(b.record) THEN json_extract(b.record, '$.compiler') END, r.initramfs,"
        " EXISTS (SELECT 1 FROM workloads w WHERE w.run_id = r.id AND json_valid(w.provenance)"
        "         AND json_array_length(w.provenance, '$.packages') > 0)"
        " FROM runs r JOIN variants v ON v.id = r.variant_id LEFT JOIN sources s ON s.id = v.source_id"
        " LEFT JOIN builds b ON b.key = r.build_key ORDER BY r.id DESC LIMIT ?", (recent,)).fetchall()
    uses: list[_Use] = []
    trees: dict[tuple[str, str, str | None], str] = {}   # one name per (source, arch, compiler), made once
    repositories: dict[str, str | None] = {}   # a git source's tree -> its repository's name
    root = paths.cache_root()
    agents = _agents_in({str(row[8]) for row in rows if row[8]})
    for run_id, build_key, source_id, content_hash, arch, kind, source_tree, compiler, initrd, debian_packages in rows:
        source_id = str(source_id) if source_id else None
        compiler = compiler if isinstance(compiler, str) else None
        tree = None
        if source_id:
            key = (source_id, str(arch), compiler)
            if key not in trees:
                trees[key] = _tree_name(*key)
            tree = trees[key]
        repository = None
        if kind == "git" and isinstance(source_tree, str) and source_tree:
            if source_tree not in repositories:
                # Only a tree in this cache is read: the store names it, never a path to open.
                worktree = Path(source_tree)
                repo = sources.repository_of(worktree) if worktree.parent.parent == root / "sources" else None
                repositories[source_tree] = sources.repository_name(repo) if repo is not None else None
            repository = repositories[source_tree]
        initrd = str(initrd) if initrd else None
        uses.append(_Use(run_id, build_key[:20] if isinstance(build_key, str) and build_key else None,
                         content_hash[:12] if isinstance(content_hash, str) and content_hash else None,
                         source_id, tree, initrd, agents.get(initrd or ""),
                         debian_arches.get(str(arch)) if debian_packages else None, repository,
                         _tree_name(repository, str(arch), compiler) if repository else None))
    return uses


def _agents_in(initrds: set[str]) -> dict[str, str]:
    """initramfs file name (of `initrds`, the runs' own) -> the agent entry it holds as /init.
    An initramfs is named by a digest of all it holds, so its agent is found by content."""
    agent_dir, initrd_dir = paths.cache_root() / "agent", paths.cache_root() / "initramfs"
    if not initrds or not agent_dir.is_dir() or not initrd_dir.is_dir():
        return {}
    agents = {hashlib.sha256(p.read_bytes()).hexdigest(): p.name for p in agent_dir.iterdir()
              if p.is_file() and not p.is_symlink()}
    found = {}
    for path in initrd_dir.iterdir():   # the store's names are looked up, never opened as paths
        init = initramfs.init_of(path) if path.name in initrds and path.is_file() else None
        if init is not None and (agent := agents.get(hashlib.sha256(init).hexdigest())):
            found[path.name] = agent
    return found


def entries(store: Store | None, recent: int = 50, debian_arches: Mapping[str, str] | None = None) -> list[Entry]:
    """`debian_arches`: arch profile -> Debian architecture (userland.DEBIAN's), to tell the
    userland a run's workloads used."""
    root = paths.cache_root()
    uses = _uses(store, recent, debian_arches or {})
    arch_names = arches.available()
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "children"):
        for path in sorted(folder.iterdir()):
            size, modified = _size_and_newest(path)
            used = sorted({use.run for use in uses if use.used(folder.name, path.name, arch_names)})
            out.append(Entry(folder.name, path, size, modified, used))
    return out


def runs_text(runs: list[int], most: int = 8) -> str:
    """Run ids as `cache show` names them, consecutive ones as a range: "runs 1-4, 6"; past
    `most` ranges, how many runs more."""
    ranges: list[list[int]] = []
    for run in sorted(runs):
        if ranges and run == ranges[-1][1] + 1:
            ranges[-1][1] = run
        else:
            ranges.append([run, run])
    shown = [f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:most]]
    left = sum(b - a + 1 for a, b in ranges[most:])
    return f"run{'s' if len(runs) > 1 else ''} {', '.join(shown)}" + (f" and {left} more" if left else "")


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
