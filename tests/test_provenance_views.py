"""A workload metric's provenance in every human view of a compare report (issue 31: "with
their provenance (program, version, command line) in every report"): the table, Markdown and
HTML name, once per workload, the program, its version from its Debian package or why it is
not known, where it ran and its command line, in the wording sweep and bisect use
(Provenance.line); runs that ran a workload differently each say which they are; a report
without workloads has no such section. `kernellab show` of the JSON report shows the same.
A study says them for each of its compares and each of its sweeps (study format 2; a study
JSON of format 1 still shows).
"""

import copy
import html
import json
import os

import pytest

from kernellab.report import kinds
from test_study_measured_only import measured_only
from test_workload_provenance import DASH, CountingShell, debian_userland, run_local  # noqa: F401
from test_workloads_everywhere import run_study, study_file, timed_workload
from workloadfiles import workload_file

VIEWS = ("table", "markdown", "html")
LINE = f"workload timed: sh {DASH} from Debian's dash on qemu: sh '{{workdir}}/run.sh' 1"


def shown(lab, capsys, report_path, fmt):
    """`kernellab show FILE --format FMT`, its HTML unescaped."""
    assert lab.main("show", str(report_path), "--format", fmt) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    return html.unescape(out) if fmt == "html" else out


def compare_json(lab, capsys, tmp_path, *extra):
    out = tmp_path / "report.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--mode", "icount", *extra,
                    "--format", "json", "-o", str(out)) == 0, capsys.readouterr().err
    capsys.readouterr()
    return out


@pytest.mark.usefixtures("debian_userland")
def test_every_view_of_a_compare_names_its_workloads_program_version_and_command_once(lab, capsys, tmp_path,
                                                                                       monkeypatch):
    report = compare_json(lab, capsys, tmp_path, "--workload", str(timed_workload(tmp_path)))
    for fmt in VIEWS:
        text = shown(lab, capsys, report, fmt)
        assert text.count(LINE) == 1, (fmt, text)   # once for the four runs of the two variants
        assert "workloads (icount mode): the program, its version and Debian package, where it ran" in text, fmt
    monkeypatch.setenv("COLUMNS", "80")   # a screen's table: the line wrapped, never cut or left out
    assert " ".join(LINE.split()) in " ".join(shown(lab, capsys, report, "table").split())
    # The command writes the same views as `show` renders from its JSON.
    page = tmp_path / "report.html"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--mode", "icount", "--workload",
                    str(timed_workload(tmp_path)), "--format", "html", "-o", str(page)) == 0
    assert html.unescape(page.read_text()).count(LINE) == 1


@pytest.mark.usefixtures("debian_userland")
def test_runs_that_ran_a_workload_differently_each_say_which_they_are(lab, capsys, tmp_path):
    path = compare_json(lab, capsys, tmp_path, "--workload", str(timed_workload(tmp_path)), "--runs", "3")
    report = json.loads(path.read_text())
    a, b = report["variants"]
    later = b["runs"][-1]
    for w in later["workloads"]:   # as if dash had been upgraded before b's last run
        w["provenance"] = copy.deepcopy(w["provenance"]) | {"version": "0.5.12-9"}
    path.write_text(json.dumps(report))
    first, second, _ = (r["id"] for r in b["runs"])
    for fmt in VIEWS:
        text = shown(lab, capsys, path, fmt)
        assert f"in variant a and variant b's runs {first}, {second}: {LINE}" in text, fmt
        assert f"in variant b's run {later['id']}: {LINE.replace(DASH, '0.5.12-9')}" in text, fmt


CLOCKED_WHY = "it runs until the clock says a second has passed"


def clocked_workload(tmp_path):
    """The timed workload's script, said to be no fixed amount of work."""
    path = timed_workload(tmp_path, "clocked")
    fixed = 'fixed_work = true\nwhy = "prints what it is told"'
    assert fixed in path.read_text()
    path.write_text(path.read_text().replace(fixed, f'fixed_work = false\nwhy = "{CLOCKED_WHY}"'))
    return path


@pytest.mark.usefixtures("debian_userland")
def test_a_workload_without_fixed_work_says_in_every_view_that_icount_does_not_reproduce_it_and_why(lab, capsys,
                                                                                                   tmp_path):
    """Issue 31: "say in the workload file and the report which workloads cannot be"
    reproducible under icount; a fixed-work workload's line says nothing of it."""
    report = compare_json(lab, capsys, tmp_path, "--workload", str(timed_workload(tmp_path)),
                          "--workload", str(clocked_workload(tmp_path)))
    clocked = LINE.replace("timed", "clocked", 1) + f"; not reproducible under icount: {CLOCKED_WHY}"
    for fmt in VIEWS:
        text = shown(lab, capsys, report, fmt)
        assert text.count(clocked) == 1, (fmt, text)
        assert LINE in text and LINE + ";" not in text and text.count("reproducible") == 1, (fmt, text)


def test_a_compare_without_workloads_has_no_workloads_section(lab, capsys, tmp_path):
    report = compare_json(lab, capsys, tmp_path, "--runs", "1")
    for fmt in VIEWS:
        text = shown(lab, capsys, report, fmt)
        assert "workloads (" not in text.lower() and "workload " not in text.lower(), fmt


def test_on_the_local_target_each_view_says_why_a_version_is_not_known(tmp_path, monkeypatch):
    """A program of no Debian package: the line says so, in every view, with the version of
    one that is (dash's sh, where this machine's sh is dash)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "my-tool").write_text("#!/bin/sh\necho 'value: 7'\n")
    (bin_dir / "my-tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    specs = [str(workload_file(tmp_path, "mine", "", command='["my-tool"]'))]
    report, _ = run_local(tmp_path, CountingShell(), specs, runs=1)
    line = f"workload mine: my-tool (version not known: {bin_dir}/my-tool on this machine is in no Debian " \
           "package) on local: my-tool"
    for fmt in VIEWS:
        text = kinds.get("compare").render(report, fmt)
        text = html.unescape(text) if fmt == "html" else text
        assert text.count(line) == 1, (fmt, text)
        assert "workloads (wall mode)" in text, fmt


@pytest.mark.usefixtures("debian_userland")
def test_a_studys_report_names_its_workloads_program(lab, capsys, tmp_path):
    spec = timed_workload(tmp_path)
    study, _ = run_study(lab, capsys, study_file(lab, tmp_path, f'"{spec}"', metric="timed.time"))
    path = tmp_path / "study.json"
    path.write_text(kinds.get("study").render(study, "json"))
    for fmt in VIEWS:
        assert LINE in shown(lab, capsys, path, fmt), fmt


def test_a_report_whose_workload_provenance_is_damaged_is_refused_in_one_line(lab, capsys, tmp_path):
    path = compare_json(lab, capsys, tmp_path, "--runs", "1")
    report = json.loads(path.read_text())
    report["variants"][0]["runs"][0]["workloads"] = [{"label": "x", "provenance": {"label": "x"}}]
    path.write_text(json.dumps(report))
    assert lab.main("show", str(path)) == 2
    err = capsys.readouterr().err
    assert "workloads[0].provenance: 'workload' is a required property" in err and "Traceback" not in err


# -- a study: each compare and each sweep inside it names its workloads once -------------

SWEEP = '\n[[sweep]]\ngood = "fast"\nbad = "slow"\nmetrics = ["timed.time"]\n'
SWEEP_HEAD = "sweep on x86_64: one option at a time"


def swept_study(lab, tmp_path):
    """A study whose variants and whose sweep run the timed workload: its file, and its JSON."""
    path = study_file(lab, tmp_path, f'"{timed_workload(tmp_path)}"', metric="timed.time")
    path.write_text(path.read_text() + SWEEP)
    return path


def study_views(lab, capsys, saved):
    """`kernellab show` of a study JSON in each view: what precedes its sweep, and the sweep on."""
    return {fmt: tuple(shown(lab, capsys, saved, fmt).split(SWEEP_HEAD)) for fmt in VIEWS}


@pytest.mark.usefixtures("debian_userland")
def test_every_view_of_a_study_names_the_workloads_of_its_compare_and_of_its_sweep(lab, capsys, tmp_path):
    path = swept_study(lab, tmp_path)
    study, _ = run_study(lab, capsys, path)
    [said] = study["sweeps"]["x86_64"]["workloads"]
    assert (said["program"], said["version"], said["argv"]) == ("sh", DASH, ["sh", "{workdir}/run.sh", "1"])
    for fmt, (before, sweep_part) in study_views(lab, capsys, lab.tmp / "study.json").items():
        assert sweep_part.count(LINE) == 1, (fmt, sweep_part)   # the sweep's, once
        assert LINE in before, fmt                               # the compare's
        if fmt != "html":   # the page says both in sections of their own, and the compare's in its text report
            assert before.count(LINE) == 1, (fmt, before)
    # What the store holds of it (study run --measured-only): its sweep says them as well.
    report, _ = measured_only(lab, capsys, path)
    assert report["sweeps"]["x86_64"]["workloads"] == study["sweeps"]["x86_64"]["workloads"]
    for fmt, (_, sweep_part) in study_views(lab, capsys, lab.tmp / "so-far.json").items():
        assert sweep_part.count(LINE) == 1, (fmt, sweep_part)


@pytest.mark.usefixtures("debian_userland")
def test_a_study_json_of_format_1_without_its_sweeps_workloads_still_shows(lab, capsys, tmp_path):
    study, _ = run_study(lab, capsys, swept_study(lab, tmp_path))
    old = tmp_path / "old.json"
    del study["sweeps"]["x86_64"]["workloads"]
    old.write_text(json.dumps(study | {"format_version": 1}))
    for fmt, (before, sweep_part) in study_views(lab, capsys, old).items():
        assert LINE in before and LINE not in sweep_part, fmt   # it never said the sweep's
    again = tmp_path / "again.json"
    again.write_text(shown(lab, capsys, old, "json"))   # written as format 2: it names none
    assert json.loads(again.read_text())["sweeps"]["x86_64"]["workloads"] == []
    assert lab.main("show", str(again)) == 0
    # Format 2 says them: a sweep that does not, or whose provenance is damaged, is refused in one line.
    study["sweeps"]["x86_64"].pop("workloads", None)
    for sweep_workloads, said in ((None, "'workloads' is a required property"),
                                  ([{"label": "timed"}], "'workload' is a required property")):
        if sweep_workloads is not None:
            study["sweeps"]["x86_64"]["workloads"] = sweep_workloads
        old.write_text(json.dumps(study | {"format_version": 2}))
        assert lab.main("show", str(old)) == 2
        err = capsys.readouterr().err
        assert said in err and "sweeps" in err and err.count("\n") == 1 and "Traceback" not in err, err
