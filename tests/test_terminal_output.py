"""The compare table as a screen shows it (issue 33, point 1): fitted to the terminal's
width (COLUMNS), its header a short block with the rest under --verbose, the written
summary a line per group, instruction-count units said so, no raw ids, counts without
decimals, one count of samples; and a file or a pipe that keeps everything."""

import json
import re

import pytest

from fakes import lab, lab_fixture, module_lab  # noqa: F401  (`lab`: the fixture)
from kernellab.guest.console import memory_line
from kernellab.metrics.catalog import catalog, describe
from kernellab.report import display_unit, fmt_value, header_lines, render, shown_metrics
from kernellab.report.conclusion import summary, summary_parts
from kernellab.report.table import shorten, shortened

RULE = "──"   # the table's rule under its header (box.MINIMAL on a screen)


@lab_fixture(scope="module")
def default_report(tmp_path_factory, request):
    """The default experiment (lab-minimal against debug) on the fake lab, as JSON."""
    with module_lab(tmp_path_factory, request, "terminal") as fake:
        out = fake.tmp / "default.json"
        assert fake.main("compare", "--format", "json", "-o", str(out)) == 0
        yield fake, out


def show(fake, path, capsys, monkeypatch, columns, *extra):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    assert fake.main("show", str(path), *extra) == 0
    return capsys.readouterr().out


def widest(text):
    return max(len(line) for line in text.splitlines())


def before_table(text):
    lines = text.splitlines()
    return lines[:next(i for i, line in enumerate(lines) if RULE in line) - 1]


# -- width -------------------------------------------------------------------------------

def test_at_80_columns_compare_fits_and_says_what_it_left_out(lab, capsys, monkeypatch):  # noqa: F811
    """End to end: `kernellab compare` with COLUMNS=80; no line is wider, no row wraps
    (one line per metric), and one line says what was left out."""
    monkeypatch.setenv("COLUMNS", "80")
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y") == 0
    text = capsys.readouterr().out
    assert widest(text) <= 80, [line for line in text.splitlines() if len(line) > 80]
    [said] = [line for line in text.splitlines() if line.startswith("left out to fit 80 columns: ")]
    assert "spreads (± and n)" in said
    rows = [line for line in text.splitlines() if line.count("│") == 4]   # metric, unit, a, b, Δ b
    report = json.loads(render_json(lab, capsys))
    assert len(rows) == len(shown_metrics(report, show_all=False)) + 1   # + the header row


def render_json(lab, capsys):  # noqa: F811
    out = lab.tmp / "again.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json",
                    "-o", str(out)) == 0
    capsys.readouterr()
    return out.read_text()


def test_at_200_columns_everything_shows(default_report, capsys, monkeypatch):
    fake, path = default_report
    text = show(fake, path, capsys, monkeypatch, 200)
    assert widest(text) <= 200
    assert "left out" not in text
    report = json.loads(path.read_text())
    for m in shown_metrics(report, show_all=False):
        row = next(line for line in text.splitlines() if line.startswith(m["label"] + " "))
        values = m["values"]["lab-minimal"]
        if values.get("n", 0) > 1:
            assert f"n={values['n']}" in row, row   # each cell's spread and n
    assert len(before_table(text)) <= 5   # the short block, not the twelve lines


def test_the_middle_of_a_long_label_goes_and_every_row_stays_its_own():
    labels = ['"Freeing unused kernel memory" (printk time)', '"Freeing unused kernel memory" (host time)',
              "context switch, 8 procs, 16 KiB", "context switch, 16 procs, 16 KiB",
              "timer wakeup latency under load, median", "timer wakeup latency under load, 99th pct"]
    short = shortened(labels, 24)
    assert all(len(s) <= 24 for s in short) and len(set(short)) == len(labels)
    assert shorten("timer wakeup latency under load, 99th pct", 24).endswith("99th pct")
    assert shorten("stat", 24) == "stat"


def test_a_file_and_a_pipe_keep_the_whole_table_and_header(default_report, capsys, monkeypatch, tmp_path):
    """-o FILE at 80 columns, and a pipe with no COLUMNS: nothing left out, nowhere."""
    fake, path = default_report
    report = json.loads(path.read_text())
    out = tmp_path / "table.txt"
    show(fake, path, capsys, monkeypatch, 80, "-o", str(out))
    piped = show(fake, path, capsys, monkeypatch, None)
    for text in (out.read_text(), piped):
        assert "left out" not in text
        for line in header_lines(report):
            assert line in text
        assert all(m["label"] in text for m in shown_metrics(report, show_all=False))
        assert "n=11" in text or "n=" in text


def test_verbose_shows_the_whole_header_fitted_to_the_screen(default_report, capsys, monkeypatch):
    fake, path = default_report
    short = show(fake, path, capsys, monkeypatch, 80)
    verbose = show(fake, path, capsys, monkeypatch, 80, "--verbose")
    assert widest(verbose) <= 80
    assert "--verbose: how each variant was built" in short and "variant debug:" not in short
    assert "variant debug:" in verbose and "cells: median;" in verbose
    head = before_table(short)
    assert 3 <= len(head) <= 5 and all(len(line) <= 80 for line in head)
    assert head[0].startswith("debug-kernel-cost: ") and "icount mode" in head[1]


def test_markdown_and_json_keep_every_header_line(default_report):
    _, path = default_report
    report = json.loads(path.read_text())
    md = render(report, "markdown")
    assert all(f"- {line}" in md for line in header_lines(report))


# -- the written summary --------------------------------------------------------------------

def _pcts(phrase):
    return [abs(float(p)) for p in re.findall(r" ([-+][0-9.]+)% \((?:worse|better)\)", phrase)]


@pytest.mark.parametrize("width", [80, 200])
def test_the_summary_is_a_line_per_group_largest_first_saying_where_it_stops(default_report, width):
    _, path = default_report
    report = json.loads(path.read_text())
    text = summary(report, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), lines
    assert lines[0] == "debug vs lab-minimal (icount mode):"
    groups = [line for line in lines[1:] if not line.startswith("- not compared")]
    by_group = {}
    for m in shown_metrics(report, show_all=False):
        if m["verdict"]["debug"]["kind"] in ("better", "worse"):
            by_group.setdefault(m["group"], []).append(abs(m["verdict"]["debug"]["delta_pct"]))
    assert [g.split(":")[0].removeprefix("- ") for g in groups] == \
        sorted(by_group, key=lambda g: -max(by_group[g]))   # one line per group, the largest change's first
    for line in groups:
        group = line.split(":")[0].removeprefix("- ")
        named = _pcts(line)
        assert named == sorted(named, reverse=True) and named[0] == pytest.approx(max(by_group[group]), abs=0.6)
        more = re.search(r" and (\d+) more$", line)
        assert len(named) + (int(more.group(1)) if more else 0) == len(by_group[group]), line


def test_the_summary_of_a_file_names_the_headline_figure(default_report):
    """Where no screen sets the width (Markdown, HTML), a line holds more: the syscalls'
    null syscall is named, as the README's headline figure is."""
    _, path = default_report
    report = json.loads(path.read_text())
    [(headline, phrases)] = summary_parts(report)
    syscalls = next(p for p in phrases if p.startswith("syscalls: "))
    assert "null syscall (getppid)" in syscalls and len(syscalls) <= 160


# -- units, labels, counts ---------------------------------------------------------------

def test_every_icount_view_says_its_times_count_instructions(default_report, capsys, monkeypatch):
    fake, path = default_report
    report = json.loads(path.read_text())
    for text in (show(fake, path, capsys, monkeypatch, 80), show(fake, path, capsys, monkeypatch, None),
                 render(report, "markdown")):
        assert re.search(r"null syscall \(getppid\)\s*[│|] ns \(icount\)", text)
        assert re.search(r"agent ready \(host time\)\s*[│|] s\s*[│|]", text)   # the host's clock: real seconds
        assert re.search(r"boot image\s*[│|] KiB\s*[│|]", text)
    null = {"name": "syscall.null", "unit": "ns", "clock": "guest"}
    assert (display_unit(null, "icount"), display_unit(null, "wall")) == ("ns (icount)", "ns")
    assert display_unit({"name": "bw.pipe", "unit": "MB/s", "clock": "guest"}, "icount") == "MB/s (icount)"


def test_every_metric_has_a_human_label():
    for m in catalog().values():
        assert m.label.strip() and m.label != m.name and not re.fullmatch(r"[a-z_]+(\.[a-z_0-9]+)+", m.label), m.name
    # Every field of the kernel's "Memory:" line (6.1, CONFIG_HIGHMEM and CMA included) is catalogued.
    line = ("Memory: 239636K/261624K available (1412K kernel code, 300K rwdata, 400K rodata, 500K init, "
            "600K bss, 21988K reserved, 0K cma-reserved, 1024K highmem)")
    for field in memory_line(line):
        assert f"mem.kernel.{field}" in catalog(), field
    # One a later kernel adds reads as the kernel prints it.
    assert describe("mem.kernel.new_thing", "KiB").label == "Memory: new thing"


def test_no_row_of_the_table_is_a_raw_id(default_report, capsys, monkeypatch):
    fake, path = default_report
    text = show(fake, path, capsys, monkeypatch, 200)
    report = json.loads(path.read_text())
    for m in shown_metrics(report, show_all=False):
        assert not any(line.startswith(m["name"] + " ") for line in text.splitlines()), m["name"]


def test_counts_print_no_decimals():
    assert fmt_value(77.0, "count") == "77" and fmt_value(7693.0, "count") == "7,693"
    assert fmt_value(77.5, "count") == "77.5"   # a median between two counts
    assert fmt_value(231.0, "MiB") == "231" and fmt_value(6.0, "irq/s") == "6"
    assert fmt_value(202.1, "ns") == "202.1" and fmt_value(17.0, "MB/s") == "17.0"


def test_compare_counts_the_samples_runs_counts(lab, capsys):  # noqa: F811
    """compare's log said the agent's samples; `runs` counts every sample the run stored
    (the console's milestones and memory too): one count, the store's."""
    assert lab.main("compare", "a=tinyconfig", "--format", "json", "-o", str(lab.tmp / "r.json")) == 0
    said = re.search(r"a: run 1 \(icount\) ok, (\d+) samples", capsys.readouterr().err)
    [run] = lab.runs()
    assert said is not None and int(said.group(1)) == run["samples"]


# -- a study's report and a results file's cost table fit the screen too ------------------

def test_a_study_report_fits_the_screen_and_says_its_units(lab, capsys, monkeypatch):  # noqa: F811
    """`study run` on an 80-column terminal: no line wider, the seed's table in one line per
    row with what it left out said, icount units said so; -o and a pipe keep every column."""
    from test_study import study_file
    path = study_file(lab)
    monkeypatch.setenv("COLUMNS", "80")
    assert lab.main("study", "run", str(path)) == 0
    text = capsys.readouterr().out
    assert widest(text) <= 80, [line for line in text.splitlines() if len(line) > 80]
    assert "left out to fit 80 columns: spreads (± and n)" in text
    rows = [line for line in text.splitlines() if line.startswith("null syscall (getppid) ")]
    assert len(rows) == 2 and "│ ns (icount) " in rows[0] and "+25.0%*" in rows[0]   # the seed's table, the split
    saved = lab.tmp / "study.txt"
    assert lab.main("study", "run", str(path), "-o", str(saved)) == 0
    monkeypatch.delenv("COLUMNS")
    assert lab.main("study", "run", str(path)) == 0
    for whole in (saved.read_text(), capsys.readouterr().out):
        assert "left out" not in whole and widest(whole) > 80
        (row,) = [line for line in whole.splitlines() if line.startswith("│ null syscall (getppid) ")][:1]
        assert "ns (icount)" in row and "n=11" in row and row.count("│") == 9   # every variant's value and Δ
    assert "| null syscall (getppid) | x86_64 | ns (icount) |" in studyreport_markdown(lab, path, capsys)


def studyreport_markdown(lab, path, capsys):  # noqa: F811
    assert lab.main("study", "run", str(path), "--format", "markdown") == 0
    return capsys.readouterr().out


def test_a_cost_table_fits_the_screen_and_says_its_units(capsys, monkeypatch, tmp_path):
    """`show` of a results file on 80 columns: no figure cut, the notes under the table;
    -o keeps them beside it; the baseline's times said to count instructions."""
    from kernellab.cli import main
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["show", "results/debug-cost.json"]) == 0
    text = capsys.readouterr().out
    assert widest(text) <= 80
    (row,) = [line for line in text.splitlines() if line.startswith("PROVE_LOCKING=y ")]
    assert re.findall(r"[-+]?[0-9.]+%", row) == ["-2.9%", "+193.8%", "+829.0%", "+596.8%", "+145.4%"]
    assert "with" not in row
    assert "  PROVE_LOCKING=y: with BINARY_PRINTF=y" in text
    assert "null syscall (getppid) 202.1 ns (icount)" in text
    out = tmp_path / "cost.txt"
    assert main(["show", "results/debug-cost.json", "-o", str(out)]) == 0
    whole = out.read_text()
    (row,) = [line for line in whole.splitlines() if line.startswith("│ PROVE_LOCKING=y ")]
    assert "+829.0%" in row and "with BINARY_PRINTF=y" in row and widest(whole) > 80


def test_a_study_reports_header_on_a_screen_is_the_short_block_compares_is(lab, capsys, monkeypatch):  # noqa: F811
    """`study run` and `show STUDY.json` on 80 columns: at most 5 header lines, each within
    the width, what the quick form leaves out said, the rest under --verbose (which the
    study's own command takes too); a file keeps every line of the header."""
    from kernellab.report import studyreport
    from test_study import run_study, study_file
    path = study_file(lab)
    report, _ = run_study(lab, capsys, path, "--quick")
    saved = lab.tmp / "study.json"
    monkeypatch.setenv("COLUMNS", "80")
    assert lab.main("show", str(saved)) == 0
    short = study_head(capsys.readouterr().out)
    assert 4 <= len(short) <= 5 and all(len(line) <= 80 for line in short), short
    assert short[0] == "study fakestudy: does FAKE_SLOW cost?"
    assert short[1].startswith("attention: the quick form, ") and "icount mode" in short[2]
    assert short[-1].startswith("--verbose: ") and not any(line.startswith("question: ") for line in short)
    assert lab.main("study", "run", str(path), "--quick") == 0   # from the store: nothing built again
    assert study_head(capsys.readouterr().out) == short
    full = studyreport.header(report)
    for command in (["show", str(saved), "--verbose"], ["study", "run", str(path), "--quick", "-v"]):
        assert lab.main(*command) == 0
        verbose = capsys.readouterr().out
        assert widest(verbose) <= 80 and "question: what does CONFIG_FAKE_SLOW cost?" in verbose
        assert len(study_head(verbose)) >= len(full)   # every line, wrapped at the width
    out = lab.tmp / "study.txt"
    assert lab.main("show", str(saved), "-o", str(out)) == 0
    assert all(line in out.read_text() for line in full)


def study_head(text):
    """A study report's header: its lines before its first table's title."""
    lines = text.splitlines()
    return lines[:lines.index(next(line for line in lines if line.startswith("system calls ")))]
