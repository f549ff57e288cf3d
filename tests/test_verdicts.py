"""One verdict per cell: whether a difference counts is decided once, in the report
(report.model.judge), and every view reads it. One report with every kind of cell goes to
every renderer (terminal table, written summary, Markdown, CSV, HTML, JSON) and to the gate and JUnit,
which must agree with the stored verdict cell by cell."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from markupsafe import escape

from kernellab import gate
from kernellab.metrics.catalog import describe
from kernellab.report import conclusion, html, junit, kinds, model, render, table
from kernellab.stats import DETERMINISTIC_REASON, summarize

SCHEMA = json.loads((Path(__file__).parent.parent / "src/kernellab/report/schema.json").read_text())
FLOOR = model.NoiseFloor({"proc.fork_exit": 4.0}, "by hand, for the test")


def one_run(*samples: float) -> list[list[float]]:
    return [list(samples)]


def runs(*medians: float) -> list[list[float]]:
    return [[m] for m in medians]


# metric -> (a's runs, b's runs; None: not available on b), and the verdict the rule gives.
ICOUNT = {
    "syscall.null": (one_run(100.0, 100.0, 100.0, 100.0, 100.0), one_run(125.0, 125.0, 125.0, 125.0, 125.0),
                     "worse"),
    "syscall.read": (one_run(200.0, 200.0, 200.0, 200.0, 200.0), one_run(180.0, 180.0, 180.0, 180.0, 180.0),
                     "better"),
    # The example: 5.0 (4..8, n=3) against 6.0 (5..6, n=3), -17% within a ±20% spread.
    "irq.idle_timer": (one_run(5.0, 6.0, 6.0), one_run(4.0, 5.0, 8.0), "no difference"),
    "proc.fork_exit": (one_run(1000.0, 1000.0, 1000.0, 1000.0, 1000.0), one_run(1015.0, 1015.0, 1015.0, 1015.0, 1015.0),
                       "no difference"),                                                   # within the 4% floor
    "mem.kernel.kernel_code": (one_run(100_000.0), one_run(100_004.0), "worse"),   # +0.004%: a count, exact
    "boot.init_start.host": (one_run(0.80), one_run(1.20), "not compared"),        # host clock, one run
    "boot.agent_ready.host": (runs(1.00, 1.01, 0.99), runs(1.50, 1.52, 1.49), "worse"),   # tested as wall figures
    "build.wall": ([[300.0]], [[330.0]], "not compared"),                          # one tree: incremental
    "ipc.unix_rtt": (one_run(900.0, 900.0, 900.0), None, "not compared"),         # not available on b
}
WALL = {
    "syscall.null": (runs(100.0, 101.0, 99.0, 100.5, 99.5), runs(125.0, 126.0, 124.0, 125.5, 124.5), "worse"),
    "crypto.aes256cbc_user": (runs(50.0, 51.0, 49.0, 50.5, 49.5), runs(60.0, 61.0, 59.0, 60.5, 59.5), "better"),
    "syscall.read": (runs(200.0, 230.0, 170.0, 215.0, 185.0), runs(205.0, 175.0, 235.0, 190.0, 220.0),
                     "no difference"),
    "boot.init_start.host": (one_run(0.80), one_run(1.20), "not compared"),
    "build.wall": ([[300.0]], [[330.0]], "not compared"),
}


def _cell(per_run: list[list[float]]) -> dict:
    pooled = [v for run in per_run for v in run]
    s = summarize(pooled)
    return {"median": s.median, "n": s.n, "runs": len(per_run), "samples": pooled,
            "run_medians": [sorted(r)[len(r) // 2] for r in per_run], "q1": s.q1, "q3": s.q3, "min": s.low,
            "max": s.high}


def _variant(name: str) -> dict:
    return {"name": name, "source": "debian:6.1", "source_version": "6.1.0", "arch": "x86_64", "base": "tinyconfig",
            "fragments": [], "options": [], "boot_args": [], "sysctls": {}, "config_hash": "0" * 64,
            "dropped_options": [], "build_only": False, "runs": [],
            "build": {"key": f"k-{name}", "wall_s": 300.0, "image_bytes": 2_000_000, "compiler": "gcc", "jobs": 2,
                      "cached": False, "cold": False, "ccache_hit_pct": 50.0}}


def build(mode: str, cells: dict) -> dict:
    """A compare report of variants a and b as report.model shapes, compares and judges it."""
    metrics = []
    for name, (a, b, _) in cells.items():
        info = describe(name, "")
        values = {"a": _cell(a), "b": _cell(b) if b is not None else {"not_available": "needs CONFIG_UNIX"}}
        metrics.append({"name": name, "label": info.label, "unit": info.unit, "better": info.better,
                        "group": info.group, "clock": info.clock, "source": info.source,
                        "valid_in_mode": info.valid_in(mode), "values": values, "delta_pct": {}, "comparison": {}})
    for name, c in model.compare_variants(metrics, "a", "b", mode).items():
        m = next(m for m in metrics if m["name"] == name)
        m["delta_pct"]["b"], m["comparison"]["b"] = c.delta_pct, c.to_dict()
    report = {"format_version": model.FORMAT_VERSION, "experiment": f"every verdict, {mode}", "description": "",
              "mode": mode, "mode_note": "a test", "runs_per_variant": {"a": 1, "b": 1},
              "statistics": model.statistics_note(mode),
              "machine": {"host": "h", "cpu": "c", "cores": 2, "kernel": "k"},
              "variants": [_variant("a"), _variant("b")], "metrics": metrics}
    return model.judge(report, FLOOR)


@pytest.fixture(scope="module", params=["icount", "wall"])
def case(request) -> tuple[dict, dict[str, str]]:
    cells = ICOUNT if request.param == "icount" else WALL
    return build(request.param, cells), {name: kind for name, (_, _, kind) in cells.items()}


def kinds_of(report: dict) -> dict[str, str]:
    return {m["name"]: m["verdict"]["b"]["kind"] for m in report["metrics"]}


def test_the_rule_gives_each_cell_its_verdict_with_a_true_reason(case):
    report, expected = case
    assert kinds_of(report) == expected
    for m in report["metrics"]:
        if m["clock"] in model.HOST_TIMED:   # the host's clock is never exact, whatever the mode
            assert m["comparison"].get("b", {}).get("reason") != DETERMINISTIC_REASON
            assert "exact" not in m["verdict"]["b"]["reason"]
    verdicts = {m["name"]: m["verdict"]["b"] for m in report["metrics"]}
    assert verdicts["build.wall"]["reason"] == "incremental builds in one build tree"
    assert verdicts["boot.init_start.host"]["reason"] == "one run of a host-clock figure"
    if report["mode"] == "icount":
        assert verdicts["irq.idle_timer"]["reason"] == "within the spread of the repeats (±20%)"
        assert verdicts["proc.fork_exit"]["floor_pct"] == 4.0
        assert verdicts["boot.agent_ready.host"]["reason"].startswith("significant (Holm-adjusted p = ")
        assert verdicts["ipc.unix_rtt"]["reason"] == "not available on b: needs CONFIG_UNIX"


def test_json_carries_the_verdicts_and_matches_the_schema(case):
    report, expected = case
    written = json.loads(render(report, "json"))
    jsonschema.validate(written, SCHEMA)
    assert kinds_of(written) == expected
    assert kinds.read(written, "r.json")[1]["metrics"] == report["metrics"]   # read, not judged again


def test_the_terminal_table_marks_each_cell_as_its_verdict(case):
    report, expected = case
    text = render(report, "table")
    styles = {"worse": "[red]", "better": "[green]", "not compared": "[dim]"}
    for m in report["metrics"]:
        kind = expected[m["name"]]
        markup, words = table.delta_markup(m, "b"), conclusion.delta_text(m, "b")
        assert markup.startswith(styles[kind]) if kind in styles else not markup.startswith("[")
        assert words.endswith("*") == (kind in model.DIFFERENCE)
        assert words.startswith("(") == (kind == "not compared" and m["verdict"]["b"]["delta_pct"] is not None)
        if m["name"] in {x["name"] for x in report["metrics"] if x["valid_in_mode"]} and words != "-":
            assert words in text
    if report["mode"] == "icount":
        # A difference too small for one decimal keeps its digits: it never reads +0.0%.
        code = next(m for m in report["metrics"] if m["name"] == "mem.kernel.kernel_code")
        assert conclusion.delta_text(code, "b") == "+0.0040%*"


def test_the_written_summary_names_exactly_the_differences_and_what_was_not_compared(case):
    report, expected = case
    [(headline, groups)] = conclusion.summary_parts(report)
    said = "; ".join(groups)
    labels = {m["name"]: m["label"] for m in report["metrics"]}
    for name, kind in expected.items():
        named = re.search(rf"{re.escape(labels[name])} [-+][0-9.]+% \((better|worse)\)", said)
        assert (named.group(1) if named else None) == (kind if kind in model.DIFFERENCE else None), name
        unsure = "; ".join(g for g in groups if g.startswith("not compared: "))   # a phrase per reason
        measured = "not_available" not in next(m for m in report["metrics"] if m["name"] == name)["values"]["b"]
        assert (labels[name] in unsure) == (kind == "not compared" and measured), name
    assert headline == f"b vs a ({report['mode']} mode)"


def test_html_colours_and_charts_each_cell_as_its_verdict(case):
    report, expected = case
    page = html.compare_page(report)
    css = {"worse": "num significant", "better": "num better", "not compared": "num muted", "no difference": "num"}
    labels = {m["name"]: m["label"] for m in report["metrics"]}
    for name, kind in expected.items():
        row = re.search(rf"<td class=\"\">{re.escape(str(escape(labels[name])))}</td>.*?</tr>", page, re.S)
        assert row is not None, name
        last = re.findall(r'<td class="([^"]*)">', row.group(0))[-1]   # the Δ b cell
        assert last == css[kind], (name, last)
    specs = json.loads(re.search(r'id="kernellab-charts">(.*?)</script>', page, re.S).group(1))
    # A change chart's point says its verdict's kind; its legend what the kind means.
    points = {r["label"]: r["verdict"] for r in _rows(specs) if "verdict" in r}
    for name, kind in expected.items():
        if labels[name] in points:
            assert points[labels[name]] == kind, name
    assert {labels[n] for n, k in expected.items() if k in model.DIFFERENCE} <= set(points)


def _rows(node):
    if isinstance(node, dict):
        if "label" in node and "series" in node:
            yield node
        for v in node.values():
            yield from _rows(v)
    elif isinstance(node, list):
        for v in node:
            yield from _rows(v)


def test_the_gate_and_junit_break_exactly_on_the_worse_and_the_unseen(case):
    report, expected = case
    # Each metric named ("worse by more than 0%"), and the catch-all regression rule.
    rules = [gate.parse_rule(f"{name}:0") for name in expected] + [gate.regression_rule(0)]
    checks = gate.check(report, rules)
    named = {c.metric: c for c in checks if c.rule.metric}
    for name, kind in expected.items():
        c = named[name]
        assert c.broken == (kind in ("worse", "not compared")), (name, c.detail)
        said = {"worse": "(worse)", "better": "(better)", "no difference": "no difference",
                "not compared": "not compared: "}[kind]
        assert said in c.detail, (name, c.detail)
    caught = {c.metric for c in checks if not c.rule.metric and c.broken}
    assert caught == {n for n, k in expected.items() if k == "worse"}
    cases = list(ET.fromstring(junit.render(report, checks)).iter("testcase"))
    assert len(cases) == len(checks)
    for c, x in zip(checks, cases, strict=True):
        assert x.get("name") == f"{c.metric} [b]" and (x.find("failure") is not None) == c.broken
        assert x.findtext("system-out") == c.line()


def test_a_floor_given_later_judges_every_cell_again_in_one_place(case):
    report, _ = case
    again = model.judge(json.loads(json.dumps(report)), model.NoiseFloor({"syscall.null": 30.0}, "wide"))
    null = next(m for m in again["metrics"] if m["name"] == "syscall.null")["verdict"]["b"]
    if report["mode"] == "icount":
        assert null["kind"] == "no difference" and null["floor_pct"] == 30.0
        assert conclusion.delta_text(next(m for m in again["metrics"] if m["name"] == "syscall.null"), "b") == \
            "within floor (+25.0%, floor 30.0%)"
    else:   # the statistics decide in wall mode; a floor is for exact differences
        assert null["kind"] == "worse"
    assert again["noise_floor"] == {"origin": "wide", "pct": {"syscall.null": 30.0}}


def _markdown_deltas(text: str) -> dict[str, str]:
    """The Markdown table's Δ b cell of each row, by its metric's label."""
    rows = [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0]: cells[-1] for cells in rows[1:]}


def test_markdown_marks_each_cell_as_its_verdict_and_says_the_summary(case):
    report, expected = case
    text = render(report, "markdown", show_all=True)
    deltas = _markdown_deltas(text)
    for m in report["metrics"]:
        kind, cell = expected[m["name"]], deltas[m["label"]]
        measured = m["verdict"]["b"]["delta_pct"] is not None
        assert cell.endswith("*") == (kind in model.DIFFERENCE), (m["name"], cell)
        assert cell.startswith("(") == (kind == "not compared" and measured), (m["name"], cell)
        assert (cell == "-") == (not measured), (m["name"], cell)
        if "floor_pct" in m["verdict"]["b"]:
            assert cell.startswith("within floor ("), (m["name"], cell)
    assert conclusion.DELTA_LEGEND in text and conclusion.summary(report) in text


def test_csv_carries_each_cells_verdict_and_reason(case):
    report, expected = case
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    stored = {m["name"]: m["verdict"]["b"] for m in report["metrics"]}
    for r in rows:
        if r["variant"] == "a":   # the variant compared with has no verdict of its own
            assert (r["verdict"], r["reason"]) == ("", ""), r["metric"]
            continue
        assert r["verdict"] == expected[r["metric"]] == stored[r["metric"]]["kind"], r["metric"]
        assert r["reason"] == stored[r["metric"]]["reason"], r["metric"]
    assert {r["metric"] for r in rows if r["variant"] == "b"} == set(expected)


def _sweep(mode: str, flips: dict[str, list[float]], baseline: list[float]) -> dict:
    """A sweep's result as experiments/sweep.py writes it: each flip's effects judged by
    report.model.judge_probes against the baseline's per-run medians."""
    return kinds.get("sweep").stamp({
        "mode": mode, "metrics": ["syscall.null"], "baseline": {"syscall.null": baseline[0]},
        "builds": 0, "boots": 0, "wall_s": 1.0,
        "flips": [{"option": option, "value": "y", "rebuild_objects": 1, "also_changed": [], "dropped": [],
                   "effects": model.judge_probes({"syscall.null": baseline}, {"syscall.null": runs}, mode),
                   "build_s": 0.0, "built": False, "copy_s": 0.0, "flaws": [], "not_affected": []}
                  for option, runs in flips.items()]})


def test_a_sweep_and_its_views_read_each_flips_verdict():
    """A wall-mode flip that is clearly slower is a difference (before, a sweep's effects
    never carried a significance and no view marked one); one that moves within its runs'
    noise is no difference; the text and the HTML say what the stored verdict says."""
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    result = _sweep("wall", {"CONFIG_SLOW": [130.0, 131.0, 129.0, 130.5, 129.5],
                             "CONFIG_SAME": [100.2, 99.2, 101.1, 99.8, 100.4]}, base)
    kind, checked = kinds.read(json.loads(json.dumps(result)), "sweep")
    slow, same = ({f["option"]: f["effects"]["syscall.null"] for f in checked["flips"]}[o]
                  for o in ("CONFIG_SLOW", "CONFIG_SAME"))
    assert slow["verdict"]["kind"] == "worse" and same["verdict"]["kind"] == "no difference"
    text = kind.render(checked, "table")
    (slow_line,) = [line for line in text.splitlines() if "CONFIG_SLOW=" in line and "%" in line]
    (same_line,) = [line for line in text.splitlines() if "CONFIG_SAME=" in line and "%" in line]
    assert "*" in slow_line and "worse" in slow_line
    assert "*" not in same_line and "worse" not in same_line and "better" not in same_line
    page = kind.render(checked, "html")
    assert '"verdict":"worse"' in page.replace(" ", "") and '"verdict":"nodifference"' in page.replace(" ", "")


def test_an_icount_sweep_judges_exactly_and_a_metric_the_mode_cannot_measure_is_not_compared():
    result = _sweep("icount", {"CONFIG_X": [110.0]}, [100.0])
    (effect,) = [f["effects"]["syscall.null"] for f in result["flips"]]
    assert effect["verdict"]["kind"] == "worse" and "exact" in effect["verdict"]["how"]
    metric = "blk.seq_read_direct"
    blk = model.judge_probes({metric: [100.0]}, {metric: [50.0]}, "icount")[metric]
    assert blk["delta_pct"] is None and blk["verdict"]["kind"] == "not compared"
    assert "not measured meaningfully in icount mode" in blk["verdict"]["reason"]
