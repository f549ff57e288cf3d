"""Text views of sweep and bisect results."""

from __future__ import annotations

import statistics
from typing import Any

from .. import blast, modes
from ..guest import vulnerabilities
from ..metrics.catalog import describe
from . import fmt_value


def bisect_text(r: dict[str, Any]) -> str:
    unit = r["unit"]
    total = r["bad"] - r["good"]
    lines = [f"bisect on {r['metric']} ({unit}), {modes.get(r['mode']).summary}",
             f"good {fmt_value(r['good'], unit)}, bad {fmt_value(r['bad'], unit)}: "
             f"{_pct(total, r['good'])} over {r['candidates']} differing option(s)"]
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
                     f"{fmt_value(p['value'], unit)} ({p['runs']} run(s)){where}")
    built = [probe_build_s(p) for p in r["probes"] if p["built"]]
    lines.append(f"cost: {r['builds']} build(s), {r['boots']} boot(s), {len(r['probes'])} probe(s), "
                 f"{r['wall_s']:.0f} s wall" + (f"; probe builds {min(built):.0f}-{max(built):.0f} s, median "
                                                f"{statistics.median(built):.0f} s (copies of trees included)"
                                                if built else ""))
    return "\n".join(lines) + "\n"


def probe_build_s(p: dict[str, Any]) -> float:
    """What a probe's build cost: make, and the copy of a tree it needed first."""
    return float(p["build_s"] + p.get("copy_s", 0.0))


def sweep_text(r: dict[str, Any]) -> str:
    lines = [f"sweep over {len(r['flips'])} option(s), {modes.get(r['mode']).summary}"]
    for metric in r["metrics"]:
        unit = describe(metric, "").unit
        lines.append(f"\n{metric} ({unit}), baseline {fmt_value(r['baseline'][metric], unit)}; ranked by effect:")
        ranked = sorted(r["flips"], key=lambda f: -abs(f["effects"][metric].get("delta_pct") or 0))
        for f in ranked:
            c = f["effects"][metric]
            interval = (f" [{c['ci_low_pct']:+.1f}, {c['ci_high_pct']:+.1f}]%{'*' if c.get('significant') else ''}"
                        if c.get("ci_low_pct") is not None else "")
            delta = "-" if c["delta_pct"] is None else f"{c['delta_pct']:+.1f}%"
            inactive = ("  inactive on the emulated CPU" if f.get("not_affected") and
                        vulnerabilities.wholly_inactive(f["flaws"], f["not_affected"]) else "")
            lines.append(f"  {f['option']}={f['value']:<4} {delta:>9}{interval}  ({c['direction']}){inactive}")
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


def _pct(delta: float, reference: float) -> str:
    return "n/a %" if reference == 0 else f"{100 * delta / abs(reference):+.1f}%"


def _share(part: float, whole: float) -> str:
    return "n/a %" if whole == 0 else f"{100 * part / whole:.0f}%"
