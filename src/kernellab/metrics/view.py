"""What `kernellab metrics` prints: every metric of the catalog (and of the workloads the
command was given), its label, unit, group, who measures it and in which timing modes it
means something, so that a user names a metric (--fail-on, --metric, a study's tables)
without reading kernellab's source."""

from __future__ import annotations

from typing import Any

from .. import modes
from .catalog import Metric, catalog, sort_key

# Who measures a metric, as the catalog's `source` says, in a user's words.
SOURCES = {
    "build": "kernellab, from the build and its artifacts",
    "console": "kernellab, from the kernel's console (boot milestones, the Memory: line, initcalls)",
    "agent": "the in-guest agent (kernellab's own microbenchmarks and /proc readings)",
    "workload": "a workload's program (--workload), read by its parser",
}


def rows() -> list[dict[str, Any]]:
    """Every metric the catalog has now, in the order reports show them."""
    return [_row(m) for m in sorted(catalog().values(), key=lambda m: sort_key(m.name, m.unit))]


def _row(m: Metric) -> dict[str, Any]:
    return {"name": m.name, "label": m.label, "unit": m.unit, "better": m.better, "group": m.group,
            "source": m.source, "clock": m.clock, "modes": list(m.modes), "needs": list(m.needs),
            "opt_in": m.opt_in or None, "icount_max_vcpus": m.icount_max_vcpus or None}


def lines(found: list[dict[str, Any]]) -> list[str]:
    """The table, one metric a line, and what its columns mean."""
    name_w = max(len(r["name"]) for r in found)
    unit_w = max(len(r["unit"]) for r in found)
    group_w = max(len(r["group"]) for r in found)
    out = [f"{'metric':{name_w}}  {'unit':{unit_w}}  {'better':6}  {'group':{group_w}}  {'from':8}  "
           f"{'modes':11}  label"]
    for r in found:
        notes = _notes(r)
        out.append(f"{r['name']:{name_w}}  {r['unit']:{unit_w}}  {r['better']:6}  {r['group']:{group_w}}  "
                   f"{r['source']:8}  {','.join(r['modes']):11}  {r['label']}{'  (' + notes + ')' if notes else ''}")
    out += ["", "from: who measures it"]
    out += [f"  {source:8}  {what}" for source, what in SOURCES.items()]
    out += ["modes: the timing modes in which it means something (in another, a report shows it as not compared)"]
    out += [f"  {m.name:8}  {m.summary}" for m in modes.all_modes().values()]
    out += ["better: the direction --fail-on METRIC:PCT (without a sign) and the verdicts count as better",
            "Reports also show /proc/meminfo's fields (meminfo.NAME, compare --all), the kernel's memory at boot "
            "(mem.kernel.NAME) and, with --initcalls, each initcall (boot.initcall.NAME).",
            "A workload's metrics are WORKLOAD.METRIC: `kernellab metrics --workload NAME` adds them."]
    return out


def _notes(r: dict[str, Any]) -> str:
    notes = []
    if r["opt_in"]:
        notes.append(f"only with --with {r['opt_in']}")
    if r["needs"]:
        notes.append(f"needs {', '.join(r['needs'])}")
    if r["icount_max_vcpus"]:
        notes.append(f"under icount, with at most {r['icount_max_vcpus']} vCPU(s)")
    return "; ".join(notes)

