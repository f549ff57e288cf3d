"""A sweep's result (experiments/sweep.py, and each sweep of a study) as a kind of result
(report/kinds.py) and its text; its HTML page is html.sweep_page, with the workloads' provenance
(a study's page shows each of its sweeps by the same html.sweep_sections)."""

from __future__ import annotations

from typing import Any

from .. import modes
from ..guest import vulnerabilities
from ..guest.workloads import Provenance
from ..metrics.catalog import describe
from . import fmt_value, kinds
from .attribution import probe_build_s
from .auditreport import effect_text
from .conclusion import DELTA_LEGEND


def sweep_text(r: dict[str, Any]) -> str:
    lines = [f"sweep over {len(r['flips'])} option(s), {modes.get(r['mode']).summary}", *workload_lines(r)]
    for metric in r["metrics"]:
        unit = describe(metric, "").unit
        lines.append(f"\n{metric} ({unit}), baseline {fmt_value(r['baseline'][metric], unit)}; ranked by effect:")
        ranked = sorted(r["flips"], key=lambda f: -abs(f["effects"][metric].get("delta_pct") or 0))
        for f in ranked:
            c = f["effects"][metric]
            inactive = ("  inactive on the emulated CPU" if f.get("not_affected") and
                        vulnerabilities.wholly_inactive(f["flaws"], f["not_affected"]) else "")
            lines.append(f"  {f['option']}={f['value']:<4} {effect_text(c):>9}{inactive}")
    lines.append(DELTA_LEGEND)
    lines.append("\nwhat each flip really changed:")
    for f in r["flips"]:
        extra = f"; also {', '.join(f['also_changed'][:6])}" + (" ..." if len(f["also_changed"]) > 6 else "") \
            if f["also_changed"] else ""
        refused = f"; NOT APPLIED: {'; '.join(f['dropped'])}" if f["dropped"] else ""
        lines.append(f"  {f['option']}={f['value']}: ~{f['rebuild_objects']} objects depend on it, "
                     f"{'built in' if f['built'] else 'cached build of'} {probe_build_s(f):.0f} s{extra}{refused}")
        if f.get("not_affected"):
            lines.append(f"    {vulnerabilities.caveat(f['flaws'], f['not_affected'])}")
    lines.append(f"cost: {r['builds']} build(s), {r['boots']} boot(s), {r['wall_s']:.0f} s wall")
    return "\n".join(lines) + "\n"


def workload_lines(result: dict[str, Any]) -> list[str]:
    """One line per workload the result's runs ran: what its metrics' figures come from
    (a sweep or bisect result written before they said so has none)."""
    return [Provenance.from_dict(w).line() for w in result.get("workloads", [])]


def _html(result: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML page
    return html.sweep_page(result, workload_lines(result))


SWEEP = kinds.register(kinds.Kind(
    name="sweep", tag="kernellab-sweep", what="a sweep's result", version=1, readable=(1,),
    schema="sweep-schema.json", rewrite="write it again with `kernellab sweep ... --format json` (its builds and "
                                        "runs are in the store)",
    renderers={"table": lambda result, view: sweep_text(result), "html": _html}, formats=("table", "json", "html")))
