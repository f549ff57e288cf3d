"""The noise floor of each metric: how far code that never runs on the metric's path moves
it, through memory layout alone.

In icount mode reruns are bit-identical, yet adding an unrelated table or library moves some
metrics by a few percent (fork+exit moved +2% to +7% with NLS code pages and crypto modules):
where code and data land changes which cache lines and pages they share, and the emulated
TLB and QEMU's translation blocks see it. That is not an effect of the option, so a change
smaller than it is said to be "within the floor". The floor of a metric is the largest
change any of the neutral options (metrics/neutral.toml) causes, flipped one at a time
from a base; it is kept per source, arch, compiler and base, and every report, gate, sweep
and bisect of such kernels reads it.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__, datafile, modes, paths
from ..errors import LabError
from ..guest import workloads as guest_workloads
from ..metrics.catalog import catalog
from ..report import kinds
from ..report.model import NoiseFloor
from ..report.noisefloor import NOISE_FLOOR
from ..store import Store
from ..workloads import Instance
from . import executor, lab, sweep
from .placement import Placement
from .spec import VariantSpec

MIN_FLIPS = 8


@dataclass(frozen=True)
class Neutral:
    name: str
    why: str


@dataclass(frozen=True)
class _NeutralFile:
    option: list[Neutral]


def neutral_options() -> list[Neutral]:
    path = resources.files("kernellab.metrics") / "neutral.toml"
    return datafile.load(_NeutralFile, datafile.read_toml(path, "metrics/neutral.toml"), "metrics/neutral.toml").option


def floor_metrics(mode: modes.Mode) -> list[str]:
    """What the floor is measured for: every metric a boot measures and the mode can
    believe (sizes and build times are exact facts of the build, not layout noise; the
    opt-in loads run only when asked); a workload's only when it runs (workload_metrics)."""
    return [m.name for m in catalog().values()
            if m.clock in ("guest", "count") and m.valid_in(mode.name) and not m.opt_in
            and not m.name.startswith("size.") and m.source != "workload"]


def workload_metrics(workloads: tuple[Instance, ...], mode: modes.Mode) -> list[str]:
    """The metrics of the workloads a floor's runs measure too, those the mode can believe."""
    return [guest_workloads.metric_name(inst, m) for inst in workloads for m in inst.metrics()
            if mode.name in m.modes]


def key(p: lab.Prepared) -> str:
    """Whose floor: one source, arch, compiler and base config."""
    compiler = p.toolchain.id if p.toolchain else "none"
    base = p.spec.base
    if "/" in base or Path(base).is_file():
        # A .config given by path: its name and what it holds, never the path's slashes.
        digest = hashlib.sha256(Path(base).expanduser().read_bytes()).hexdigest()[:12]
        base = f"{Path(base).name}-{digest}"
    return f"{p.source.id}-{p.profile.name}-{compiler}-{base}"


def path_for(p: lab.Prepared) -> Path:
    return paths.cache_dir("floors") / f"{key(p)}.json"


@dataclass
class Floor:
    base: str
    mode: str
    pct: dict[str, float]            # metric -> the largest change of any neutral flip, %
    by: dict[str, str]               # metric -> the option that caused it
    flips: list[str]                 # the options flipped (each really changed)
    measured: str                    # when, with what

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "mode": self.mode, "pct": self.pct, "by": self.by, "flips": self.flips,
                "measured": self.measured}

    @classmethod
    def from_dict(cls, floor: dict[str, Any]) -> Floor:
        """A floor its kind read (report/kinds.py: checked against noise-floor-schema.json)."""
        return cls(**{name: floor[name] for name in cls.__dataclass_fields__})

    def noise_floor(self) -> NoiseFloor:
        return NoiseFloor(self.pct, f"measured: {self.measured}")


def measure(store: Store, base: VariantSpec, mode: modes.Mode, options: list[str] | None = None,
            log: Callable[[str], None] = print, placement: Placement | None = None,
            workloads: tuple[Instance, ...] = (), cluster: executor.Cluster | None = None) -> Floor:
    """`workloads`: real programs every run measures too, whose metrics get a floor as well
    (their metrics registered: compare.resolve_workloads). `placement`: where every probe
    boots, the baseline and each flip alike (None: QEMU TCG); a floor of two machines
    would be no floor of either. `cluster`: the probes build and boot on its workers, as a
    sweep's do."""
    if not mode.deterministic:
        exact = [m.name for m in modes.deterministic()]
        raise LabError(f"the noise floor is measured in a deterministic mode ({', '.join(exact)}): "
                       f"in {mode.name} mode the statistics already say what is noise")
    names = [n if n.startswith("CONFIG_") else f"CONFIG_{n}" for n in options or [o.name for o in neutral_options()]]
    if len(names) < MIN_FLIPS:
        raise LabError(f"a noise floor needs at least {MIN_FLIPS} neutral options, got {len(names)}")
    if placement is not None:   # a target that cannot boot its probes: one line, before any config is resolved
        placement.for_probes("noise-floor", mode.name, base)
    prepared = placement.prepare(base) if placement is not None else lab.prepare(base)   # `running`: the target's
    # An option the base's config does not list is unknown to the tree or has an unmet
    # dependency there: refused before any build.
    absent = [n for n in names if n not in prepared.config.values]
    names = [n for n in names if n not in absent]
    refused = [f"{n} (not in {base.name}'s config: unknown here, or a dependency is unmet)" for n in absent]
    if len(names) < MIN_FLIPS:
        raise LabError(f"only {len(names)} of the neutral options could be set on {base.name} "
                       f"(refused: {', '.join(refused)}); a floor needs {MIN_FLIPS}")
    # Every metric this kernel could measure is asked; the sweep's one boot of the base
    # finds those it does measure, and the floor is theirs.
    candidates = floor_metrics(mode) + workload_metrics(workloads, mode)
    result = sweep.sweep(store, base, {n: "y" for n in names}, candidates, mode, log=log, cluster=cluster,
                         placement=placement, workloads=workloads, command="noise-floor", measured_only=True)
    metrics = result.metrics
    applied = [f for f in result.flips if not f.dropped]
    refused += [f"{f.option} ({'; '.join(f.dropped)})" for f in result.flips if f.dropped]
    if len(applied) < MIN_FLIPS:
        raise LabError(f"only {len(applied)} of the neutral options could be set on {base.name} "
                       f"(refused: {', '.join(refused)}); a floor needs {MIN_FLIPS}")
    pct: dict[str, float] = {}
    by: dict[str, str] = {}
    for m in metrics:
        moves = [(abs(f.effects[m]["delta_pct"]), f.option) for f in applied
                 if f.effects.get(m, {}).get("delta_pct") is not None]
        if moves:
            pct[m], by[m] = max(moves)
    when = datetime.date.today().isoformat()
    return Floor(base.name, mode.name, pct, by, [f.option for f in applied],
                 f"{len(applied)} neutral options flipped on {base.name} in {mode.name} mode, kernellab {__version__}, "
                 f"{when}" + (f"; refused: {', '.join(refused)}" if refused else ""))


def save(p: lab.Prepared, floor: Floor) -> Path:
    out = path_for(p)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(NOISE_FLOOR.dump(floor.to_dict()))
    tmp.replace(out)
    return out


def load_for(p: lab.Prepared) -> Floor | None:
    """The floor measured for this variant's source, arch, compiler and base, if any."""
    path = path_for(p)
    if not path.exists():
        return None
    return Floor.from_dict(kinds.load(path, expect=NOISE_FLOOR.name)[1])

