"""HTML views of kernellab's reports: one self-contained file per report, charts drawn by
Vega-Lite (specs built with altair, the JavaScript bundled by vl-convert), text through
jinja2 with autoescaping. The page fetches nothing: scripts and styles are inline and its
Content-Security-Policy forbids any request.

What came from outside (variant names, config strings, console text, rule citations) is
text: the template escapes it, chart data travels as JSON with every <, > and & escaped,
and only http(s) addresses become links.
"""

from __future__ import annotations

import functools
import json
import math
import re
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import jinja2
import vl_convert

from .. import __version__, modes
from ..guest import vulnerabilities
from ..metrics.catalog import describe
from . import (
    FEW_SAMPLES,
    display_unit,
    fmt_cell,
    fmt_value,
    footer_lines,
    header_lines,
    shown_metrics,
    workload_lines,
    workloads_head,
)
from .attribution import probe_build_s
from .auditreport import effect_text, summary_lines
from .conclusion import delta_text, pct_text, summary_parts, verdict_of
from .model import BETTER, NO_DIFFERENCE, NOT_COMPARED, WORSE


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = ""
    href: str = ""


@dataclass(frozen=True)
class Row:
    cells: Sequence[Cell] = ()
    group: str = ""          # a heading row across the table instead of cells


@dataclass(frozen=True)
class Table:
    head: Sequence[str]
    rows: Sequence[Row]
    title: str = ""
    # Each column's share of the page's width (CSS, "20%"), for a table of prose that the
    # browser's own layout would squeeze into one narrow column; empty: the browser decides.
    widths: Sequence[str] = ()

    def numeric(self) -> list[bool]:
        """Per column, whether it holds figures (every cell "num"): its header is aligned as they are."""
        cells = [r.cells for r in self.rows if not r.group]
        return [bool(cells) and all(i < len(c) and "num" in c[i].css.split() for c in cells)
                for i in range(len(self.head))]


@dataclass(frozen=True)
class Chart:
    title: str
    spec: dict[str, Any]


@dataclass
class Section:
    title: str
    summary: list[str] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    text: str = ""           # a text report, shown as it is printed (its columns kept)
    # Reference a reader opens when wanted: all but the heading folded away (<details>),
    # this line, which says what it holds, the one to click. Empty: shown.
    folded: str = ""


# The "Memory:" line's fields, in the kernel's order: what the image costs in RAM.
MEMORY_SPLIT = ("kernel_code", "rwdata", "rodata", "init", "bss", "reserved")
_WIDTH = 640


@functools.cache
def _bundle() -> str:
    """vega, vega-lite and vega-embed as one script, for the Vega-Lite version altair writes."""
    version = ".".join(alt.SCHEMA_VERSION.split(".")[:2])
    bundle: str = vl_convert.javascript_bundle(vl_version=version)  # type: ignore[call-arg]
    # Inside <script> these would end the element or change how the HTML parser reads it.
    if re.search(r"</script|<!--|<script", bundle, re.IGNORECASE):
        raise RuntimeError("the Vega bundle holds a sequence that cannot be inlined in <script>")
    return bundle


def _data(values: Sequence[dict[str, Any]]) -> alt.Data:
    """Inline chart data (no pandas on the way)."""
    return alt.Data(values=list(values))  # type: ignore[no-untyped-call]


def _json_for_script(data: Any) -> str:
    """JSON that no string inside can turn into markup: `</script>` stays data."""
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_ENV = jinja2.Environment(loader=jinja2.PackageLoader("kernellab.report", "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def page(title: str, subtitle: str, sections: Sequence[Section], footer: str) -> str:
    charts = [c for s in sections for c in s.charts]
    placed = []
    for s in sections:
        placed.append({"title": s.title, "anchor": re.sub(r"[^a-z0-9]+", "-", s.title.lower()).strip("-"),
                       "summary": s.summary, "paragraphs": s.paragraphs, "bullets": s.items, "tables": s.tables,
                       "text": s.text, "folded": s.folded,
                       "charts": [{"title": c.title, "id": f"chart-{charts.index(c)}", "index": charts.index(c)}
                                  for c in s.charts]})
    return _ENV.get_template("report.html.j2").render(
        title=title, subtitle=subtitle, sections=placed, footer=footer, version=__version__,
        specs_json=_json_for_script(_verdict_legend_once([c.spec for c in charts])), bundle=_bundle())


def _verdict_legend_once(specs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The charts' specs with the verdict legend drawn once per page, above the first chart
    that has it: the same four entries over every chart made the page longer and said
    nothing new. A legend in other words (verdict_marks' `legend`) is drawn again, once."""
    drawn: set[str] = set()
    out = []
    for spec in specs:
        spec = json.loads(json.dumps(spec))   # the caller's spec stays as it was
        legends = [channel for channel in _channels(spec)
                   if channel.get("field") == "verdict" and isinstance(channel.get("legend"), dict)]
        said = {json.dumps(c["legend"], sort_keys=True) for c in legends}
        for channel in legends:
            if json.dumps(channel["legend"], sort_keys=True) in drawn:
                channel["legend"] = None
        drawn |= said
        out.append(spec)
    return out


def _channels(spec: Any) -> Iterable[dict[str, Any]]:
    """Every encoding channel of a Vega-Lite spec, its layers' included."""
    if isinstance(spec, dict):
        for name, value in spec.items():
            if name == "encoding" and isinstance(value, dict):
                yield from (c for c in value.values() if isinstance(c, dict))
            else:
                yield from _channels(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from _channels(value)


def link(url: str) -> str:
    """An address safe to put in href: http(s) only (never javascript: or data:)."""
    return url if re.match(r"https?://[^\s\"'<>]+$", url) else ""


# A verdict as the charts say it (their colour and shape legend): what each one means.
VERDICT_LEGEND = {WORSE: "worse: a difference", BETTER: "better: a difference",
                  NO_DIFFERENCE: "no difference (within the noise)",
                  NOT_COMPARED: "not compared (the tooltip says why)"}
_VERDICT_COLOURS = {WORSE: "#9c2a1a", BETTER: "#1c6b33", NO_DIFFERENCE: "#7a8193",
                    NOT_COMPARED: "#b4b9c5"}
_VERDICT_SHAPES = {WORSE: "triangle-right", BETTER: "triangle-left", NO_DIFFERENCE: "circle",
                   NOT_COMPARED: "cross"}
# A label longer than this wraps onto another line of the axis: none is cut, so that none
# reads as another (three "timer wakeup latency under load,..." rows once did).
_LABEL_CHARS = 36
_LINE_PX = 13
# The plot's width, and what a chart's labels and its column of figures take beside it:
# the whole fits the page's column at 1,280 px.
PLOT_WIDTH = 440
# The figures written beside a chart: a long variant name is cut (its tooltip has it whole)
# rather than push the chart past the page.
TEXT_LIMIT = 300
# A change of -99.9% or more (down to nothing) is drawn at -99.9%: a log axis has no 0.
_MIN_RATIO = 1e-3


def _wrapped(label: str) -> str:
    """The label on as many lines as it needs, none cut ("\\n" between them: the axis splits)."""
    return "\n".join(textwrap.wrap(label, _LABEL_CHARS, break_on_hyphens=False)) or "-"


def row_labels(labels: Sequence[str], names: Sequence[str]) -> list[str]:
    """Each row's axis label: its label, wrapped; a label two rows share says its row's name
    too (a chart would draw both rows as one)."""
    count = Counter(labels)
    shown = [_wrapped(label if count[label] == 1 else f"{label} ({name})") for label, name in zip(labels, names,
                                                                                                 strict=True)]
    if len(set(shown)) < len(shown):   # still twice: the names said it in another way
        shown = [f"{s}\n{name}" for s, name in zip(shown, names, strict=True)]
    return shown


def label_axis() -> alt.Axis:
    return alt.Axis(labelExpr="split(datum.label, '\\n')", labelLimit=0, title=None, labelPadding=6)


def row_step(rows: Sequence[dict[str, Any]], per_row: int) -> int:
    """Pixels per step of a chart's y axis, enough for its longest label: a row, or with
    several series per row (yOffset, whose step it is then) one series of it."""
    lines = max((r["row"].count("\n") + 1 for r in rows), default=1)
    return max(14, math.ceil((_LINE_PX * lines + 8) / per_row))


# -- change charts: a log-ratio axis -----------------------------------------------------

def _ratio(pct: float) -> float:
    return max(1 + pct / 100, _MIN_RATIO)


# Round changes to mark on a ratio axis, the roundest first: +100%, -50%, +900%, -90%, ...
_TICK_RATIOS = (1.0, 2.0, 0.5, 10.0, 0.1, 100.0, 0.01, 1000.0, 0.001, 5.0, 0.2, 1.5, 3.0, 20.0, 50.0, 200.0, 500.0,
                1.25, 0.8, 0.75, 1.1, 0.9, *(1 + sign * f * 10.0 ** e for e in (-2, -3, -4) for f in (5, 2, 1)
                                             for sign in (1, -1)))


def _ratio_ticks(lo: float, hi: float) -> list[float]:
    """Ratios to mark on an axis from lo to hi: the roundest changes that leave room between them."""
    gap = math.log(hi / lo) / 9
    ticks: list[float] = []
    for r in _TICK_RATIOS:
        if lo <= r <= hi and all(abs(math.log(r / t)) >= gap for t in ticks):
            ticks.append(r)
    return sorted(ticks)


def _ratio_x(ratios: Sequence[float], title: str) -> alt.X:
    """An x axis of ratios on a log scale, labelled in % change: +900% and +100% both show."""
    lo, hi = min(1.0, *ratios), max(1.0, *ratios)
    span = max(math.log(hi / lo), math.log(1.02))
    lo, hi = lo / math.exp(0.06 * span), hi * math.exp(0.06 * span)
    return alt.X("ratio:Q", title=title, scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
                 axis=alt.Axis(values=_ratio_ticks(lo, hi), labelFlush=False,
                               labelExpr="datum.value == 1 ? '0%' : format((datum.value - 1) * 100, '+,.3~r') + '%'"))


def change_text(delta: float, lo: float | None, hi: float | None) -> str:
    text = pct_text(delta)
    return text + (f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else "")


def verdict_marks(legend: dict[str, str] = VERDICT_LEGEND) -> dict[str, Any]:
    """A point's stroke, fill and shape by its `verdict` field (a kind of VERDICT_LEGEND):
    filled for a difference, hollow for none, a cross for not compared, in one legend that
    says `legend`'s words for them (a page whose verdicts have words of their own keeps the marks)."""
    # The data says the verdict's kind (worse); the legend what it means.
    shown = alt.Legend(orient="top", title="verdict", labelLimit=0, symbolStrokeWidth=1.5,
                       labelExpr=f"{json.dumps(legend)}[datum.label]")
    scale = {k: alt.Scale(domain=list(VERDICT_LEGEND), range=list(d.values()))
             for k, d in (("colour", _VERDICT_COLOURS), ("shape", _VERDICT_SHAPES))}
    fills = alt.Scale(domain=list(VERDICT_LEGEND),
                      range=[_VERDICT_COLOURS[k] if k != NO_DIFFERENCE else "transparent" for k in VERDICT_LEGEND])
    return {"stroke": alt.Stroke("verdict:N", scale=scale["colour"], legend=shown),
            "fill": alt.Fill("verdict:N", scale=fills, legend=shown),
            "shape": alt.Shape("verdict:N", scale=scale["shape"], legend=shown)}


def change_chart(rows: Sequence[dict[str, Any]], title: str) -> dict[str, Any]:
    """Changes as points on a log-ratio axis, one row each (`row`: its axis label; `series`:
    whose change, when a row holds several), coloured and shaped by verdict, with the change
    written beside each and, where measured, its 95% interval as a line."""
    series = list(dict.fromkeys(r["series"] for r in rows))
    several = len(series) > 1
    values = [r | {"ratio": _ratio(r["delta"]),
                   "ratio_lo": None if r["lo"] is None else _ratio(r["lo"]),
                   "ratio_hi": None if r["hi"] is None else _ratio(r["hi"]),
                   "text": (f"{r['series']}: " if several else "") + change_text(r["delta"], r["lo"], r["hi"])}
              for r in rows]
    data = _data(values)
    x = _ratio_x([v["ratio"] for v in values] + [v[k] for v in values for k in ("ratio_lo", "ratio_hi") if v[k]],
                 title)
    y = alt.Y("row:N", sort=list(dict.fromkeys(r["row"] for r in rows)), axis=label_axis())
    offset = {"yOffset": alt.YOffset("series:N", sort=series)} if several else {}
    points = alt.Chart(data).mark_point(size=80, strokeWidth=1.5, opacity=1).encode(
        x=x, y=y, **offset, **verdict_marks(),
        tooltip=[alt.Tooltip("label:N", title="metric"), alt.Tooltip("series:N", title="variant"),
                 alt.Tooltip("text:N", title="change"), "verdict:N", "how:N"])
    one = alt.Chart(_data([{"ratio": 1.0}])).mark_rule(color="#8a8f9c").encode(x=alt.X("ratio:Q"))
    figures = alt.Chart(data).mark_text(align="left", dx=10, fontSize=11, color="#1d2330", limit=TEXT_LIMIT).encode(
        x=alt.value(PLOT_WIDTH), y=y, **offset, text="text:N")
    layers: list[alt.Chart] = [one, points, figures]
    if any(v["ratio_lo"] is not None for v in values):
        layers.insert(1, alt.Chart(data).mark_rule(color="#5a6275").encode(
            x=alt.X("ratio_lo:Q"), x2="ratio_hi:Q", y=y, **offset))
    step = row_step(values, len(series) if several else 1)
    spec: dict[str, Any] = alt.layer(*layers).properties(width=PLOT_WIDTH, height=alt.Step(step)).to_dict()
    return spec


# -- values: each variant's figure and its spread ---------------------------------------

def _spread(cell: dict[str, Any]) -> tuple[float, float] | None:
    """The whisker of a cell, as the tables' ± says it: the interquartile range from
    FEW_SAMPLES samples on, the range below, none for one sample."""
    n = cell.get("n", 1)
    if n >= FEW_SAMPLES and "q1" in cell:
        return cell["q1"], cell["q3"]
    if n > 1 and "min" in cell:
        return cell["min"], cell["max"]
    return None


def values_chart(report: dict[str, Any], metrics: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Each variant's median as a bar with its repeats' spread, per metric, written out
    beside it (value, spread, n) as Phoronix's result viewer shows a result: each metric's
    bars to its own scale (the longest whisker or bar is the full width), for a group's
    metrics have units of their own."""
    names = [v["name"] for v in report["variants"]]
    labels = row_labels([m["label"] for m in metrics], [m["name"] for m in metrics])
    rows = []
    for m, label in zip(metrics, labels, strict=True):
        cells = {n: m["values"].get(n) or {} for n in names}
        tops = [max([c["median"], *(_spread(c) or ())], key=abs) for c in cells.values() if "median" in c]
        top = max((abs(t) for t in tops), default=0.0) or 1.0
        row = f"{label}\n{display_unit(m, report['mode'])}"
        for n, c in cells.items():
            spread = _spread(c) if "median" in c else None
            rows.append({"row": row, "label": m["label"], "variant": n,
                         "bar": c["median"] / top if "median" in c else None,
                         "lo": spread[0] / top if spread else None, "hi": spread[1] / top if spread else None,
                         "text": f"{n}: {'n/a' if 'not_available' in c else fmt_cell(c or None, m['unit'])}",
                         "why": c.get("not_available", "")})
    if not rows:
        return None
    data = _data(rows)
    y = alt.Y("row:N", sort=list(dict.fromkeys(r["row"] for r in rows)), axis=label_axis())
    offset = alt.YOffset("variant:N", sort=names)
    colour = alt.Color("variant:N", sort=names, legend=None)
    low = min([0.0] + [r[k] for r in rows for k in ("bar", "lo") if r[k] is not None])
    x = alt.X("bar:Q", axis=None, scale=alt.Scale(domain=[low, 1.0], nice=False, clamp=True))
    bars = alt.Chart(data).mark_bar(height={"band": 0.8}).encode(
        x=x, y=y, yOffset=offset, color=colour, tooltip=[alt.Tooltip("label:N", title="metric"), "text:N", "why:N"])
    whiskers = alt.Chart(data).mark_rule(color="#1d2330").encode(x="lo:Q", x2="hi:Q", y=y, yOffset=offset)
    figures = alt.Chart(data).mark_text(align="left", dx=8, fontSize=11, color="#1d2330", limit=TEXT_LIMIT).encode(
        x=alt.value(PLOT_WIDTH), y=y, yOffset=offset, text="text:N", tooltip=["text:N", "why:N"])
    step = row_step(rows, len(names))
    return alt.layer(bars, whiskers, figures).properties(width=PLOT_WIDTH, height=alt.Step(step)).to_dict()


# -- compare ---------------------------------------------------------------------------

def compare_page(report: dict[str, Any]) -> str:
    sections = [_summary_section(report),
                Section("How the numbers were obtained", items=header_lines(report) + footer_lines(report))]
    sections += compare_sections(report) + _workloads_section(report)
    return page(f"kernellab compare: {report['experiment']}", report.get("description", ""), sections,
                _footer(report))


def _workloads_section(report: dict[str, Any]) -> list[Section]:
    """What the workload rows' figures come from, under the table; none without workloads."""
    lines = workload_lines(report)
    return [Section("Workloads", paragraphs=[f"{workloads_head(report)}."], items=lines)] if lines else []


def _summary_section(report: dict[str, Any]) -> Section:
    parts = summary_parts(report)
    headlines = [f"{head}:" if groups else f"{head}." for head, groups in parts]
    others = [v["name"] for v in report["variants"][1:]]
    # With several variants each phrase says whose it is.
    items = [g if len(parts) == 1 else f"{name}, {g}"
             for name, (_, groups) in zip(others, parts, strict=True) for g in groups]
    return Section("Summary", summary=headlines or ["One variant: nothing to compare against."],
                   items=items + _failures(report))


def _failures(report: dict[str, Any]) -> list[str]:
    return [f"{v['name']}: run {r['id']} {r['status']}: {r['reason']}"
            for v in report["variants"] for r in v["runs"] if r["status"] != "ok"]


def _footer(report: dict[str, Any]) -> str:
    return (f"kernellab report format {report.get('format_version', '?')}; mode {report['mode']}: "
            f"{modes.get(report['mode']).summary}")


def compare_sections(report: dict[str, Any], metrics: Iterable[str] | None = None,
                     heading: str = "") -> list[Section]:
    """The charts and the table of one comparison report (a study shows one per arch), each
    cell as its verdict says (report.model)."""
    wanted = set(metrics) if metrics is not None else None
    shown = [m for m in shown_metrics(report, show_all=False) if wanted is None or m["name"] in wanted]
    prefix = f"{heading}: " if heading else ""
    sections = []
    baseline = report["variants"][0]["name"]
    deltas = _delta_charts(report, shown)
    if deltas:
        sections.append(Section(f"{prefix}Change against {baseline}", charts=deltas,
                                paragraphs=[_delta_legend(report)]))
    values = _values_charts(report, shown)
    if values:
        sections.append(Section(f"{prefix}Values per variant", charts=values, paragraphs=[_values_legend(report)],
                                folded=_values_said(report, shown, values)))
    if wanted is None:
        timeline = _boot_charts(report)
        if timeline:
            sections.append(Section(f"{prefix}Boot timeline", charts=timeline))
        memory = _memory_chart(report)
        if memory:
            sections.append(Section(f"{prefix}Kernel memory (the \"Memory:\" line)", charts=[memory]))
        if report.get("size"):
            size = size_section(report["size"])
            size.folded = (f"Show where the image's bytes go, by directory and by symbol "
                           f"({_counted(size.charts, 'chart')}, {_counted(size.tables, 'table')}; the largest moves "
                           "are named under How the numbers were obtained)")
            sections.append(size)
    sections.append(Section(f"{prefix}All metrics", tables=[_metric_table(report, shown)]))
    return sections


def _delta_legend(report: dict[str, Any]) -> str:
    scale = ("Each change is the ratio of the two medians on a log scale, labelled in % change: a doubling "
             "(+100%) and a halving (-50%) lie as far from 0%, and +100% stays apart from +900%. ")
    if modes.get(report["mode"]).deterministic:
        return scale + ("Exact differences (icount: reruns are identical). Worse or better, filled: a difference "
                        "larger than the metric's noise floor and the spread of its repeats; no difference, hollow: "
                        "within them; not compared, a cross: not to be believed from what was measured (a host "
                        "clock's single run, an incremental build: the tooltip says why).")
    return scale + ("Wall clock: the medians' difference, its 95% confidence interval as a line. Worse or better, "
                    "filled: significant after the correction for many metrics; no difference, hollow: not "
                    "significant; not compared, a cross: not to be believed from what was measured (the tooltip "
                    "says why).")


def _counted(things: Sequence[Any], what: str) -> str:
    return f"{len(things)} {what}{'s' if len(things) != 1 else ''}"


def _values_said(report: dict[str, Any], shown: Sequence[dict[str, Any]], charts: Sequence[Chart]) -> str:
    """The line that opens the folded values: what they are, of how many metrics."""
    names = [v["name"] for v in report["variants"]]
    whose = "each variant's" if len(names) > 1 else f"{names[0]}'s"
    return (f"Show {whose} median, spread and number of samples of the {len(shown)} metrics "
            f"({_counted(charts, 'chart')}, one per group; the table below has the figures)")


def _values_legend(report: dict[str, Any]) -> str:
    icount = (" A unit marked (icount) is an emulated time: a nanosecond is one instruction, not a hardware "
              "time." if modes.get(report["mode"]).deterministic else "")
    return (f"Each variant's median as a bar, each metric to its own scale (the longest bar or whisker fills the "
            f"width); the whisker is the spread of its samples: the interquartile range from {FEW_SAMPLES} samples "
            f"on, the range (min..max) below. Beside each: the median, the spread (± half the interquartile range "
            f"as % of the median, or min..max) and the number of samples n." + icount)


def _verdicts(report: dict[str, Any], shown: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One chart row per cell with a change, its verdict read from the report."""
    rows = []
    labels = dict(zip((m["name"] for m in shown),
                      row_labels([m["label"] for m in shown], [m["name"] for m in shown]), strict=True))
    for m in shown:
        for v in report["variants"][1:]:
            verdict = verdict_of(m, v["name"])
            if verdict is None or verdict["delta_pct"] is None:
                continue
            c = m["comparison"].get(v["name"]) or {}
            tested = c.get("testable") and c.get("ci_low_pct") is not None and c.get("ci_high_pct") is not None
            rows.append({"group": m["group"], "row": labels[m["name"]], "label": m["label"], "series": v["name"],
                         "delta": round(verdict["delta_pct"], 3), "lo": c["ci_low_pct"] if tested else None,
                         "hi": c["ci_high_pct"] if tested else None,
                         "verdict": verdict["kind"] if verdict["kind"] in VERDICT_LEGEND else NO_DIFFERENCE,
                         "how": f"{verdict['reason']}; {verdict['how']}" if verdict["how"] else verdict["reason"]})
    return rows


def _delta_charts(report: dict[str, Any], shown: Sequence[dict[str, Any]]) -> list[Chart]:
    rows = _verdicts(report, shown)
    baseline = report["variants"][0]["name"]
    return [Chart(group, change_chart([r for r in rows if r["group"] == group], f"change against {baseline}"))
            for group in dict.fromkeys(r["group"] for r in rows)]


def _values_charts(report: dict[str, Any], shown: Sequence[dict[str, Any]]) -> list[Chart]:
    charts = []
    for group in dict.fromkeys(m["group"] for m in shown):
        spec = values_chart(report, [m for m in shown if m["group"] == group])
        if spec is not None:
            charts.append(Chart(group, spec))
    return charts


def _boot_charts(report: dict[str, Any]) -> list[Chart]:
    milestones = [m for m in report["metrics"] if m["group"] == "boot" and m["clock"] == "guest"]
    rows = [{"variant": v["name"], "milestone": m["label"], "t": m["values"][v["name"]]["median"]}
            for m in milestones for v in report["variants"] if "median" in m["values"].get(v["name"], {})]
    charts = []
    if rows:
        data = _data(rows)
        line = alt.Chart(data).mark_line(color="#c4c8d2").encode(x="t:Q", y=alt.Y("variant:N", sort=None),
                                                                 detail="variant:N")
        ticks = alt.Chart(data).mark_point(filled=True, size=90).encode(
            x=alt.X("t:Q", title=f"guest time since boot (printk), {display_unit(milestones[0], report['mode'])}"),
            y=alt.Y("variant:N", sort=None, title=None),
            color=alt.Color("milestone:N", sort=None, legend=alt.Legend(labelLimit=0)),
            tooltip=["variant:N", "milestone:N", alt.Tooltip("t:Q", format=".4f")])
        charts.append(Chart("Milestones", (line + ticks).properties(width=_WIDTH).to_dict()))
    initcalls = [m for m in shown_metrics(report, show_all=False) if m["group"] == "initcalls"]
    calls = [{"variant": v["name"], "initcall": m["label"], "us": m["values"][v["name"]]["median"]}
             for m in initcalls for v in report["variants"] if "median" in m["values"].get(v["name"], {})]
    if calls:
        chart = alt.Chart(_data(calls)).mark_bar().encode(
            x=alt.X("us:Q", title=f"initcall time, {display_unit(initcalls[0], report['mode'])}"),
            y=alt.Y("initcall:N", sort="-x", title=None, axis=alt.Axis(labelLimit=0)),
            yOffset="variant:N", tooltip=["initcall:N", "variant:N", "us:Q"],
            color=alt.Color("variant:N", legend=alt.Legend() if len(report["variants"]) > 1 else None))
        charts.append(Chart("The slowest initcalls", chart.properties(width=_WIDTH).to_dict()))
    return charts


def _memory_chart(report: dict[str, Any]) -> Chart | None:
    metrics = {m["name"]: m for m in report["metrics"]}
    rows = []
    for v in report["variants"]:
        for part in MEMORY_SPLIT:
            cell = metrics.get(f"mem.kernel.{part}", {}).get("values", {}).get(v["name"], {})
            if "median" in cell:
                rows.append({"variant": v["name"], "part": part.replace("_", " "), "KiB": cell["median"],
                             "order": MEMORY_SPLIT.index(part)})
    if not rows:
        return None
    chart = alt.Chart(_data(rows)).mark_bar().encode(
        x=alt.X("KiB:Q", title="KiB (the kernel's own count at boot)"), y=alt.Y("variant:N", sort=None, title=None),
        color=alt.Color("part:N", sort=list(p.replace("_", " ") for p in MEMORY_SPLIT)),
        order=alt.Order("order:Q"), tooltip=["variant:N", "part:N", "KiB:Q"])
    return Chart("Kernel code, data, init and reserved memory", chart.properties(width=_WIDTH).to_dict())


# The table's style of a cell by its verdict (report.html.j2's classes).
_CELL_CSS = {WORSE: "significant", BETTER: "better", NOT_COMPARED: "muted"}


def _metric_table(report: dict[str, Any], shown: Sequence[dict[str, Any]]) -> Table:
    names = [v["name"] for v in report["variants"]]
    rows: list[Row] = []
    group = None
    for m in shown:
        if m["group"] != group:
            group = m["group"]
            rows.append(Row(group=group))
        cells = [Cell(m["label"]), Cell(display_unit(m, report["mode"]))]
        cells += [Cell(fmt_cell(m["values"].get(n), m["unit"]), "num") for n in names]
        for n in names[1:]:
            verdict = verdict_of(m, n)
            css = _CELL_CSS.get(verdict["kind"], "") if verdict is not None else ""
            cells.append(Cell(delta_text(m, n), f"num {css}".strip()))
        rows.append(Row(cells))
    return Table(["metric", "unit", *names, *(f"Δ {n}" for n in names[1:])], rows)


# -- size ------------------------------------------------------------------------------

def size_section(size: dict[str, Any]) -> Section:
    """Where the image's bytes go (report["size"]): by directory, and the symbols that moved most."""
    section = Section("Image size: where it goes", paragraphs=[size["how"]])
    rows = [{"variant": name, "dir": d["dir"], "KiB": round((d["text"] + d["data"] + d["bss"]) / 1024, 1)}
            for name, v in size["variants"].items() for d in v["by_dir"]]
    if rows:
        top = sorted({r["dir"] for r in rows}, key=lambda d: -max(r["KiB"] for r in rows if r["dir"] == d))[:12]
        chart = alt.Chart(_data([r for r in rows if r["dir"] in top])).mark_bar().encode(
            x=alt.X("KiB:Q", title="text + data + bss, KiB"), y=alt.Y("dir:N", sort=top, title=None),
            yOffset="variant:N", color="variant:N", tooltip=["dir:N", "variant:N", "KiB:Q"])
        section.charts.append(Chart("By directory (the largest)", chart.properties(width=_WIDTH).to_dict()))
    for name, c in size["changes"].items():
        against = f"{name} against {size['baseline']}"
        section.tables.append(Table(["section", "added", "removed", "grown", "shrunk", "before", "after"], [
            Row([Cell(sec), *(Cell(f"{t[k]:,}", "num") for k in ("added", "removed", "grown", "shrunk", "before",
                                                                 "after"))])
            for sec, t in c["sections"].items()], f"{against}: symbols per section (bytes)"))
        if c["dirs"]:
            section.tables.append(Table(["directory", "old", "new", "delta"], [
                Row([Cell(r["dir"]), Cell(f"{sum(r['old']):,}", "num"), Cell(f"{sum(r['new']):,}", "num"),
                     Cell(f"{r['delta']:+,}", "num")]) for r in c["dirs"] + c["subdirs"] if r["delta"]],
                f"{against}: directories that changed (text + data + bss, bytes)"))
        section.tables.append(Table(["symbol", "section", "old", "new", "delta", "change"], [
            Row([Cell(r["name"]), Cell(r["section"]), Cell(_plain(r["old"]), "num"), Cell(_plain(r["new"]), "num"),
                 Cell(f"{r['delta']:+,}", "num"), Cell(r["change"])]) for r in c["symbols"]],
            f"{against}: the symbols that changed most (bytes)"))
    return section


# -- study, sweep, bisect, audit -------------------------------------------------------

def study_page(study: dict[str, Any], details: str, sweep_notes: Mapping[str, Sequence[str]]) -> str:
    """A study: its summary first, then per arch the seed's tables as charts and tables, then
    each sweep as its own page shows it; `details` is the text report, for the parts (the
    split) shown only as text. `sweep_notes`: by a sweep's label, the lines the study says
    of it beside its figures (its workloads' provenance, the flips not measured yet); a
    label in it alone is a sweep of which nothing is measured yet."""
    how = [f"question: {study['question']}", f"seed: {study['seed']}", f"arches: {', '.join(study['arches'])}",
           f"baseline {study['baseline']}, subject {study['subject']}",
           f"noise floor: {study['noise_floor']['origin']}",
           f"{study['builds']} build(s), {study['wall_s'] / 60:.0f} min wall"]
    how += [f"left out: {x}" for x in study["left_out"]] + [f"changed: {x}" for x in study.get("changed", [])]
    how += [f"caveat: {c}" for c in study["caveats"]]
    how += [f"not yet measured: {n}" for n in study["not_yet"]] + list(study["support"])
    sections = [Section("Summary", summary=list(study["summary"]) or ["nothing measured"],
                        items=[f"failed: {f}" for f in study["failures"]]),
                Section("How the numbers were obtained", items=how)]
    metrics = [m for t in study["tables"] for m in t["metrics"]]
    for arch, report in study["reports"].items():
        sections.append(Section(f"{arch}: how", items=header_lines(report) + workload_lines(report)))
        sections += compare_sections(report, metrics, heading=arch)
    for label in dict.fromkeys([*study["sweeps"], *sweep_notes]):
        notes = sweep_notes.get(label, ())
        result = study["sweeps"].get(label)
        sections += (sweep_sections(result, notes, heading=label) if result is not None
                     else [Section(f"{label}: {SWEEP_HEADING}", items=list(notes))])
    sections.append(Section("The text report", text=details))
    return page(f"kernellab study {study['study']}: {study['title']}", study["question"], sections,
                f"kernellab study report format {study['format_version']}")


def sweep_page(result: dict[str, Any], workloads: Sequence[str] = ()) -> str:
    """`workloads`: a line per real program the probes ran, what its figures come from."""
    return page("kernellab sweep", ", ".join(result["metrics"]), sweep_sections(result, workloads),
                modes.get(result["mode"]).summary)


# What a sweep is, after its label, where a study's page heads one.
SWEEP_HEADING = "sweep, one option at a time"


def sweep_sections(result: dict[str, Any], notes: Sequence[str] = (), heading: str = "") -> list[Section]:
    """A sweep's sections, on its own page and on a study's: how its numbers were obtained
    (with `notes`, each a line of its own), each metric's options ranked by effect, what each
    flip changed. `heading`: the sweep's label on a study's page, which its sections name
    (the page holds other sections, and the arches' compares)."""
    prefix = f"{heading}: " if heading else ""
    sections = [Section(f"{prefix}{SWEEP_HEADING}" if heading else "How the numbers were obtained", items=[
        modes.get(result["mode"]).summary,
        f"{len(result['flips'])} option(s) flipped one at a time from the baseline",
        f"cost: {result['builds']} build(s), {result['boots']} boot(s), {result['wall_s']:.0f} s wall",
        *notes])]
    for metric in result["metrics"]:
        about = describe(metric, "")
        unit = display_unit({"name": about.name, "unit": about.unit, "clock": about.clock}, result["mode"])
        rows = _sweep_rows(result, metric)
        section = Section(f"{prefix}{metric}: the options ranked by effect",
                          paragraphs=[f"baseline {fmt_value(result['baseline'][metric], about.unit)} {unit}"])
        if rows:
            section.charts.append(Chart(metric, change_chart(rows, f"change of {metric} against the baseline")))
        sections.append(section)
    sections.append(Section(f"{prefix}What each flip changed", tables=[Table(
        ["option", "objects depending on it", "build", "also changed", "not applied"],
        [Row([Cell(f"{f['option']}={f['value']}"), Cell(str(f["rebuild_objects"]), "num"),
              Cell(f"{'built in' if f['built'] else 'cached build of'} {probe_build_s(f):.0f} s"),
              Cell(", ".join(f["also_changed"])), Cell("; ".join(f["dropped"]), "failed")])
         for f in result["flips"]])]))
    return sections


def _sweep_rows(result: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    """Each flip's change of the metric, the largest first, as change_chart draws it."""
    rows = []
    for f in result["flips"]:
        c = f["effects"].get(metric, {})
        if c.get("delta_pct") is None:
            continue
        verdict = c.get("verdict") or {"kind": NOT_COMPARED, "reason": "not judged (a file from an older kernellab)"}
        option = f"{f['option']}={f['value']}"
        tested = c.get("ci_low_pct") is not None and c.get("ci_high_pct") is not None
        rows.append({"row": option, "label": option, "series": "", "delta": c["delta_pct"],
                     "lo": c["ci_low_pct"] if tested else None, "hi": c["ci_high_pct"] if tested else None,
                     "verdict": verdict["kind"] if verdict["kind"] in VERDICT_LEGEND else NO_DIFFERENCE,
                     "how": verdict.get("reason", "")})
    rows.sort(key=lambda r: -abs(r["delta"]))
    labels = row_labels([r["row"] for r in rows], [r["row"] for r in rows])
    return [r | {"row": label} for r, label in zip(rows, labels, strict=True)]


def bisect_page(result: dict[str, Any], text: str, summary: list[str]) -> str:
    unit = result["unit"]
    culprits = Table(["option", "alone on good", "removed from bad", "notes"], [
        Row([Cell(f"{c['option']}={c['value']}"),
             Cell("-" if c["alone_on_good"] is None else f"{c['alone_on_good']:+.4g} {unit}", "num"),
             Cell("-" if c["removed_from_bad"] is None else f"{c['removed_from_bad']:+.4g} {unit}", "num"),
             Cell("; ".join(c["notes"]))]) for c in result["culprits"]], "Culprits")
    probes = _dict_table(result["probes"], "Probes, in the order they ran")
    values = [{"probe": i + 1, "value": p["value"]} for i, p in enumerate(result["probes"])
              if isinstance(p.get("value"), (int, float))]
    section = Section("Probes", tables=[probes])
    if values:
        base = alt.Chart(_data(values))
        points = base.mark_line(point=True).encode(
            x=alt.X("probe:O"), y=alt.Y("value:Q", title=f"{result['metric']}, {unit}", scale=alt.Scale(zero=False)))
        marks = alt.Chart(_data([{"v": result["good"], "k": "good"}, {"v": result["bad"], "k": "bad"}]))
        section.charts.append(Chart("Each probe's value between good and bad", (points + marks.mark_rule(
            strokeDash=[4, 3]).encode(y="v:Q", color="k:N")).properties(width=_WIDTH).to_dict()))
    sections = [Section("Summary", summary=summary), Section("Culprits", tables=[culprits]), section,
                Section("The text report", text=text)]
    return page(f"kernellab bisect: {result['metric']}", modes.get(result["mode"]).summary, sections,
                modes.get(result["mode"]).summary)


def _dict_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return Table(keys, [Row([Cell(_plain(r.get(k))) for k in keys]) for r in rows], title)


def _plain(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


_VERDICT_TITLES = {"change": "Recommended changes", "boot": "Changes made at boot (no rebuild)",
                   "ok": "Already as recommended", "n/a": "Not applicable"}


# The audit table's columns: the option's name whole, the evidence a third of the page.
_AUDIT_WIDTHS = ("18%", "24%", "5%", "11%", "14%", "28%")


def audit_page(audit: dict[str, Any]) -> str:
    """An audit (auditreport.body) as a page: the head every view of it has (the same counts,
    of rules), then its rules grouped by their verdict."""
    findings = audit["findings"]
    sections = [Section("Summary", summary=summary_lines(audit))]
    for verdict, title in _VERDICT_TITLES.items():
        chosen = [f for f in findings if f["rule_verdict"] == verdict]
        if not chosen:
            continue
        rows: list[Row] = []
        category = None
        for f in sorted(chosen, key=lambda f: (f["category"], f["rule"])):
            if f["category"] != category:
                category = f["category"]
                rows.append(Row(group=category))
            evidence = f["evidence"][0] if f["evidence"] else None
            rows.append(Row([Cell(f["title"]), Cell(f["option"]), Cell(f["current"] or "not set"),
                             Cell(f["recommended"] or "/".join(f["expected"])), Cell(f["reason"]),
                             Cell(_evidence_text(evidence), "evidence",
                                  href=link(evidence["source"]) if evidence else "")]))
        sections.append(Section(title, tables=[Table(["rule", "option", "now", "recommended", "why", "evidence"],
                                                     rows, widths=_AUDIT_WIDTHS)]))
    measured = audit.get("measured")
    if measured:
        sections.append(_measured_section(measured))
    return page(f"kernellab audit: {audit['config']}", f"profile {audit['profile']}", sections,
                "rules: src/kernellab/knowledge")


def _measured_section(m: dict[str, Any]) -> Section:
    """audit --measure: each rule's measured effect, and what was not measured."""
    rules = Table(["rule", "change", "metric", "with its group", "with all recommendations"],
                  [Row([Cell(r["rule"]), Cell(f"{r['option']}={r['value']}"), Cell(r["metric"]),
                        Cell(f"{effect_text(r['group_effect'])} ({r['group']})" + _caveat(r)),
                        Cell(effect_text(r["all_effect"]))])
                   for r in m["rules"]])
    missing = Table(["rule", "change", "why not measured"],
                    [Row([Cell(u["rule"]), Cell(u["option"]), Cell(u["why"])]) for u in m["unmeasured"]])
    return Section("Measured by kernellab", summary=[
        m["kernel"], f"{modes.get(m['mode']).summary}; {m['runs']} run(s) per kernel",
        f"{m['builds']} build(s), {m['boots']} boot(s), {m['wall_s'] / 60:.1f} min"],
        tables=[rules, missing] if m["unmeasured"] else [rules])


def _caveat(r: dict[str, Any]) -> str:
    return f"; {vulnerabilities.caveat(r['flaws'], r['not_affected'])}" if r.get("not_affected") else ""


def _evidence_text(e: dict[str, Any] | None) -> str:
    """The figure and where it is from: a linked source by its site (the link has the
    address: a whole one in the text made the table wider than the page)."""
    if e is None:
        return "-"
    checked = {True: "", False: " (not verified)", None: ""}[e.get("verified")]
    site = re.match(r"https?://(?:www\.)?([^/]+)", e["source"]) if link(e["source"]) else None
    return f"{e['figure']}{checked} ({site.group(1)})" if site else f"{e['figure']}{checked} - {e['source']}"
