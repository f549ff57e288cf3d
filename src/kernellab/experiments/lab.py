"""One variant through the lab: prepare (resolve its config) -> build -> run -> save.

prepare() only reads: resolving a variant (`kernellab resolve`) leaves the store as it
was. The store learns of a variant when it is built or run.

The base `running` is a real machine's own kernel: alone (`running`, `now=running`) it is
that kernel as it runs, measured without a build; with changes (`lean=running+lean.config`)
it is that kernel's config, changed and built from a source of the same version.

The base `debian-image:VERSION-FLAVOUR` is one of Debian's prebuilt kernels (see
kernellab.prebuilt): measured with no build, its package's name and version its identity.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from .. import arches, prebuilt, progress, sources, staticbuild, targets, userland
from .. import build as builder
from .. import toolchain as toolchains
from ..agent.compile import CrossTarget, agent_binary, cross_targets
from ..build import Build
from ..config import explain, kconfig
from ..config.resolve import ResolvedConfig, resolve
from ..errors import LabError
from ..guest import vulnerabilities
from ..guest import workloads as guest_workloads
from ..guest.console import MILESTONES
from ..guest.session import Sample, Session
from ..initramfs import agent_initramfs, with_segments
from ..metrics.catalog import catalog, describe
from ..sources import Source
from ..store import Store
from ..targets import Console, Site, Target, TargetInfo, TargetOptions, Want
from ..targets.machine import running_config, running_config_file
from ..targets.qemu import disk_mib, host_ports
from ..targets.registry import Ask, check
from ..targets.running import WORKLOADS_OPTION, RunningTarget
from ..workloads import Instance
from .spec import VariantSpec

DEFAULT_TIMEOUT_S = 600.0
# The agent's reason when the kernel refused it for lack of privilege (EPERM, EACCES).
_DENIED = re.compile(r"_errno_(1|13)$")


RUNNING = "running"


@dataclass
class Prepared:
    spec: VariantSpec
    source: Source
    profile: arches.ArchProfile
    toolchain: toolchains.Toolchain | None   # None: the running kernel, which is not built
    config: ResolvedConfig
    note: str = ""     # what kernellab could not learn of it (a running kernel's unreadable config)
    image: prebuilt.Image | None = None   # a Debian prebuilt kernel: booted, never built
    modules: tuple[tuple[str, bytes], ...] = ()   # (name, .ko) the agent loads, in order

    @property
    def running(self) -> bool:
        """The kernel a machine runs now: measured, never built."""
        return self.source.kind == RUNNING

    @property
    def built(self) -> bool:
        """Whether kernellab builds this variant's kernel (else it is measured as it is)."""
        return not self.running and self.image is None


def is_running(spec: VariantSpec) -> bool:
    return spec.base == RUNNING and not spec.fragments and not spec.options


@dataclass
class RunOutcome:
    run_id: int
    status: str
    reason: str
    samples: int


def prepare(spec: VariantSpec, machine: RunningTarget | None = None) -> Prepared:
    """`machine`: whose running kernel the base `running` means (default: this machine)."""
    if prebuilt.is_image(spec.base):
        return _prepare_image(spec)
    if spec.base == RUNNING:
        machine = machine or targets.open("local").machine
        assert machine is not None   # the local target is a machine
        if is_running(spec):
            return _prepare_running(spec, machine)
    profile = arches.load(spec.arch)
    source = sources.resolve(spec.source)
    toolchain = toolchains.detect(profile, spec.toolchain)
    base = spec.base if spec.base != RUNNING or machine is None else str(_running_config_file(machine, source))
    config = resolve(source, profile, toolchain, base, spec.settings())
    return Prepared(spec, source, profile, toolchain, replace(config, base=spec.base))


def explained(p: Prepared) -> Prepared:
    """`p` with each option olddefconfig dropped saying why ("why": what `config explain`
    would say setting it takes), for every view of it to show: computed once per variant,
    where a report or a command's answer is made (the Kconfig tree is opened only when
    something was dropped; a sweep's probes, which only need what was kept, do without)."""
    if not p.config.dropped or p.toolchain is None:
        return p
    tree = kconfig.open_tree(p.source, p.profile, p.toolchain)
    tree.load_text(p.config.text, p.spec.name)
    dropped = [d | {"why": explain.why(tree, d["option"], d["asked"])} for d in p.config.dropped]
    return replace(p, config=replace(p.config, dropped=dropped))


def dropped_lines(p: Prepared) -> list[str]:
    """What olddefconfig dropped, a line each, with why where `explained` said it."""
    return [f"asked {d['option']}={d['asked']}, got {d['got']} ({d['origin']})"
            + (f": {d['why']}" if d.get("why") else "") for d in p.config.dropped]


def _prepare_running(spec: VariantSpec, machine: RunningTarget) -> Prepared:
    facts = machine.facts
    text, origin = running_config(machine.shell)
    source = Source(RUNNING, RUNNING, facts["release"], facts.kernel_id, Path("/"))
    note = "" if text is not None else f"config unknown: {origin}"
    return Prepared(spec, source, machine.profile, None, ResolvedConfig(RUNNING, text or "", []), note)


def _prepare_image(spec: VariantSpec) -> Prepared:
    """A Debian prebuilt kernel: its package is its source (name=version, the .deb's hash),
    its /boot/config-* its config; the variant's source names the package, so that the
    report's header and the store say exactly which kernel was measured."""
    compiler = getattr(spec, "toolchain", "gcc")   # Debian built it: a toolchain cannot be asked for
    prebuilt.check_variant(spec.name, spec.base, spec.arch,
                           [*spec.fragments, *spec.options, *([f"cc:{compiler}"] if compiler != "gcc" else [])])
    image = prebuilt.fetch(prebuilt.parse(spec.base))
    source = Source(image.identity, prebuilt.KIND, image.release, image.sha256, image.root)
    config = ResolvedConfig(spec.base, image.config_path.read_text(errors="replace"), [])
    modules, notices = prebuilt.agent_modules(image, config.values)
    note = "; ".join([f"Debian's prebuilt kernel {image.identity}: not built (prebuilt by Debian), sizes from the "
                      "ELF in its bzImage, "
                      + (f"the agent loads {', '.join(n for n, _ in modules)}" if modules else "no modules to load"),
                      *notices])
    return Prepared(replace(spec, source=image.identity), source, arches.load(spec.arch), None, config, note,
                    image, tuple(modules))


def _running_config_file(machine: RunningTarget, source: Source) -> Path:
    """The machine's running config, as a base file, after checking the source fits it."""
    release = machine.facts["release"]
    if _major_minor(release) != _major_minor(source.version):
        raise LabError(f"{machine.shell.where} runs Linux {release}, and the source {source.spec} is "
                       f"{source.version}: pass --source with a tree (or debian:X.Y) of "
                       f"{_major_minor(release)} to build a variant of its kernel")
    return running_config_file(machine.shell)


def _major_minor(release: str) -> str:
    return ".".join(release.split(".")[:2]).split("-")[0]


def record_variant(p: Prepared, store: Store) -> int:
    """The variant's row: its config and its boot parameters and sysctls are its identity."""
    return store.add_variant(p.spec.name, p.source, p.profile.name, p.spec.base, p.spec.to_dict(),
                             p.config.hash, p.config.dropped, " ".join(p.spec.boot_args),
                             json.dumps(p.spec.sysctls, sort_keys=True) if p.spec.sysctls else "")


def ensure_built(p: Prepared, store: Store, log: Callable[[str], None] | None = None,
                 where: Callable[[], Path] | None = None, cold: bool = False) -> Build:
    """`where`: the build tree, if not the shared one; `cold`: from scratch, to be timed
    (kernellab.build.build)."""
    if p.image is not None:
        raise LabError(f"variant {p.spec.name} is Debian's prebuilt {p.image.identity}: it is measured, not built")
    if p.toolchain is None:
        raise LabError(f"variant {p.spec.name} is the kernel a machine runs: it is measured, not built")
    result = builder.build(p.source, p.profile, p.toolchain, p.config, log=log, what=p.spec.name,
                           where=where, cold=cold)
    store.add_build(result.key, record_variant(p, store), result.to_dict())
    return result


@dataclass(frozen=True)
class RunOptions:
    mode: str = "icount"
    timeout_s: float = DEFAULT_TIMEOUT_S
    initcalls: bool = False        # boot with initcall_debug and record every initcall's time
    repeats: int | None = None     # the agent's repeats per metric (None: its default)
    cmdline_extra: str = ""        # more kernel command line, e.g. KL_ONLY=syscall.null
    with_groups: tuple[str, ...] = ()   # opt-in metric groups the agent runs too (KL_WITH)
    workloads: tuple[Instance, ...] = ()   # real programs the agent runs after its tables (--workload)

    def key(self, initrd: Path, spec: VariantSpec) -> str:
        """What, besides the kernel, decides a run's numbers: to find an equal earlier run."""
        vcpus = f" vcpus={spec.vcpus}" if spec.vcpus is not None else ""
        devices = f" devices={spec.devices}" if spec.devices else ""   # devices:0 boots as no devices:
        fs = f" fs={spec.fs}" if spec.fs else ""   # the block size is not on the command line
        wl = f" workloads={guest_workloads.digest(self.workloads)}" if self.workloads else ""
        return f"{self.mode} {initrd.name} {self.cmdline(spec)}{vcpus}{devices}{fs}{wl}"

    @property
    def disk_mib(self) -> int:
        """The room the workloads need on a disk's file system (a QEMU guest's, wall mode)."""
        return disk_mib(self.workloads)

    @property
    def host_ports(self) -> tuple[int, ...]:
        """The ports of the servers the host reaches (a QEMU guest forwards them, wall mode)."""
        return host_ports(self.workloads)

    def workload_timeout_s(self) -> float:
        """The guest time the workloads may take at most, beyond the agent's own."""
        return sum(i.workload.longest_s() for i in self.workloads)

    def cmdline(self, spec: VariantSpec) -> str:
        words = [*spec.boot_words(), self.cmdline_extra]
        if self.initcalls:
            # initcall_debug reports at KERN_DEBUG: raise the console level to show it.
            words.append("initcall_debug loglevel=8")
        if self.repeats:
            words.append(f"KL_REPEATS={self.repeats}")
        if self.with_groups:
            words.append(f"KL_WITH={','.join(self.with_groups)}")
        return " ".join(w for w in words if w)


def agent_for(p: Prepared, target: Target, workloads: tuple[Instance, ...] = ()) -> Path:
    """What the target runs the agent from: an initramfs (with the workloads' files), or
    the program itself (the workloads' file is named on its command line: `run`). An
    experiment takes it once, so every variant is measured by the same agent binary."""
    if target.capabilities.agent == "program":
        cross = _cross_target(p.profile)
        return agent_binary(cross.cc, p.profile.agent_arch)
    # The agent runs every workload its initramfs holds: those the guest can run (`run`
    # says why of the others).
    return initramfs_for(p, _runnable(workloads, _unmet_needs(target, workloads, p.config.values)))


def _cross_target(profile: arches.ArchProfile) -> CrossTarget:
    target = cross_targets().get(profile.agent_arch)
    if target is None:
        raise LabError(f"arch profile {profile.name}: no agent build {profile.agent_arch!r} "
                       f"in agent/cross.toml (one of {', '.join(sorted(cross_targets()))})")
    return target


def initramfs_for(p: Prepared, workloads: tuple[Instance, ...] = ()) -> Path:
    """The agent's initramfs for this variant's arch. An experiment takes it once, so
    every variant is measured by the same agent binary. The agent build is the profile's
    (agent/cross.toml), not the kernel's compiler: several profiles share one user-space
    ABI (ppc44x and ppc32 run the ppc32 agent), and the agent needs a C library the
    kernel's compiler may lack."""
    p.profile.require_machine()  # a build-only arch has no guest to run the agent in
    packaged, from_source = guest_programs(workloads, p.profile)
    # Programs built from Debian's source go where the user's own do (bin/, found first).
    built = staticbuild.programs(from_source, p.profile) if from_source else None
    extra = guest_workloads.initramfs_files(workloads, built) if workloads else None
    initrd = agent_initramfs(agent_binary(_cross_target(p.profile).cc, p.profile.agent_arch), p.modules, extra)
    if userland.wanted(packaged).packages:
        # Debian's programs for the guest's arch, and the libraries they load, unpacked by
        # the kernel from a segment after the agent's (the agent looks them up on PATH).
        initrd = with_segments(initrd, [userland.segment(packaged, p.profile)])
    return initrd


def guest_programs(workloads: tuple[Instance, ...],
                   profile: arches.ArchProfile) -> tuple[tuple[Instance, ...], tuple[Instance, ...]]:
    """Where a guest of `profile` gets the programs of `workloads` from, besides their own
    `binaries`: (those whose programs come from Debian's packages, kernellab.userland; those
    kernellab builds statically from Debian's source packages, kernellab.staticbuild). The
    second are the workloads with a [static] recipe on an arch Debian 12 has no release for:
    the one place that is decided."""
    if userland.has_debian(profile):
        return workloads, ()
    return (tuple(i for i in workloads if i.workload.static is None),
            tuple(i for i in workloads if i.workload.static is not None))


def check_guest_programs(workloads: tuple[Instance, ...], profile: arches.ArchProfile) -> None:
    """Refuse, in one line before anything is built, workloads a guest of `profile` could
    not get the programs of (guest_programs): Debian packages where Debian 12 has no
    release, a program a [static] build does not make."""
    packaged, from_source = guest_programs(workloads, profile)
    if userland.wanted(packaged).packages:
        userland.debian_arch(profile)
    staticbuild.check(from_source, profile)


def guest_packages(workloads: tuple[Instance, ...], profile: arches.ArchProfile) -> guest_workloads.Packages:
    """Where the programs of a guest's workloads came from (for their provenance), as the
    cache remembers it: the packages of its Debian userland, the source packages of those
    kernellab built (guest_programs). Never assembles nor builds."""
    packaged, from_source = guest_programs(workloads, profile)
    debian = userland.installed(packaged, profile)
    if not from_source:
        return debian
    built = staticbuild.installed(from_source, profile)
    return guest_workloads.Packages({**debian.versions, **built.versions}, {**debian.programs, **built.programs},
                                    {**debian.unknown, **built.unknown}, {**debian.built, **built.built})


def bootable(p: Prepared, build: Build | None) -> Build | None:
    """What a target is given to boot: the build, or a prebuilt image presented as one
    (its sizes, nothing built: wall_s 0, jobs 0). Never stored as a build."""
    if p.image is None:
        return build
    size = prebuilt.sizes(p.image)
    return Build(key=prebuilt_key(p.image), artifacts=p.image.root, image=p.image.kernel, wall_s=0.0, user_s=0.0,
                 sys_s=0.0, image_bytes=size["image_bytes"], vmlinux_bytes=size["vmlinux_bytes"],
                 text=size["text"], data=size["data"], bss=size["bss"],
                 compiler=f"prebuilt by Debian ({p.image.identity})", ccache="", ccache_hit_pct=None,
                 jobs=0, cached=True)


def prebuilt_key(image: prebuilt.Image) -> str:
    """A prebuilt kernel's runs are filed under its package, as a build's under its key."""
    return f"debian-image-{image.sha256[:20]}"


def _prebuilt_rows(store: Store, run_id: int, image: prebuilt.Image) -> int:
    """A prebuilt kernel has no build for the report to take its size rows from: each run
    carries them (one sample each, equal in every run), and says why it has no build rows.
    -> the samples stored."""
    figures = prebuilt.figures(image)
    for metric, (unit, value) in figures.items():
        store.add_sample(run_id, metric, unit, 0, 1, value)
    for metric in prebuilt.BUILD_METRICS:
        store.add_unavailable(run_id, metric, prebuilt.NOT_BUILT)
    return len(figures)


CONSOLE_FLUSH_S = 0.5


class _StoreSink:
    """Commits what the session reads as it reads it."""

    def __init__(self, store: Store, run_id: int, config: dict[str, str], agent: str = "init"):
        self.store, self.run_id, self.config, self.agent = store, run_id, config, agent
        self.log_id = store.add_log("console", "", run_id=run_id)
        self._pending: list[str] = []
        self._flushed = time.monotonic()
        self.samples = 0   # stored through this sink: counted here, as a Dask worker cannot read the store

    def console(self, text: str) -> None:
        # Appended in batches: a commit per line would cost a boot of 300 lines little,
        # but a chatty kernel thousands. Every sample flushes first, so the log holds the
        # lines that led up to whatever was measured, whatever kills kernellab next.
        self._pending.append(text)
        if time.monotonic() - self._flushed >= CONSOLE_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self.store.append_log(self.log_id, "".join(self._pending))
            self._pending = []
        self._flushed = time.monotonic()

    def sample(self, s: Sample) -> None:
        self.flush()
        self.store.add_sample(self.run_id, s.metric, s.unit, s.rep, s.iters, s.value, s.seq)
        self.samples += 1

    def unavailable(self, metric: str, reason: str) -> None:
        """The agent says why; the catalog knows which options the metric needs, and the
        variant's config which of them it lacks: that is the reason users can act on."""
        lacking = [o for o in describe(metric, "").needs if self.config.get(o, "n") not in ("y", "m")]
        if lacking and self.config:  # an unknown config (a running kernel's) lacks nothing we know of
            reason = f"needs {', '.join(lacking)}"
        elif _DENIED.search(reason):
            reason = f"needs root ({reason})"
        elif reason == "no_scratch_disk" and self.agent == "program":
            reason = "needs --block-dir DIR: kernellab writes no device, only a file in a directory you name"
        elif reason == "no_file_system":
            reason = "no file system to measure on: give the variant fs:ext4-4k (or ext4-64k), in wall mode"
        elif reason == "no_tst.dd_on_the_file_system":
            reason = ("the file system the run's workloads got has no file to measure: give the variant "
                      "fs:ext4-4k (or ext4-64k)")
        elif reason == "reached_KL_ALLOC_CAP_MB":
            reason = ("stopped at its cap, KL_ALLOC_CAP_MB (64 MiB on a real machine, which kernellab does not "
                      "push into reclaim): a lower bound, not a measurement")
        self.store.add_unavailable(self.run_id, metric, reason)


# The milestones a boot passes before the agent speaks (ssh_ready is a kexec'd remote's).
_BOOT_STEPS = sum(1 for name, _ in MILESTONES if name not in ("agent_ready", "ssh_ready"))


class _RunProgress:
    """A run on the progress display: the boot's milestones, then the agent's metrics."""

    def __init__(self, name: str, expected: int) -> None:
        self.bar = progress.Task(None, None)   # the display's line, while the run shows
        self.name, self.expected = name, expected
        self.seen: set[str] = set()

    def milestone(self, name: str) -> None:
        if name == "agent_ready":
            self.bar.update(description=f"{self.name}: measuring", completed=0, total=self.expected,
                            note="metrics")
        else:
            self.bar.advance()

    def metric(self, name: str) -> None:
        if name not in self.seen and name in catalog():
            self.seen.add(name)
            self.bar.update(completed=len(self.seen))


def expected_metrics(options: RunOptions) -> int:
    """How many catalogued metrics the agent will measure in a run with these options."""
    for word in options.cmdline_extra.split():
        if word.startswith("KL_ONLY="):
            return len(word.removeprefix("KL_ONLY=").split(","))
    return sum(1 for m in catalog().values()
               if m.source == "agent" and (not m.opt_in or m.opt_in in options.with_groups))


class Cancellation:
    """Stops runs that other threads are reading. A signal (Ctrl-C, SIGTERM) reaches only
    the main thread: when variants boot side by side, the main thread cancels the others'
    runs, each of which then ends as interrupted, keeping what it measured."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._consoles: set[Console] = set()
        self.reason: str | None = None

    def watch(self, console: Console) -> None:
        with self._lock:
            self._consoles.add(console)
            if self.reason is not None:
                console.stop_in(0)

    def unwatch(self, console: Console) -> None:
        with self._lock:
            self._consoles.discard(console)

    def cancel(self, reason: str) -> None:
        with self._lock:
            self.reason = reason
            for console in self._consoles:
                console.stop_in(0)


def on_target(store: Store, run_ids: list[int], target: str | None) -> list[int]:
    """The runs of `run_ids` measured on the target named `target` (a Site's or a Target's
    name, as the store records it; None: any): a run is reused only where it was measured
    (a probe on a board never stands for one under QEMU)."""
    if target is None:
        return run_ids
    return [i for i in run_ids if (row := store.run(i)) is not None and row["target"] == target]


def default_site() -> Site:
    """Where runs go when the command names no target: QEMU TCG (targets.open("qemu"))."""
    return targets.open("qemu", TargetOptions(accel="tcg"))


def default_target(p: Prepared, build: Build | None, options: RunOptions) -> Target:
    site = default_site()
    image = build.image if build is not None else None
    return site.target(Want(p.profile, options.mode, image, vcpus=p.spec.vcpus, devices=p.spec.devices,
                            fs=p.spec.file_system, disk_mib=options.disk_mib, host_ports=options.host_ports),
                       lambda _: None)


def _workloads_word(target: Target, workloads: tuple[Instance, ...]) -> str:
    """For an agent run as a program: KL_WORKLOADS=FILE, the workloads' file on this
    machine, which the target puts where the agent runs (targets.running: a copy on a
    remote machine). An initramfs carries its own, which the agent finds by itself."""
    if not workloads or target.capabilities.agent != "program":
        return ""
    path = str(guest_workloads.local_file(workloads))
    if any(c.isspace() for c in path):
        raise LabError(f"the workloads file {path} has a space in its path, which the agent's options cannot "
                       "carry: set KERNELLAB_CACHE to a directory without spaces")
    return f" {WORKLOADS_OPTION}={path}"


def _unmet_needs(target: Target, workloads: tuple[Instance, ...], config: Mapping[str, str]) -> dict[int, str]:
    """The workloads (by index) that the target cannot give what they need, each with why
    ("needs ...", several joined by "; "): more vCPUs or memory (needs.vcpus,
    needs.memory_mib) than a QEMU guest or a machine has, more room for their files
    (needs.disk_mib) than a machine has where their {workdir} is, a guest's NIC that the
    variant's kernel (`config`) has no driver for. Each is asked of the target only when a
    workload needs it. A guest gets a disk with room instead (RunOptions.disk_mib,
    targets.qemu; none under icount, where the agent does not run them:
    guest.workloads.Reader). The variant is never changed to fit: a guest boots with the
    vCPUs and the options it asks for, and the reason says how to ask for more. A LAVA
    board's log says nothing of its machine: the agent checks vCPUs and memory there (its
    status too_small), as it does everywhere after this."""
    whys: dict[int, list[str]] = {}
    for n, why in [*_short_of_capacity(target, workloads), *_short_of_room(target, workloads),
                   *_short_of_link_driver(target, workloads, config)]:
        whys.setdefault(n, []).append(why)
    return {n: "; ".join(why) for n, why in sorted(whys.items())}


def _runnable(workloads: tuple[Instance, ...], unmet: dict[int, str]) -> tuple[Instance, ...]:
    """The workloads the agent is given: those whose needs are met (_unmet_needs)."""
    return tuple(i for n, i in enumerate(workloads) if n not in unmet)


def _short_of_capacity(target: Target, workloads: tuple[Instance, ...]) -> list[tuple[int, str]]:
    """(index, why) of each workload needing more vCPUs or memory than the target has."""
    if (not any(i.workload.needs.vcpus > 1 or i.workload.needs.memory_mib for i in workloads)
            or not isinstance(target, targets.HasCapacity)):
        return []
    has = target.capacity()
    # A QEMU guest gets more vCPUs from its variant; a machine has what it has.
    more = target.capabilities.vcpus
    out = []
    for n, i in enumerate(workloads):
        need = i.workload.needs
        if need.vcpus > has.vcpus:
            out.append((n, f"needs {need.vcpus} vCPUs, {has.where} has {has.vcpus}"
                           + (f": give the variant vcpus:{need.vcpus}" if more else "")))
        if need.memory_mib > has.memory_mib:
            out.append((n, f"needs {need.memory_mib} MiB of memory, {has.where} has {has.memory_mib} MiB"))
    return out


def _short_of_room(target: Target, workloads: tuple[Instance, ...]) -> list[tuple[int, str]]:
    """(index, why) of each workload whose files (needs.disk_mib) a machine has no room for
    where their {workdir} is."""
    if not any(i.workload.needs.disk_mib for i in workloads) or not isinstance(target, targets.MachinePrograms):
        return []
    workdir, free = target.workdir_free_mib()
    return [(n, f"needs {i.workload.needs.disk_mib} MiB free under {workdir}, the machine has {free} MiB")
            for n, i in enumerate(workloads) if i.workload.needs.disk_mib > free]


def _short_of_link_driver(target: Target, workloads: tuple[Instance, ...],
                          config: Mapping[str, str]) -> list[tuple[int, str]]:
    """(index, why) of each workload that talks to the host through a NIC of the machine the
    target boots (a QEMU guest's) when the variant's kernel has no driver for it built in
    (a config kernellab does not know, a running kernel's, is taken as it is)."""
    if not config or not isinstance(target, targets.LinkDriver):
        return []
    option = target.link_driver
    value = config.get(option, "n")
    if value == "y":
        return []
    why = (f"needs {option} (the guest's network device)" if value != "m" else
           f"needs {option}=y (the guest's network device; as a module, =m, nothing loads it)")
    return [(n, why) for n, i in enumerate(workloads) if i.workload.client_on_host]


def _workload_reader(options: RunOptions, instances: tuple[Instance, ...], sink: _StoreSink, info: TargetInfo,
                     store: Store, run_id: int, p: Prepared, target: Target,
                     console: Console) -> guest_workloads.Reader | None:
    """What reads the run's workloads (`instances`, those the agent runs) back, storing each
    one's provenance and raw output; the host's side of those that talk to the host runs
    against the console's link."""
    if not options.workloads:
        return None
    # A guest runs the programs of the userland kernellab assembled; a machine its own; the
    # host's command of a workload that talks to the host is this machine's.
    if target.capabilities.agent != "program":
        guest = guest_packages(options.workloads, p.profile)
    elif isinstance(target, targets.MachinePrograms):
        guest = target.installed(options.workloads)
    else:
        guest = guest_workloads.Packages()
    on_host = tuple(i for i in options.workloads if i.workload.client_on_host)
    this_one = isinstance(target, RunningTarget) and target.shell.here
    here = _this_machine().installed(on_host) if on_host and not this_one else guest

    def ended(e: guest_workloads.Ended) -> None:
        sink.flush()
        programs = here if e.inst.workload.client_on_host else guest
        store.add_workload(run_id, e.inst.label,
                           guest_workloads.Provenance.of(e.inst, target.name, programs).to_dict(),
                           e.status, e.reason, e.elapsed_s)
        store.add_log(f"{guest_workloads.LOG_KIND} {e.inst.label}", e.output, run_id=run_id)

    # A real machine's runs say which one ("this machine", "ssh://root@nas"); a guest or a board has no such name.
    where = info.details.get("target", target.capabilities.machine)
    return guest_workloads.Reader(instances, options.mode, sink,
                                  lambda metric, unit, value: Sample(metric, unit, 0, 1, value), ended, where,
                                  debian=info.details.get("packages", "Debian's") == "Debian's",
                                  host_link=console.host_address if isinstance(console, targets.HostLinked) else None)


def _this_machine() -> RunningTarget:
    """The machine kernellab runs on, where the host's side of a workload runs."""
    machine = targets.open("local").machine
    assert machine is not None   # the local target is a machine
    return machine


def run(p: Prepared, build: Build | None, store: Store, options: RunOptions = RunOptions(),
        initrd: Path | None = None, target: Target | None = None,
        cancellation: Cancellation | None = None) -> RunOutcome:
    """Boot once (or, for the running kernel, attach); every sample is committed to the
    store as its line arrives. `initrd`: the agent as the target takes it (agent_for)."""
    target = target or default_target(p, build, options)
    initrd = initrd or agent_for(p, target, options.workloads)
    check(target.name, target.capabilities, Ask(mode=options.mode))
    if (build is None) == p.built:
        raise LabError(f"variant {p.spec.name}: " + ("not built" if p.built else "measured as it is, it has no build"))
    check(target.name, target.capabilities, Ask(variant=p.spec.name, running=p.running))
    variant_id = record_variant(p, store)
    info = target.describe(options.mode)
    boot = bootable(p, build)
    build_key = boot.key if boot is not None else f"running-{p.source.content_hash[:20]}"
    kernel = boot.image if boot is not None else None
    # A workload whose needs the target cannot meet is not run; the others are (a guest's
    # initramfs holds only those: agent_for).
    unmet = _unmet_needs(target, options.workloads, p.config.values)
    given = _runnable(options.workloads, unmet)
    cmdline = options.cmdline(p.spec) + _workloads_word(target, given)
    timeout_s = options.timeout_s + options.workload_timeout_s()
    with target.start(kernel, initrd, cmdline, options.mode, timeout_s) as console:
        run_id = store.start_run(variant_id, build_key, target.name, info.to_dict(), options.mode,
                                 console.command, options.key(initrd, p.spec), initrd.name)
        stored = _prebuilt_rows(store, run_id, p.image) if p.image is not None else 0
        if cancellation:
            cancellation.watch(console)
        watcher = _RunProgress(p.spec.name, expected_metrics(options))
        sink = _StoreSink(store, run_id, p.config.values, target.capabilities.agent)
        reader = _workload_reader(options, given, sink, info, store, run_id, p, target, console)
        for n, why in unmet.items():
            assert reader is not None   # the run has workloads
            reader.not_run(options.workloads[n], why)
        session = Session(sink, watcher, reader)
        try:
            with progress.task(f"{p.spec.name}: booting", _BOOT_STEPS, "milestones") as watcher.bar:
                result = session.read(console)
            if cancellation and cancellation.reason is not None:
                raise KeyboardInterrupt(cancellation.reason)
        except KeyboardInterrupt as exc:
            session.store_console_samples()   # the Memory: line and initcalls it reached
            sink.flush()
            store.finish_run(run_id, "interrupted", f"interrupted ({exc.args[0] if exc.args else 'Ctrl-C'})",
                             session.result.agent_version, session.result.clocksource)
            raise
        finally:
            if cancellation:
                cancellation.unwatch(console)
            if reader is not None:
                reader.close()   # the host's commands it started, should the run have stopped first
    sink.flush()
    if result.vulnerabilities:
        store.add_log(vulnerabilities.LOG_KIND, vulnerabilities.to_log(result.vulnerabilities), run_id=run_id)
    for prefix, reason in console.unavailable().items():
        store.add_unavailable(run_id, prefix, reason)
    after = console.facts_after()
    if after:
        store.set_target_info(run_id, replace(info, details={**info.details, **after}).to_dict())
    if result.rejected:
        store.add_log("rejected-records", "\n".join(result.rejected), run_id=run_id)
    store.finish_run(run_id, result.status, result.reason, result.agent_version, result.clocksource)
    if result.status == "agent-mismatch":
        raise LabError(result.reason)
    # Every sample the run stored (the console's milestones, memory and initcalls, the
    # workloads' figures, the agent's), the count `runs` shows: one count, one word.
    return RunOutcome(run_id, result.status, result.reason, stored + sink.samples)
