"""Measure one configuration for attribution (sweep, bisect): resolve it on a base,
build it in the pool's build tree nearest to it (kernellab.treepool), boot it for the
chosen metrics, or reuse all of that from the store when the same kernel was already
measured the same way."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from .. import arches, blast, modes, paths, treepool
from ..build import FIGURE_METRICS, Build, build_tree
from ..config import kconfig
from ..errors import LabError
from ..guest import workloads as guest_workloads
from ..metrics.catalog import check_known, describe, only_words
from ..stats import ALPHA, compare_samples
from ..store import Store
from ..targets import Capabilities, Target
from ..workloads import Instance
from . import lab
from .placement import Placement, check_workloads
from .scheduler import Scheduler, Threads
from .spec import VariantSpec


@dataclass
class Probe:
    label: str
    requested: dict[str, str]     # options set on top of the base config
    config: dict[str, str]        # the resolved config
    dropped: list[dict[str, str]]  # requests olddefconfig did not keep
    build: Build
    runs: dict[str, list[float]]  # metric -> one value (median of repeats) per run
    boots: int = 0                # boots this probe cost now (reused runs cost none)
    run_ids: list[int] = field(default_factory=list)   # the store's runs behind `runs`
    tree: treepool.Choice | None = None   # where it was built (None: not built now)

    def value(self, metric: str) -> float:
        return statistics.median(self.runs[metric])


@dataclass(frozen=True)
class Due:
    """A probe to bring up to its runs: its variant, and the agent that measures it."""
    probe: Probe
    prepared: lab.Prepared
    agent: Path


@dataclass
class Prober:
    """Builds and boots probes; counts the builds and boots it really performed."""
    store: Store
    base: VariantSpec             # source, arch, boot parameters and sysctls of every probe
    base_text: str                # the resolved config every probe starts from
    metrics: list[str]
    mode: modes.Mode = field(default_factory=modes.default)
    timeout_s: float = lab.DEFAULT_TIMEOUT_S
    tolerant: bool = False        # a metric the kernel does not measure is left empty, not an error
    builds: int = 0
    boots: int = 0
    probes: list[Probe] = field(default_factory=list)
    # Where probes boot: the command's --target (None: QEMU TCG), checked for the probes of
    # `command` (sweep, bisect, ...) before anything is built.
    placement: Placement | None = None
    command: str = "sweep"
    # Real programs every probe's run measures too (--workload; compare.resolve_workloads):
    # their WORKLOAD.METRIC figures are metrics a search follows like the agent's.
    workloads: tuple[Instance, ...] = ()

    def __post_init__(self) -> None:
        check_known(self.metrics)
        check_workload_metrics(self.metrics, self.workloads, self.command)
        check_workloads(self.placement, self.workloads, self.mode.name, [self.base.arch])
        self.place: Callable[[lab.Prepared, Build | None, lab.RunOptions], Target] | None = (
            self.placement.for_probes(self.command, self.mode.name, self.base) if self.placement is not None
            else None)
        self.capabilities: Capabilities = (self.placement.site.capabilities if self.placement is not None
                                           else lab.default_site().capabilities)
        self.base_path = base_file(self.base_text)
        self.needs_boot = any(m not in FIGURE_METRICS for m in self.metrics)
        # Only the chosen metrics: a probe boot costs seconds, not the whole suite.
        words = only_words(self.metrics, arches.load(self.base.arch).fast_boot_args)
        self.options = lab.RunOptions(self.mode.name, self.timeout_s, cmdline_extra=words, workloads=self.workloads)
        self._pool: treepool.TreePool | None = None

    @cached_property
    def scheduler(self) -> Scheduler[Due]:
        """Probes boot on this machine (one probe at a time asks for its runs)."""
        def boot(d: Due, store: Store, cancellation: lab.Cancellation | None) -> lab.RunOutcome:
            return lab.run(d.prepared, d.probe.build, store, self.options, d.agent,
                           self._target(d.prepared, d.probe.build), cancellation)
        return Threads(self.mode, self.capabilities, self.store, boot)

    def _spec(self, label: str, settings: dict[str, str]) -> VariantSpec:
        options = [f"{name}={value}" for name, value in sorted(settings.items())]
        # Everything of the base but its config: the compiler, boot words and machine too.
        return replace(self.base, name=f"probe:{label}", base=str(self.base_path), fragments=[], options=options)

    def resolve(self, settings: dict[str, str]) -> dict[str, str]:
        """The config a probe of these settings would build, resolved, nothing built."""
        return lab.prepare(self._spec("resolve", settings)).config.values

    def probe(self, label: str, settings: dict[str, str], runs: int = 1) -> Probe:
        return self.probe_all([(label, settings)], runs)[0]

    def probe_all(self, asks: list[tuple[str, dict[str, str]]], runs: int = 1,
                  done: Callable[[Probe], None] | None = None) -> list[Probe]:
        """Each (label, settings) built and booted `runs` times, in the order given: probes
        build one after another in the shared build tree, so the order is what they cost.
        `done` hears of each probe as it is complete."""
        out = []
        for label, settings in asks:
            prepared = lab.prepare(self._spec(label, settings))
            chosen: list[treepool.Choice] = []
            probe = self._new(label, settings, prepared, self._build(prepared, chosen))
            probe.tree = chosen[0] if chosen else None
            if self.needs_boot:
                self._complete([(probe, prepared)], runs)
            out.append(probe)
            if done is not None:
                done(probe)
        return out

    def _new(self, label: str, settings: dict[str, str], prepared: lab.Prepared, build: Build) -> Probe:
        self.builds += not build.cached
        probe = Probe(label, dict(settings), prepared.config.values, prepared.config.dropped, build,
                      {m: [] for m in self.metrics})
        self._add_build_metrics(probe)
        self.probes.append(probe)
        return probe

    def _build(self, prepared: lab.Prepared, chosen: list[treepool.Choice]) -> Build:
        """Built in the pool's nearest tree; `chosen` hears which, if it is built now."""
        def where() -> Path:
            chosen.append(self.pool(prepared).choose(prepared.config.values))
            return chosen[-1].tree
        return lab.ensure_built(prepared, self.store, log=None, where=where)

    def pool(self, prepared: lab.Prepared) -> treepool.TreePool:
        if self._pool is None:
            assert prepared.toolchain is not None   # a probe is a kernel kernellab builds
            home = build_tree(prepared.source, prepared.profile, prepared.toolchain)
            self._pool = treepool.TreePool(home, prepared.source.tree, prepared.profile.kernel_arch)
        return self._pool

    def _target(self, prepared: lab.Prepared, build: Build | None) -> Target:
        """Where a probe boots: the command's --target, else QEMU TCG."""
        if self.place is not None:
            return self.place(prepared, build, self.options)
        return lab.default_target(prepared, build, self.options)

    def radius(self, options: list[str]) -> blast.Radius:
        return radius(self._spec("radius", {}), options)

    def needs(self, options: list[str]) -> dict[str, set[str]]:
        """Which of `options` each one's Kconfig dependencies name (config.kconfig.needs)."""
        prepared = lab.prepare(self._spec("needs", {}))
        assert prepared.toolchain is not None   # a probe is a kernel kernellab builds
        return kconfig.needs(kconfig.open_tree(prepared.source, prepared.profile, prepared.toolchain), options)

    def keep_measured(self, probe: Probe) -> list[str]:
        """Only the metrics `probe` measured from now on, each then required of every probe
        (the boots still ask all that were asked, so that every probe boots alike): those."""
        self.metrics = [m for m in self.metrics if probe.runs[m]]
        probe.runs = {m: probe.runs[m] for m in self.metrics}
        self.tolerant = False
        return self.metrics

    def more_runs(self, probe: Probe, runs: int = 1) -> None:
        """Bring the probe up to `runs` runs, reusing matching runs already in the store."""
        self._complete([(probe, lab.prepare(self._spec(probe.label, probe.requested)))], runs)

    def _complete(self, probes: list[tuple[Probe, lab.Prepared]], runs: int) -> None:
        """Each probe up to `runs` runs: equal runs from the store first, then boots, in the
        scheduler's rounds; a failed boot stops the boots after it (a probe must measure)."""
        due = [self._due(probe, prepared, runs) for probe, prepared in probes]
        self.scheduler.run(due, have=lambda d: len(d.probe.run_ids), record=self._booted, min_runs=runs)

    def _due(self, probe: Probe, prepared: lab.Prepared, runs: int) -> Due:
        """The probe with the agent its target takes (as compare's variants take theirs:
        an initramfs, or the program itself), and its equal runs from the store taken."""
        target = self._target(prepared, probe.build)
        agent = lab.agent_for(prepared, target, self.workloads)
        earlier = self.store.finished_runs(probe.build.key, self.mode.name, self.options.key(agent, prepared.spec))
        # A probe's run is reused only where it was measured (any QEMU run, without --target).
        reusable = lab.on_target(self.store, earlier, target.name if self.place is not None else None)
        for run_id in reusable[len(probe.run_ids):runs]:
            self._add_run(probe, run_id)
        return Due(probe, prepared, agent)

    def _booted(self, d: Due, outcome: lab.RunOutcome) -> None:
        self.boots += 1
        d.probe.boots += 1
        if outcome.status != "ok":
            raise LabError(f"probe {d.probe.label} run {outcome.run_id} {outcome.status}: "
                           f"{outcome.reason} (console log: kernellab log {outcome.run_id})")
        self._add_run(d.probe, outcome.run_id)

    def _add_build_metrics(self, probe: Probe) -> None:
        figures = probe.build.figures()
        for m in self.metrics:
            if m in figures:
                probe.runs[m].append(figures[m][1])

    def _add_run(self, probe: Probe, run_id: int) -> None:
        probe.run_ids.append(run_id)
        by_metric = self.store.run_metrics(run_id)
        for m in self.metrics:
            if m in FIGURE_METRICS:
                continue
            if m not in by_metric:
                if self.tolerant:
                    continue
                why = self.store.run_unavailable(run_id).get(m)
                raise LabError(f"probe {probe.label}: run {run_id} measured no {m} "
                               + (f"({why}; see `kernellab log {run_id}`)" if why else
                                  f"(not available in this kernel? see `kernellab log {run_id}`)"))
            probe.runs[m].append(statistics.median(by_metric[m]))


def check_workload_metrics(metrics: list[str], workloads: tuple[Instance, ...], what: str) -> list[str]:
    """A workload's metric is measured only with its workload (a metric registered by another,
    in this process, is not): the metrics, or one line before anything builds."""
    given = {guest_workloads.metric_name(inst, m) for inst in workloads for m in inst.metrics()}
    missing = [m for m in metrics if describe(m, "").source == "workload" and m not in given]
    if missing:
        raise LabError(f"{what}: {', '.join(missing)} is a workload's metric that no --workload given yields: "
                       "give that workload (with the parameters its name needs)")
    return metrics


def base_file(text: str) -> Path:
    """A config's text as a file in this machine's cache, named by its content: the base
    every probe starts from (a probe's variant names its base by path), or on a Dask worker
    a file the client's variant names."""
    path = paths.cache_file("attribution", f"base-{hashlib.sha256(text.encode()).hexdigest()[:16]}.config")
    if not path.exists():
        path.write_text(text)
    return path


def radius(spec: VariantSpec, options: list[str]) -> blast.Radius:
    """The blast radius of each option, from the builds this machine's shared tree holds."""
    prepared = lab.prepare(spec)
    assert prepared.toolchain is not None   # a probe is a kernel kernellab builds
    return blast.measure(build_tree(prepared.source, prepared.profile, prepared.toolchain),
                         prepared.source.tree, prepared.profile.kernel_arch, options)


SAME, DIFFERENT, UNKNOWN = "same", "different", "not yet known"


@dataclass(frozen=True)
class Verdict:
    """Do two probes differ on a metric by at least the smallest effect of interest?"""
    kind: str                       # SAME, DIFFERENT or UNKNOWN
    reason: str
    more_could_decide: bool = False  # UNKNOWN: would more runs (up to the cap) likely settle it


def verdict(low: list[float], high: list[float], better: str, mode: modes.Mode, min_pct: float, max_runs: int,
            alpha: float = ALPHA) -> Verdict:
    """Exact in a deterministic mode. In wall mode, in the manner of Chromium's Pinpoint:
    different when the change is significant and at least min_pct; same when the 95%
    interval of the change lies within +-min_pct (no effect of interest is left possible);
    otherwise not yet known, and more runs are worth it only while the interval, shrinking
    as 1/sqrt(runs), could still settle it either way by the cap."""
    ref = statistics.median(low)
    pct = 100 * (statistics.median(high) - ref) / abs(ref) if ref else math.inf
    if mode.deterministic:
        kind = DIFFERENT if abs(pct) >= min_pct else SAME
        return Verdict(kind, f"exact: {pct:+.2f}% against a threshold of {min_pct:g}%")
    n = min(len(low), len(high))
    c = compare_samples(low, high, better)
    if not c.testable or c.ci_low_pct is None or c.ci_high_pct is None or c.p_value is None:
        return Verdict(UNKNOWN, f"{n} run(s) each cannot be tested", n < max_runs)
    lo, hi = c.ci_low_pct, c.ci_high_pct
    interval = f"{pct:+.1f}%, 95% interval [{lo:+.1f}, {hi:+.1f}]%, p={c.p_value:.3g}"
    if c.p_value < alpha and abs(pct) >= min_pct:
        return Verdict(DIFFERENT, f"significant: {interval}")
    if -min_pct < lo and hi < min_pct:
        return Verdict(SAME, f"no change of {min_pct:g}% or more is left possible: {interval}")
    # Power for the smallest effect of interest, not for the observed one (itself noise):
    # by the cap the interval's half-width, shrinking as 1/sqrt(runs), must be narrower than
    # min_pct, or no number of runs up to it could tell such an effect from none.
    half = (hi - lo) / 2 * math.sqrt(n / max_runs)
    could = n < max_runs and half < min_pct
    return Verdict(UNKNOWN, f"{interval} after {n} run(s) each", could)
