"""A results file (kernellab.report.results) as the table a person reads: for each sweep,
the options switched alone, largest change first, each metric's change in its own column,
and what the row needs said beside its figures (what olddefconfig brought along, a
mitigation the emulated CPU never ran); the options that could not be set alone after
the table. Every sweep's heading says how its figures were obtained. The results file is
a kind of result (RESULTS, report/kinds.py); report/results.py writes one from a study.

On a screen (terminal.Screen with a width) the table fits the width, its figures and
headers never cut: the notes go under the table; the headers fold between words (after a
hyphen too), else each becomes a letter that a legend line under the table names; long
option names lose their middles last, each still its own (a line says so). A file or a
pipe gets every row on one line. The baseline's units say when a time counts instructions (display_unit)."""

from __future__ import annotations

import io
import string
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..guest import vulnerabilities
from ..metrics.catalog import describe
from . import display_unit, fmt_value, kinds, md_table
from .table import FULL_WIDTH, GAP, LABEL_MIN, shortened
from .terminal import fold_header, header_pieces

# The narrowest the notes' column may be beside the figures: narrower, they go under the table.
NOTE_MIN = 24
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
    return "baseline: " + ", ".join(_figure(m, v, sweep["mode"]) for m, v in sweep["baseline"].items())


def _figure(metric: str, value: float, mode: str) -> str:
    """A baseline figure: "null syscall (getppid) 202.1 ns (icount)"."""
    info = describe(metric, "")
    return f"{info.label} {fmt_value(value, info.unit)} {display_unit({'name': metric, 'unit': info.unit}, mode)}"


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


def terminal(results: dict[str, Any], view: kinds.View) -> str:
    width = view.screen.width
    console = Console(record=True, width=width or FULL_WIDTH, file=io.StringIO())   # renders; never writes stdout
    with console.capture() as capture:
        for sweep in results["sweeps"]:
            columns, rows = head(sweep), _rows(sweep)
            shown = _on_screen(columns, rows, width) if width else Shown(columns, rows)
            # Cells are rich markup: the file's words are escaped ("[/]" in an option's value).
            table = Table(title=escape(heading(results, sweep)), title_justify="left",
                          box=box.MINIMAL if width else box.HEAVY_HEAD, show_edge=not width, pad_edge=not width)
            for i, col in enumerate(shown.columns):
                figures = 0 < i < len(columns) - 1
                # Figures whole: a screen too narrow for them beside the shortest options folds the options.
                whole = max((cell_len(r[i]) for r in shown.rows), default=0) if figures and width else None
                table.add_column(escape(col), justify="right" if figures else "left", min_width=whole,
                                 overflow="fold", no_wrap=bool(width) and figures)
            for cells in shown.rows:
                table.add_row(*map(escape, cells))
            console.print(table)
            for line in [*shown.legend, baseline(sweep), *shown.notes,
                         *(f"not measured: {line}" for line in not_measured(sweep))]:
                # A line of words: on a screen wrapped at its width, in a file whole.
                console.print(f"  {line}", highlight=False, markup=False, soft_wrap=not width)
    return capture.get()


@dataclass(frozen=True)
class Shown:
    """A sweep's table as a screen shows it: its columns' headers, its rows, and the lines
    under it that say what moved there (the legend of lettered headers, the notes)."""
    columns: list[str]
    rows: list[list[str]]
    legend: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _on_screen(columns: list[str], rows: list[list[str]], width: int) -> Shown:
    """The table for `width` columns, narrowed step by step: the notes under the table;
    each figure's header folded to its column; the headers lettered, a legend naming them;
    the options' middles left out."""
    notes: list[str] = []
    # A screen too narrow for the notes beside the figures has them under the table, each whole.
    if _needed(columns[:-1], [r[:-1] for r in rows]) + GAP + NOTE_MIN > width:
        notes = [f"{r[0]}: {r[-1]}" for r in rows if r[-1]]
        columns, rows = columns[:-1], [r[:-1] for r in rows]
    legend = []
    if _needed(columns, rows) > width:
        letters = string.ascii_uppercase[:len(columns) - 1]
        legend = ["columns: " + "; ".join(f"{k} = {c}" for k, c in zip(letters, columns[1:], strict=True))]
        columns = [columns[0], *letters]
    over = _needed(columns, rows) - width
    if over > 0:
        options = shortened([r[0] for r in rows], max(max(cell_len(r[0]) for r in rows) - over, LABEL_MIN))
        rows = [[option, *r[1:]] for option, r in zip(options, rows, strict=True)]
        legend.append(f"shortened to fit {width} columns: the middle of long options (-o FILE keeps them whole)")
    figures = [max((cell_len(r[i]) for r in rows), default=0) for i in range(len(columns))]
    return Shown([columns[0], *(fold_header(c, w) for c, w in zip(columns[1:], figures[1:], strict=True))],
                 rows, legend, notes)


def _needed(columns: list[str], rows: list[list[str]]) -> int:
    """A table's width on a screen: each cell whole, each header folded (fold_header)."""
    widths = [max(max((cell_len(cell) for cell in column[1:]), default=0),
                  max(cell_len(p.rstrip()) for p in header_pieces(column[0])) if i else cell_len(column[0]))
              for i, column in enumerate(zip(columns, *rows, strict=True))]
    return sum(widths) + GAP * (len(widths) - 1)


RESULTS = kinds.register(kinds.Kind(
    name="results", tag="kernellab-option-costs", what="a results file", version=1, readable=(1,),
    schema="results-schema.json", rewrite="write it again with `kernellab show STUDY.json --format results`",
    renderers={"table": terminal, "markdown": lambda results, view: markdown(results)},
    formats=("table", "markdown", "json"), indent=1))
