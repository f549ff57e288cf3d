"""Kernel source trees: Debian's linux-source packages, a kernel tarball, a git commit, or
a local tree.

A source is identified by `make kernelversion` and a content hash, so two trees that
report the same version but differ in content never share a cached build. A tarball's
hash is the sha256 of the file, whoever names it: Debian's /usr/src/linux-source-6.1.tar.xz
given as a path is the same source as `debian:6.1` (same id, same extraction, same
builds). A git source's hash is its commit id, and its tree holds the commit's files that
are read without building (READ_WITHOUT_BUILDING: Kconfig, scripts/, the Makefiles kconfig
and `make kernelversion` read), one per commit in kernellab's cache; its builds run in its
repository's one checkout for builds instead (build_checkout), where the whole commit is,
so that every commit of a repository builds incrementally in one tree.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import archive, paths
from .errors import LabError
from .locks import locked
from .proc import require_tool, run_checked

DEBIAN_SOURCES = {"6.1": "linux-source-6.1", "6.12": "linux-source-6.12"}
TARBALL_SUFFIXES = (".tar.xz", ".tar.gz", ".tgz", ".tar.bz2")
MARKER = ".kernellab-source.json"  # written last into an extraction: its presence means "complete"


@dataclass(frozen=True)
class Source:
    spec: str          # what the user asked for: "debian:6.1", a path, or "git:PATH@REF"
    kind: str          # "debian", "tarball", "git" or "path"
    version: str       # make kernelversion
    content_hash: str  # sha256 of the tarball, the commit id, or a hash of the tree's file metadata
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
    if spec.startswith("git:"):
        return _git(spec)
    path = Path(spec).expanduser()
    if path.is_dir():
        return _local(spec, path.resolve())
    if path.name.endswith(TARBALL_SUFFIXES):
        return _tarball(spec, path)
    raise LabError(f"unknown source {spec!r}: use {_choices()}")


def identify(spec: str) -> list[str]:
    """The content hashes a source's cache entries are named by, found without preparing
    it: nothing is installed, extracted, checked out or run, and nothing is written (for
    `cache prune`, whose dry run must change nothing). Usually one hash; for a Debian
    source whose package is not installed, those of its extractions still in the cache;
    for a git source, its commit's and its repository's (whose checkout and build trees
    the builds of all its commits share)."""
    if spec.startswith("debian:"):
        package = DEBIAN_SOURCES.get(spec.split(":", 1)[1])
        if package is None:
            raise LabError(f"unknown source {spec!r}: use {_choices()}")
        tarball = Path(f"/usr/src/{package}.tar.xz")
        return [_file_sha256_cached(tarball, remember=False)] if tarball.exists() else _extracted_hashes(package)
    if spec.startswith("git:"):
        repo_text, at, ref = spec.removeprefix("git:").rpartition("@")
        commit = _git_out(Path(repo_text).expanduser().resolve(), "rev-parse", "--verify", "--quiet",
                          f"{ref}^{{commit}}") if at and repo_text and ref else None
        if commit is None:
            raise LabError(f"source {spec!r}: no commit {ref!r} in the git repository {repo_text!r}: "
                           "give git:PATH@REF")
        # Its builds are in its repository's checkout and build trees (build_checkout).
        return [commit, _repository_hash(Path(repo_text).expanduser().resolve())]
    path = Path(spec).expanduser()
    if path.is_dir():
        tree = path.resolve()
        if not (tree / "Makefile").exists() or not (tree / "Kconfig").exists():
            raise LabError(f"{tree} is not a kernel source tree (no top-level Makefile and Kconfig)")
        return [_tree_hash(tree)]
    if path.name.endswith(TARBALL_SUFFIXES) and path.is_file():
        return [_file_sha256_cached(path, remember=False)]
    if path.name.endswith(TARBALL_SUFFIXES):
        raise LabError(f"source {spec!r}: no such file: give the path of a kernel tarball (linux-X.Y.tar.xz)")
    raise LabError(f"unknown source {spec!r}: use {_choices()}")


def _extracted_hashes(package: str) -> list[str]:
    """The hashes (their first 12 digits, which name cache entries) of the complete
    extractions of a Debian package's tarball: named after it, PACKAGE-HASH12."""
    where = paths.cache_root() / "sources"
    found = sorted(where.glob(f"{package}-*")) if where.is_dir() else []
    return [p.name.rsplit("-", 1)[1] for p in found if (p / MARKER).is_file()]


def _choices() -> str:
    known = ", ".join(f"debian:{v}" for v in DEBIAN_SOURCES)
    return (f"one of {known}, the path of a kernel tree or of a linux-X.Y.tar.xz (.tar.gz, .tar.bz2), "
            "or git:PATH@REF")


def _debian(spec: str) -> Source:
    version = spec.split(":", 1)[1]
    package = DEBIAN_SOURCES.get(version)
    if package is None:
        raise LabError(f"unknown source {spec!r}: use {_choices()}")
    tarball = Path(f"/usr/src/{package}.tar.xz")
    if not tarball.exists():
        _install_package(package)
    digest = _file_sha256_cached(tarball)
    tree, version = _extracted(tarball, digest)
    return Source(spec, "debian", version, digest, tree)


def _tarball(spec: str, path: Path) -> Source:
    if not path.is_file():
        raise LabError(f"source {spec!r}: no such file: give the path of a kernel tarball (linux-X.Y.tar.xz)")
    path = path.resolve()
    digest = _file_sha256_cached(path)
    tree, version = _extracted(path, digest)
    return Source(spec, "tarball", version, digest, tree)


def _local(spec: str, tree: Path) -> Source:
    if not (tree / "Makefile").exists() or not (tree / "Kconfig").exists():
        raise LabError(f"{tree} is not a kernel source tree (no top-level Makefile and Kconfig)")
    content_hash = _tree_hash(tree)
    return Source(spec, "path", _tree_version(tree, content_hash), content_hash, tree)


@functools.cache
def _tree_version(tree: Path, content_hash: str) -> str:
    """`make kernelversion` once per tree and content: an edit of the Makefile changes the hash."""
    return _kernelversion(tree)


# -- tarballs (Debian's and any other) -------------------------------------------------

def _extracted(tarball: Path, digest: str) -> tuple[Path, str]:
    """The kernel tree of a tarball, extracted once per content hash: any earlier
    extraction of the same bytes (under whatever file name) is reused."""
    sources = paths.cache_dir("sources")
    with locked(sources / f".lock-{digest[:12]}"):  # two processes never extract one tarball twice
        dest = _extraction(sources, digest)
        if dest is None:
            dest = sources / f"{_stem(tarball)}-{digest[:12]}"
            top = _extract(tarball, dest, digest)
            (dest / MARKER).write_text(json.dumps({"version": _kernelversion(dest / top), "tree": top,
                                                   "sha256": digest}))
    info = json.loads((dest / MARKER).read_text())
    # Markers written before tarball sources say no "tree": the one directory there is.
    top = info.get("tree") or next(p.name for p in dest.iterdir() if p.is_dir())
    return dest / top, str(info["version"])


def _extraction(sources: Path, digest: str) -> Path | None:
    for candidate in sorted(sources.glob(f"*-{digest[:12]}")):
        if not candidate.name.startswith(".") and _marker_hash(candidate) in (digest, None):
            return candidate
    return None


def _marker_hash(extraction: Path) -> str | None:
    """The sha256 an extraction's marker names (None for markers older than it); "" if it
    has no marker (an incomplete extraction) or one kernellab cannot read."""
    try:
        info = json.loads((extraction / MARKER).read_text())
    except (OSError, ValueError):
        return ""
    return info.get("sha256") if isinstance(info, dict) else ""


def _stem(tarball: Path) -> str:
    """linux-source-6.1.tar.xz -> linux-source-6.1: Debian's extraction keeps its old name."""
    name = tarball.name
    return next((name.removesuffix(s) for s in TARBALL_SUFFIXES if name.endswith(s)), name)


def _install_package(package: str) -> None:
    command = ["apt-get", "install", "-y", "--no-install-recommends", package]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise LabError(f"{package} is not installed: run `sudo {' '.join(command)}`")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LabError(f"could not install {package} ({last}): run `apt-get update && {' '.join(command)}`")


# The hashes of tarballs already read. Hashing a 140 MB tarball costs a second, so a file
# whose inode still looks the same is not read again. "Looks the same" must not be
# foolable: size and mtime are not enough (`touch -r` puts an old mtime back on a replaced
# file of the same size). The key adds the device and inode (a file renamed over it is
# another inode) and ctime, which the kernel sets at every change to the inode (a write, a
# chmod, a utime) and which no user can set back. A file changed in the last seconds is not
# remembered: ctime has the file system's clock tick, and a second change within the
# tick of the first would keep it.
_HASH_INDEX = "source-hashes.json"
_HASH_INDEX_ENTRIES = 64
_SETTLED_S = 2.0


def _identity(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _hash_index() -> dict[str, str]:
    try:
        index = json.loads((paths.cache_root() / _HASH_INDEX).read_text())
    except (OSError, ValueError):    # none yet, or damaged: hash again
        return {}
    if not isinstance(index, dict):
        return {}
    return {k: v for k, v in index.items() if isinstance(k, str) and isinstance(v, str) and len(v) == 64}


def _file_sha256_cached(path: Path, remember: bool = True) -> str:
    """The sha256 of a file; `remember`: note it in the cache (False: write nothing)."""
    before = path.stat()
    index = _hash_index()
    key = _identity(before)
    if key in index:
        return index[key]
    digest = _file_sha256(path)
    settled = time.time() - before.st_ctime > _SETTLED_S and _identity(path.stat()) == key
    if remember and settled:
        index.pop(key, None)
        index[key] = digest
        kept = dict(list(index.items())[-_HASH_INDEX_ENTRIES:])
        index_path = paths.cache_root() / _HASH_INDEX
        tmp = index_path.with_name(f".{_HASH_INDEX}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(kept, indent=1))
            tmp.replace(index_path)
        except OSError:                  # a full disk: the file is hashed again next time
            tmp.unlink(missing_ok=True)
    return digest


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise LabError(f"cannot read the tarball {path}: {exc.strerror or exc}") from None
    return h.hexdigest()


def _extract(tarball: Path, dest: Path, digest: str) -> str:
    """Extract into dest (via a staging directory, so no half tree is ever used); the name
    of the one top-level directory, which must be a kernel tree. The extraction goes
    through kernellab.archive: nothing in the tarball can write outside the staging
    directory, which is removed whatever goes wrong."""
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        extracted = archive.extract_tarball(tarball, staging, "give a kernel.org linux-X.Y tarball or "
                                            "Debian's linux-source one")
        if extracted != digest:
            raise LabError(f"{tarball} changed while kernellab extracted it: run the command again "
                           "once it is complete")
        top = _kernel_tree_top(tarball, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    return top


def _kernel_tree_top(tarball: Path, staging: Path) -> str:
    tops = [p for p in staging.iterdir()]
    if len(tops) != 1 or tops[0].is_symlink() or not (tops[0] / "Makefile").is_file() \
            or not (tops[0] / "Kconfig").is_file():
        raise LabError(f"{tarball} does not hold one kernel tree (a directory with Makefile and Kconfig) "
                       "at its top: give a kernel.org linux-X.Y tarball or Debian's linux-source one")
    return tops[0].name


# -- git ---------------------------------------------------------------------------

def _git(spec: str) -> Source:
    repo_text, at, ref = spec.removeprefix("git:").rpartition("@")
    if not at or not repo_text or not ref:
        raise LabError(f"bad source {spec!r}: give git:PATH@REF (REF a branch, tag or commit)")
    require_tool("git")
    repo = Path(repo_text).expanduser().resolve()
    if _git_out(repo, "rev-parse", "--git-dir") is None:
        raise LabError(f"source {spec!r}: {repo} is not a git repository")
    commit = _git_out(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit is None:
        raise LabError(f"source {spec!r}: {ref!r} is no branch, tag or commit of {repo} "
                       f"(`git -C {repo} log --oneline` lists its commits)")
    _refuse_dirty(spec, repo, ref)
    tree, version = _commit_tree(repo, commit)
    return Source(spec, "git", version, commit, tree)


def _git_out(repo: Path, *args: str) -> str | None:
    """git's stdout, stripped; None when git fails (not a repository, unknown ref)."""
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def _refuse_dirty(spec: str, repo: Path, ref: str) -> None:
    """A ref that names the checkout (HEAD, or its branch) with uncommitted changes would
    build the last commit, not the files the user sees: say so rather than guess."""
    branch = _git_out(repo, "symbolic-ref", "--quiet", "--short", "HEAD")
    if ref not in ("HEAD", branch):
        return
    changes = _git_out(repo, "status", "--porcelain", "--untracked-files=no")
    if changes:
        raise LabError(f"source {spec!r}: {repo} has uncommitted changes, which {ref} does not hold: "
                       f"commit them, or give the path {repo} as the source to build the files as they are")


# What is read at a commit without building it, as patterns of the paths kept (`**`: any
# directories, `*`: within one name): kconfiglib reads every Kconfig file (any arch's) and
# runs the scripts of their $(shell,...) calls; make's config targets (defconfig,
# tinyconfig, olddefconfig) read the top Makefile, scripts/ (Kbuild.include, kconfig's
# conf and its sources), the arch's Makefile, its defconfigs and the config fragments; and
# `make kernelversion` the top Makefile. The sources only a build reads stay out: on Debian's
# Linux 6.1 this keeps 2,652 of 78,635 files, 24 MB on disk instead of 1.5 GB, made in ~1 s
# instead of a minute or two, and every config it resolves is the whole commit's.
READ_WITHOUT_BUILDING = (
    "Makefile",
    "**/Kconfig*",
    "scripts/**",
    "arch/*/Makefile*",     # arch/x86/Makefile_32.cpu, arch/powerpc/Makefile.postlink too
    "arch/*/configs/**",
    "arch/*/tools/**",      # run by powerpc's and s390's Kconfig
    "kernel/configs/**",    # tiny.config and the other fragments of `make *.config`
)


def _path_pattern(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regular expression matching a path (relative, with /) that any pattern matches."""
    def one(pattern: str) -> str:
        words = re.split(r"(\*\*/|/\*\*|\*)", pattern)
        return "".join({"**/": "(?:.*/)?", "/**": "/.*", "*": "[^/]*"}.get(w, re.escape(w)) for w in words)
    return re.compile("|".join(f"(?:{one(p)})" for p in patterns))


_KEPT = _path_pattern(READ_WITHOUT_BUILDING)


def _commit_tree(repo: Path, commit: str) -> tuple[Path, str]:
    """A commit's files that are read without building (READ_WITHOUT_BUILDING), in
    kernellab's cache, made once and kept: plain files from git's objects, not a worktree
    (the repository gains no worktree, index or config for it). Its builds run in the
    repository's checkout for builds (build_checkout), where the whole commit is."""
    dest = paths.cache_dir("sources") / f"git-{commit[:12]}"
    tree = dest / f"linux-{commit[:12]}"
    with locked(dest):
        if _marker(dest).get("files") != list(READ_WITHOUT_BUILDING):
            # An interrupted earlier attempt, another selection of files, or a whole
            # worktree of the commit made by an earlier kernellab (1.5 GB on Linux).
            (dest / MARKER).unlink(missing_ok=True)
            was_worktree = (tree / ".git").exists()
            shutil.rmtree(tree, ignore_errors=True)
            if was_worktree:
                _git_out(repo, "worktree", "prune")   # ... and the repository's record of it
            _write_files_read_without_building(repo, commit, tree)
            if not (tree / "Makefile").is_file() or not (tree / "Kconfig").is_file():
                shutil.rmtree(tree, ignore_errors=True)
                raise LabError(f"commit {commit[:12]} of {repo} is not a kernel tree (no top-level Makefile "
                               "and Kconfig)")
            (dest / MARKER).write_text(json.dumps({"version": _kernelversion(tree), "commit": commit,
                                                   "repo": str(repo), "files": list(READ_WITHOUT_BUILDING)}))
    return tree, str(_marker(dest)["version"])


def _marker(dest: Path) -> dict[str, Any]:
    """A source entry's marker; {} when there is none (yet), or it is unreadable."""
    try:
        info = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _write_files_read_without_building(repo: Path, commit: str, tree: Path) -> None:
    """The commit's files that _KEPT matches, written into `tree` with their modes (a
    symlink as a symlink), read from the repository's objects in two git commands."""
    blobs = [(mode, sha, path) for mode, sha, path in _blobs(repo, commit) if _KEPT.fullmatch(path)]
    batch = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], capture_output=True,
                           input="".join(f"{sha}\n" for _mode, sha, _path in blobs).encode())
    if batch.returncode != 0:
        raise LabError(f"git cat-file of commit {commit[:12]} of {repo} failed: "
                       f"{batch.stderr.decode(errors='replace').strip()}")
    data, at = batch.stdout, 0
    for mode, _sha, path in blobs:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].split()[2])   # "<sha> blob <size>", then the content
        content = data[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1
        _write_blob(tree, path, mode, content)


def _blobs(repo: Path, commit: str) -> list[tuple[str, str, str]]:
    """(mode, object id, path) of every file of the commit; submodules left out."""
    listing = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "-z", "--full-tree", commit],
                             capture_output=True)
    if listing.returncode != 0:
        raise LabError(f"git ls-tree of commit {commit[:12]} of {repo} failed: "
                       f"{listing.stderr.decode(errors='replace').strip()}")
    out = []
    for item in listing.stdout.split(b"\0"):
        if not item:
            continue
        meta, _tab, path = item.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        if kind == "blob":
            out.append((mode, sha, os.fsdecode(path)))
    return out


def _write_blob(tree: Path, path: str, mode: str, content: bytes) -> None:
    """One file of a commit (`path` as git names it) written under `tree`, as git checks it out."""
    parts = path.split("/")
    if any(part in ("", ".", "..", ".git") for part in parts):   # git refuses to check these out too
        raise LabError(f"the git tree holds a path git would not check out: {path!r}")
    # A hand-made tree object can hold a symlink and a directory of one name (`scripts` ->
    # /root/.ssh beside scripts/Kconfig): never create or write through a link.
    twice = LabError(f"the git tree holds {path!r} and also a file or symbolic link on its way or of its name: "
                     "a tree git would not check out; use another repository")
    tree.mkdir(parents=True, exist_ok=True)
    target = tree
    for part in parts[:-1]:
        target = target / part
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise twice
        target.mkdir(exist_ok=True)
    target = target / parts[-1]
    try:
        if mode == "120000":
            os.symlink(os.fsdecode(content), target)
            return
        with open(target, "xb") as handle:   # x: never through a name that exists
            handle.write(content)
    except (FileExistsError, IsADirectoryError):
        raise twice from None
    target.chmod(0o755 if mode == "100755" else 0o644)


# -- one checkout per repository, for builds -----------------------------------------

CHECKOUT = "linux"        # the checkout, in its cache entry (sources/git-repo-HASH12)
_MADE = ".made"           # touched whenever a make in the checkout ends
_CLOCK = ".clock"         # touched to read the file system's clock
_CLOCK_WAIT_S = 5.0       # the coarsest file time granularity waited out (FAT's is 2 s)


@dataclass(frozen=True)
class BuildSource:
    """Where make builds a source from (its -C): for a git source, its repository's one
    checkout for builds, and the commit that checkout held before (None: made for this build)."""
    tree: Path
    repository: Path | None = None
    previous: str | None = None


def repository_of(tree: Path) -> Path | None:
    """The repository a git source's tree (its Source.tree) was made from, as the tree's
    marker says; None when there is no such marker."""
    repo = _marker(tree.parent).get("repo")
    return Path(repo) if isinstance(repo, str) and repo else None


def repository_name(repo: Path) -> str:
    """The cache's name of a repository's checkout for builds, which its build trees'
    names start with too."""
    return f"git-repo-{_repository_hash(repo)[:12]}"


def _repository_hash(repo: Path) -> str:
    return hashlib.sha256(str(repo).encode()).hexdigest()


def build_name(source: Source) -> str:
    """What the build trees of a source are named by: its id; for a git source, its
    repository's name, as every commit of a repository builds in one tree (build_checkout)."""
    repo = repository_of(source.tree) if source.kind == "git" else None
    return repository_name(repo) if repo is not None else source.id


@contextlib.contextmanager
def build_checkout(source: Source) -> Iterator[BuildSource]:
    """The tree to build `source` from, held until the build (make) ends.

    A git source builds in its repository's one checkout for builds, not in its commit's
    tree (which holds only what is read without building): the checkout is moved to the
    commit (`git checkout --force --detach`) under its lock, which is held while make runs,
    so two builds of different commits never interleave. Builds of every commit then compile
    from one path into one build tree (build.build_tree names it by build_name), and kbuild
    recompiles only what the commit changed, and ccache finds the objects of a commit built
    before (same paths, same command lines). Invariant: a build of commit X compiles exactly
    X's files. git rewrites the files that differ from the commit the checkout held, and
    only those; each file it rewrites is newer than anything an earlier make of the checkout
    wrote (_after_last_make), so an object older than its sources is compiled again, and an
    object newer than all of them was compiled from their present content.

    Any other kind of source builds in its own tree, as before."""
    repo = repository_of(source.tree) if source.kind == "git" else None
    if repo is None:
        yield BuildSource(source.tree)
        return
    entry = paths.cache_dir("sources") / paths.component("repository", repository_name(repo))
    with locked(entry):
        previous = _move_checkout(entry, repo, source.content_hash)
        try:
            yield BuildSource(entry / CHECKOUT, repo, previous)
        finally:
            # What make wrote is older than this; kernellab killed outright (SIGKILL) skips
            # it, but then the next command starts well after the last object was written.
            (entry / _MADE).touch()


def _move_checkout(entry: Path, repo: Path, commit: str) -> str | None:
    """The checkout moved to `commit` (made when there is none): the commit it held before."""
    tree = entry / CHECKOUT
    # A checkout's .git is a file naming the repository; without it, git -C would find
    # whatever repository holds the cache.
    previous = _git_out(tree, "rev-parse", "--verify", "--quiet", "HEAD") if (tree / ".git").is_file() else None
    if previous is not None:
        _after_last_make(entry)
        if _git_out(tree, "checkout", "--quiet", "--force", "--detach", commit) is not None:
            return previous
    # None yet, or one git no longer knows (its repository's record of it was removed).
    shutil.rmtree(tree, ignore_errors=True)
    _git_out(repo, "worktree", "prune")
    run_checked(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), commit],
                what=f"git worktree add of {repo}'s checkout for builds")
    return None


def _after_last_make(entry: Path) -> None:
    """Waits until a file written now is newer than the end of the checkout's last make.
    File times have the file system's granularity (a jiffy; a second or two on some): a
    file the checkout rewrote within the tick in which make wrote an object would not be
    newer than the object, and make would keep an object of the other commit."""
    made = entry / _MADE
    if not made.exists():
        return
    last = made.stat().st_mtime_ns
    clock = entry / _CLOCK
    deadline = time.monotonic() + _CLOCK_WAIT_S
    while True:
        clock.touch()
        if clock.stat().st_mtime_ns > last:
            return
        if time.monotonic() > deadline:
            raise LabError(f"the clock is behind the last build in {entry}: set the system clock right, "
                           f"or remove {entry} (the next build of the repository then compiles everything)")
        time.sleep(0.01)


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
