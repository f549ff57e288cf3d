"""kernellab's own measurements as evidence for the rules: from a results file
(`kernellab study run NAME --format results`, kernellab.report.results; the caller reads
it with kernellab.report.kinds.load(path, expect="results")), the `[[rule.evidence]]` block each rule
whose options the file measured can cite, with every figure as the file holds it and how
it was obtained (mode, runs, kernel, date, version). The blocks are printed for a person
to paste and annotate: which figure matters for a rule, and why, stays a judgement."""

from __future__ import annotations

import json
from typing import Any

from ..errors import LabError
from ..guest import vulnerabilities
from ..metrics.catalog import describe
from . import Rule


def only_sweeps(results: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """The results with only the sweeps named (all of them when none is): a rule cites the
    one sweep that measured what it is about, not every sweep of the file."""
    if not labels:
        return results
    known = [sweep["label"] for sweep in results["sweeps"]]
    unknown = [label for label in labels if label not in known]
    if unknown:
        raise LabError(f"no sweep {unknown[0]!r} in the results file: give one of "
                       + "; ".join(repr(label) for label in known))
    return {**results, "sweeps": [sweep for sweep in results["sweeps"] if sweep["label"] in labels]}


def evidence(rule: Rule, results: dict[str, Any], source: str) -> str | None:
    """The rule's evidence block from the results, or None when they measured none of its
    options (an option olddefconfig would not set alone is said beside those measured, not
    cited alone). `source`: the file as the rule cites it (results/NAME.json)."""
    emulated = results.get("emulated", True)
    parts = []
    for sweep in results["sweeps"]:
        rows = [r for r in sweep["options"] if r["option"] in rule.options()]
        if any(v is not None for r in rows for v in r.get("delta_pct", {}).values()):
            figures = [_row(r) for r in rows]
            how = (f"{sweep['mode']}, {'QEMU TCG, ' if emulated else ''}"
                   f"{sweep['runs']} run{'s' if sweep['runs'] != 1 else ''}, "
                   f"switched alone on {sweep['flipped_on']}")
            parts.append(f"{sweep['label']} ({how}): " + "; ".join(figures))
    if not parts:
        return None
    figure = " | ".join(parts) + (f" (kernellab {results['kernellab']}, {results['date']}"
                                  f"{'; emulated figures' if emulated else ''})")
    return "\n".join(["[[rule.evidence]]", f"source = {json.dumps('kernellab:' + source)}",
                      f"figure = {json.dumps(figure)}", "verified = true"])


def _row(row: dict[str, Any]) -> str:
    name = f"{row['option'].removeprefix('CONFIG_')}={row['value']}"
    if "not_measured" in row:
        return f"{name} not measured ({row['not_measured']})"
    effects = ", ".join(f"{describe(m, '').label} {pct:+.1f}%" for m, pct in row["delta_pct"].items()
                        if pct is not None)
    inactive = row.get("inactive_on_emulated_cpu")
    if inactive:
        effects += f", {vulnerabilities.note(row.get('mitigates', []), inactive)}"
    return f"{name}: {effects or 'no figure'}"
