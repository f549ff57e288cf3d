"""The terminal table (rich): each Δ coloured by its verdict (report.model), red worse,
green better, dim not compared.

On a screen (terminal.Screen with a width) the table fits its width: what does not fit
is left out in this order, and one line says what was, (1) the Δ's 95% intervals, (2)
each cell's spread and n, (3) the length of long labels (shortened in the middle, each
still its own), (4) the values of the later variants (their Δ stays); the header is the
short block (report.short_header), the rest under --verbose. A file or a pipe (no width)
gets every column and every header line."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import (
    clip,
    display_unit,
    first_fitting,
    fmt_cell,
    footer_lines,
    header_lines,
    short_footer,
    short_header,
    shown_metrics,
    workload_lines,
    workloads_head,
)
from .conclusion import DELTA_LEGEND, SHORT_LEGEND, delta_text, summary, verdict_of
from .model import BETTER, NOT_COMPARED, WORSE
from .terminal import FULL_SCREEN, Screen

STYLES = {WORSE: "red", BETTER: "green", NOT_COMPARED: "dim"}
# The width a file's table is laid out in: wider than any table, so that none is cut.
FULL_WIDTH = 10_000
# A label is never shortened below this many characters: below it rows stop reading.
LABEL_MIN = 20
# Between two columns: a rule and a space either side.
GAP = 3


@dataclass(frozen=True)
class Shape:
    """What the table shows of its cells: narrowed step by step until it fits."""
    intervals: bool = True          # the Δ's 95% interval (wall mode)
    spreads: bool = True            # a cell's ± or (min..max), and n
    values: int = 0                 # the variants whose values are shown, from the first (0: all)
    label_width: int | None = None  # labels shortened to this (None: whole)


def table_text(report: dict[str, Any], show_all: bool = False, screen: Screen = FULL_SCREEN,
               verbose: bool = False) -> str:
    metrics = shown_metrics(report, show_all)
    names = [v["name"] for v in report["variants"]]
    shape = fit(report, metrics, screen.width) if screen.width else Shape()
    shown = names[:shape.values or len(names)]
    labels = shortened([m["label"] for m in metrics], shape.label_width)
    title = None if screen.width else escape(f"kernellab compare: {report['experiment']}")
    table = Table(title=title, title_justify="left", box=box.HEAVY_HEAD if not screen.width else box.MINIMAL,
                  show_edge=not screen.width, pad_edge=not screen.width)
    table.add_column("metric", no_wrap=True, overflow="ellipsis")
    table.add_column("unit", no_wrap=True)
    for n in shown:   # A table's cells are rich markup: the report's words ("[/]" in a name) are escaped.
        table.add_column(escape(n), justify="right", no_wrap=True)
    for n in names[1:]:
        table.add_column(escape(f"Δ {n}"), justify="right", no_wrap=True)
    group = None
    for m, label in zip(metrics, labels, strict=True):
        if m["group"] != group:
            if group is not None:
                table.add_section()
            group = m["group"]
        cells = [escape(fmt_cell(m["values"].get(n), m["unit"], shape.spreads)) for n in shown]
        table.add_row(escape(label), escape(display_unit(m, report["mode"])), *cells,
                      *[delta_markup(m, n, shape.intervals) for n in names[1:]])
    width = screen.width or FULL_WIDTH
    # Renders; never writes stdout. Colours only for a terminal (NO_COLOR is rich's to honour).
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=screen.colour,
                      color_system="standard" if screen.colour else None, highlight=False)
    fitted = bool(screen.width) and not verbose
    head = short_header(report, width) if fitted else header_lines(report)
    legend = ([SHORT_LEGEND if screen.width else DELTA_LEGEND] if len(names) > 1 else [])
    foot = legend + left_out(report, shape, names, screen.width) + unavailable(metrics, shown, shape, width)
    foot += short_footer(report, width) if fitted else footer_lines(report)
    foot += _workloads(report)
    with console.capture() as capture:
        for line in head:
            _say(console, line, screen)
        console.print(table)
        for line in foot:
            _say(console, line, screen)
        text = summary(report, screen.width)
        if text:
            for line in text.splitlines():
                _say(console, line, screen)
    return capture.get()


def _workloads(report: dict[str, Any]) -> list[str]:
    """What the workload rows' figures come from, under the table: on a screen too (a line
    each, wrapped rather than cut: the command line is what it says)."""
    lines = workload_lines(report)
    return [f"{workloads_head(report)}:", *(f"  {line}" for line in lines)] if lines else []


def _say(console: Console, line: str, screen: Screen) -> None:
    """A line of words: on a screen wrapped at its width (between words), in a file whole."""
    console.print(line, highlight=False, markup=False, soft_wrap=not screen.width)


def delta_markup(m: dict[str, Any], variant: str, interval: bool = True) -> str:
    """A Δ cell as rich markup: its text in its verdict's style."""
    text = escape(delta_text(m, variant, interval))
    v = verdict_of(m, variant)
    style = STYLES.get(v["kind"], "") if v is not None else ""
    return f"[{style}]{text}[/]" if style else text


# -- fitting a width -------------------------------------------------------------------

def fit(report: dict[str, Any], metrics: list[dict[str, Any]], width: int) -> Shape:
    """The compare table's shape for `width` (fit_shape)."""
    return fit_shape(lambda shape: _widths(report, metrics, shape), len(report["variants"]), width)


def fit_shape(widths: Callable[[Shape], tuple[int, int]], variants: int, width: int) -> Shape:
    """The first shape, most shown first, whose table is at most `width` wide; the
    narrowest when none is (its labels then cut by rich, never wrapped). `widths`: a
    table's width in a shape, and its label column's (a study's tables are fitted so too)."""
    narrowest = Shape()
    for shape in _shapes(variants):
        needed, label = widths(shape)
        if needed <= width:
            return shape
        room = label - (needed - width)
        if not shape.spreads and room >= LABEL_MIN:
            return replace(shape, label_width=room)
        narrowest = replace(shape, label_width=LABEL_MIN)
    return narrowest


def _shapes(variants: int) -> Iterator[Shape]:
    yield Shape()
    yield Shape(intervals=False)
    yield Shape(intervals=False, spreads=False)
    for values in range(variants - 1, 0, -1):
        yield Shape(intervals=False, spreads=False, values=values)


def _widths(report: dict[str, Any], metrics: list[dict[str, Any]], shape: Shape) -> tuple[int, int]:
    """The table's width in this shape, and its label column's."""
    names = [v["name"] for v in report["variants"]]
    shown = names[:shape.values or len(names)]
    columns = [["metric", *(m["label"] for m in metrics)],
               ["unit", *(display_unit(m, report["mode"]) for m in metrics)]]
    columns += [[n, *(fmt_cell(m["values"].get(n), m["unit"], shape.spreads) for m in metrics)] for n in shown]
    columns += [[f"Δ {n}", *(delta_text(m, n, shape.intervals) for m in metrics)] for n in names[1:]]
    widths = [max(cell_len(c) for c in column) for column in columns]
    return sum(widths) + GAP * (len(widths) - 1), widths[0]


def left_out(report: dict[str, Any], shape: Shape, names: list[str], width: int | None) -> list[str]:
    """The one line that says what the table left out to fit the screen."""
    said = []
    if not shape.intervals and report["mode"] == "wall":
        said.append("the Δ's 95% intervals")
    if not shape.spreads:
        said.append("spreads (± and n)")
    if shape.values:
        said.append(f"the values of {', '.join(names[shape.values:])} (their Δ shown)")
    if shape.label_width:
        said.append("the middle of long labels")
    if not said or width is None:
        return []
    line = f"left out to fit {width} columns: {', '.join(said)}"
    return [first_fitting([f"{line}; -o FILE has them all", line], width)]


def unavailable(metrics: list[dict[str, Any]], names: list[str], shape: Shape, width: int) -> list[str]:
    """Why the cells that say only "n/a" are not available: a line per reason."""
    if shape.spreads:
        return []
    why: dict[str, dict[str, list[str]]] = {}
    for m in metrics:
        for n in names:
            reason = (m["values"].get(n) or {}).get("not_available")
            if reason:
                why.setdefault(reason, {}).setdefault(m["label"], []).append(n)
    out = []
    for reason, rows in why.items():
        cells = [f"{label} on {' and '.join(on)}" for label, on in rows.items()]
        out.append(clip(f"n/a: {', '.join(cells)}: {reason}", width))
    return out


def shortened(labels: list[str], width: int | None) -> list[str]:
    """Each label at most `width` long, cut in the middle (the start says what it is, the end
    which one: "(host time)", "99th pct"), every one still told apart from the others."""
    if width is None:
        return labels
    out = [shorten(label, width) for label in labels]
    seen: dict[str, int] = {}
    for text in out:
        seen[text] = seen.get(text, 0) + 1
    return [text if seen[text] == 1 or text == label else _cut_chars(label, width)
            for text, label in zip(out, labels, strict=True)]


def shorten(label: str, width: int) -> str:
    """`label` within `width`: its first words, "…", and as many of its last words as fit."""
    if cell_len(label) <= width:
        return label
    words = label.split(" ")
    tail: list[str] = []
    for word in reversed(words[1:]):
        if cell_len(_elided(words[:1], [word, *tail])) > width:
            break
        tail.insert(0, word)
    if not tail:
        return _cut_chars(label, width)
    head = words[:1]
    for word in words[1:len(words) - len(tail)]:
        if cell_len(_elided([*head, word], tail)) > width:
            break
        head.append(word)
    return _elided(head, tail)


def _elided(head: list[str], tail: list[str]) -> str:
    return " ".join(head) + "… " + " ".join(tail)


def _cut_chars(label: str, width: int) -> str:
    """`label` cut in the middle between characters, its end (what tells it apart) kept longer."""
    end = (width - 1) * 3 // 5
    return label[:width - 1 - end] + "…" + label[len(label) - end:]
