"""`kernellab study run NAME --measured-only`: the report of what a study stopped part-way
has measured, built and booted from nothing, each missing variant, cell and sweep option
marked "not measured yet", on the fake lab (tests/fakes) in seconds."""

import html
import json
import re
import sqlite3

import pytest

from kernellab.errors import LabError
from kernellab.experiments import lab as lab_module
from test_study import FAST_SLOW, SWEPT, WITH_BIG_BSS, run_study, study_file

NOT = "not measured yet"

SWEEP = """
[[sweep]]
good = "fast"
bad = "slow"
metrics = ["syscall.null"]
"""


def measured_only(lab, capsys, path, fmt="json", expect=0):
    out = lab.tmp / f"so-far.{fmt}"
    rc = lab.main("study", "run", str(path), "--measured-only", "--format", fmt, "-o", str(out))
    err = capsys.readouterr().err
    assert rc == expect, err
    return (json.loads(out.read_text()) if fmt == "json" else out.read_text()), err


def what_the_lab_holds(lab):
    """Runs, build records and kernel images: what a build or a boot would add to."""
    db = sqlite3.connect(lab.store)
    try:
        builds = sorted(r[0] for r in db.execute("SELECT key FROM builds"))
    finally:
        db.close()
    images = sorted(p.parent.name for p in (lab.cache / "artifacts").glob("*/build.json"))
    return lab.runs(), builds, images


def test_a_study_stopped_after_its_quick_form_reports_what_it_measured(lab, capsys):
    """The quick form measured fast and slow (and so the split's variant, fast's kernel):
    big-bss and the sweep are not measured yet, each marked once, nothing zero, no row left out."""
    path = study_file(lab, text=WITH_BIG_BSS + SWEEP)
    run_study(lab, capsys, path, "--quick")
    held = what_the_lab_holds(lab)

    report, _ = measured_only(lab, capsys, path)
    assert what_the_lab_holds(lab) == held   # nothing built, nothing booted
    so_far = report["measured_only"]
    assert so_far["so_far"] == "3 of 4 variants, 0 of 1 sweeps"
    assert so_far["variants"] == {"x86_64": ["big-bss"]} and so_far["unbooted"] == {}
    assert report["reports"]["x86_64"]["runs_per_variant"] == {"fast": 1, "slow": 1, "slow-code-fast-config": 1}
    assert report["sweeps"] == {}
    assert so_far["sweeps"] == {"x86_64": {"flips": 1, "not_measured": ["the baseline", "CONFIG_FAKE_SLOW=y"]}}
    assert report["builds"] == 0 and report["failures"] == []
    # The figures are the study's own: what a run of it would take from the store.
    null = next(m for m in report["reports"]["x86_64"]["metrics"] if m["name"] == "syscall.null")
    assert null["values"]["slow"]["median"] == pytest.approx(1.25 * null["values"]["fast"]["median"])

    text, _ = measured_only(lab, capsys, path, fmt="markdown")
    lines = text.splitlines()
    assert lines[2] == "- study fakestudy: does FAKE_SLOW cost?"
    assert lines[3] == "- MEASURED SO FAR (a study stopped part-way): 3 of 4 variants, 0 of 1 sweeps"
    assert f"- {NOT} on x86_64: big-bss" in lines
    assert "- this run:" not in text and "built and booted nothing, every figure from the store" in text
    head = next(line for line in lines if line.startswith("| metric"))
    columns = [c.strip() for c in head.strip("|").split("|")]
    assert columns[3:7] == ["fast", "slow", "slow-code-fast-config", "big-bss"]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| ") and "| x86_64 |" in line]
    # Every metric of the tables, a row each, as in the full report: big-bss's cell marked.
    assert len(rows) == len(["syscall.null", "syscall.read", "ipc.pipe_rtt", "irq.idle_timer", "size.text"])
    for row in rows:
        assert row[6] == NOT and row[3] not in (NOT, "-", "0")
        assert row[-1] == ""   # no Δ for what is not measured
    assert f"sweep on x86_64: {NOT}: the baseline, CONFIG_FAKE_SLOW=y" in text
    # Saved, it is shown again as it was written (study-schema.json knows its measured_only part).
    assert lab.main("show", str(lab.tmp / "so-far.json"), "--format", "markdown") == 0
    assert capsys.readouterr().out == text
    # Its page has a section for the sweep, headed as a measured sweep's, that says so.
    page, _ = measured_only(lab, capsys, path, fmt="html")
    sweep = re.search(r'<section id="x86-64-sweep-one-option-at-a-time">(.*?)</section>', page, re.S)
    assert f"<li>{NOT}: the baseline, CONFIG_FAKE_SLOW=y</li>" in html.unescape(sweep.group(1))


def test_a_variant_built_but_not_booted_shows_its_build_figures_only(lab, capsys):
    path = study_file(lab, text=WITH_BIG_BSS)
    run_study(lab, capsys, path, "--quick")
    assert lab.main("build", "tinyconfig+CONFIG_PROC_FS=y+CONFIG_FAKE_BSS_KB=64") == 0   # big-bss's kernel
    held = what_the_lab_holds(lab)
    report, _ = measured_only(lab, capsys, path)
    assert what_the_lab_holds(lab) == held
    assert report["measured_only"]["so_far"] == "3 of 4 variants (1 more built, not booted yet)"
    assert report["measured_only"]["unbooted"] == {"x86_64": ["big-bss"]}
    text, _ = measured_only(lab, capsys, path, fmt="markdown")
    assert "- built, not booted yet on x86_64: big-bss" in text
    rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
                              if "| x86_64 |" in line)}
    assert rows["null syscall (getppid)"][6] == NOT
    assert rows["vmlinux text"][6] not in (NOT, "-")   # the build's own figure


def stop_the_sweep_part_way(lab, capsys, monkeypatch, path):
    """The study of `path` (SWEPT's sweep of two flips), its sweep's third boot failed
    (baseline, one flip, then the host goes away)."""
    run_study(lab, capsys, path, "--quick")
    real_run, boots = lab_module.run, []

    def fails_third(*args, **kwargs):
        boots.append(1)
        if len(boots) == 3:
            raise LabError("the host went away (a fake failure)")
        return real_run(*args, **kwargs)

    monkeypatch.setattr(lab_module, "run", fails_third)
    stopped, _ = run_study(lab, capsys, path, expect=1)
    assert stopped["sweeps"] == {} and len(boots) == 3
    monkeypatch.setattr(lab_module, "run", real_run)


def test_a_sweep_stopped_part_way_shows_the_flips_it_measured(lab, capsys, monkeypatch):
    """The report shows the flip measured, as the finished sweep has it, and names the other."""
    path = study_file(lab, text=SWEPT)
    stop_the_sweep_part_way(lab, capsys, monkeypatch, path)
    held = what_the_lab_holds(lab)
    report, _ = measured_only(lab, capsys, path)
    assert what_the_lab_holds(lab) == held
    (flip,) = report["sweeps"]["x86_64"]["flips"]
    (left,) = report["measured_only"]["sweeps"]["x86_64"]["not_measured"]
    assert {f"{flip['option']}={flip['value']}", left} == {"CONFIG_FAKE_SLOW=y", "CONFIG_FAKE_BSS_KB=32"}
    assert report["measured_only"]["so_far"] == "3 of 3 variants, 0 of 1 sweeps (1 partly: 1 of 2 options)"
    text, _ = measured_only(lab, capsys, path, fmt="table")
    assert f"{NOT} on x86_64: 1 of 2 options: {left}" in text

    # The study run again finishes the sweep: the flip measured so far has the figures it has there.
    full, _ = run_study(lab, capsys, path)
    finished = {f["option"]: f for f in full["sweeps"]["x86_64"]["flips"]}
    assert flip["effects"] == finished[flip["option"]]["effects"]
    assert flip["rebuild_objects"] == finished[flip["option"]]["rebuild_objects"]


def test_a_study_with_nothing_measured_is_one_line(lab, capsys):
    path = study_file(lab, text=FAST_SLOW)
    assert lab.main("study", "run", str(path), "--measured-only") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"study fakestudy: nothing of it is measured yet (no store yet): run it first (kernellab study run {path})" \
        in err
    assert not lab.store.exists()
    assert lab.main("compare", "a=tinyconfig") == 0   # a store, with none of the study's kernels
    capsys.readouterr()
    held = what_the_lab_holds(lab)
    assert lab.main("study", "run", str(path), "--quick", "--measured-only") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing of it is measured yet: run it first" in err and "--quick" in err
    assert what_the_lab_holds(lab) == held


def test_measured_only_refuses_what_it_cannot_do(lab, capsys):
    path = study_file(lab, text=SWEPT)
    assert lab.main("study", "run", str(path), "--measured-only", "--format", "results") == 2
    assert "a results file, which rules cite, holds whole sweeps" in capsys.readouterr().err
    assert lab.main("study", "run", str(path), "--measured-only", "--workers", "2") == 2
    assert "--measured-only builds and boots nothing: drop --workers/--cluster" in capsys.readouterr().err


def test_a_variant_with_fewer_runs_than_the_study_asks_is_said_so(lab, capsys):
    path = study_file(lab, mode="wall")
    run_study(lab, capsys, path, "--quick", "--runs", "2")
    held = what_the_lab_holds(lab)
    assert lab.main("study", "run", str(path), "--quick", "--runs", "3", "--measured-only", "--format", "markdown") == 0
    text = capsys.readouterr().out
    assert what_the_lab_holds(lab) == held
    assert "- fewer runs than the study asks: fast on x86_64: 2 of 3 runs" in text
    assert "- fewer runs than the study asks: slow on x86_64: 2 of 3 runs" in text
