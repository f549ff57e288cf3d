"""Run an experiment's variants: build them all, then boot them round after round until
the numbers are precise enough. The report model (report.model) turns the store's record
into the comparison every view renders.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import arches, modes, progress
from .. import workloads as workload_files
from ..arches import BUILD_ONLY_NOTE
from ..build import Build, build_key, cached_build
from ..config import resolve
from ..errors import LabError
from ..guest import workloads as guest_workloads
from ..metrics.catalog import describe, only_words
from ..report import render
from ..report.model import Only, VariantRecord, build_report, run_medians, samples
from ..report.terminal import Screen
from ..stats import imprecise_metrics
from ..store import Store
from ..targets import Capabilities, Target
from ..targets.qemu import extra_device_args
from ..targets.running import RunningTarget
from . import lab
from .placement import Placement, check_workloads
from .scheduler import BootOne, Scheduler, Threads
from .spec import Experiment


@dataclass(frozen=True)
class Plan:
    mode: modes.Mode
    min_runs: int
    max_runs: int
    options: lab.RunOptions
    # The real machine whose running kernel the base `running` means (None: this one).
    machine: RunningTarget | None = None
    # Where each variant runs: a function of the variant and its build (None for the
    # running kernel). None: QEMU TCG.
    target: Callable[[lab.Prepared, Build | None], Target] | None = None
    # Take finished runs of the same kernel, measured the same way, from the store before
    # booting more: what lets a study resume. compare itself always measures afresh.
    reuse: bool = False
    # The name runs on that target are recorded under (None: any), for reuse.
    target_name: str | None = None
    # What that target can do: with deterministic time, a deterministic mode's variants
    # boot side by side (scheduler). Default: QEMU TCG's.
    capabilities: Capabilities = field(default_factory=lambda: lab.default_site().capabilities)
    # Some metrics only (--metric): the agent boots for those, and the report holds them.
    only: Only | None = None


def resolve_workloads(specs: Sequence[str]) -> tuple[workload_files.Instance, ...]:
    """--workload SPEC...: each resolved (a shipped name or a file, with its parameters),
    checked, and its metrics registered in the catalog before a gate's rule names them,
    for the running command only (metrics.catalog.command_scope: a library user opens
    one around its own command)."""
    instances = tuple(workload_files.resolve(spec) for spec in specs)
    guest_workloads.check(instances)
    guest_workloads.register(instances)
    return instances


def plan(exp: Experiment, mode: str | None, runs: int | None, max_runs: int | None,
         timeout_s: float, initcalls: bool = False, placement: Placement | None = None,
         workloads: tuple[workload_files.Instance, ...] = (), only: Sequence[str] = ()) -> Plan:
    """How to run `exp`: the mode asked for (else the experiment's, else the target's
    default), resolved here once for the whole command, the boots per variant, and where
    (placement; None: QEMU TCG). `workloads`: real programs each run measures too
    (resolve_workloads). `only`: the metrics to measure (none: all), each the catalog's or
    a workload's (checked by the command, as sweep's --metric is)."""
    how = modes.get(mode or exp.mode or (placement.default_mode() if placement else modes.DEFAULT))
    check_workloads(placement, workloads, how.name, [v.arch for v in exp.variants])
    if placement is not None:
        placement.check_mode(how.name)
        for spec in exp.variants:
            placement.adapt(spec)
    for flag, value in (("--runs", runs), ("--max-runs", max_runs)):
        if value is not None and value < 1:
            raise LabError(f"{flag} must be at least 1, got {value}")
    if timeout_s <= 0:
        raise LabError(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    _check_machines(exp, how)
    min_runs = runs or exp.runs or how.runs
    cap = max(min_runs, max_runs or (how.max_runs if runs is None else min_runs))
    subset = _only(exp, only, initcalls, workloads) if only else None
    options = lab.RunOptions(mode=how.name, timeout_s=timeout_s, initcalls=initcalls,
                             cmdline_extra=subset.words if subset is not None else "",
                             with_groups=tuple(exp.with_groups), workloads=workloads)
    if placement is None:
        return Plan(how, min_runs, cap, options, only=subset)
    return Plan(how, min_runs, cap, options, machine=placement.machine,
                target=lambda p, build: placement.target(p, build, options), target_name=placement.site.name,
                capabilities=placement.site.capabilities, only=subset)


def _only(exp: Experiment, only: Sequence[str], initcalls: bool,
          workloads: tuple[workload_files.Instance, ...]) -> Only:
    """The metrics `only` and the words that boot the agent for them, as a probe boots
    (metrics.catalog.only_words). The arch's words that shorten a boot go on a command line
    that every booted variant's arch takes alike, and never to the kernel a machine runs
    (its command line was fixed when it booted), nor when --initcalls times the boot."""
    unasked = [i.label for i in workloads
               if not any(guest_workloads.metric_name(i, m) in only for m in i.metrics())]
    if unasked:
        raise LabError(f"--metric names no metric of the workload {unasked[0]}: name one of its metrics "
                       f"({unasked[0].partition(':')[0]}.METRIC), or leave the workload out")
    booted = [arches.load(v.arch) for v in exp.variants]
    fast = {p.fast_boot_args for p in booted if not p.build_only}
    shortened = len(fast) == 1 and not initcalls and not any(lab.is_running(v) for v in exp.variants)
    return Only(tuple(only), only_words(only, fast.pop() if shortened else ""))


def _check_machines(exp: Experiment, how: modes.Mode) -> None:
    """The machine each variant asks for (vCPUs, a file system, extra devices), checked
    against the mode and the arch before any build."""
    cores = os.cpu_count() or 1
    for v in exp.variants:
        machine = arches.load(v.arch).qemu
        limit = machine.icount_max_vcpus if machine is not None else None
        vcpus = v.vcpus or 1
        if how.deterministic and limit is not None and vcpus > limit:
            raise LabError(f"{v.name}: {v.arch} under {how.name} brings up at most {limit} vCPU(s) "
                           f"(QEMU hangs starting the next; see the arch profile): use --mode wall or vcpus:{limit}")
        if not how.deterministic and vcpus > cores:
            raise LabError(f"{v.name}: more vCPUs than this host's {cores} cores: in {how.name} mode the figures "
                           f"would measure the host's oversubscription, not the guest; use --mode icount or at "
                           f"most {cores} vcpus")
        if how.deterministic and v.fs:
            raise LabError(f"{v.name} (fs:{v.fs}): a file system on a disk needs --mode wall: {modes.DISK_WALL_ONLY}")
        if v.devices:   # an arch with no extra_device refuses it
            extra_device_args(arches.load(v.arch), v.devices, v.name)


def run_experiment(exp: Experiment, store: Store, how: Plan,
                   log: Callable[[str], None] = print) -> tuple[dict[str, Any], list[str]]:
    """Returns (report, failures). Builds every variant before booting any, so a build
    error stops the experiment before guest time is spent; except in a deterministic mode,
    where a variant boots as soon as it is built, while the next one builds (its figures
    do not depend on what the host does), and the first variants' table is shown before
    the last build ends. Then the runs, round after round (boot_rounds)."""
    names = [v.name for v in exp.variants]
    if len(set(names)) != len(names):
        raise LabError(f"variant names must be unique, got {', '.join(names)}")
    records = []
    for spec in exp.variants:
        prepared = lab.explained(lab.prepare(spec, how.machine))
        for line in lab.dropped_lines(prepared):
            log(f"{spec.name}: {line}")
        for warning in resolve.base_file_warnings(prepared.source, prepared.profile, prepared.toolchain,
                                                  prepared.spec.base):
            log(f"{spec.name}: warning: {warning}")
        records.append(VariantRecord(prepared))
    # Build-only variants (no QEMU machine for their arch) get build and size rows only.
    booted = [r for r in records if not r.prepared.profile.build_only]
    to_build = [r for r in records if r.prepared.built]
    initrds: dict[str, Path] = {}
    failures: list[str] = []

    def ready(r: VariantRecord) -> None:
        """A variant that can boot: its agent, and the runs the store already has."""
        initrds[r.prepared.spec.name] = lab.agent_for(r.prepared, target_of(how, r), how.options.workloads)
        if how.reuse:
            r.runs = earlier_runs(r, store, how, initrds[r.prepared.spec.name])
            if r.runs:
                log(f"{r.prepared.spec.name}: {len(r.runs)} earlier run(s) of this kernel, measured the same way, "
                    f"taken from the store (runs {', '.join(str(o.run_id) for o in r.runs)})")

    # Timed cold builds share the host with nothing: no variant boots while one builds.
    early = (_EarlyRuns(exp, store, how, initrds, failures, log)
             if how.mode.deterministic and len(to_build) > 1 and not exp.cold_builds else None)
    try:
        with progress.task(f"{exp.name}: builds", len(to_build), "variants") as bar:
            for r in records:
                _build(r, store, log, exp.cold_builds)
                if r in to_build:
                    bar.advance()
                if early is not None and r in booted and any(_needs_build(later) for later in to_build
                                                              if records.index(later) > records.index(r)):
                    ready(r)
                    early.submit(r)
        if early is not None:
            early.finish()
    except KeyboardInterrupt as exc:
        if early is not None:
            early.stop(exc.args[0] if exc.args else "Ctrl-C")
        raise
    except BaseException:
        if early is not None:
            early.drain()   # a build failed: the run under way completes and is stored
        raise
    for r in booted:
        if r.prepared.spec.name not in initrds:
            ready(r)
    for r in records:
        if r.prepared.profile.build_only:
            log(f"{r.prepared.spec.name}: {BUILD_ONLY_NOTE}; not booted")
    boot_rounds(exp.name, booted, store, how, Threads(how.mode, how.capabilities, store, _boot(how, initrds)),
                failures, log)
    return build_report(exp.name, exp.description, records, store, how.mode.name, how.only), failures


def boot_rounds(name: str, records: list[VariantRecord], store: Store, how: Plan, scheduler: Scheduler[VariantRecord],
                failures: list[str], log: Callable[[str], None]) -> None:
    """The variants' runs, in the scheduler's counterbalanced rounds (so that a drift of the
    host affects them alike), on this machine or a Dask cluster; in wall mode past the
    minimum while some metric's median is known only to worse than +-3% (stats). Each
    outcome is recorded, a failed one in `failures` too."""
    scheduler.run(records, have=lambda r: len(r.runs),
                  record=lambda r, outcome: _outcome(r, outcome, how.mode, failures, log),
                  min_runs=how.min_runs, max_runs=how.max_runs, imprecise=lambda: _imprecise(records, store, how.mode),
                  log=log, label=f"{name}: runs")


def _needs_build(r: VariantRecord) -> bool:
    """Whether building the variant takes a build, not the cache: long enough to boot
    another variant meanwhile."""
    p = r.prepared
    return p.toolchain is not None and cached_build(build_key(p.source, p.profile, p.toolchain, p.config)) is None


def _build(r: VariantRecord, store: Store, log: Callable[[str], None], cold: bool) -> None:
    name = r.prepared.spec.name
    if r.prepared.running:
        log(f"{name}: the kernel the machine runs, Linux {r.prepared.source.version}: nothing to build")
    elif r.prepared.image is not None:
        log(f"{name}: Debian's prebuilt {r.prepared.image.identity} (Linux {r.prepared.source.version}): "
            "nothing to build")
    else:
        r.build = lab.ensure_built(r.prepared, store, log=_prefixed(log, name), cold=cold)
        how_built = "cached" if r.build.cached else f"built in {r.build.wall_s:.0f} s"
        log(f"{name}: {how_built} ({r.build.image.name} {r.build.image_bytes // 1024} KiB)")


def _outcome(r: VariantRecord, outcome: lab.RunOutcome, mode: modes.Mode, failures: list[str],
             log: Callable[[str], None]) -> None:
    r.runs.append(outcome)
    log(f"{r.prepared.spec.name}: run {len(r.runs)} ({mode.name}) {outcome.status}, "
        f"{outcome.samples} samples" + (f": {outcome.reason}" if outcome.reason else ""))
    if outcome.status != "ok":
        failures.append(f"{r.prepared.spec.name} run {outcome.run_id} {outcome.status}: "
                        f"{outcome.reason} (console log: kernellab log {outcome.run_id})")


class _EarlyRuns:
    """The runs of variants already built, in a deterministic mode, while the next one
    builds: one at a time, at the lowest CPU priority, so that the build's time barely
    changes; guest time counts instructions, so the figures do not change at all. When
    the first of them is measured, its table is shown."""

    def __init__(self, exp: Experiment, store: Store, how: Plan, initrds: dict[str, Path],
                 failures: list[str], log: Callable[[str], None]) -> None:
        self.exp, self.store, self.how, self.initrds = exp, store, how, initrds
        self.failures, self.log = failures, log
        self.pool = ThreadPoolExecutor(max_workers=1, initializer=_lowest_priority)
        self.boot = _boot(how, initrds)
        self.cancellation = lab.Cancellation()
        self.futures: list[Future[None]] = []
        self.measured: list[VariantRecord] = []

    def submit(self, r: VariantRecord) -> None:
        self.futures.append(self.pool.submit(self._runs, r))

    def _runs(self, r: VariantRecord) -> None:
        own = Store(self.store.path)   # an SQLite connection belongs to the thread that opened it
        try:
            while len(r.runs) < self.how.min_runs and self.cancellation.reason is None:
                outcome = self.boot(r, own, self.cancellation)
                _outcome(r, outcome, self.how.mode, self.failures, self.log)
            self.measured.append(r)
            if len(self.measured) == 1:
                report = build_report(f"{self.exp.name}: first look, while the other variants build",
                                      self.exp.description, [r], own, self.how.mode.name, self.how.only)
                self.log("first look (" + r.prepared.spec.name + " measured; the full table follows):\n"
                         + render(report, "table", screen=Screen.of(sys.stderr)))   # the log's screen
        finally:
            own.close()

    def finish(self) -> None:
        """Waits for the run under way; variants not yet started boot with the rest."""
        self.drain()
        for f in self.futures:
            if not f.cancelled():
                f.result()   # a run's LabError (an agent that does not match) stops the experiment

    def drain(self) -> None:
        """Waits for the run under way, and starts no other."""
        for f in self.futures:
            f.cancel()
        self.pool.shutdown(wait=True)

    def stop(self, reason: str) -> None:
        """Ctrl-C during a build: the run under way ends as interrupted, keeping what it measured."""
        self.cancellation.cancel(reason)
        self.drain()


def _lowest_priority() -> None:
    # Linux's nice value belongs to the thread, and QEMU, started from it, inherits it.
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def earlier_runs(r: VariantRecord, store: Store, how: Plan, initrd: Path) -> list[lab.RunOutcome]:
    """Finished runs of the same kernel, measured the same way on the same target, up to the cap."""
    boot = lab.bootable(r.prepared, r.build)   # a prebuilt image's runs are filed under its package
    if boot is None:
        return []
    ids = lab.on_target(store, store.finished_runs(boot.key, how.mode.name, how.options.key(initrd, r.prepared.spec)),
                        how.target_name)[:how.max_runs]
    return [lab.RunOutcome(i, "ok", "", len(store.run_samples(i))) for i in ids]


def _prefixed(log: Callable[[str], None], name: str) -> Callable[[str], None]:
    """`log`, each message prefixed with a variant's name."""
    return lambda message: log(f"{name}: {message}")


def _boot(how: Plan, initrds: dict[str, Path]) -> BootOne[VariantRecord]:
    """How one run of a variant boots, with the agent it took once (initrds)."""
    def boot(r: VariantRecord, on_store: Store, cancellation: lab.Cancellation | None) -> lab.RunOutcome:
        return lab.run(r.prepared, r.build, on_store, how.options, initrds[r.prepared.spec.name], target_of(how, r),
                       cancellation)
    return boot


def target_of(how: Plan, r: VariantRecord) -> Target:
    """Where a run of the variant goes: the plan's target, else QEMU TCG."""
    if how.target is not None:
        # A prebuilt image is given as a build: the placement boots a kernel image either way.
        return how.target(r.prepared, lab.bootable(r.prepared, r.build))
    return lab.default_target(r.prepared, r.build, how.options)


def _imprecise(records: list[VariantRecord], store: Store, mode: modes.Mode) -> list[str]:
    """The metrics whose median is not yet known well enough to stop (stats)."""
    by_metric: dict[str, dict[str, list[float]]] = {}
    for r in records:
        for metric, (unit, per_run) in samples(r, store).items():
            info = describe(metric, unit)
            if info.clock == "guest" and info.source == "agent" and info.valid_in(mode.name):
                by_metric.setdefault(metric, {})[r.prepared.spec.name] = run_medians(per_run)
    return imprecise_metrics(by_metric)
