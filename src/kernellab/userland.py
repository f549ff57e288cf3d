"""The guest's userland for workloads: the programs a set of workloads runs, from Debian's
packages for the guest's architecture, as a newc cpio segment to append to the agent's
initramfs (Linux unpacks concatenated archives one after the other into the same rootfs).

Assembling one:

1. the Debian architecture of the arch profile (`DEBIAN`); 32-bit PowerPC has none in Debian 12;
2. the dependency closure of the workloads' packages (Depends and Pre-Depends) in a private
   apt view of that architecture (`apt.private`: the host's dpkg and apt state are never
   touched), leaving out what a guest that runs one program after another never uses
   (`UNNEEDED`);
3. the packages downloaded (`apt-get download`) and unpacked one by one into kernellab's cache
   by kernellab.archive, as `dpkg-deb -x` would: nothing is installed, no maintainer script runs;
4. what is kept: each workload's programs (the argv[0] of its command and of its server, looked
   up on PATH), what its file `uses`, the dynamic loader and the shared libraries they load
   (DT_NEEDED, transitively), with the symbolic links on the way. Documentation, manual
   pages, locales and every other program of the packages are left out;
5. the files kernellab writes itself (`GUEST_FILES`: a minimal /etc/passwd and /etc/group,
   which a server such as nginx looks its user up in);
6. the segment, named by a hash of the architecture, the packages' sha256s and the kept files.

The request (the architecture, the packages, what is kept from them), each package's version
and the package each program came from are remembered beside the segment, so that assembling
it again is a lookup (no apt, no unpacking), and a run's workloads say which version of which
package they ran (`installed`, guest.workloads.Provenance). The packages under a
remembered request change only with `refresh` (a new `apt-get update` and a new download).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from elftools.elf.dynamic import DynamicSegment
from elftools.elf.segments import InterpSegment

from . import apt, elfsize, paths
from .arches import ArchProfile
from .errors import LabError
from .guest.workloads import Packages
from .initramfs import build_cpio
from .workloads import Instance

# Arch profile -> (Debian architecture, its multiarch triplet: where its libraries are).
DEBIAN: dict[str, tuple[str, str]] = {
    "x86_64": ("amd64", "x86_64-linux-gnu"),
    "i386": ("i386", "i386-linux-gnu"),
    "arm64": ("arm64", "aarch64-linux-gnu"),
    "s390x": ("s390x", "s390x-linux-gnu"),
}

# Packages whose dependents run without them in a guest that is an initramfs with the agent as
# PID 1 running one program at a time: package configuration and its tools (debconf, dpkg,
# ucf), init systems and service helpers, account tools (the guest has no users to add),
# interpreters the programs' side scripts need (fio's and rt-tests' Python tools, Perl), and
# data nothing here reads. A dependency is dropped when any of its alternatives is here. A
# library a kept program loads is never in one of these: if it were, the assembly says so.
UNNEEDED = frozenset({
    "debconf", "debconf-2.0", "cdebconf", "dpkg", "install-info", "ucf", "usrmerge", "usr-is-merged",
    "init-system-helpers", "lsb-base", "sysvinit-utils", "systemd", "systemd-sysv", "libpam-systemd",
    "adduser", "passwd", "login", "logrotate",
    "perl", "perl-base", "perl-modules-5.36", "python3", "python3-minimal", "python3.11",
    "python3.11-minimal", "libpython3.11-stdlib", "libpython3.11-minimal",
    "tzdata", "media-types", "mime-support", "sensible-utils", "netbase", "ca-certificates", "openssl",
    "nginx-common", "iproute2",
})

# Where argv[0] is looked up (in this order), as the agent's PATH has it.
PATH_DIRS = ("usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin")
# The changes of this module that change what a request keeps: part of its key.
FORMAT = 2
# Files of kernellab's own in every userland. The guest runs everything as root; a server
# still looks its user up by name (nginx's `user root root;`, redis nothing), and glibc reads
# these without nsswitch.conf. nobody/nogroup for a program that drops to them.
GUEST_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
}
# How the segment is compressed. gzip: the starter set's 115 MiB on amd64 become 42 MiB (6 s
# to compress, once), and the guest holds the compressed image and the unpacked files at once
# only briefly; xz saves 30% more but takes 90 s. lab-minimal has RD_GZIP (its default with
# BLK_DEV_INITRD); "none" for a kernel without it.
Compression = Literal["gzip", "none"]
_MAX_LINKS = 40   # the kernel's limit of symbolic links in one lookup


@dataclass(frozen=True)
class Userland:
    """An assembled userland: its segment and what it holds."""

    arch: str                            # the Debian architecture
    segment: Path                        # the newc cpio, to append to the agent's initramfs
    compression: str                     # of the segment: gzip or none
    size: int                            # its bytes
    unpacked: int                        # the bytes of the files it holds
    packages: dict[str, str]             # the closure: name -> version
    programs: dict[str, str]             # each argv[0] of the workloads -> its path in the guest
    files: tuple[str, ...]               # every entry, without the leading '/'
    origins: dict[str, str]              # each argv[0] of the workloads -> the package it came from

    def installed(self) -> Packages:
        """What a run's workloads say of the packages their programs came from."""
        return Packages(self.packages, self.origins)


@dataclass(frozen=True)
class Wanted:
    """What a set of workload instances needs of the userland."""

    packages: tuple[str, ...]
    programs: tuple[str, ...]            # argv[0]s: a name on PATH or an absolute path
    uses: tuple[str, ...]


def wanted(instances: Iterable[Instance]) -> Wanted:
    packages: set[str] = set()
    programs: set[str] = set()
    uses: set[str] = set()
    for inst in instances:
        packages.update(inst.workload.packages)
        uses.update(inst.workload.uses)
        own = {PurePosixPath(b).name for b in inst.workload.binaries}
        # The command of a workload that talks to the host runs there, not in the guest.
        client = None if inst.workload.client_on_host else inst.argv("/tmp")
        for argv in (client, inst.server_argv("/tmp")):
            # A program the workload writes into its workdir comes from its [files], and one of
            # its `binaries` is the user's: neither comes from a package.
            if argv and not argv[0].startswith("/tmp/") and argv[0] not in own:
                programs.add(argv[0])
    return Wanted(tuple(sorted(packages)), tuple(sorted(programs)), tuple(sorted(uses)))


def has_debian(profile: ArchProfile) -> bool:
    """Whether Debian 12 has a release for the profile's arch, whose packages a guest's
    userland comes from (else its workloads' programs are built: kernellab.staticbuild)."""
    return profile.name in DEBIAN


def debian_arch(profile: ArchProfile) -> tuple[str, str]:
    """The Debian architecture and multiarch triplet of a profile; a one-line LabError where
    Debian 12 has none."""
    found = DEBIAN.get(profile.name)
    if found is None:
        raise LabError(f"{profile.name} has no Debian 12 userland (Debian 12 has no 32-bit PowerPC release): "
                       "a workload runs there only from static programs: your own (`binaries = [...]` in its "
                       "workload file) or built by kernellab from Debian's source package (a `[static]` table)")
    return found


def segment(instances: Sequence[Instance], profile: ArchProfile, compression: Compression = "gzip") -> Path:
    """The cpio segment holding what `instances` run, for the guest of `profile`."""
    return assemble(instances, profile, compression).segment


def assemble(instances: Sequence[Instance], profile: ArchProfile, compression: Compression = "gzip",
             refresh: bool = False) -> Userland:
    """The userland of `instances` for `profile`, from the cache when it was assembled before
    (unless `refresh`: then apt's lists and the packages are fetched again)."""
    arch, triplet = debian_arch(profile)
    want = wanted(instances)
    if not want.packages:
        raise LabError("the workloads name no Debian packages (`packages = [...]`): nothing to assemble")
    remembered = _remembered_file(arch, want, compression)
    if not refresh:
        found = _remembered(remembered)
        if found is not None:
            return found
    built = _build(arch, triplet, want, compression, refresh)
    paths.write_atomically(remembered, json.dumps({**asdict(built), "segment": built.segment.name}, indent=1).encode())
    return built


def installed(instances: Sequence[Instance], profile: ArchProfile, compression: Compression = "gzip") -> Packages:
    """The packages the guest's userland of `instances` was assembled from, as the cache
    remembers it (the run's initramfs was given its segment: `segment`); none where the
    workloads need no package or the arch has no Debian userland. Never assembles."""
    found = DEBIAN.get(profile.name)
    want = wanted(instances)
    if found is None or not want.packages:
        return Packages()
    built = _remembered(_remembered_file(found[0], want, compression))
    return built.installed() if built is not None else Packages()


def _remembered_file(arch: str, want: Wanted, compression: str) -> Path:
    return paths.cache_file("userland", f"{arch}-{_request_key(arch, want, compression)}.json")


def _request_key(arch: str, want: Wanted, compression: str) -> str:
    request = {"format": FORMAT, "arch": arch, **asdict(want), "unneeded": sorted(UNNEEDED), "path": PATH_DIRS,
               "compression": compression}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:20]


def _remembered(path: Path) -> Userland | None:
    try:
        data = json.loads(path.read_text())
        found = Userland(data["arch"], path.parent / paths.component("cache file name", data["segment"]),
                         data["compression"], data["size"], data["unpacked"], data["packages"],
                         data["programs"], tuple(data["files"]), data["origins"])
    except (OSError, ValueError, KeyError, TypeError, LabError):
        return None   # none yet, damaged, or remembered before it named the programs' packages: assembled again
    if not found.segment.is_file():
        return None
    paths.mark_used(path)
    paths.mark_used(found.segment)
    return found


# -- the packages --------------------------------------------------------------------------------

def _build(arch: str, triplet: str, want: Wanted, compression: Compression, refresh: bool) -> Userland:
    state = paths.cache_dir("userland", arch, "apt")
    options = apt.private(arch, state)
    updated = refresh or not apt.has_lists(state)
    if updated:
        apt.update(options)
    names = closure(want.packages, apt.recursive_depends(want.packages, options))
    debs_dir = paths.cache_dir("userland", arch, "debs")
    if refresh:   # another version of a package may now be the candidate
        shutil.rmtree(debs_dir)
        debs_dir.mkdir()
    try:
        debs = apt.download(names, debs_dir, options)
    except LabError:
        if updated:
            raise
        apt.update(options)   # the lists are older than the archive's packages: once more, fresh
        debs = apt.download(names, debs_dir, options)
    trees = {name: _unpacked(arch, deb) for name, deb in debs.items()}
    tree = Tree.of(trees)
    programs, kept = keep(tree, want, triplet)
    origins = {name: tree.package_of(path[1:]) for name, path in programs.items()}
    sha256s = {name: apt.sha256(deb) for name, deb in sorted(debs.items())}
    files = _cpio_files(tree, kept)
    for name, text in GUEST_FILES.items():
        files[name] = (stat.S_IFREG | 0o644, _Reader(text=text))
        files.setdefault(str(PurePosixPath(name).parent), (stat.S_IFDIR | 0o755, _Reader()))
    content = hashlib.sha256(json.dumps([arch, sha256s, sorted(files), GUEST_FILES]).encode()).hexdigest()[:20]
    target = paths.cache_file("userland", f"{arch}-{content}.cpio" + (".gz" if compression == "gzip" else ""))
    unpacked = sum(e.source.stat().st_size for e in (tree.entries[p] for p in kept) if e.kind == "file")
    if not target.is_file():
        cpio = build_cpio({name: (mode, data()) for name, (mode, data) in files.items()})
        # mtime 0: the same files make the same bytes.
        paths.write_atomically(target, gzip.compress(cpio, compresslevel=6, mtime=0) if compression == "gzip" else cpio)
    versions = {name: _version(deb) for name, deb in sorted(debs.items())}
    return Userland(arch, target, compression, target.stat().st_size, unpacked, versions, programs,
                    tuple(sorted(files)), origins)


def _version(deb: Path) -> str:
    """A downloaded package's version, as apt-get download names its file: NAME_VERSION_ARCH.deb,
    an epoch's colon written %3a (the control data's Version, without running dpkg-deb once
    per package)."""
    return deb.name.split("_")[1].replace("%3a", ":")


def _unpacked(arch: str, deb: Path) -> Path:
    where = paths.cache_dir("userland", arch, "unpacked") / paths.component("package file", deb.stem)
    return apt.unpack([deb], where)


_RELATION = re.compile(r"^ ([ |])(?:PreDepends|Depends): (\S+)$")
_PROVIDER = re.compile(r"^    (\S+)$")


def closure(roots: Sequence[str], recursive: str) -> list[str]:
    """The packages `roots` need, from `apt-cache depends --recurse` output: for each
    dependency, its first alternative that is a real package (or, for a virtual one, its
    first provider), none for a dependency any alternative of which is UNNEEDED."""
    graph = _graph(recursive)
    missing = [r for r in roots if r not in graph]
    if missing:
        raise LabError(f"apt knows no package {missing[0]} for this architecture: check its name in the "
                       "workload's `packages`")
    found: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0)
        if name in found:
            continue
        found.append(name)
        for group in graph[name]:
            chosen = _choose(name, group, graph)
            if chosen is not None and chosen not in found:
                todo.append(chosen)
    return sorted(found)


Group = list[tuple[str, list[str]]]   # alternatives: (name, its providers)


def _graph(recursive: str) -> dict[str, list[Group]]:
    """package -> its dependencies, each a group of alternatives (`a | b`)."""
    graph: dict[str, list[Group]] = {}
    groups: list[Group] = []
    last: tuple[str, list[str]] | None = None
    joined = False                      # the previous line ended in `|`: this one is an alternative of it
    for line in recursive.splitlines():
        if line and not line.startswith(" "):
            groups = graph.setdefault(line.strip(), [])
            last, joined = None, False
            continue
        relation, provider = _RELATION.match(line), _PROVIDER.match(line)
        if relation:
            last = (relation.group(2), [])
            if joined:
                groups[-1].append(last)
            else:
                groups.append([last])
            joined = relation.group(1) == "|"
        elif provider and last is not None:
            last[1].append(provider.group(1))
        else:
            last = None                 # a kind of relation that is not followed
    return graph


def _bare(name: str) -> str:
    """A name without apt's decorations: <virtual>, :any, :ARCH."""
    return name.strip("<>").split(":")[0]


def _choose(package: str, group: Group, graph: dict[str, list[Group]]) -> str | None:
    if any(_bare(name) in UNNEEDED or any(_bare(p) in UNNEEDED for p in providers) for name, providers in group):
        return None
    for name, providers in group:
        if not name.startswith("<") and name in graph:
            return name
        real = [p for p in providers if p in graph]
        if real:
            return real[0]
    wanted_names = " | ".join(name for name, _ in group)
    raise LabError(f"no package for this architecture satisfies {package}'s dependency on {wanted_names}")


# -- the tree the packages make, and what is kept of it -----------------------------------------

@dataclass(frozen=True)
class Entry:
    kind: str                            # "file", "link" or "dir"
    source: Path                         # where it was unpacked on the host
    mode: int                            # permission bits
    target: str = ""                     # a link's
    package: str = ""                    # the package it came from


@dataclass
class Tree:
    """The union of the unpacked packages, by path relative to the root (no leading '/'):
    the first package, by name, that holds a path gives its entry."""

    entries: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def of(cls, trees: dict[str, Path]) -> Tree:
        tree = cls()
        for package, root in sorted(trees.items()):
            for here, dirs, names in os.walk(root):
                relative = Path(here).relative_to(root).as_posix()
                for name in (*dirs, *names):
                    path = name if relative == "." else f"{relative}/{name}"
                    if path not in tree.entries:
                        tree.entries[path] = _entry(Path(here) / name, package)
        return tree

    def package_of(self, path: str) -> str:
        """The package that holds `path` itself (a command's link on PATH is its package's,
        wherever it leads), or, under a linked directory, the file it leads to."""
        entry = self.entries.get(path)
        if entry is None:
            found = self.resolve(path)
            entry = self.entries[found[0]] if found is not None else None
        return entry.package if entry is not None else ""

    def resolve(self, path: str) -> tuple[str, list[str]] | None:
        """The path `path` leads to through symbolic links, and the links it went through;
        None if it leads nowhere in the tree."""
        parts = [p for p in path.split("/") if p not in ("", ".")]
        real: list[str] = []
        links: list[str] = []
        while parts:
            part = parts.pop(0)
            if part == "..":
                if real:
                    real.pop()
                continue
            here = "/".join([*real, part])
            entry = self.entries.get(here)
            if entry is None:
                return None
            if entry.kind == "link":
                links.append(here)
                if len(links) > _MAX_LINKS:
                    return None
                if entry.target.startswith("/"):
                    real = []
                parts = [p for p in entry.target.split("/") if p not in ("", ".")] + parts
                continue
            real.append(part)
        return "/".join(real), links


def _entry(host: Path, package: str) -> Entry:
    st = host.lstat()
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", host, 0o777, os.readlink(host), package)
    return Entry("dir" if stat.S_ISDIR(st.st_mode) else "file", host, mode, package=package)


def keep(tree: Tree, want: Wanted, triplet: str) -> tuple[dict[str, str], set[str]]:
    """The programs (argv[0] -> path in the guest) and every path kept: the programs, what
    is used, the interpreters and libraries they load, the links on the way."""
    kept: set[str] = set()
    todo: list[str] = []

    def take(path: str, what: str) -> str:
        found = tree.resolve(path)
        if found is None or not found[0]:
            raise LabError(f"{what}: /{path} is in no package of the closure")
        real, links = found
        kept.update(links)
        if tree.entries[real].kind == "dir":
            inside = [p for p in tree.entries if p.startswith(real + "/")]
            kept.update(inside)
            todo.extend(p for p in inside if tree.entries[p].kind == "file")
        else:
            kept.add(real)
            todo.append(real)
        return real

    programs = {name: "/" + _program(tree, name) for name in want.programs}
    for name, path in programs.items():
        take(path[1:], f"the program {name}")
    for used in want.uses:
        take(used.lstrip("/") if used.startswith("/") else _program(tree, used), f"uses {used!r}")
    done: set[str] = set()
    while todo:
        path = todo.pop()
        if path in done:
            continue
        done.add(path)
        for needed, why in _loads(tree, path, triplet):
            take(needed, why)
    return programs, kept


def _program(tree: Tree, name: str) -> str:
    candidates = [name.lstrip("/")] if name.startswith("/") else [f"{d}/{name}" for d in PATH_DIRS]
    for path in candidates:
        found = tree.resolve(path)
        if found is not None and tree.entries[found[0]].kind == "file":
            return path
    raise LabError(f"no package of the workloads' closure has the program {name} "
                   f"(on {':'.join('/' + d for d in PATH_DIRS)}): add its package to the workload's `packages`")


def _loads(tree: Tree, path: str, triplet: str) -> list[tuple[str, str]]:
    """What the file at `path` needs to run: (path, why) for its interpreter and libraries."""
    source = tree.entries[path].source
    with source.open("rb") as f:
        head = f.read(256)
    if head.startswith(b"#!"):
        interpreter = head[2:].split(b"\n")[0].split()
        return [(interpreter[0].decode(errors="replace").lstrip("/"), f"the interpreter of /{path}")] \
            if interpreter else []
    if not head.startswith(b"\x7fELF"):
        return []
    interp, needed, runpath = _dynamic(source)
    out = [(interp.lstrip("/"), f"the dynamic loader of /{path}")] if interp else []
    origin = str(PurePosixPath("/" + path).parent)
    dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin).lstrip("/") for d in runpath]
    dirs += [f"lib/{triplet}", f"usr/lib/{triplet}", "lib", "usr/lib"]
    for library in needed:
        out.append((_library(tree, library, dirs, path), f"{library}, needed by /{path}"))
    return out


def _library(tree: Tree, library: str, dirs: list[str], user: str) -> str:
    if "/" in library:
        return library.lstrip("/")
    for d in dirs:
        found = tree.resolve(f"{d}/{library}")
        if found is not None and tree.entries[found[0]].kind == "file":
            return f"{d}/{library}"
    raise LabError(f"{library}, needed by /{user}, is in no package of the closure: add the package that "
                   "has it to the workload's `packages`")


def _dynamic(binary: Path) -> tuple[str, list[str], list[str]]:
    """An ELF file's interpreter (PT_INTERP), DT_NEEDED and DT_RUNPATH/DT_RPATH directories."""
    interp, needed, runpath = "", [], []
    with elfsize.elf_file(binary) as elf:
        for seg in elf.iter_segments():
            if isinstance(seg, InterpSegment):
                interp = seg.get_interp_name()
            elif isinstance(seg, DynamicSegment):
                for tag in seg.iter_tags():
                    # pyelftools names a tag's string after the tag: .needed, .runpath, .rpath
                    kind = str(tag.entry.d_tag)
                    if kind == "DT_NEEDED":
                        needed.append(str(getattr(tag, "needed")))   # noqa: B009
                    elif kind in ("DT_RUNPATH", "DT_RPATH"):
                        runpath.extend(str(getattr(tag, kind[3:].lower())).split(":"))
    return interp, needed, [d for d in runpath if d]


# -- the segment ----------------------------------------------------------------------------------

def _cpio_files(tree: Tree, kept: set[str]) -> dict[str, tuple[int, _Reader]]:
    """The cpio's entries: each kept file and link, and the directories above them."""
    files: dict[str, tuple[int, _Reader]] = {}
    for path in kept:
        entry = tree.entries[path]
        if entry.kind == "link":
            files[path] = (stat.S_IFLNK | 0o777, _Reader(target=entry.target))
        elif entry.kind == "file":
            files[path] = (stat.S_IFREG | entry.mode, _Reader(source=entry.source))
        else:
            files[path] = (stat.S_IFDIR | 0o755, _Reader())
        for parent in PurePosixPath(path).parents:
            if str(parent) != ".":
                files.setdefault(str(parent), (stat.S_IFDIR | 0o755, _Reader()))
    return files


@dataclass(frozen=True)
class _Reader:
    """An entry's bytes, read only when the segment is written."""

    source: Path | None = None
    target: str = ""                     # a link's
    text: str = ""                       # a file of kernellab's own (GUEST_FILES)

    def __call__(self) -> bytes:
        return self.source.read_bytes() if self.source else (self.target or self.text).encode()


def summary(userland: Userland) -> dict[str, object]:
    """What `kernellab workload userland` prints: as plain data (--format json)."""
    return {**asdict(userland), "segment": str(userland.segment)}


def lines(userland: Userland) -> list[str]:
    """The same, for a terminal."""
    mib = 1 << 20
    out = [f"segment   {userland.segment}",
           f"size      {userland.size / mib:.1f} MiB ({userland.compression}), files {userland.unpacked / mib:.1f} MiB "
           f"unpacked, {len(userland.files)} entries",
           f"arch      {userland.arch} (Debian 12)", "programs"]
    out += [f"  {name:18} {path} (from {userland.origins[name]})" for name, path in sorted(userland.programs.items())]
    out.append(f"packages  {len(userland.packages)}: the closure, from which only the files below are kept")
    out += [f"  {name:34} {version}" for name, version in sorted(userland.packages.items())]
    out.append("files")
    out += [f"  /{path}" for path in userland.files]
    return out
