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
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import jinja2
import vl_convert

from .. import __version__, modes
from ..guest import vulnerabilities
from ..metrics.catalog import describe
from . import fmt_cell, fmt_value, footer_lines, header_lines, shown_metrics
from .attribution import probe_build_s
from .auditreport import effect_text
from .conclusion import delta_text, summary_parts, verdict_of
from .model import BETTER, NOT_COMPARED, WORSE


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
                       "charts": [{"title": c.title, "id": f"chart-{charts.index(c)}", "index": charts.index(c)}
                                  for c in s.charts]})
    return _ENV.get_template("report.html.j2").render(
        title=title, subtitle=subtitle, sections=placed, footer=footer, version=__version__,
        specs_json=_json_for_script([c.spec for c in charts]), bundle=_bundle())


def link(url: str) -> str:
    """An address safe to put in href: http(s) only (never javascript: or data:)."""
    return url if re.match(r"https?://[^\s\"'<>]+$", url) else ""


# -- compare ---------------------------------------------------------------------------

def compare_page(report: dict[str, Any]) -> str:
    sections = [_summary_section(report),
                Section("How the numbers were obtained", items=header_lines(report) + footer_lines(report))]
    sections += compare_sections(report)
    return page(f"kernellab compare: {report['experiment']}", report.get("description", ""), sections,
                _footer(report))


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
    deltas = _delta_charts(report, shown)
    if deltas:
        sections.append(Section(f"{prefix}Change against {report['variants'][0]['name']}", charts=deltas,
                                paragraphs=[_delta_legend(report)]))
    if wanted is None:
        timeline = _boot_charts(report)
        if timeline:
            sections.append(Section(f"{prefix}Boot timeline", charts=timeline))
        memory = _memory_chart(report)
        if memory:
            sections.append(Section(f"{prefix}Kernel memory (the \"Memory:\" line)", charts=[memory]))
        if report.get("size"):
            sections.append(size_section(report["size"]))
    sections.append(Section(f"{prefix}All metrics", tables=[_metric_table(report, shown)]))
    return sections


def _delta_legend(report: dict[str, Any]) -> str:
    if modes.get(report["mode"]).deterministic:
        return ("Exact differences (icount: reruns are identical). Filled: a difference; hollow: no difference "
                "(within the metric's noise floor or the spread of its repeats); cross: not compared (not to be "
                "believed from what was measured: the tooltip says why).")
    return ("Medians' difference with its 95% confidence interval. Filled: significant after the correction "
            "for many metrics; hollow: not significant, no difference; cross: not compared (the tooltip says why).")


# A verdict as the charts name it.
_CHART_VERDICTS = {WORSE: "difference: worse", BETTER: "difference: better", NOT_COMPARED: "not compared"}


def _verdicts(report: dict[str, Any], shown: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One chart row per cell with a change, its verdict read from the report."""
    rows = []
    for m in shown:
        for v in report["variants"][1:]:
            verdict = verdict_of(m, v["name"])
            if verdict is None or verdict["delta_pct"] is None:
                continue
            c = m["comparison"].get(v["name"]) or {}
            rows.append({"group": m["group"], "metric": m["label"], "variant": v["name"],
                         "delta": round(verdict["delta_pct"], 3), "lo": c.get("ci_low_pct"), "hi": c.get("ci_high_pct"),
                         "verdict": _CHART_VERDICTS.get(verdict["kind"], "no difference"),
                         "how": f"{verdict['reason']}; {verdict['how']}" if verdict["how"] else verdict["reason"]})
    return rows


def _delta_charts(report: dict[str, Any], shown: Sequence[dict[str, Any]]) -> list[Chart]:
    rows = _verdicts(report, shown)
    baseline = report["variants"][0]["name"]
    charts = []
    for group in dict.fromkeys(r["group"] for r in rows):
        group_rows = [r for r in rows if r["group"] == group]
        data = _data(group_rows)
        y = alt.Y("metric:N", sort=None, title=None)
        color = alt.Color("variant:N", title="variant")
        points = alt.Chart(data).mark_point(size=70).encode(
            x=alt.X("delta:Q", title=f"change against {baseline}, %"), y=y, color=color,
            fill=alt.condition("indexof(datum.verdict, 'difference:') == 0", color, alt.value("transparent")),
            shape=alt.Shape("verdict:N", title="verdict",
                            scale=alt.Scale(domain=["difference: worse", "difference: better", "no difference",
                                                    "not compared"],
                                            range=["triangle-right", "triangle-left", "circle", "cross"])),
            tooltip=["metric:N", "variant:N", alt.Tooltip("delta:Q", format="+.2f"), "verdict:N", "how:N"])
        zero = alt.Chart(_data([{"zero": 0}])).mark_rule(color="#8a8f9c").encode(x="zero:Q")
        layers = [zero, points]
        if any(r["lo"] is not None for r in group_rows):   # intervals: wall mode
            layers.insert(1, alt.Chart(data).mark_rule().encode(x="lo:Q", x2="hi:Q", y=y, color=color))
        chart = alt.layer(*layers).properties(width=_WIDTH)
        charts.append(Chart(group, chart.to_dict()))
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
            x=alt.X("t:Q", title="guest time since boot (printk), s"), y=alt.Y("variant:N", sort=None, title=None),
            color=alt.Color("milestone:N", sort=None), tooltip=["variant:N", "milestone:N",
                                                                alt.Tooltip("t:Q", format=".4f")])
        charts.append(Chart("Milestones", (line + ticks).properties(width=_WIDTH).to_dict()))
    initcalls = [m for m in shown_metrics(report, show_all=False) if m["group"] == "initcalls"]
    calls = [{"variant": v["name"], "initcall": m["label"], "us": m["values"][v["name"]]["median"]}
             for m in initcalls for v in report["variants"] if "median" in m["values"].get(v["name"], {})]
    if calls:
        chart = alt.Chart(_data(calls)).mark_bar().encode(
            x=alt.X("us:Q", title="initcall time, us"), y=alt.Y("initcall:N", sort="-x", title=None),
            yOffset="variant:N", color="variant:N", tooltip=["initcall:N", "variant:N", "us:Q"])
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
        cells = [Cell(m["label"]), Cell(m["unit"])]
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

def study_page(study: dict[str, Any], details: str) -> str:
    """A study: its summary first, then per arch the seed's tables as charts and tables;
    `details` is the text report, for the parts (the split, the sweep) shown as text."""
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
        sections.append(Section(f"{arch}: how", items=header_lines(report)))
        sections += compare_sections(report, metrics, heading=arch)
    sections.append(Section("The text report", paragraphs=[], tables=[_pre_table(details)]))
    return page(f"kernellab study {study['study']}: {study['title']}", study["question"], sections,
                f"kernellab study report format {study['format_version']}")


def _pre_table(text: str) -> Table:
    return Table(["line"], [Row([Cell(line)]) for line in text.splitlines()])


def sweep_page(result: dict[str, Any]) -> str:
    sections = [Section("How the numbers were obtained", items=[
        modes.get(result["mode"]).summary,
        f"{len(result['flips'])} option(s) flipped one at a time from the baseline",
        f"cost: {result['builds']} build(s), {result['boots']} boot(s), {result['wall_s']:.0f} s wall"])]
    for metric in result["metrics"]:
        unit = describe(metric, "").unit
        rows = []
        for f in result["flips"]:
            c = f["effects"].get(metric, {})
            if c.get("delta_pct") is not None:
                rows.append({"option": f"{f['option']}={f['value']}", "delta": c["delta_pct"],
                             "lo": c.get("ci_low_pct"), "hi": c.get("ci_high_pct"),
                             "verdict": c["verdict"]["kind"] if "verdict" in c else "not judged (an older file)"})
        rows.sort(key=lambda r: -abs(r["delta"]))
        order = [r["option"] for r in rows]
        data = _data(rows)
        layers = [alt.Chart(data).mark_bar().encode(
            x=alt.X("delta:Q", title=f"change of {metric} against the baseline, %"),
            y=alt.Y("option:N", sort=order, title=None), color=alt.Color("verdict:N"),
            tooltip=["option:N", alt.Tooltip("delta:Q", format="+.2f"), "verdict:N"])]
        if any(r["lo"] is not None for r in rows):
            layers.append(alt.Chart(data).mark_rule().encode(x="lo:Q", x2="hi:Q", y=alt.Y("option:N", sort=order)))
        section = Section(f"{metric}: the options ranked by effect",
                          paragraphs=[f"baseline {fmt_value(result['baseline'][metric], unit)} {unit}"])
        if rows:
            section.charts.append(Chart(metric, alt.layer(*layers).properties(width=_WIDTH).to_dict()))
        sections.append(section)
    sections.append(Section("What each flip changed", tables=[Table(
        ["option", "objects depending on it", "build", "also changed", "not applied"],
        [Row([Cell(f"{f['option']}={f['value']}"), Cell(str(f["rebuild_objects"]), "num"),
              Cell(f"{'built in' if f['built'] else 'cached build of'} {probe_build_s(f):.0f} s"),
              Cell(", ".join(f["also_changed"])), Cell("; ".join(f["dropped"]), "failed")])
         for f in result["flips"]])]))
    return page("kernellab sweep", ", ".join(result["metrics"]), sections, modes.get(result["mode"]).summary)


def bisect_page(result: dict[str, Any], text: str) -> str:
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
    sections = [Section("Summary", summary=[line for line in text.splitlines()[:3] if line]),
                Section("Culprits", tables=[culprits]), section, Section("The text report", tables=[_pre_table(text)])]
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


def audit_page(findings: Sequence[dict[str, Any]], config: str, profile: str,
               measured: dict[str, Any] | None = None) -> str:
    sections = [Section("Summary", summary=[
        f"{sum(f['verdict'] == v for f in findings)} finding(s): {_VERDICT_TITLES[v].lower()}"
        for v in _VERDICT_TITLES if any(f["verdict"] == v for f in findings)])]
    for verdict, title in _VERDICT_TITLES.items():
        chosen = [f for f in findings if f["verdict"] == verdict]
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
                             Cell(_evidence_text(evidence), href=link(evidence["source"]) if evidence else "")]))
        sections.append(Section(title, tables=[Table(["rule", "option", "now", "recommended", "why", "evidence"],
                                                     rows)]))
    if measured:
        sections.append(_measured_section(measured))
    return page(f"kernellab audit: {config}", f"profile {profile}", sections, "rules: src/kernellab/knowledge")


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
    if e is None:
        return "-"
    checked = {True: "", False: " (not verified)", None: ""}[e.get("verified")]
    return f"{e['figure']}{checked} - {e['source']}"
