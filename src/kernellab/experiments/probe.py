"""Measure one configuration for attribution (sweep, bisect): resolve it on a base,
build it in the shared build tree, boot it for the chosen metrics, or reuse all of that
from the store when the same kernel was already measured the same way."""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass, field, replace

from .. import arches, modes, paths
from ..build import FIGURE_METRICS, Build
from ..errors import LabError
from ..metrics.catalog import describe
from ..stats import compare_samples
from ..store import Store
from . import lab
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

    def value(self, metric: str) -> float:
        return statistics.median(self.runs[metric])


@dataclass
class Prober:
    """Builds and boots probes; counts the builds and boots it really performed."""
    store: Store
    base: VariantSpec             # source, arch, boot parameters and sysctls of every probe
    base_text: str                # the resolved config every probe starts from
    metrics: list[str]
    mode: str = modes.DEFAULT
    timeout_s: float = lab.DEFAULT_TIMEOUT_S
    tolerant: bool = False        # a metric the kernel does not measure is left empty, not an error
    builds: int = 0
    boots: int = 0
    probes: list[Probe] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = [m for m in self.metrics if describe(m, "").group == "other"]
        if unknown:
            raise LabError(f"unknown metric {', '.join(unknown)}: see src/kernellab/metrics/metrics.toml")
        digest = hashlib.sha256(self.base_text.encode()).hexdigest()[:16]
        self.base_path = paths.cache_dir("attribution") / f"base-{digest}.config"
        if not self.base_path.exists():
            self.base_path.write_text(self.base_text)
        agent = [m for m in self.metrics if describe(m, "").source == "agent"]
        self.needs_boot = any(m not in FIGURE_METRICS for m in self.metrics)
        # Only the chosen metrics: a probe boot costs seconds, not the whole suite.
        words = [f"KL_ONLY={','.join(agent) or 'meminfo'}"]
        if not any(describe(m, "").group in ("timer", "boot", "initcalls") for m in self.metrics):
            words.append(arches.load(self.base.arch).fast_boot_args)
        self.options = lab.RunOptions(self.mode, self.timeout_s, cmdline_extra=" ".join(w for w in words if w))

    def _spec(self, label: str, settings: dict[str, str]) -> VariantSpec:
        options = [f"{name}={value}" for name, value in sorted(settings.items())]
        # Everything of the base but its config: the compiler, boot words and machine too.
        return replace(self.base, name=f"probe:{label}", base=str(self.base_path), fragments=[], options=options)

    def probe(self, label: str, settings: dict[str, str], runs: int = 1) -> Probe:
        prepared = lab.prepare(self._spec(label, settings))
        build = lab.ensure_built(prepared, self.store, log=None)
        self.builds += not build.cached
        result = Probe(label, dict(settings), prepared.config.values, prepared.config.dropped, build,
                       {m: [] for m in self.metrics})
        self._add_build_metrics(result)
        if self.needs_boot:
            self.more_runs(result, prepared, runs)
        self.probes.append(result)
        return result

    def more_runs(self, probe: Probe, prepared: lab.Prepared | None = None, runs: int = 1) -> None:
        """Bring the probe up to `runs` runs, reusing matching runs already in the store."""
        prepared = prepared or lab.prepare(self._spec(probe.label, probe.requested))
        initrd = lab.initramfs_for(prepared)
        have = len(next(iter(probe.runs.values()))) if self.metrics else 0
        reusable = self.store.finished_runs(probe.build.key, self.mode, self.options.key(initrd, prepared.spec))
        while have < runs:
            if have < len(reusable):
                run_id = reusable[have]
            else:
                outcome = lab.run(prepared, probe.build, self.store, self.options, initrd)
                self.boots += 1
                probe.boots += 1
                if outcome.status != "ok":
                    raise LabError(f"probe {probe.label} run {outcome.run_id} {outcome.status}: "
                                   f"{outcome.reason} (console log: kernellab log {outcome.run_id})")
                run_id = outcome.run_id
            self._add_run(probe, run_id)
            have += 1

    def _add_build_metrics(self, probe: Probe) -> None:
        figures = probe.build.figures()
        for m in self.metrics:
            if m in figures:
                probe.runs[m].append(figures[m][1])

    def _add_run(self, probe: Probe, run_id: int) -> None:
        by_metric = self.store.run_metrics(run_id)
        for m in self.metrics:
            if m in FIGURE_METRICS:
                continue
            if m not in by_metric:
                if self.tolerant:
                    continue
                raise LabError(f"probe {probe.label}: run {run_id} measured no {m} "
                               f"(not available in this kernel? see `kernellab log {run_id}`)")
            probe.runs[m].append(statistics.median(by_metric[m]))


def differing(good: dict[str, str], bad: dict[str, str]) -> dict[str, str]:
    """Options whose value differs between two resolved configs -> BAD's value
    (an option a config does not mention counts as "n")."""
    return {name: bad.get(name, "n") for name in sorted(set(good) | set(bad))
            if good.get(name, "n") != bad.get(name, "n")}


def distinguishable(low: list[float], high: list[float], better: str, mode: str,
                    min_pct: float, alpha: float = 0.05) -> bool | None:
    """Does `high` differ from `low` by at least min_pct % of low? True / False, or None
    when wall-mode noise does not let us say yet (another run would help)."""
    ref = statistics.median(low)
    delta = statistics.median(high) - ref
    big = ref != 0 and abs(delta) / abs(ref) * 100 >= min_pct
    if modes.get(mode).deterministic:
        return big  # the difference is exact
    c = compare_samples(low, high, better)
    if not c.testable:
        return None
    assert c.p_value is not None   # a testable comparison has its p-value
    if c.p_value < alpha:
        return big
    return False if not big else None
