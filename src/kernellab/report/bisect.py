"""A bisection's result (experiments/bisect.py) as a kind of result (report/kinds.py) and
its text (its header: the metric, the endpoints, each workload's provenance); its HTML page
is html.bisect_page, whose summary (summary_lines) and text report show them. AHEAD,
measured_ahead and probe_count say which probes were measured ahead and not needed, here
and in why's views of its option search (report/why.py)."""

from __future__ import annotations

import statistics
from typing import Any

from .. import blast, modes
from . import fmt_value, kinds
from .attribution import probe_build_s
from .sweep import workload_lines


def bisect_text(r: dict[str, Any]) -> str:
    unit = r["unit"]
    total = r["bad"] - r["good"]
    lines = [f"bisect on {r['metric']} ({unit}), {modes.get(r['mode']).summary}",
             f"good {fmt_value(r['good'], unit)}, bad {fmt_value(r['bad'], unit)}: "
             f"{_pct(total, r['good'])} over {r['candidates']} differing option(s)", *workload_lines(r)]
    if not r["culprits"]:
        lines.append(f"no option moves the metric by the threshold ({r['threshold_pct']:g}%): no culprit")
    for c in r["culprits"]:
        alone = ("-" if c["alone_on_good"] is None
                 else f"{c['alone_on_good']:+.4g} {unit} ({_pct(c['alone_on_good'], r['good'])})")
        removed = "-" if c["removed_from_bad"] is None else f"{c['removed_from_bad']:+.4g} {unit}"
        lines.append(f"  culprit {c['option']}={c['value']}: alone on good {alone}; removed from bad {removed}")
        lines += [f"    note: {n}" for n in c["notes"]]
    if r["culprits"] and r["below_threshold"] is not None:
        lines.append(f"  below the threshold: {r['below_threshold']:+.4g} {unit} "
                     f"({_share(r['below_threshold'], total)} of the difference): what BAD's other options "
                     f"do together, none of them moving a probe by {r['threshold_pct']:g}%; "
                     "a lower --threshold names them")
    if r["interaction"] is not None:
        lines.append(f"  interaction: {r['interaction']:+.4g} {unit} (what the culprits do together beyond "
                     "their own effects)")
    conf = r.get("confirmation")
    if conf:
        lines.append(f"  confirmed by reverting (KernelCI's check): {'yes' if conf['confirmed'] else 'NO'}; "
                     f"BAD without every culprit against GOOD: {conf['together']['verdict']} "
                     f"({conf['together']['reason']})")
        for option, v in conf["each"].items():
            lines.append(f"    BAD without {option} against BAD: {v['verdict']} ({v['reason']})")
    for u in r.get("unsure", []):
        lines.append(f"  {u}")
    for a in r["adjustments"]:
        lines.append(f"  resolution: {a}")
    if r.get("wide"):
        lines.append(f"  searched first, together: {len(r['wide'])} wide option(s) (a change recompiles over "
                     f"{blast.WIDE_SHARE:.0%} of the tree): {', '.join(r['wide'])}")
    lines.append("probes (each builds next to the earlier build nearest to it; before a wide rebuild a copy "
                 "of that state is kept):")
    for p in r["probes"]:
        cost = f"built in {probe_build_s(p):.0f} s" if p["built"] else "build reused"
        where = f"  in {p['tree']}" if p.get("tree") else ""
        lines.append(f"  {p['label']:<40} {p['options']:>4} option(s)  {cost:<16} "
                     f"{fmt_value(p['value'], unit)} ({p['runs']} run(s)){where}"
                     + (f"  {AHEAD}" if p["ahead"] else ""))
    built = [probe_build_s(p) for p in r["probes"] if p["built"]]
    lines.append(f"cost: {r['builds']} build(s), {r['boots']} boot(s), {probe_count(r['probes'])}, "
                 f"{r['wall_s']:.0f} s wall" + (f"; probe builds {min(built):.0f}-{max(built):.0f} s, median "
                                                f"{statistics.median(built):.0f} s (copies of trees included)"
                                                if built else ""))
    return "\n".join(lines) + "\n"


# How a probe a Dask cluster's idle workers measured ahead of the search, and that the
# search never asked for, is marked wherever probes of an option bisection are listed
# (bisect's views, and why's, whose option search is a bisection).
AHEAD = "measured ahead, not needed"


def measured_ahead(probes: list[dict[str, Any]]) -> int:
    """How many of an option bisection's probes were measured ahead and not needed (a
    result of format 1 did not say: its probes' `ahead` is null, none counted)."""
    return sum(1 for p in probes if p.get("ahead"))


def probe_count(probes: list[dict[str, Any]]) -> str:
    """The probes, those measured ahead and not needed counted apart: they cost builds and
    boots, and no verdict rests on them."""
    ahead = measured_ahead(probes)
    return f"{len(probes)} probe(s)" + (f" ({ahead} of them measured ahead on idle workers and not needed)"
                                        if ahead else "")


def summary_lines(r: dict[str, Any], text: str) -> list[str]:
    """The HTML page's summary: the text's head (the metric, the endpoints, the workloads),
    and the probes measured ahead and not needed, when there were any."""
    head = [line for line in text.splitlines()[:3] if line]
    return head + ([f"probes: {probe_count(r['probes'])}"] if measured_ahead(r["probes"]) else [])


def _pct(delta: float, reference: float) -> str:
    return "n/a %" if reference == 0 else f"{100 * delta / abs(reference):+.1f}%"


def _share(part: float, whole: float) -> str:
    return "n/a %" if whole == 0 else f"{100 * part / whole:.0f}%"


def _upgrade(result: dict[str, Any], origin: str) -> dict[str, Any]:
    """Format 1 as format 2: its probes do not say whether the search used them (null)."""
    for row in result["probes"]:
        row.setdefault("ahead", None)
    return result


def _html(result: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML page
    text = bisect_text(result)
    return html.bisect_page(result, text, summary_lines(result, text))


BISECT = kinds.register(kinds.Kind(
    name="bisect", tag="kernellab-bisect", what="a bisection's result", version=2, readable=(1, 2),
    schema="bisect-schema.json", rewrite="write it again with `kernellab bisect ... --format json` (its builds and "
                                         "runs are in the store)",
    renderers={"table": lambda result, view: bisect_text(result), "html": _html}, formats=("table", "json", "html"),
    from_dict=_upgrade))
