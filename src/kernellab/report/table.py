"""The terminal table (rich)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import floor_of, fmt_cell, fmt_delta, footer_lines, header_lines, shown_metrics, summary


def table_text(report: dict[str, Any], show_all: bool = False) -> str:
    names = [v["name"] for v in report["variants"]]
    # A table's cells are rich markup: the report's words ("[/]" in a name) are escaped.
    table = Table(title=escape(f"kernellab compare: {report['experiment']}"), title_justify="left")
    table.add_column("metric")
    table.add_column("unit")
    for n in names:
        table.add_column(escape(n), justify="right")
    for n in names[1:]:
        table.add_column(escape(f"Δ {n}"), justify="right")
    group = None
    for m in shown_metrics(report, show_all):
        if m["group"] != group:
            if group is not None:
                table.add_section()
            group = m["group"]
        deltas = []
        for n in names[1:]:
            c = m["comparison"].get(n)
            text = fmt_delta(m, n, floor_of(report, m["name"]))
            notable = c is not None and not text.startswith("within floor") and (
                c["significant"] if c["testable"] else abs(c["delta_pct"] or 0) >= 1)
            style = ("red" if c["direction"] == "worse" else "green") if notable else ""
            deltas.append(f"[{style}]{text}[/]" if style else text)
        table.add_row(escape(m["label"]), escape(m["unit"]),
                      *[escape(fmt_cell(m["values"].get(n), m["unit"])) for n in names], *deltas)
    console = Console(record=True, width=160, file=io.StringIO())   # renders; never writes stdout
    with console.capture() as capture:
        for line in header_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        console.print(table)
        for line in footer_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        text = summary(report)
        if text:
            console.print(text, highlight=False, markup=False, soft_wrap=True)
    return capture.get()
