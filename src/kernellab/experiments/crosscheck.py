"""`kernellab workload crosscheck`: one kernel, booted (or found) where the command says, runs
the agent's metrics of the cross-check pairs (report/crosscheck.py, metrics/crosschecks.toml)
and the standard tools that time the same paths, in the same runs; the pairs' ratios come
from that one compare report, so that both sides of a ratio always share guest and kernel."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .. import toolchain as toolchains
from ..report import crosscheck as pairs
from ..store import Store
from . import compare
from .placement import Placement
from .spec import Experiment, VariantSpec


def run(store: Store, variant: VariantSpec, mode: str | None, runs: int | None, timeout_s: float,
        placement: Placement | None, log: Callable[[str], None] = print,
        only: Sequence[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """The cross-check result of `variant` and the failures of its runs; `only`: these
    pairs' names (--pair), else every pair."""
    checks = pairs.load().only(only) if only else pairs.load()
    exp = Experiment("crosscheck", [variant], description="the agent's microbenchmarks beside standard tools")
    how = compare.plan(exp, mode, runs, None, timeout_s, placement=placement,
                       workloads=compare.resolve_workloads(checks.workloads))
    # Only the agent's metrics the pairs name: a run costs the tools' time, not the whole suite's.
    how = replace(how, options=replace(how.options, cmdline_extra=f"KL_ONLY={','.join(checks.agent_metrics)}"))
    report, failures = compare.run_experiment(exp, store, how, log=log)
    setting = {"base": _kernel(variant), "source": variant.source, "arch": variant.arch, "mode": how.mode.name,
               "target": placement.site.name if placement is not None else "qemu",
               "date": datetime.date.today().isoformat()}
    return pairs.judge(report, setting, checks), failures


def _kernel(variant: VariantSpec) -> str:
    """The variant's base with what it changes on it: the bands hold for the base alone."""
    changes = [*variant.fragments, *variant.options, *(f"boot:{a}" for a in variant.boot_args),
               *(f"sysctl:{k}={v}" for k, v in variant.sysctls.items())]
    if variant.toolchain != toolchains.DEFAULT:
        changes.append(variant.toolchain)
    if variant.vcpus:
        changes.append(f"vcpus:{variant.vcpus}")
    if variant.devices:
        changes.append(f"devices:{variant.devices}")
    if variant.fs:
        changes.append(f"fs:{variant.fs}")
    return "+".join([variant.base, *changes])
