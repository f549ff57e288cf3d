"""`kernellab profile A B --metric M`: build each variant with CONFIG_PROFILING, boot it
with the tick profiler on while the agent runs the metric, and set the two kernels'
functions side by side (kernellab.profiler). A finished run of the same kernel and
command line is taken from the store, not booted again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from .. import modes, profiler
from ..errors import LabError
from ..metrics.catalog import describe
from ..store import Store
from . import lab
from .placement import Placement
from .spec import VariantSpec

PROFILING = "CONFIG_PROFILING=y"
# A tick lands every 4 ms (HZ=250): 50 ms samples give each repeat about a dozen ticks.
TARGET_US = 50_000


@dataclass
class Profiled:
    name: str
    run_id: int
    reused: bool
    functions: Counter[str]
    hits: int
    metric_value: float | None


def profile(store: Store, spec: VariantSpec, metric: str, mode: str, repeats: int,
            log: Callable[[str], None] = print, placement: Placement | None = None) -> Profiled:
    """`placement`: where it boots (None: QEMU TCG): the kernel built as for that target (of
    its arch; `running`: the target machine's kernel), measured by the agent as that target
    takes it."""
    if describe(metric, "").source != "agent":
        raise LabError(f"--metric {metric}: profile needs a metric the agent runs (see `kernellab metrics`)")
    # Always a kernel it builds: `running` becomes running+CONFIG_PROFILING=y before the target sees it.
    profiled = replace(spec, options=[*spec.options, PROFILING])
    if placement is not None:
        placement.adapt(profiled)
    place = placement.for_probes("profile", mode, profiled) if placement is not None else lab.default_target
    prepared = placement.prepare(profiled) if placement is not None else lab.prepare(profiled)
    if prepared.toolchain is None:
        raise LabError(f"variant {spec.name}: profile builds its kernel with {PROFILING}: give a config, "
                       "not a running or prebuilt kernel")
    if prepared.config.values.get("CONFIG_PROFILING") != "y":
        raise LabError(f"variant {spec.name}: {PROFILING} does not hold in this config")
    build = lab.ensure_built(prepared, store, log=log)
    options = lab.RunOptions(mode, repeats=repeats,
                             cmdline_extra=f"profile={profiler.SHIFT} KL_PROFILE=1 KL_ONLY={metric} "
                                           f"KL_TARGET_US={TARGET_US}")
    target = place(prepared, build, options)
    agent = lab.agent_for(prepared, target)
    # A run is reused only where it was measured (any QEMU run, without --target).
    earlier = lab.on_target(store, store.finished_runs(build.key, mode, options.key(agent, prepared.spec)),
                            target.name if placement is not None else None)
    if earlier:
        run_id, reused = earlier[-1], True
    else:
        outcome = lab.run(prepared, build, store, options, agent, target)
        if outcome.status != "ok":
            raise LabError(f"variant {spec.name}: run {outcome.run_id} {outcome.status}: {outcome.reason} "
                           f"(console log: kernellab log {outcome.run_id})")
        run_id, reused = outcome.run_id, False
    console = store.run_log(run_id) or ""
    prof = profiler.Profile.from_console(console, f"run {run_id} ({spec.name})")
    functions = profiler.functions(prof, profiler.TextSymbols(build.artifacts / "vmlinux"))
    values = store.run_metrics(run_id).get(metric)
    value = sorted(values)[len(values) // 2] if values else None
    log(f"{spec.name}: run {run_id}{' (from the store)' if reused else ''}: {prof.hits} ticks in "
        f"{len(functions)} functions")
    return Profiled(spec.name, run_id, reused, functions, prof.hits, value)


def how(mode: str, metric: str, repeats: int) -> str:
    return (f"{modes.get(mode).summary}; the agent ran {metric} ({repeats} repeats) with profile={profiler.SHIFT} "
            f"and {TARGET_US // 1000} ms samples on kernels built with {PROFILING}")
