"""One variant through the lab: prepare (resolve its config) -> build -> run -> save.

prepare() only reads: resolving a variant (`kernellab resolve`) leaves the store as it
was. The store learns of a variant when it is built or run.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import arches, modes, sources
from .. import build as builder
from .. import toolchain as toolchains
from ..agent.compile import agent_binary, cross_targets
from ..build import Build
from ..config.resolve import ResolvedConfig, resolve
from ..errors import LabError
from ..guest.session import Sample, Session, console_samples
from ..initramfs import agent_initramfs
from ..metrics.catalog import describe
from ..sources import Source
from ..store import Store
from ..targets import Console, Target
from ..targets.qemu import SCRATCH_MIB, QemuTarget
from .spec import VariantSpec

DEFAULT_TIMEOUT_S = 600.0


@dataclass
class Prepared:
    spec: VariantSpec
    source: Source
    profile: arches.ArchProfile
    toolchain: toolchains.Toolchain
    config: ResolvedConfig


@dataclass
class RunOutcome:
    run_id: int
    status: str
    reason: str
    samples: int


def prepare(spec: VariantSpec) -> Prepared:
    profile = arches.load(spec.arch)
    source = sources.resolve(spec.source)
    toolchain = toolchains.detect(profile)
    config = resolve(source, profile, toolchain, spec.base, spec.settings())
    return Prepared(spec, source, profile, toolchain, config)


def record_variant(p: Prepared, store: Store) -> int:
    """The variant's row: its config and its boot parameters and sysctls are its identity."""
    return store.add_variant(p.spec.name, p.source, p.profile.name, p.spec.base, p.spec.to_dict(),
                             p.config.hash, p.config.dropped, " ".join(p.spec.boot_args),
                             json.dumps(p.spec.sysctls, sort_keys=True) if p.spec.sysctls else "")


def ensure_built(p: Prepared, store: Store, log: Callable[[str], None] | None = None) -> Build:
    result = builder.build(p.source, p.profile, p.toolchain, p.config, log=log)
    store.add_build(result.key, record_variant(p, store), result.to_dict())
    return result


@dataclass(frozen=True)
class RunOptions:
    mode: str = "icount"
    timeout_s: float = DEFAULT_TIMEOUT_S
    initcalls: bool = False        # boot with initcall_debug and record every initcall's time
    repeats: int | None = None     # the agent's repeats per metric (None: its default)
    cmdline_extra: str = ""        # more kernel command line, e.g. KL_ONLY=syscall.null
    scratch_mib: int = SCRATCH_MIB  # wall mode only

    def key(self, initrd: Path, spec: VariantSpec) -> str:
        """What, besides the kernel, decides a run's numbers: to find an equal earlier run."""
        return f"{self.mode} {initrd.name} {self.cmdline(spec)}"

    def cmdline(self, spec: VariantSpec) -> str:
        words = [*spec.boot_words(), self.cmdline_extra]
        if self.initcalls:
            # initcall_debug reports at KERN_DEBUG: raise the console level to show it.
            words.append("initcall_debug loglevel=8")
        if self.repeats:
            words.append(f"KL_REPEATS={self.repeats}")
        return " ".join(w for w in words if w)


def initramfs_for(p: Prepared) -> Path:
    """The agent's initramfs for this variant's arch. An experiment takes it once, so
    every variant is measured by the same agent binary. The agent build is the profile's
    (agent/cross.toml), not the kernel's compiler: several profiles share one user-space
    ABI (ppc44x and ppc32 run the ppc32 agent), and the agent needs a C library the
    kernel's compiler may lack."""
    p.profile.require_machine()  # a build-only arch has no guest to run the agent in
    target = cross_targets().get(p.profile.agent_arch)
    if target is None:
        raise LabError(f"arch profile {p.profile.name}: no agent build {p.profile.agent_arch!r} "
                       f"in agent/cross.toml (one of {', '.join(sorted(cross_targets()))})")
    return agent_initramfs(agent_binary(target.cc, p.profile.agent_arch))


class _StoreSink:
    """Commits what the session reads as it reads it."""

    def __init__(self, store: Store, run_id: int, config: dict[str, str]):
        self.store, self.run_id, self.config = store, run_id, config

    def sample(self, s: Sample) -> None:
        self.store.add_sample(self.run_id, s.metric, s.unit, s.rep, s.iters, s.value, s.seq)

    def unavailable(self, metric: str, reason: str) -> None:
        """The agent says why; the catalog knows which options the metric needs, and the
        variant's config which of them it lacks: that is the reason users can act on."""
        lacking = [o for o in describe(metric, "").needs if self.config.get(o, "n") not in ("y", "m")]
        self.store.add_unavailable(self.run_id, metric, f"needs {', '.join(lacking)}" if lacking else reason)


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


def run(p: Prepared, build: Build, store: Store, options: RunOptions = RunOptions(),
        initrd: Path | None = None, target: Target | None = None,
        cancellation: Cancellation | None = None) -> RunOutcome:
    """Boot once; every sample is committed to the store as its line arrives."""
    initrd = initrd or initramfs_for(p)
    target = target or QemuTarget(p.profile, options.scratch_mib)
    if modes.get(options.mode).deterministic and not target.capabilities.deterministic:
        raise LabError(f"the {target.name} target cannot run {options.mode} mode (its time is the host's): "
                       "use --mode wall")
    variant_id = record_variant(p, store)
    info = target.describe(options.mode)
    with target.start(build.image, initrd, options.cmdline(p.spec), options.mode, options.timeout_s) as console:
        run_id = store.start_run(variant_id, build.key, target.name, info.to_dict(), options.mode,
                                 console.command, options.key(initrd, p.spec), initrd.name)
        session = Session(_StoreSink(store, run_id, p.config.values))
        if cancellation:
            cancellation.watch(console)
        try:
            result = session.read(console)
            if cancellation and cancellation.reason is not None:
                raise KeyboardInterrupt(cancellation.reason)
        except KeyboardInterrupt as exc:
            sink = session.sink
            for sample in console_samples(session.result.lines):  # the milestones it reached
                sink.sample(sample)
            store.add_log("console", session.result.console_log, run_id=run_id)
            store.finish_run(run_id, "interrupted", f"interrupted ({exc.args[0] if exc.args else 'Ctrl-C'})",
                             session.result.agent_version, session.result.clocksource)
            raise
        finally:
            if cancellation:
                cancellation.unwatch(console)
    store.add_log("console", result.console_log, run_id=run_id)
    if result.rejected:
        store.add_log("rejected-records", "\n".join(result.rejected), run_id=run_id)
    store.finish_run(run_id, result.status, result.reason, result.agent_version, result.clocksource)
    if result.status == "agent-mismatch":
        raise LabError(result.reason)
    return RunOutcome(run_id, result.status, result.reason, result.samples)
