"""One option at a time: flip each option from a baseline and rank the flips by their
effect on the chosen metrics (the method of the study in 003_00a8a1bb4e5d5f26.txt).

Flips build incrementally in the shared build tree and kbuild recompiles only what
depends on the flipped option; ccache, keyed on the preprocessed source, makes a
configuration that comes back cheap. Some options sit in headers nearly every file
includes, so the flips run cheapest first, by the number of objects in the build tree
a change of the option, or of an option olddefconfig brings along with it, recompiles
(kernellab.blast).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import modes, progress
from ..config.dotconfig import differing
from ..errors import LabError
from ..guest import vulnerabilities
from ..guest.workloads import Provenance, provenances
from ..knowledge import flaws_by_option
from ..report.model import NoiseFloor, judge_probes
from ..store import Store
from ..workloads import Instance
from . import cluster_probe, executor, lab
from .placement import Placement
from .probe import Probe, Prober
from .spec import VariantSpec

NO_FLOOR = NoiseFloor()   # every exact difference counts


@dataclass
class Flip:
    option: str
    value: str
    rebuild_objects: int          # objects a change of it, or of what it brings along, recompiles (blast radius)
    also_changed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    # metric -> its comparison with the baseline and, under "verdict", whether the change
    # counts (report.model's rule, the one every compare cell follows)
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    build_s: float = 0.0
    built: bool = False
    copy_s: float = 0.0           # the copy of a build tree the build needed first (kernellab.treepool)
    flaws: list[str] = field(default_factory=list)          # the CPU flaws the option mitigates
    not_affected: list[str] = field(default_factory=list)   # of those, the ones no run's CPU had


@dataclass
class SweepResult:
    mode: str
    metrics: list[str]
    baseline: dict[str, float]
    flips: list[Flip]
    builds: int
    boots: int
    wall_s: float
    workloads: list[Provenance] = field(default_factory=list)   # what the workload metrics' figures come from

    def ranked(self, metric: str) -> list[Flip]:
        def size(f: Flip) -> float:
            pct = f.effects.get(metric, {}).get("delta_pct")
            return -abs(pct) if pct is not None else 0.0
        return sorted(self.flips, key=size)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "metrics": self.metrics, "baseline": self.baseline,
                "builds": self.builds, "boots": self.boots, "wall_s": self.wall_s,
                "flips": [f.__dict__ for f in self.flips],
                **({"workloads": [w.to_dict() for w in self.workloads]} if self.workloads else {})}


def flips_from_toggles(base: dict[str, str], toggles: list[str]) -> dict[str, str]:
    out = {}
    for raw in toggles:
        name = raw if raw.startswith("CONFIG_") else f"CONFIG_{raw}"
        current = base.get(name, "n")
        if current not in ("y", "m", "n"):
            raise LabError(f"--toggle {name}: not a bool/tristate option (it is {current}); "
                           "use a fragment to set it")
        out[name] = "n" if current in ("y", "m") else "y"
    return out


def sweep(store: Store, base: VariantSpec, flips: dict[str, str], metrics: list[str],
          mode: modes.Mode, runs: int | None = None,
          log: Callable[[str], None] = print, cluster: executor.Cluster | None = None,
          placement: Placement | None = None, workloads: tuple[Instance, ...] = (),
          command: str = "sweep", measured_only: bool = False, floor: NoiseFloor = NO_FLOOR) -> SweepResult:
    """Each flip on its own from `base`; on a Dask cluster the flips build and boot at once.
    `floor`: the change below which a flip's effect is no difference (model.verdict), as in
    every other view of the same figures.
    `workloads`: real programs each probe runs, for the WORKLOAD.METRIC names in `metrics`.
    `command`: whose probes these are, for a target's refusal. `measured_only`: `metrics`
    are candidates, those the baseline's kernel does not measure left out (the noise
    floor's: its baseline's one boot finds them; every probe asks all of them, alike)."""
    start = time.monotonic()
    if runs is not None and runs < 1:
        raise LabError(f"--runs must be at least 1, got {runs}")
    prepared = placement.prepare(base) if placement is not None else lab.prepare(base)   # `running`: the target's
    if prepared.toolchain is None:
        raise LabError("sweep flips options of a kernel it builds: give a base other than the running kernel "
                       "(running+... builds the running kernel's config)")
    prober = cluster_probe.prober(store, base, prepared.config.text, metrics, mode, cluster, log, placement, command,
                                  workloads)
    prober.tolerant = measured_only
    runs = runs or mode.runs
    baseline = prober.probe("baseline", {}, runs)
    if measured_only:
        metrics = prober.keep_measured(baseline)
    costs = cheapest_first(prober, prepared.config.values, flips)
    asks = {f"flip:{o}={flips[o]}": o for o in costs}
    results = []
    run_ids = list(baseline.run_ids)
    with progress.task("sweep", len(costs), "options flipped") as bar:
        def flipped(probe: Probe) -> None:
            option = asks[probe.label]
            flip = measured_flip(Flip(option, flips[option], costs[option]), prepared.config.values, baseline,
                                 probe, store, base, mode.name, floor)
            log(f"flip {option}={flips[option]}: " + (f"built in {flip.build_s + flip.copy_s:.0f} s" if flip.built
                                                      else "cached")
                + f" (~{flip.rebuild_objects} objects depend on it and what it brings along), "
                + f"{probe.boots} boot(s)")
            results.append(flip)
            run_ids.extend(probe.run_ids)
            bar.advance()

        prober.probe_all([(label, {option: flips[option]}) for label, option in asks.items()], runs, done=flipped)
    return SweepResult(mode.name, metrics, {m: baseline.value(m) for m in metrics}, results,
                       prober.builds, prober.boots, time.monotonic() - start,
                       provenances(store.run_workloads(r) for r in run_ids))


def cheapest_first(prober: Prober, base: dict[str, str], flips: dict[str, str]) -> dict[str, int]:
    """Each flip's blast radius, cheapest first (then by name): the order a sweep flips them
    in. The radius is the widest of the option and of what olddefconfig brings along with
    it (FTRACE=y is named by no object, but the TRACING it brings by 1,223 of x86_64
    lab-minimal's 1,349: ordered first on its own radius, it cost a cold build)."""
    brought = {o: {o, *differing(base, prober.resolve({o: v}))} for o, v in flips.items()}
    radius = prober.radius(sorted(set().union(*brought.values()))).recompiles
    costs = {o: max(radius.get(c, 0) for c in changed) for o, changed in brought.items()}
    return {o: costs[o] for o in sorted(costs, key=lambda o: (costs[o], o))}


def measured_flip(flip: Flip, base: dict[str, str], baseline: Probe, probe: Probe, store: Store,
                  spec: VariantSpec, mode: str, floor: NoiseFloor = NO_FLOOR) -> Flip:
    """`flip` as its probe measured it against the baseline's (both on the base `spec`, whose
    resolved config is `base`): what the kernel really built (the flip, what came with it,
    what it refused), the CPU flaws it touches and those no run's CPU had, and its effects
    by the verdict every compare cell follows."""
    if probe.config.get(flip.option, "n") != flip.value:
        flip.dropped = [f"asked {d['option']}={d['asked']}, got {d['got']}" for d in probe.dropped]
    flip.also_changed = [f"{o}={v}" for o, v in differing(base, probe.config).items() if o != flip.option]
    flip.build_s, flip.built = probe.build.wall_s, not probe.build.cached
    flip.copy_s = probe.tree.copy_s if probe.tree else 0.0
    # What it brings along counts: RETHUNK=n takes the ITS thunks, forced on at boot, with it.
    touched = [flip.option, *(c.split("=", 1)[0] for c in flip.also_changed)]
    mitigates = flaws_by_option()
    flip.flaws = list(dict.fromkeys([*(f for o in touched for f in mitigates.get(o, ())),
                                     *vulnerabilities.built_by(touched)]))
    flip.not_affected = vulnerabilities.inactive(
        [store.run_vulnerabilities(r) for r in baseline.run_ids + probe.run_ids], flip.flaws, spec.boot_words())
    flip.effects = judge_probes(baseline.runs, probe.runs, mode, floor)
    return flip
