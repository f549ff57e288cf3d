"""A results file (kernellab.report.results) as the table a person reads: for each sweep,
the options switched alone, largest change first, each metric's change in its own column,
and what the row needs said beside its figures (what olddefconfig brought along, a
mitigation the emulated CPU never ran); the options that could not be set alone after
the table. Every sweep's heading says how its figures were obtained. The results file is
a kind of result (RESULTS, report/kinds.py); report/results.py writes one from a study."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..guest import vulnerabilities
from ..metrics.catalog import describe
from . import fmt_value, kinds, md_table

# An option that brings this many others along is named with the first few: the rest
# are in the file.
WITH_SHOWN = 3


def heading(results: dict[str, Any], sweep: dict[str, Any]) -> str:
    runs = f"{sweep['runs']} run{'s' if sweep['runs'] != 1 else ''}"
    emulated = "QEMU TCG, emulated figures" if results.get("emulated", True) else "measured on the machine"
    return (f"{sweep['label']}: each option switched alone on {sweep['flipped_on']} "
            f"({sweep['mode']}, {runs}, {emulated}; kernellab {results['kernellab']}, {results['date']})")


def baseline(sweep: dict[str, Any]) -> str:
    """What the percentages are of: the kernel flipped on, as measured."""
    return "baseline: " + ", ".join(f"{describe(m, '').label} {fmt_value(v, describe(m, '').unit)} "
                                    f"{describe(m, '').unit}" for m, v in sweep["baseline"].items())


def ranked(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """The measured rows, largest change on a run-time metric first (sizes break ties)."""
    def largest(row: dict[str, Any], sizes: bool) -> float:
        return max((abs(v) for m, v in row["delta_pct"].items()
                    if v is not None and m.startswith("size.") == sizes), default=0.0)
    rows = [r for r in sweep["options"] if "delta_pct" in r]
    return sorted(rows, key=lambda r: (-largest(r, False), -largest(r, True), r["option"]))


def head(sweep: dict[str, Any]) -> list[str]:
    return ["option", *(describe(m, "").label for m in sweep["baseline"]), "note"]


def row(r: dict[str, Any], metrics: list[str]) -> list[str]:
    cells = [f"{r['option'].removeprefix('CONFIG_')}={r['value']}"]
    cells += ["-" if r["delta_pct"].get(m) is None else _pct(r["delta_pct"][m]) for m in metrics]
    notes = []
    if r.get("inactive_on_emulated_cpu"):
        notes.append(vulnerabilities.note(r.get("mitigates", []), r["inactive_on_emulated_cpu"]))
    if r.get("with"):
        more = len(r["with"]) - WITH_SHOWN
        notes.append("with " + ", ".join(w.removeprefix("CONFIG_") for w in r["with"][:WITH_SHOWN])
                     + (f" and {more} more" if more > 0 else ""))
    return cells + ["; ".join(notes)]


def not_measured(sweep: dict[str, Any]) -> list[str]:
    return [f"{r['option'].removeprefix('CONFIG_')}={r['value']}: {r['not_measured']}"
            for r in sweep["options"] if "not_measured" in r]


def _pct(value: float) -> str:
    return "0%" if round(value, 1) == 0 else f"{value:+.1f}%"


def _rows(sweep: dict[str, Any]) -> list[list[str]]:
    metrics = list(sweep["baseline"])
    return [row(r, metrics) for r in ranked(sweep)]


def markdown(results: dict[str, Any]) -> str:
    lines = [f"### {results['title']}", ""]
    for sweep in results["sweeps"]:
        lines += [f"#### {heading(results, sweep)}", "", baseline(sweep), ""]
        lines += md_table(head(sweep), _rows(sweep), left=1, notes=1) + [""]
        lines += [f"- not measured: {line}" for line in not_measured(sweep)]
        lines += [""] if not_measured(sweep) else []
    return "\n".join(lines).rstrip("\n") + "\n"


def terminal(results: dict[str, Any]) -> str:
    console = Console(record=True, width=200, file=io.StringIO())   # renders; never writes stdout
    with console.capture() as capture:
        for sweep in results["sweeps"]:
            # Cells are rich markup: the file's words are escaped ("[/]" in an option's value).
            table = Table(title=escape(heading(results, sweep)), title_justify="left")
            columns = head(sweep)
            for i, col in enumerate(columns):
                table.add_column(escape(col), justify="right" if 0 < i < len(columns) - 1 else "left")
            for cells in _rows(sweep):
                table.add_row(*map(escape, cells))
            console.print(table)
            console.print(f"  {baseline(sweep)}", highlight=False, markup=False, soft_wrap=True)
            for line in not_measured(sweep):
                console.print(f"  not measured: {line}", highlight=False, markup=False, soft_wrap=True)
    return capture.get()


RESULTS = kinds.register(kinds.Kind(
    name="results", tag="kernellab-option-costs", what="a results file", version=1, readable=(1,),
    schema="results-schema.json", rewrite="write it again with `kernellab show STUDY.json --format results`",
    renderers={"table": lambda results, view: terminal(results), "markdown": lambda results, view: markdown(results)},
    formats=("table", "markdown", "json"), indent=1))
