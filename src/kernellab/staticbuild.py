"""Workloads' programs built statically from Debian's source packages, for a guest whose
arch Debian 12 has no release for (32-bit PowerPC: kernellab.userland has no packages there).

A workload file's `[static]` table (workloads.Static) names the source package, the build
(argv lists, never a shell) and the programs it makes. Building one:

1. the source package's files, downloaded through a private apt view of the source packages
   of the host's own archives (`apt.private_sources`: the host's apt state is not touched);
2. its .dsc read as hostile data (its name, its version, the plain file names it lists), then
   unpacked by `dpkg-source -x` (which checks every file against the .dsc's checksums and
   applies Debian's patches) into a fresh directory of kernellab's cache;
3. the recipe run there, each command with its placeholders filled ({cc}: the compiler of
   the arch's agent build, agent/cross.toml; {cross_prefix}; {jobs}), its output in a log
   kept in the cache; nothing is installed;
4. each program checked with pyelftools: an ELF for the arch's machine, class and byte order
   (cross.toml's), with no dynamic loader (PT_INTERP): a guest has no libraries to load;
5. the programs kept under a key of the .dsc's sha256, the recipe, the compiler's version
   line and the arch, and the request remembered, so that a second run downloads and builds
   nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from elftools.elf.segments import InterpSegment

from . import apt, elfsize, locks, paths, reaper
from .agent.compile import CrossTarget, cross_targets
from .arches import ArchProfile
from .errors import LabError
from .guest.workloads import WORKDIR, Packages
from .proc import require_tool, run_checked
from .workloads import Instance, Static

# The changes of this module that change what a build makes: part of every key.
FORMAT = 1
# What the caller's environment must not hand a recipe: its own compiler and flags (the
# recipe names the compiler), a parent make's jobserver.
_UNSET = ("CC", "CXX", "CPP", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LIBS", "CROSS_COMPILE", "ARCH",
          "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS")
_DEBIAN_VERSION = re.compile(r"[0-9][A-Za-z0-9.+~:-]*")


@dataclass(frozen=True)
class Built:
    """One recipe's programs, as built."""

    source: str                          # the Debian source package
    version: str                         # its version, as its .dsc says
    compiler: str                        # "powerpc-linux-gnu-gcc 12.2.0"
    programs: dict[str, Path]            # file name -> the static program in kernellab's cache

    def installed(self) -> Packages:
        """What a run's workloads say of where these programs came from."""
        return Packages({self.source: self.version}, {name: self.source for name in self.programs},
                        built={name: self.compiler for name in self.programs})


def recipes(instances: Iterable[Instance]) -> list[Static]:
    """The distinct recipes of `instances` (fio:rw=read and fio:rw=write share one)."""
    return list(dict.fromkeys(i.workload.static for i in instances if i.workload.static is not None))


def check(instances: Sequence[Instance], profile: ArchProfile) -> None:
    """Refuse, in one line before anything is built, a workload built here whose command or
    server runs a program its build does not make (nor its `binaries`, nor its files): the
    guest has no other."""
    for inst in instances:
        own = {PurePosixPath(p).name for p in (*inst.workload.binaries, *_programs_of(inst))}
        client = None if inst.workload.client_on_host else inst.argv(WORKDIR)
        for argv in (client, inst.server_argv(WORKDIR)):
            if argv and WORKDIR not in argv[0] and argv[0] not in own:
                raise LabError(f"workload {inst.label} runs {argv[0]}, which its [static] build does not make: "
                               f"a {profile.name} guest has no other programs; add it to `programs` (the file "
                               "name is what the command runs)")


def _programs_of(inst: Instance) -> tuple[str, ...]:
    return inst.workload.static.programs if inst.workload.static is not None else ()


def programs(instances: Sequence[Instance], profile: ArchProfile, refresh: bool = False) -> dict[str, Path]:
    """file name -> the static program built for `profile`, of every recipe of `instances`,
    built unless the cache has it (`refresh`: apt's lists and the source packages fetched again)."""
    out: dict[str, Path] = {}
    for recipe in recipes(instances):
        for name, path in build(recipe, profile, refresh).programs.items():
            if out.setdefault(name, path) != path:
                raise LabError(f"two [static] builds make a program named {name} ({out[name]} and {path}): "
                               "rename one")
    return out


def installed(instances: Sequence[Instance], profile: ArchProfile) -> Packages:
    """Where the programs built for `instances` came from, as the cache remembers it (the
    run's initramfs was given them: `programs`); nothing for one not built. Never builds."""
    wanted = recipes(instances)
    target = _target(profile) if wanted else None
    said = [found.installed() for found in (_remembered(r, target) for r in wanted if target) if found is not None]
    return Packages({k: v for p in said for k, v in p.versions.items()},
                    {k: v for p in said for k, v in p.programs.items()},
                    built={k: v for p in said for k, v in p.built.items()})


def build(recipe: Static, profile: ArchProfile, refresh: bool = False) -> Built:
    """The programs of `recipe` for `profile`: from the cache, or downloaded and built."""
    target = _target(profile)
    if not refresh:
        found = _remembered(recipe, target)
        if found is not None:
            return found
    top = paths.cache_dir("userland", "static")
    # One build at a time: two would share the apt view and build the same programs twice.
    with locks.locked(top):
        if not refresh:
            found = _remembered(recipe, target)
            if found is not None:
                return found
        built = _build(recipe, profile, target, top, refresh)
    [directory] = {path.parent.name for path in built.programs.values()}
    remembered = {**asdict(built), "directory": directory, "programs": sorted(built.programs)}
    paths.write_atomically(_request_file(recipe, target), json.dumps(remembered, indent=1).encode())
    return built


# -- what is remembered ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Target:
    """What the programs are built for and with: the arch's agent build (agent/cross.toml)."""

    arch: str                            # the agent build's name: ppc32 serves every 32-bit PowerPC profile
    cross: CrossTarget
    compiler: str                        # the compiler's --version line

    def short(self) -> str:
        """The compiler and its version: "powerpc-linux-gnu-gcc 12.2.0"."""
        words = self.compiler.split()
        return f"{self.cross.cc} {words[-1]}" if words else self.cross.cc


def _target(profile: ArchProfile) -> _Target:
    cross = cross_targets().get(profile.agent_arch)
    if cross is None:
        raise LabError(f"arch profile {profile.name}: no agent build {profile.agent_arch!r} in agent/cross.toml, "
                       "whose compiler builds a workload's [static] programs")
    require_tool(cross.cc)
    version = run_checked([cross.cc, "--version"], f"{cross.cc} --version").splitlines()
    return _Target(profile.agent_arch, cross, version[0] if version else "")


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _request_file(recipe: Static, target: _Target) -> Path:
    key = _digest(FORMAT, asdict(recipe), target.arch, asdict(target.cross), target.compiler)
    return paths.cache_dir("userland", "static") / paths.component("cache file name", f"{recipe.source}-{key}.json")


def _remembered(recipe: Static, target: _Target) -> Built | None:
    path = _request_file(recipe, target)
    try:
        data = json.loads(path.read_text())
        directory = path.parent / paths.component("cache directory name", data["directory"])
        found = Built(data["source"], data["version"], data["compiler"],
                      {name: directory / paths.component("program name", name) for name in data["programs"]})
    except (OSError, ValueError, KeyError, TypeError, LabError):
        return None   # none yet, or damaged: built again
    if (sorted(found.programs) != sorted(PurePosixPath(p).name for p in recipe.programs)
            or not all(p.is_file() for p in found.programs.values())):
        return None
    paths.mark_used(path)
    for program in found.programs.values():
        paths.mark_used(program.parent)
    return found


# -- downloading and building ---------------------------------------------------------------------

def _build(recipe: Static, profile: ArchProfile, target: _Target, top: Path, refresh: bool) -> Built:
    with tempfile.TemporaryDirectory(prefix=f".{recipe.source}-", dir=top) as scratch:
        downloads = Path(scratch) / "source"
        downloads.mkdir()
        dsc = _download(recipe.source, top / "apt", downloads, refresh)
        version = _dsc_version(dsc, recipe.source)
        key = _digest(FORMAT, apt.sha256(dsc), asdict(recipe), target.arch, asdict(target.cross), target.compiler)
        result = top / paths.component("cache directory name", f"{recipe.source}-{key}")
        if not result.is_dir():
            log = top / paths.component("cache file name", f"{recipe.source}-{key}.log")
            tree = Path(scratch) / "tree"
            _unpack(dsc, tree)
            _run_recipe(recipe, tree, target, log, f"{recipe.source} {version} for {profile.name}")
            _keep(recipe, tree, target, profile, Path(scratch) / "bin", result)
    return Built(recipe.source, version, target.short(),
                 {PurePosixPath(p).name: result / PurePosixPath(p).name for p in recipe.programs})


def _download(source: str, state: Path, where: Path, refresh: bool) -> Path:
    """The .dsc of `source`, downloaded into `where` with its files, through the private view
    of source packages kept in `state`."""
    options = apt.private_sources(state)
    updated = refresh or not apt.has_source_lists(state)
    if updated:
        apt.update(options)
    try:
        return apt.download_source(source, where, options)
    except LabError:
        if updated:
            raise
        apt.update(options)   # the lists are older than the archive's files, or the host's sources changed
        return apt.download_source(source, where, options)


def _dsc_version(dsc: Path, source: str) -> str:
    """The version a .dsc states, once its Source field is `source` and every file it lists
    is a plain file name beside it (dpkg-source reads them from there)."""
    text = dsc.read_text(errors="replace")
    fields = dict(re.findall(r"^(Source|Version): *(\S*) *$", text, re.MULTILINE))
    if fields.get("Source") != source or not _DEBIAN_VERSION.fullmatch(fields.get("Version", "")):
        raise LabError(f"the mirror's {dsc.name} is not a .dsc of {source} with a Debian version: check the "
                       "host's apt sources")
    for name in re.findall(r"^ [0-9a-f]+ [0-9]+ (\S+)$", text, re.MULTILINE):
        paths.component("file name in the .dsc", name)   # no path: dpkg-source reads it beside the .dsc
        if not (dsc.parent / name).is_file():
            raise LabError(f"{dsc.name} lists {name}, which apt-get source did not download")
    version: str = fields["Version"]
    return version


def _unpack(dsc: Path, tree: Path) -> None:
    """`dsc` unpacked into `tree`, Debian's patches applied. The orig tarball is not copied."""
    require_tool("dpkg-source")
    result = subprocess.run(["dpkg-source", "--no-copy", "-x", str(dsc), str(tree)], cwd=dsc.parent,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise LabError(f"dpkg-source -x {dsc.name} failed: {lines[-1] if lines else f'exit {result.returncode}'}")


def _words(argv: Sequence[str], target: _Target) -> list[str]:
    cc = target.cross.cc
    values = {"cc": cc, "cross_prefix": cc.removesuffix("gcc"), "jobs": str(os.cpu_count() or 1)}
    return [re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)], word) for word in argv]


def _run_recipe(recipe: Static, tree: Path, target: _Target, log: Path, what: str) -> None:
    """Each command of the recipe in `tree`, its output appended to `log`; the first that
    fails ends the build with one line naming the log."""
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    env["LC_ALL"] = "C"
    with log.open("w") as out:
        for argv in (_words(a, target) for a in recipe.build):
            out.write(f"$ {shlex.join(argv)}\n")
            out.flush()
            if "/" not in argv[0]:
                require_tool(argv[0])
            rc = _step(argv, tree, env, out)
            if rc != 0:
                raise LabError(f"building {what} failed: `{shlex.join(argv)[:80]}` exited with {rc}: its output "
                               f"is in {log}")
            out.write("\n")


def _step(argv: list[str], tree: Path, env: dict[str, str], out: TextIO) -> int:
    """One command of a build, in a process group of its own that is stopped with kernellab
    (and by the next kernellab, should this one be killed outright: kernellab.reaper)."""
    try:
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, process_group=0)
    except OSError as exc:
        raise LabError(f"cannot run {argv[0]} in the source tree: {exc.strerror or exc}: check the recipe's "
                       "`build`") from None
    try:
        with reaper.tracked(proc.pid, f"static build: {argv[0]}"):
            return proc.wait()
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass   # it had ended
        proc.wait()
        raise


def _keep(recipe: Static, tree: Path, target: _Target, profile: ArchProfile, staging: Path, result: Path) -> None:
    """Each built program, checked, copied into `result` (renamed into place whole)."""
    staging.mkdir()
    for program in recipe.programs:
        found = tree / program
        if not found.is_file() or not found.resolve().is_relative_to(tree.resolve()):
            raise LabError(f"the build of {recipe.source} made no {program} in its source tree: check the "
                           "recipe's `programs`")
        check_program(found, target.cross, profile.name, f"{recipe.source}'s {program}")
        kept = staging / found.name
        shutil.copyfile(found, kept)
        kept.chmod(0o755)
    try:
        staging.rename(result)
    except OSError:
        if not result.is_dir():   # not another build's, which finished first
            raise


def check_program(path: Path, cross: CrossTarget, arch: str, what: str) -> None:
    """Refuse, in one line, a program that is not a static ELF for the machine, class and byte
    order of `cross` (a guest has no dynamic loader, nor libraries)."""
    want = f"{cross.elf.machine}, {cross.elf.class_}-bit {cross.elf.endian}-endian"
    with path.open("rb") as f:
        if f.read(4) != b"\x7fELF":
            raise LabError(f"{what} is not an ELF program: a {arch} guest runs {want} programs only")
    with elfsize.elf_file(path) as elf:
        endian = "little" if elf.little_endian else "big"
        has = f"{elf['e_machine']}, {elf.elfclass}-bit {endian}-endian"
        if has != want:
            raise LabError(f"{what} is an ELF for {has}, not for {arch} ({want}): build it with {cross.cc} "
                           "(the recipe's {cc})")
        interp = next((s for s in elf.iter_segments() if isinstance(s, InterpSegment)), None)
        if interp is not None:
            raise LabError(f"{what} is linked dynamically (its loader: {interp.get_interp_name()}): a {arch} guest "
                           "has no shared libraries; link it statically (-static)")
