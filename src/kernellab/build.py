"""Build a kernel variant out of tree, with ccache, and record what it cost.

Artifacts are cached by a key over everything that changes the output (source content,
arch, compiler, resolved .config, this recipe), so a variant asked for twice is built
once. The build tree is shared per (source, arch, toolchain): a variant that differs in
a few options recompiles only what depends on them. Every commit of one git repository
is one source here: its builds run in the repository's one checkout for builds
(sources.build_checkout) and one build tree per (arch, toolchain), so a commit recompiles
what it changed, as with `git bisect` by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from . import apt, paths, progress, reaper, sources
from .arches import ArchProfile
from .config.resolve import ResolvedConfig
from .elfsize import berkeley_size
from .errors import LabError
from .locks import locked, locked_if_free
from .metrics.catalog import catalog, from_source
from .size import objects
from .sources import Source
from .toolchain import Toolchain, ccache_counts, ccache_version, make_vars

# Bump when the way kernellab builds changes the artifacts.
RECIPE = "1"

# Fixed build metadata: reproducible images, and ccache hits across variants for init/version.c.
REPRODUCIBLE_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 1970",
    "KBUILD_BUILD_USER": "kernellab",
    "KBUILD_BUILD_HOST": "kernellab",
    "KBUILD_BUILD_VERSION": "1",
}


# The catalog's `source = "build"` metrics (known from the build alone: no boot needed),
# and the Build field each one reads, with the divisor into the catalog's unit.
FIGURE_METRICS = from_source("build")
FIGURE_FIELDS = {"build.wall": ("wall_s", 1), "build.user": ("user_s", 1), "build.sys": ("sys_s", 1),
                 "size.image": ("image_bytes", 1024), "size.vmlinux": ("vmlinux_bytes", 1024),
                 "size.text": ("text", 1024), "size.data": ("data", 1024), "size.bss": ("bss", 1024)}


@dataclass
class Build:
    key: str
    artifacts: Path
    image: Path
    wall_s: float
    user_s: float
    sys_s: float
    image_bytes: int
    vmlinux_bytes: int
    text: int
    data: int
    bss: int
    compiler: str
    ccache: str
    ccache_hit_pct: float | None  # of the compilations this build ran; warm caches build faster
    jobs: int
    cached: bool  # True when this request reused an earlier build
    # Compiled from scratch: an emptied tree and no ccache, so its times are the compiler's.
    cold: bool = False
    compiled: int | None = None   # the objects its make compiled (None: a record from before it was counted)
    # A git source: the repository in whose one checkout and build tree it was built
    # (incrementally), and the commit that checkout held before (None: made for it).
    repository: str | None = None
    checkout_from: str | None = None

    def figures(self) -> dict[str, tuple[str, float]]:
        """The build's rows of a report: metric -> (unit, value)."""
        return {m: (catalog()[m].unit, getattr(self, name) / scale) for m, (name, scale) in FIGURE_FIELDS.items()}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["artifacts"], d["image"] = str(self.artifacts), str(self.image)
        return d


def build_key(source: Source, profile: ArchProfile, toolchain: Toolchain,
              config: ResolvedConfig) -> str:
    material = json.dumps({"source": source.content_hash, "arch": profile.name,
                           "target": profile.build_target, "compiler": toolchain.version_text,
                           "config": config.hash, "recipe": RECIPE}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def cached_build(key: str) -> Build | None:
    meta = paths.cache_dir("artifacts") / key[:20] / "build.json"
    if not meta.exists():
        return None
    data = json.loads(meta.read_text())
    data["artifacts"], data["image"] = Path(data["artifacts"]), Path(data["image"])
    data["cached"] = True
    try:
        return Build(**data)
    except TypeError:  # written by another kernellab version: rebuild (ccache makes it cheap)
        return None


def build(source: Source, profile: ArchProfile, toolchain: Toolchain, config: ResolvedConfig,
          jobs: int | None = None, log: Callable[[str], None] | None = None, what: str = "",
          where: Callable[[], Path] | None = None, cold: bool = False) -> Build:
    """`what`: the variant's name, for the progress display. `where`: the build tree to
    use, asked only when there is something to build (default: the shared one). `cold`:
    for a table of build times, compile from scratch in the emptied shared tree without
    ccache; an earlier build of the same kernel that was not cold is made again."""
    key = build_key(source, profile, toolchain, config)
    hit = _usable(cached_build(key), source, profile, toolchain, cold)
    if hit is not None:
        return hit
    artifacts = paths.cache_dir("artifacts") / key[:20]
    # One build of a kernel at a time: a command that asks for a kernel another is building
    # (in whatever tree) waits for it and takes its build rather than make it a second time.
    with locked(artifacts):
        hit = _usable(cached_build(key), source, profile, toolchain, cold)
        if hit is not None:
            return hit
        return _build(key, artifacts, source, profile, toolchain, config, jobs, log, what, where, cold)


def _usable(hit: Build | None, source: Source, profile: ArchProfile, toolchain: Toolchain,
            cold: bool) -> Build | None:
    """A cached build that does what was asked (a cold one, when a cold one was asked)."""
    if hit is not None and (hit.cold or not cold):
        record_objects_late(hit, build_tree(source, profile, toolchain))
        return hit
    return None


def _build(key: str, artifacts: Path, source: Source, profile: ArchProfile, toolchain: Toolchain,
           config: ResolvedConfig, jobs: int | None, log: Callable[[str], None] | None, what: str,
           where: Callable[[], Path] | None, cold: bool) -> Build:
    hit = cached_build(key)   # not cold, where a cold one is asked for: made again, and compared
    earlier = apt.sha256(hit.image) if hit is not None and hit.image.exists() else None
    if hit is not None and log:
        log(f"building again from scratch, to time it: the cached build was not cold "
            f"({_warmth(hit)})")
    jobs = jobs or os.cpu_count() or 1
    tree = where() if where is not None and not cold else build_tree(source, profile, toolchain)
    log_path = artifacts / "build.log"
    with locked(tree), sources.build_checkout(source) as checkout:
        if cold:
            _empty(tree)
        _install_config(tree, config.text)
        argv = ["make", "-C", str(checkout.tree), f"O={tree}", f"-j{jobs}",
                *make_vars(profile, toolchain, use_ccache=not cold), profile.build_target]
        ccache_dir = str(paths.cache_dir("ccache"))
        env = dict(os.environ, **REPRODUCIBLE_ENV, CCACHE_DIR=ccache_dir)
        env.setdefault("CCACHE_MAXSIZE", "5G")
        # ccache's depend mode keys an object on the compiler's own dependency file (kbuild
        # asks for one), where its default runs the preprocessor once more for every object
        # it has not seen: a cold kernel build then costs about 45% more compiler time
        # (measured on 16 objects of lab-minimal; ccache.dev/performance.html says 5-20%
        # in general and 1-3% in depend mode). Hits are as exact either way: the dependency
        # file names every header, and their contents are hashed.
        env.setdefault("CCACHE_DEPEND", "1")
        if log:
            how = "from scratch, without ccache" if cold else f"in {tree}"
            if checkout.repository is not None:
                how += f", from {checkout.repository}'s checkout for builds" + (
                    f" (was {checkout.previous[:12]})" if checkout.previous else "")
            log(f"building {profile.build_target} {how} (-j{jobs}), log: {log_path}")
        hits0, misses0 = ccache_counts(ccache_dir)
        expected = _objects_in(tree)
        with progress.task(f"{what or profile.name}: compiling", expected,
                           f"objects (of {expected} in this tree's last build)" if expected else "objects") as bar:
            wall_s, user_s, sys_s, rc, compiled = _timed_make(argv, env, log_path, bar)
        hits, misses = ccache_counts(ccache_dir)
        hits, misses = hits - hits0, misses - misses0
        if rc != 0:
            raise LabError(f"build failed: {first_error(log_path)} (full log: {log_path})")
        image = artifacts / Path(profile.boot_image).name
        shutil.copy2(tree / profile.boot_image, image)
        shutil.copy2(tree / "vmlinux", artifacts / "vmlinux")
        shutil.copy2(tree / "System.map", artifacts / "System.map")
        (artifacts / "config").write_text(config.text)
        objects.record(tree, tree / "vmlinux", artifacts / objects.RECORD)
    if earlier is not None and log:
        # The runs in the store measured the earlier image under this key: a reproducible
        # build makes the same bytes, and a difference must be said.
        log("the same image, byte for byte, as the cached build" if apt.sha256(image) == earlier else
            "warning: the image differs from the cached build's; runs measured before belong to that one")
    sizes = berkeley_size(artifacts / "vmlinux")
    result = Build(key=key, artifacts=artifacts, image=image, wall_s=wall_s, user_s=user_s,
                   sys_s=sys_s, image_bytes=image.stat().st_size,
                   vmlinux_bytes=(artifacts / "vmlinux").stat().st_size,
                   compiler=toolchain.version_text, ccache=ccache_version() or "",
                   ccache_hit_pct=100.0 * hits / (hits + misses) if hits + misses else None,
                   jobs=jobs, cached=False, cold=cold, compiled=compiled,
                   repository=str(checkout.repository) if checkout.repository else None,
                   checkout_from=checkout.previous, **sizes)
    tmp = artifacts / "build.json.tmp"
    tmp.write_text(json.dumps(result.to_dict() | {"cached": False}, indent=1))
    tmp.replace(artifacts / "build.json")  # written last: its presence means "complete"
    return result


def _warmth(b: Build) -> str:
    if b.ccache_hit_pct is None:
        return "it kept no ccache record"
    return f"{b.ccache_hit_pct:.0f}% ccache hits, in a tree that may have held an earlier build"


def _empty(tree: Path) -> None:
    """Everything an earlier build left in the tree, but the lock held on it."""
    for entry in tree.iterdir():
        if entry.name == ".kernellab.lock":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def record_objects_late(hit: Build, tree: Path) -> None:
    """A build made before kernellab recorded objects: record them if the shared tree still
    holds exactly that build (its vmlinux is the artifact's copy), never waiting for a tree
    another command is building in."""
    if (hit.artifacts / objects.RECORD).exists() or not (tree / "vmlinux").exists():
        return
    with locked_if_free(tree) as free:
        ours, theirs = (tree / "vmlinux").stat(), (hit.artifacts / "vmlinux").stat()
        if free and (ours.st_size, ours.st_mtime_ns) == (theirs.st_size, theirs.st_mtime_ns):
            objects.record(tree, tree / "vmlinux", hit.artifacts / objects.RECORD)


def build_tree(source: Source, profile: ArchProfile, toolchain: Toolchain) -> Path:
    """The build directory shared by every variant of one (source, arch, toolchain); by
    every commit of a git source's repository (sources.build_name)."""
    return paths.cache_dir("build", f"{sources.build_name(source)}-{profile.name}-{toolchain.id}")


def _install_config(tree: Path, text: str) -> None:
    """Rewrite .config only when it changed: a new mtime alone makes kbuild re-run syncconfig."""
    target = tree / ".config"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


# kbuild's quiet output names each object it compiles: "  CC      kernel/fork.o".
_COMPILED = re.compile(rb"^  (?:HOSTCC|CC|AS) ", re.MULTILINE)
_POLL_S = 0.5


def _objects_in(tree: Path) -> int | None:
    """How many objects the tree's last build compiled, from kbuild's records (one
    .NAME.o.cmd per object): what a full build of a similar config compiles."""
    count = sum(1 for _ in tree.rglob(".*.o.cmd"))
    return count or None


def _follow(proc: subprocess.Popen[bytes], reader: BinaryIO,
            bar: progress.Task) -> tuple[int, resource.struct_rusage, int]:
    """Waits for make, counting the objects it compiles as its log grows. Returns its exit
    code, the CPU time of make and the compilers it waited for (that of this process's
    other children, the QEMU of a run while the build goes on, is not the build's) and
    the objects it compiled."""
    compiled = 0
    exited = os.pidfd_open(proc.pid)   # readable once make exits: no polling delay at the end
    try:
        while not select.select([exited], [], [], _POLL_S)[0]:
            # Lines complete at the log's end count now; a partial one is read again.
            chunk = reader.read()
            whole = chunk[:chunk.rfind(b"\n") + 1]
            reader.seek(len(whole) - len(chunk), 1)
            compiled += len(_COMPILED.findall(whole))
            bar.update(completed=compiled)
    finally:
        os.close(exited)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    compiled += len(_COMPILED.findall(reader.read()))   # what make wrote after the last look
    return proc.returncode, usage, compiled


def _timed_make(argv: list[str], env: dict[str, str], log_path: Path,
                bar: progress.Task) -> tuple[float, float, float, int, int]:
    start = time.monotonic()
    with log_path.open("w") as log_file, log_path.open("rb") as reader:
        try:
            # Its own process group: if kernellab is stopped, the whole make tree (every
            # compiler it started) stops with it, and no orphan keeps writing into a build
            # tree the next build will use. Not a session of its own: with the scheduler's
            # autogroups (kernel.sched_autogroup_enabled, on by default) a session gets an
            # equal share of the CPU whatever its nice value, so `nice kernellab ...` would
            # not make its build yield to the machine's other work.
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                    env=env, process_group=0)
        except FileNotFoundError:
            raise LabError("make not found: run `apt-get install -y make` (or `kernellab doctor`)") from None
        try:
            # Registered while it runs: a kernellab killed outright (SIGKILL) cannot stop it,
            # the next kernellab command does (kernellab.reaper).
            with reaper.tracked(proc.pid, f"make of {log_path.parent.name}"):
                rc, usage, compiled = _follow(proc, reader, bar)
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # make and its children were already gone
            proc.wait()
            raise
    return time.monotonic() - start, usage.ru_utime, usage.ru_stime, rc, compiled


_ERROR = re.compile(r"(error:|Error \d+|\*\*\*)")


def first_error(log_path: Path) -> str:
    """The first line that names a compiler or make error, which is the one to fix first."""
    lines = log_path.read_text(errors="replace").splitlines()
    for line in lines:
        if "error:" in line:
            return line.strip()
    for line in lines:
        if _ERROR.search(line):
            return line.strip()
    return lines[-1].strip() if lines else "no output"
