"""The terminal table (rich): each Δ coloured by its verdict (report.model), red worse,
green better, dim not compared."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import fmt_cell, footer_lines, header_lines, shown_metrics
from .conclusion import DELTA_LEGEND, delta_text, summary, verdict_of
from .model import BETTER, NOT_COMPARED, WORSE

STYLES = {WORSE: "red", BETTER: "green", NOT_COMPARED: "dim"}


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
        deltas = [delta_markup(m, n) for n in names[1:]]
        table.add_row(escape(m["label"]), escape(m["unit"]),
                      *[escape(fmt_cell(m["values"].get(n), m["unit"])) for n in names], *deltas)
    console = Console(record=True, width=160, file=io.StringIO())   # renders; never writes stdout
    with console.capture() as capture:
        for line in header_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        console.print(table)
        legend = [DELTA_LEGEND] if len(names) > 1 else []
        for line in legend + footer_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        text = summary(report)
        if text:
            console.print(text, highlight=False, markup=False, soft_wrap=True)
    return capture.get()


def delta_markup(m: dict[str, Any], variant: str) -> str:
    """A Δ cell as rich markup: its text in its verdict's style."""
    text = escape(delta_text(m, variant))
    v = verdict_of(m, variant)
    style = STYLES.get(v["kind"], "") if v is not None else ""
    return f"[{style}]{text}[/]" if style else text
