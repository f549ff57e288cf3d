"""Studies: the shipped study files, the strict loader, the plan, the written summary and
the code/config split, end to end on the fake lab (tests/fakes) in seconds.

The fake QEMU's values follow from the config (tests/fakes/qemu/qemu-system-x86_64):
CONFIG_FAKE_SLOW makes the system calls 25% slower and adds 4 KiB of text; everything
else stays as it is.
"""

import json
import textwrap
from pathlib import Path

import pytest

from kernellab.errors import LabError
from kernellab.experiments import study
from kernellab.report import conclusion, model, studyreport
from test_fake_lab import _join_compare_threads

FAST_SLOW = """
name = "fakestudy"
title = "does FAKE_SLOW cost?"
seed = ""
question = "what does CONFIG_FAKE_SLOW cost?"
arches = ["x86_64"]
baseline = "fast"
subject = "slow"
expected_minutes = 1

[experiment]
source = "{tree}"
mode = "{mode}"

[[experiment.variant]]
name = "fast"
base = "tinyconfig"
options = ["CONFIG_PROC_FS=y"]

[[experiment.variant]]
name = "slow"
base = "tinyconfig"
options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y"]

[[experiment.variant]]
name = "slow-code-fast-config"
base = "config-of:fast"

[[table]]
title = "system calls"
metrics = ["syscall.null", "syscall.read", "ipc.pipe_rtt", "irq.idle_timer"]

[[table]]
title = "size"
metrics = ["size.text"]

[[summary]]
says = "System calls"
metrics = ["syscall.null", "syscall.read"]

[[summary]]
says = "Idle timer"
metrics = ["irq.idle_timer"]

[[decompose]]
from = "fast"
via = "slow-code-fast-config"
to = "slow"

[quick]
arches = ["x86_64"]
variants = ["fast", "slow"]
"""


# A fourth kernel, which the quick form does not measure.
WITH_BIG_BSS = FAST_SLOW.replace("[[table]]", """[[experiment.variant]]
name = "big-bss"
base = "tinyconfig"
options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_BSS_KB=64"]

[[table]]""", 1)


def study_file(lab, mode="icount", text=FAST_SLOW):
    path = lab.tmp / "fakestudy.toml"
    path.write_text(text.format(tree=lab.tree, mode=mode))
    return path


def run_study(lab, capsys, path, *extra, expect=0):
    out = lab.tmp / "study.json"
    rc = lab.main("study", "run", str(path), "--format", "json", "-o", str(out), *extra)
    err = capsys.readouterr().err
    assert rc == expect, err
    return json.loads(out.read_text()), err


# -- end to end on the fake lab -------------------------------------------------------

def test_a_study_measures_splits_and_concludes_in_icount(lab, capsys):
    report, _ = run_study(lab, capsys, study_file(lab))
    assert report["format"] == "kernellab-study" and report["format_version"] == 2
    assert report["quick"] is False and report["arches"] == ["x86_64"]
    x86 = report["reports"]["x86_64"]
    assert [v["name"] for v in x86["variants"]] == ["fast", "slow", "slow-code-fast-config"]
    null = next(m for m in x86["metrics"] if m["name"] == "syscall.null")
    assert null["values"]["slow"]["median"] == pytest.approx(1.25 * null["values"]["fast"]["median"])

    # The summary names the 25% with its direction and how it was measured; the idle
    # timer, which FAKE_SLOW leaves alone, is no difference.
    calls, timer = report["summary"]
    assert calls.startswith("System calls (slow against fast): null syscall (getppid) 25% worse "
                            "(x86_64 +25.0%, icount, 1 run, exact)")
    assert timer.startswith("Idle timer (slow against fast): no difference in timer interrupts/s, idle")

    # The split: the variant with slow's code and fast's config is fast's kernel here (one
    # source), so all of the difference is configuration, and the parts add up.
    (split,) = report["decomposition"]
    row = next(r for r in split["rows"] if r["metric"] == "syscall.null")
    assert row["total_pct"] == pytest.approx(25.0)
    assert row["code_pct"] == pytest.approx(0.0) and row["config_pct"] == pytest.approx(25.0)
    for r in split["rows"]:
        assert r["code_pct"] + r["config_pct"] == pytest.approx(r["total_pct"])


def test_the_rendered_study_ends_with_its_summary_and_says_how(lab, capsys):
    path = study_file(lab)
    for fmt in ("table", "markdown"):
        assert lab.main("study", "run", str(path), "--format", fmt) == 0
        text = capsys.readouterr().out
        assert "question: what does CONFIG_FAKE_SLOW cost?" in text
        assert "mode: icount" in text and "noise floor: none given" in text
        assert "code or configuration?" in text
        summary_at = text.index("Summary")
        assert text.index("system calls") < summary_at < text.index("System calls (slow against fast): null")
        # Each Δ marked by its cell's verdict, as a compare report's tables mark it, and the marks said.
        assert "+25.0%*" in text and conclusion.DELTA_LEGEND in text


def test_a_study_run_again_resumes_from_the_store(lab, capsys):
    path = study_file(lab, text=WITH_BIG_BSS)
    run_study(lab, capsys, path, "--quick")
    assert len(lab.runs()) == 2   # fast and slow, once each (icount)
    report, err = run_study(lab, capsys, path)
    # The full form boots only the kernel the quick one did not: big-bss (the split's
    # variant is fast's kernel, measured the same way, so its run is fast's).
    assert sorted(r["name"] for r in lab.runs()) == ["big-bss", "fast", "slow"]   # icount: side by side
    assert "taken from the store" in err
    assert report["reports"]["x86_64"]["runs_per_variant"] == {
        "fast": 1, "slow": 1, "slow-code-fast-config": 1, "big-bss": 1}
    run_study(lab, capsys, path)
    assert len(lab.runs()) == 3


def test_an_interrupted_study_resumes_with_what_it_had_measured(lab, capsys, monkeypatch):
    """Killed (SIGTERM) while booting the one variant the quick form had not measured: the
    run is marked, and the study run again boots only that variant."""
    path = study_file(lab, text=WITH_BIG_BSS)
    run_study(lab, capsys, path, "--quick")
    monkeypatch.setenv("FAKE_QEMU_SIGNAL_PARENT", "TERM:4")
    try:
        assert lab.main("study", "run", str(path)) == 130
    finally:
        _join_compare_threads()
    assert "every sample measured so far is in the store" in capsys.readouterr().err
    monkeypatch.delenv("FAKE_QEMU_SIGNAL_PARENT")
    assert [(r["name"], r["status"]) for r in lab.runs()][2:] == [("big-bss", "interrupted")]
    report, err = run_study(lab, capsys, path)
    assert sorted((r["name"], r["status"]) for r in lab.runs()) == [
        ("big-bss", "interrupted"), ("big-bss", "ok"), ("fast", "ok"), ("slow", "ok")]
    assert report["reports"]["x86_64"]["runs_per_variant"]["big-bss"] == 1
    assert err.count("taken from the store") == 3


def test_the_quick_form_says_what_it_leaves_out(lab, capsys):
    report, _ = run_study(lab, capsys, study_file(lab), "--quick")
    assert report["quick"] is True
    assert report["left_out"] == ["the variant slow-code-fast-config", "the split into code and configuration"]
    assert report["decomposition"] == []
    assert lab.main("study", "run", str(study_file(lab)), "--quick") == 0
    assert ("QUICK FORM: it leaves out the variant slow-code-fast-config; the split into code and configuration"
            in capsys.readouterr().out)
    full, _ = run_study(lab, capsys, study_file(lab))
    assert full["left_out"] == []


def test_a_partial_run_of_a_shipped_study_says_what_it_leaves_out():
    s = study.load("debug-cost")
    assert study.plan(s, None, None, None, True).left_out() == [
        "the arch i386", "the sweep that names the options responsible"]
    assert study.plan(s, ["x86_64", "i386"], None, None, True).left_out() == [
        "the sweep that names the options responsible"]
    assert study.plan(s, None, None, None, False).left_out() == []
    assert [a for _, a in study.plan(s, None, None, None, False).sweeps()] == ["x86_64"]


def test_in_wall_mode_only_significant_changes_are_differences(lab, capsys):
    report, _ = run_study(lab, capsys, study_file(lab, mode="wall"), "--quick", "--runs", "3")
    calls, timer = report["summary"]
    assert "null syscall (getppid) 2" in calls and "worse" in calls and "95% CI" in calls
    # About 1% noise on an unchanged metric: never given a direction.
    assert timer.startswith("Idle timer (slow against fast): no difference in timer interrupts/s, idle")


def test_a_noise_floor_turns_a_small_exact_change_into_no_difference(lab, capsys):
    floor = lab.tmp / "floor.toml"
    floor.write_text('measured = "by hand"\n[floor]\n"syscall.null" = 30.0\n')
    report, _ = run_study(lab, capsys, study_file(lab), "--quick", "--noise-floor", str(floor))
    calls = report["summary"][0]
    assert "null syscall (getppid)" not in calls.split(";")[0]
    assert "syscall read" in calls.lower() or "read 1 byte" in calls
    assert report["noise_floor"] == {"origin": f"{floor} (by hand)", "pct": {"syscall.null": 30.0}}
    # The report keeps the verdicts the study's floor gave, and its tables read them.
    null = next(m for m in report["reports"]["x86_64"]["metrics"] if m["name"] == "syscall.null")
    assert null["verdict"]["slow"]["kind"] == "no difference" and null["verdict"]["slow"]["floor_pct"] == 30.0
    (row,) = studyreport.section_rows(report, ["syscall.null"])
    assert row[-1] == "within floor (+25.0%, floor 30.0%)"


# -- bad input -----------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (("mode = \"{mode}\"", "mode = \"{mode}\"\nmdoe = 1"), "unknown key 'mdoe'"),
    (("subject = \"slow\"", "subject = \"slwo\""), "subject names variant 'slwo'"),
    (("\"irq.idle_timer\"]", "\"irq.idle_timr\"]"), "names metric 'irq.idle_timr'"),
    (("arches = [\"x86_64\"]\nbaseline", "arches = [\"x86_65\"]\nbaseline"), "unknown arch 'x86_65'"),
    (("expected_minutes = 1", "expected_minutes = \"1\""), "expected_minutes: expected an integer"),
    (("variants = [\"fast\", \"slow\"]", "variants = [\"slow\"]"), "must keep the baseline and the subject"),
])
def test_a_bad_study_file_is_one_line_naming_the_key(lab, capsys, change, message):
    old, new = change
    assert old in FAST_SLOW
    path = study_file(lab, text=FAST_SLOW.replace(old, new))
    assert lab.main("study", "run", str(path)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_an_unknown_study_lists_the_known_ones(lab, capsys):
    assert lab.main("study", "run", "versoins") == 2
    err = capsys.readouterr().err
    assert "unknown study 'versoins'" in err and "debug-cost" in err and "versions" in err


def test_an_arch_the_study_does_not_run_on_is_refused(lab, capsys):
    assert lab.main("study", "run", str(study_file(lab)), "--arch", "s390x") == 2
    assert "runs on x86_64, not s390x" in capsys.readouterr().err


def test_a_missing_compiler_names_the_package_before_any_build(lab, capsys, monkeypatch):
    import kernellab.proc
    real = kernellab.proc.shutil.which
    monkeypatch.setattr(kernellab.proc.shutil, "which", lambda tool: None if tool == "gcc" else real(tool))
    assert lab.main("study", "run", str(study_file(lab))) == 2
    assert "gcc not found: run `apt-get install -y gcc`" in capsys.readouterr().err
    assert lab.runs() == []


# -- the shipped studies -------------------------------------------------------------

def test_every_shipped_study_loads_and_plans():
    names = study.packaged()
    assert {"debug-cost", "versions", "zseries"} <= set(names)
    for name in names:
        s = study.load(name)
        assert s.file.seed == "" or s.file.seed.endswith(".txt")
        full, quick = study.plan(s, None, None, None, False), study.plan(s, None, None, None, True)
        assert len(quick.arches) <= len(full.arches) and s.builds_needed(True) <= s.builds_needed()
        for a in full.arches:
            exp = full.experiment(a)
            assert exp.variants[0].name == s.file.baseline and {v.arch for v in exp.variants} == {a}


def test_study_list_names_each_seed_and_its_cost(capsys):
    from kernellab.cli import main
    assert main(["study", "list", "--format", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["debug-cost"]["seed"] == "003_00a8a1bb4e5d5f26.txt"
    assert rows["debug-cost"]["builds"] == 4 and rows["debug-cost"]["quick_builds"] == 2
    assert rows["versions"]["arches"] == ["x86_64", "ppc32", "mpc885"]


# -- the summary writer, on measured-shape data ----------------------------------------

def _report(mode, values, comparison=None, clock="guest", better="lower", valid=True):
    """One metric of a compare report as report.model writes it."""
    metric = {"name": "proc.fork_exit", "label": "fork + exit", "unit": "ns", "better": better, "group": "processes",
              "clock": clock, "valid_in_mode": valid,
              "values": {n: {"median": v, "run_medians": [v]} for n, v in values.items()},
              "comparison": comparison or {}}
    return {"mode": mode, "variants": [{"name": n} for n in values], "metrics": [metric]}


def summary_lines(items, reports, baseline, subject):
    """A study's summary lines as studyreport.build writes them: each report judged first."""
    for report in reports.values():
        model.judge(report, model.NoiseFloor())
    return conclusion.write(items, reports, baseline, subject, model.NoiseFloor())


def test_ranges_across_arches_are_written_as_the_seed_writes_them():
    reports = {"x86_64": _report("icount", {"a": 100.0, "b": 130.0}),
               "ppc32": _report("icount", {"a": 100.0, "b": 140.0})}
    item = study.SummaryItem("Slow to fork", ["proc.fork_exit"])
    (line,) = summary_lines([item], reports, "a", "b")
    assert line == ("Slow to fork (b against a): fork + exit 30...40% worse "
                    "(x86_64 +30.0%, ppc32 +40.0%; icount, 1 run, exact)")
    reports["ppc32"] = _report("icount", {"a": 100.0, "b": 930.0})
    (line,) = summary_lines([item], reports, "a", "b")
    assert "fork + exit 30...830% worse" in line
    reports["x86_64"] = _report("icount", {"a": 100.0, "b": 900.0})
    (line,) = summary_lines([item], reports, "a", "b")
    assert "fork + exit 800...830% (9.0...9.3x) worse" in line
    assert conclusion.pct_range([5.2]) == "5%" and conclusion.pct_range([0.4]) == "0.4%"


def test_a_change_on_some_arches_only_names_them():
    reports = {"x86_64": _report("icount", {"a": 100.0, "b": 100.0}),
               "ppc32": _report("icount", {"a": 100.0, "b": 106.6})}
    (line,) = summary_lines([study.SummaryItem("RAM", ["proc.fork_exit"])], reports, "a", "b")
    assert line == ("RAM (b against a): fork + exit 7% worse on ppc32, no difference on x86_64 "
                    "(x86_64 +0.0%, ppc32 +6.6%; icount, 1 run, exact)")


def test_arches_that_disagree_are_said_to_disagree():
    reports = {"x86_64": _report("icount", {"a": 100.0, "b": 110.0}),
               "i386": _report("icount", {"a": 100.0, "b": 90.0})}
    (line,) = summary_lines([study.SummaryItem("Forks", ["proc.fork_exit"])], reports, "a", "b")
    assert "better on some arches, worse on others" in line


def test_a_metric_meaningless_in_the_mode_is_not_summarized():
    reports = {"x86_64": _report("icount", {"a": 100.0, "b": 200.0}, valid=False)}
    (line,) = summary_lines([study.SummaryItem("Bandwidth", ["proc.fork_exit"])], reports, "a", "b")
    assert "not measured" in line


def test_a_wall_change_that_is_not_significant_is_no_difference():
    c = {"testable": True, "significant": False, "delta_pct": 8.0, "direction": "worse",
         "ci_low_pct": -3.0, "ci_high_pct": 19.0}
    reports = {"x86_64": _report("wall", {"a": 100.0, "b": 108.0}, {"b": c})}
    (line,) = summary_lines([study.SummaryItem("Forks", ["proc.fork_exit"])], reports, "a", "b")
    assert line.startswith("Forks (b against a): no difference in fork + exit")
    c = dict(c, significant=True, ci_low_pct=5.0)
    reports = {"x86_64": _report("wall", {"a": 100.0, "b": 108.0}, {"b": c})}
    (line,) = summary_lines([study.SummaryItem("Forks", ["proc.fork_exit"])], reports, "a", "b")
    assert "8% worse" in line and "95% CI [+5.0, +19.0]%" in line


def test_a_noise_floor_file_is_checked(tmp_path):
    bad = tmp_path / "floor.toml"
    bad.write_text('[floor]\n"proc.fork_exti" = 3.0\n')
    with pytest.raises(LabError, match="unknown metric 'proc.fork_exti'"):
        conclusion.load_floor(bad)
    bad.write_text(textwrap.dedent('[floor]\n"proc.fork_exit" = -1\n'))
    with pytest.raises(LabError, match="a floor is a size"):
        conclusion.load_floor(bad)


def test_each_series_support_status_comes_from_the_dated_table():
    from kernellab import lifecycle
    line = lifecycle.status("6.1.192")
    assert line.startswith("Linux 6.1: longterm, released 2022-12-11, projected end of life Dec 2027 "
                           "(kernel.org, read ")
    assert lifecycle.status("6.12.57").startswith("Linux 6.12: longterm")
    assert "not in kernellab's lifecycle table" in lifecycle.status("4.9.337")


def test_a_summary_line_may_compare_two_variants_other_than_the_baseline():
    report = _report("icount", {"a": 100.0, "b": 150.0, "c": 120.0})
    item = study.SummaryItem("Compiler", ["proc.fork_exit"], subject="c", against="b")
    (line,) = summary_lines([item], {"x86_64": report}, "a", "b")
    assert line == "Compiler (c against b): fork + exit 20% better (x86_64 -20.0%, icount, 1 run, exact)"


def test_a_variant_an_arch_cannot_build_is_left_out_there_and_said():
    s = study.load("versions")
    full = study.plan(s, None, None, None, False)
    assert "v6.12-clang" in [v.name for v in full.experiment("x86_64").variants]
    assert "v6.12-clang" not in [v.name for v in full.experiment("ppc32").variants]
    assert full.left_out() == ["v6.12-clang on ppc32 (no clang kernel builds for ppc32)",
                               "v6.12-clang on mpc885 (no clang kernel builds for mpc885)"]


def test_a_saved_study_report_is_shown_again(lab, capsys):
    report, _ = run_study(lab, capsys, study_file(lab), "--quick")
    saved = lab.tmp / "study.json"
    assert lab.main("show", str(saved), "--format", "markdown") == 0
    text = capsys.readouterr().out
    assert text.startswith("### Study fakestudy") and "#### Summary" in text and report["summary"][0] in text
    assert lab.main("show", str(saved), "--format", "results") == 2
    assert "this report has no sweep" in capsys.readouterr().err
    assert lab.main("show", str(saved), "--format", "csv") == 2
    assert "a study report renders as table, markdown, json, html, results, not csv" in capsys.readouterr().err
    report_json = lab.tmp / "compare.json"
    assert lab.main("compare", "a=tinyconfig", "--format", "json", "-o", str(report_json)) == 0
    assert lab.main("show", str(report_json), "--format", "results") == 2
    assert "a compare report renders as table, markdown, json, csv, html, junit, not results" in capsys.readouterr().err
    saved.write_text(json.dumps({k: v for k, v in report.items() if k != "wall_s"}))
    assert lab.main("show", str(saved)) == 2
    assert "study.json: at $: 'wall_s' is a required property; run the study again" in capsys.readouterr().err
    saved.write_text(json.dumps(dict(report, format_version=99)))
    assert lab.main("show", str(saved)) == 2
    assert "is kernellab-study format 99; this kernellab reads formats 1, 2" in capsys.readouterr().err


def test_an_exact_change_within_the_spread_of_the_repeats_is_no_difference():
    wide = _report("icount", {"a": 100.0, "b": 120.0})
    wide["metrics"][0]["values"]["b"].update(q1=60.0, q3=180.0)   # ±50% within the run
    (line,) = summary_lines([study.SummaryItem("Forks", ["proc.fork_exit"])], {"x86_64": wide}, "a", "b")
    assert line.startswith("Forks (b against a): no difference in fork + exit")
    wide["metrics"][0]["values"]["b"].update(median=300.0, run_medians=[300.0])
    (line,) = summary_lines([study.SummaryItem("Forks", ["proc.fork_exit"])], {"x86_64": wide}, "a", "b")
    assert "200% (3.0x) worse (x86_64 +200.0%, icount, 1 run, exact, repeats spread ±20%)" in line


def test_an_arch_that_cannot_build_fails_alone_and_the_report_says_so(lab, capsys):
    broken = FAST_SLOW.replace('options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y"]',
                               'options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y", "CONFIG_FAKE_BROKEN=y"]')
    report, err = run_study(lab, capsys, study_file(lab, text=broken), "--quick", expect=1)
    assert report["reports"] == {} and len(report["failures"]) == 1
    assert report["failures"][0].startswith("x86_64: build failed:")
    assert "kernellab: error: x86_64: build failed:" in err and "Traceback" not in err
    assert report["summary"][0].startswith("System calls (slow against fast): not measured")


def test_a_study_report_says_how_long_it_took_and_what_it_built(lab, capsys):
    report, _ = run_study(lab, capsys, study_file(lab), "--quick")
    assert report["builds"] == 2 and report["wall_s"] > 0
    again, _ = run_study(lab, capsys, study_file(lab), "--quick")
    assert again["builds"] == 0


def test_the_keys_a_study_report_must_have_are_the_keys_it_is_written_with(lab, capsys):
    schema = json.loads((Path(__file__).parent.parent / "src/kernellab/report/study-schema.json").read_text())
    report, _ = run_study(lab, capsys, study_file(lab), "--quick")
    assert set(report) == set(schema["required"])


SWEPT = FAST_SLOW.replace('''options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y"]''',
                          '''options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y", "CONFIG_FAKE_BSS_KB=32"]''') + """
[[sweep]]
good = "fast"
bad = "slow"
metrics = ["syscall.null"]
"""


def test_the_full_form_names_the_options_responsible_with_a_sweep(lab, capsys):
    """The seed's own method, automated: each option in which the two resolved configs
    differ flipped alone on the baseline, ranked by its effect."""
    report, _ = run_study(lab, capsys, study_file(lab, text=SWEPT))
    (sweep,) = report["sweeps"].values()
    ranked = sorted(sweep["flips"], key=lambda f: -abs(f["effects"]["syscall.null"]["delta_pct"] or 0))
    assert [f["option"] for f in ranked] == ["CONFIG_FAKE_SLOW", "CONFIG_FAKE_BSS_KB"]
    assert ranked[0]["effects"]["syscall.null"]["delta_pct"] == pytest.approx(25.0)
    assert ranked[1]["effects"]["syscall.null"]["delta_pct"] == pytest.approx(0.0)
    assert report["left_out"] == []
    assert lab.main("show", str(lab.tmp / "study.json"), "--format", "markdown") == 0
    text = capsys.readouterr().out
    assert "sweep on x86_64: one option at a time" in text and "CONFIG_FAKE_SLOW=y" in text
    quick, _ = run_study(lab, capsys, study_file(lab, text=SWEPT), "--quick")
    assert quick["sweeps"] == {} and "the sweep that names the options responsible" in quick["left_out"]


def test_a_studys_noise_floor_judges_its_sweeps_flips_as_its_tables(lab, capsys):
    """--noise-floor decides once whether a change counts, for the tables and the sweep alike:
    FAKE_SLOW's +25% is a difference without a floor, and no difference within one of 30%."""
    floor = lab.tmp / "floor.toml"
    floor.write_text('[floor]\n"syscall.null" = 30.0\n')
    plain, _ = run_study(lab, capsys, study_file(lab, text=SWEPT))
    floored, _ = run_study(lab, capsys, study_file(lab, text=SWEPT), "--noise-floor", str(floor))

    def slow(report):
        (sweep,) = report["sweeps"].values()
        [flip] = [f for f in sweep["flips"] if f["option"] == "CONFIG_FAKE_SLOW"]
        return flip["effects"]["syscall.null"]

    assert slow(plain)["delta_pct"] == slow(floored)["delta_pct"] == pytest.approx(25.0)
    (sweep,) = floored["sweeps"].values()
    [none] = [f["effects"]["syscall.null"]["verdict"] for f in sweep["flips"] if f["option"] == "CONFIG_FAKE_BSS_KB"]
    assert slow(plain)["verdict"]["kind"] != none["kind"]       # a difference, without the floor
    assert slow(floored)["verdict"]["kind"] == none["kind"]     # as a flip with no effect, within it
    assert slow(floored)["verdict"]["reason"] == "within the metric's noise floor (30.0%)"


def test_a_study_sweeps_both_ways_each_sweep_reported_under_its_title(lab, capsys):
    """The cost table's method: each option switched on from the lean kernel, and off from
    the other one."""
    both = SWEPT.replace('[[sweep]]\ngood = "fast"', '[[sweep]]\ntitle = "on from fast"\ngood = "fast"') + """
[[sweep]]
title = "off from slow"
good = "slow"
bad = "fast"
metrics = ["syscall.null"]
"""
    report, _ = run_study(lab, capsys, study_file(lab, text=both))
    assert list(report["sweeps"]) == ["x86_64, on from fast", "x86_64, off from slow"]
    off = {f["option"]: f for f in report["sweeps"]["x86_64, off from slow"]["flips"]}
    assert off["CONFIG_FAKE_SLOW"]["value"] == "n"
    assert off["CONFIG_FAKE_SLOW"]["effects"]["syscall.null"]["delta_pct"] == pytest.approx(-20.0)
    assert lab.main("show", str(lab.tmp / "study.json")) == 0
    assert "sweep on x86_64, off from slow: one option at a time" in capsys.readouterr().out
    # The same, as the results file the rule files cite: from the store, nothing measured again.
    path = lab.tmp / "costs.json"
    assert lab.main("study", "run", str(study_file(lab, text=both)), "--format", "results", "-o", str(path)) == 0
    assert "built" not in capsys.readouterr().err
    results = json.loads(path.read_text())
    assert (results["format"], results["format_version"], results["emulated"]) == ("kernellab-option-costs", 1, True)
    on, off = results["sweeps"]
    assert (on["label"], on["mode"], on["runs"]) == ("x86_64, on from fast", "icount", 1)
    assert on["flipped_on"].startswith(f"{lab.tree} (") and "x86_64, base tinyconfig" in on["flipped_on"]
    rows = {r["option"]: r for r in off["options"]}
    assert rows["CONFIG_FAKE_SLOW"]["value"] == "n"
    assert rows["CONFIG_FAKE_SLOW"]["delta_pct"] == {"syscall.null": pytest.approx(-20.0)}
    assert results["date"] and results["kernellab"]


def test_a_sweep_can_flip_only_the_options_the_audits_rules_name(lab, capsys):
    """The cost table of the rules: FAKE_SLOW differs too, but no rule names it."""
    ruled = (SWEPT.replace('options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y", "CONFIG_FAKE_BSS_KB=32"]',
                           'options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y", "CONFIG_DEBUG_KERNEL=y", '
                           '"CONFIG_DEBUG_LIST=y"]')
             .replace('options = ["CONFIG_PROC_FS=y"]', 'options = ["CONFIG_PROC_FS=y", "CONFIG_DEBUG_KERNEL=y"]')
             .replace('metrics = ["syscall.null"]\n', 'metrics = ["syscall.null"]\nrules = ["debugging"]\n'))
    report, err = run_study(lab, capsys, study_file(lab, text=ruled))
    (sweep,) = report["sweeps"].values()
    assert [f["option"] for f in sweep["flips"]] == ["CONFIG_DEBUG_LIST"]
    assert (sweep["rules"], sweep["left_out"]) == (["debugging"], 1)
    assert "1 of them named by the rules of debugging; the other 1 are not flipped" in err
    assert lab.main("show", str(lab.tmp / "study.json")) == 0
    assert "the options the audit's rules of debugging name; 1 other differing option(s) not flipped" in \
        capsys.readouterr().out
    path = lab.tmp / "costs.json"
    assert lab.main("study", "run", str(study_file(lab, text=ruled)), "--format", "results", "-o", str(path)) == 0
    (results,) = json.loads(path.read_text())["sweeps"]
    assert (results["rules"], results["left_out"], [r["option"] for r in results["options"]]) == \
        (["debugging"], 1, ["CONFIG_DEBUG_LIST"])
    bad = study_file(lab, text=ruled.replace('rules = ["debugging"]', 'rules = ["debuging"]'))
    assert lab.main("study", "run", str(bad)) == 2
    assert "sweep rules names category 'debuging', not one of debugging, " in capsys.readouterr().err


def test_a_results_file_needs_a_sweep_and_says_so_before_measuring(lab, capsys):
    path = study_file(lab, text=SWEPT)
    assert lab.main("study", "run", str(path), "--quick", "--format", "results") == 2
    err = capsys.readouterr().err
    assert "the quick form never sweeps" in err and "built" not in err


def _build_report(hits_b, source_b, cold=False):
    """build.user of two variants, each with its build record as report.model writes it."""
    report = _report("icount", {"a": 400.0, "b": 520.0}, clock="build")
    report["metrics"][0].update(name="build.user", label="build time (user)", unit="s")
    report["variants"] = [
        {"name": "a", "source": "debian:6.1", "arch": "x86_64",
         "build": {"compiler": "gcc", "ccache_hit_pct": 2.0, "cached": True, "cold": cold}},   # reused: its times stand
        {"name": "b", "source": source_b, "arch": "x86_64",
         "build": {"compiler": "gcc", "ccache_hit_pct": hits_b, "cached": False, "cold": cold}}]
    return {"x86_64": report}


def test_build_times_count_only_cold_builds_in_trees_of_their_own():
    item = study.SummaryItem("Build time", ["build.user"])
    (line,) = summary_lines([item], _build_report(1.0, "debian:6.12"), "a", "b")
    assert "build time (user) 30% worse (x86_64 +30.0%, one cold build each)" in line
    (line,) = summary_lines([item], _build_report(60.0, "debian:6.12"), "a", "b")
    assert line.endswith(": not compared: build time (user) (ccache hits)")   # the cache was timed
    (line,) = summary_lines([item], _build_report(1.0, "debian:6.1"), "a", "b")
    assert line.endswith(": not compared: build time (user) (incremental builds in one build tree)")
    # Built from scratch in an emptied tree (cold_builds): one tree shared in turn is no objection.
    (line,) = summary_lines([item], _build_report(None, "debian:6.1", cold=True), "a", "b")
    assert "build time (user) 30% worse (x86_64 +30.0%, one cold build each)" in line


def test_the_split_leaves_out_what_the_mode_cannot_measure():
    report = _report("icount", {"a": 100.0, "v": 110.0, "b": 130.0})
    assert conclusion.split(report, "proc.fork_exit", "a", "v", "b")["code_pct"] == pytest.approx(10.0)
    report["metrics"][0]["valid_in_mode"] = False
    assert conclusion.split(report, "proc.fork_exit", "a", "v", "b") is None


def test_the_header_says_how_each_variant_ran_and_where(lab, capsys):
    slow = '''options = ["CONFIG_PROC_FS=y", "CONFIG_FAKE_SLOW=y"]'''
    text = FAST_SLOW.replace(slow, slow + '''\nboot_args = ["quiet"]\nvcpus = 2''')
    import datetime
    days = {f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"}
    # Wall mode: x86_64 brings up no second vCPU under icount (its arch profile says so).
    assert lab.main("study", "run", str(study_file(lab, text=text)), "--quick", "--mode", "wall", "--runs", "1") == 0
    days.add(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}")   # a run across midnight
    out = capsys.readouterr().out
    assert "  target: QEMU TCG wall (accelerator tcg, arch x86_64" in out
    assert "config" in out and "; runs with quiet, 2 vCPUs" in out
    assert any(f"measured: {day}, runs started " in out for day in days)


def test_vcpus_boots_every_variant_with_that_many_and_the_report_says_so(lab, capsys):
    path = study_file(lab)
    # x86_64 brings up no second vCPU under icount: refused before any build, naming the way out.
    assert lab.main("study", "run", str(path), "--quick", "--vcpus", "2") == 1
    err = capsys.readouterr().err
    assert "brings up at most 1 vCPU(s)" in err and "--mode wall" in err
    assert lab.runs() == [] and not list((lab.cache / "artifacts").glob("*/build.json"))
    report, _ = run_study(lab, capsys, path, "--quick", "--mode", "wall", "--runs", "1", "--vcpus", "2")
    assert report["changed"] == ["every variant booted with 2 vCPUs (--vcpus 2)"]
    assert {v["name"]: v["vcpus"] for v in report["reports"]["x86_64"]["variants"]} == {"fast": 2, "slow": 2}
    # What QEMU was started with (the target's description reads its -smp).
    assert {r["target"]["details"]["vcpus"] for v in report["reports"]["x86_64"]["variants"] for r in v["runs"]} \
        == {"2"}
    text = studyreport.STUDY.render(report, "table")
    assert "CHANGED FROM THE STUDY FILE: every variant booted with 2 vCPUs (--vcpus 2)" in text
    # A study whose variants differ in vCPUs on purpose keeps them.
    with pytest.raises(LabError, match="sets the vCPUs of 1cpu, 2cpu itself: run it without --vcpus"):
        study.plan(study.load("zseries-scaling"), None, "wall", None, False, vcpus=2)
    assert "changed" not in run_study(lab, capsys, path, "--quick")[0]


def test_a_summary_line_whose_variant_was_left_out_says_so():
    reports = {"x86_64": _report("icount", {"a": 100.0, "b": 120.0})}
    item = study.SummaryItem("Forks", ["proc.fork_exit"], subject="c")
    (line,) = summary_lines([item], reports, "a", "b")
    assert line == "Forks (c against a): not in this run (left out: see its header)"


def test_a_sweep_that_fails_keeps_the_studys_tables(lab, capsys):
    broken = SWEPT.replace('[[sweep]]\ngood = "fast"\nbad = "slow"\nmetrics = ["syscall.null"]',
                           '[[sweep]]\ngood = "fast"\nbad = "slow"\nmetrics = ["crypto.aes256cbc_kernel"]')
    assert broken != SWEPT
    report, err = run_study(lab, capsys, study_file(lab, text=broken), expect=1)
    assert report["sweeps"] == {} and report["reports"]["x86_64"]["metrics"]
    assert report["failures"][0].startswith("x86_64 sweep: probe baseline: run ")
    assert report["summary"][0].startswith("System calls (slow against fast): null syscall (getppid) 25% worse")
