"""Debian packages as files: downloaded with `apt-get download` and unpacked into
kernellab's cache as `dpkg-deb -x` would, by kernellab.archive (which lets nothing in a
package write outside the directory it unpacks into). Nothing is installed (a kernel
package's hooks would write /boot and run update-initramfs) and no root privileges are needed.

Used for Debian's prebuilt kernels (kernellab.prebuilt), the workloads' guest userland
(kernellab.userland, through a private view of another architecture's packages: `private`),
the workloads' programs built from Debian's source packages (kernellab.staticbuild, through
a private view of the host's archives' source packages: `private_sources`) and for the
tests' ssh guest.
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
        # A private view's options (`-o NAME=VALUE` pairs) are noise.
        shown = " ".join(a for i, a in enumerate(argv) if a != "-o" and (i == 0 or argv[i - 1] != "-o"))
        raise LabError(f"`{shown}` failed: {why}; {advice}")
    return result.stdout


# A Debian package's name (Debian Policy 5.6.1): it also keeps a name from reading as an option.
PACKAGE_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")


def private(debian_arch: str, state: Path) -> list[str]:
    """apt's options for a view of Debian's packages for `debian_arch` alone, kept in
    `state`: the host's sources and keys, but its own package lists, cache and an empty
    list of installed packages. The host's dpkg architectures and apt state stay untouched
    (no `dpkg --add-architecture`), and no root privileges are needed."""
    return ["-o", f"APT::Architecture={debian_arch}", "-o", f"APT::Architectures={debian_arch}", *_own_state(state)]


def _own_state(state: Path) -> list[str]:
    """apt's options for package lists, a cache and an empty list of installed packages of
    its own in `state`."""
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    status = state / "status"
    if not status.exists():
        status.touch()
    return ["-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}",
            "-o", f"Dir::State::status={status}",
            # The files are ours: apt need not drop to its _apt user, who cannot write them.
            "-o", "APT::Sandbox::User=root",
            # Only the Packages indexes: no translations, no AppStream metadata.
            "-o", "Acquire::Languages=none", "-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            "-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
            "-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"]


# Where the host's apt reads its sources (Dir::Etc::SourceList and SourceParts, as Debian has them).
HOST_SOURCE_LIST = Path("/etc/apt/sources.list")
HOST_SOURCE_PARTS = Path("/etc/apt/sources.list.d")


def private_sources(state: Path) -> list[str]:
    """apt's options for a view of the source packages of the archives the host's apt uses
    (its `deb` entries, as `deb-src`, with their keys: `source_entries`), kept in `state` as
    `private` keeps its view: the host's own sources and apt state stay untouched."""
    view = state / "host-deb-src.sources"
    text = source_entries(_host_source_files())
    if not text:
        raise LabError(f"the host's apt sources ({HOST_SOURCE_LIST}, {HOST_SOURCE_PARTS}) name no archive: add "
                       "Debian's (`deb http://deb.debian.org/debian bookworm main`) to fetch its source packages")
    state.mkdir(parents=True, exist_ok=True)
    if not view.is_file() or view.read_text() != text:
        view.write_text(text)
    # apt reads a SourceList ending in .sources as deb822; the parts' directory does not
    # exist, so that the host's own entries are not read beside the view's.
    return [*_own_state(state), "-o", f"Dir::Etc::SourceList={view}", "-o", f"Dir::Etc::SourceParts={state / 'none'}"]


def _host_source_files() -> list[tuple[str, str]]:
    """(name, text) of each file the host's apt reads its sources from, as apt picks them:
    sources.list, then the parts' *.list and *.sources in name order (apt ignores any other)."""
    files = [HOST_SOURCE_LIST] if HOST_SOURCE_LIST.is_file() else []
    if HOST_SOURCE_PARTS.is_dir():
        files += sorted(p for p in HOST_SOURCE_PARTS.iterdir() if p.suffix in (".list", ".sources") and p.is_file())
    out = []
    for path in files:
        try:
            out.append((path.name, path.read_text(errors="replace")))
        except OSError:
            continue   # unreadable to this user: apt would not read it either
    return out


def source_entries(files: Sequence[tuple[str, str]]) -> str:
    """The `deb-src` entries (deb822) of the archives `files` (name, text: a one-line
    .list or a deb822 .sources) name with `deb` or `deb-src`, each with its suites,
    components and key; disabled entries are left out, and so are architectures, which
    source packages do not have."""
    paragraphs: dict[tuple[str, ...], str] = {}
    for name, text in files:
        for paragraph in _from_deb822(text) if name.endswith(".sources") else _from_one_line(text):
            # An archive named twice (a `deb` and a `deb-src` line) once: apt refuses one
            # archive with two values of an option such as its key.
            paragraphs.setdefault(_archive(paragraph), paragraph)
    return "\n".join(paragraphs.values())


def _archive(paragraph: str) -> tuple[str, ...]:
    """A deb822 entry's URIs, suites and components, which name what it fetches."""
    fields = {name.strip().lower(): value for name, _, value in
              (line.partition(":") for line in paragraph.splitlines() if line[:1] not in " \t")}
    return tuple(" ".join(fields.get(k, "").split()) for k in ("uris", "suites", "components"))


def _from_one_line(text: str) -> list[str]:
    out = []
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) < 3 or words[0] not in ("deb", "deb-src"):
            continue
        options: dict[str, str] = {}
        rest = words[1:]
        if rest[0].startswith("["):
            joined = " ".join(rest)
            end = joined.find("]")
            if end < 0:
                continue   # apt refuses the line too
            options = dict(o.split("=", 1) for o in joined[1:end].split() if "=" in o)
            rest = joined[end + 1:].split()
        if len(rest) < 2:
            continue
        fields = [("Types", "deb-src"), ("URIs", rest[0]), ("Suites", rest[1])]
        fields += [("Components", " ".join(rest[2:]))] if rest[2:] else []
        fields += [(key, options[option]) for option, key in (("signed-by", "Signed-By"), ("trusted", "Trusted"))
                   if option in options]
        out.append("".join(f"{k}: {v}\n" for k, v in fields))
    return out


def _from_deb822(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n[ \t]*\n", text):
        fields: list[tuple[str, str]] = []   # (name, its lines)
        for line in block.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and fields:   # a continuation line (a key block)
                fields[-1] = (fields[-1][0], f"{fields[-1][1]}\n{line}")
            elif ":" in line:
                fields.append((line.split(":", 1)[0].strip(), line))
        by_name = {n.lower(): line.split(":", 1)[1].split() for n, line in fields}
        if not {"deb", "deb-src"} & set(by_name.get("types", [])) or by_name.get("enabled") == ["no"]:
            continue
        kept = [line for n, line in fields if n.lower() not in ("types", "architectures", "enabled")]
        out.append("Types: deb-src\n" + "".join(f"{line}\n" for line in kept))
    return out


def has_source_lists(state: Path) -> bool:
    """Whether a private view of source packages (`private_sources`) has its lists."""
    return any((state / "lists").glob("*_Sources*"))


def download_source(package: str, where: Path, options: Sequence[str]) -> Path:
    """The .dsc of the source package `package` (its candidate version), downloaded into
    `where` with the files it names (`apt-get source --download-only`: apt checks each
    against the archive's signed index; nothing is unpacked, nothing built)."""
    if not PACKAGE_NAME.fullmatch(package):
        raise LabError(f"{package!r} is not a Debian source package name (lower-case letters, digits, '+', '-', '.')")
    _checked(["apt-get", *options, "source", "--download-only", package], cwd=where,
             advice="check the source package's name and that the mirror serves its files")
    found = sorted(where.glob(f"{package}_*.dsc"))
    if len(found) != 1:
        raise LabError(f"apt-get source left {len(found)} .dsc files of {package} in {where}, not one")
    return found[0]


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
