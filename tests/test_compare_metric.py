"""`kernellab compare --metric NAME`: the agent boots for the metrics asked only, as a sweep
or bisect probe does (metrics.catalog.only_words), the report holds those (and the rows the
build and the console give) and says how it was obtained; what cannot be measured so is
one line before anything builds. On the fake lab (tests/fakes)."""

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from fakes import compare_json
from kernellab.experiments import compare
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.metrics.catalog import catalog
from kernellab.store import Store
from workloadfiles import workload_file

SCHEMA = Path(__file__).parent.parent / "src/kernellab/report/schema.json"
VARIANTS = ("a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y")



def measured(report):
    """The report's rows of the catalog's agent metrics and of the workloads: what --metric picks."""
    return {m["name"] for m in report["metrics"]
            if m["source"] == "workload" or (m["name"] in catalog() and catalog()[m["name"]].source == "agent")}


def stored(lab, run_id):
    """The catalog's agent metrics one run's samples hold, but /proc/meminfo's (one read, whole)."""
    return {name for name, _ in lab.samples(run_id)
            if name in catalog() and catalog()[name].source == "agent" and not name.startswith("meminfo.")}


def one_line_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernellab: error: "), err
    return lines[0]


def test_only_the_metrics_asked_come_back_and_the_report_says_so(lab, capsys):
    report, _ = compare_json(lab, capsys, *VARIANTS, "--metric", "syscall.null", "--metric", "meminfo.MemFree")
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    assert measured(report) == {"syscall.null", "meminfo.MemFree"}
    # The agent measured no more than that (all of /proc/meminfo is one read: the table keeps the row asked)...
    for run in lab.runs():
        assert stored(lab, run["id"]) == {"syscall.null"}
        assert "meminfo.MemFree" in {name for name, _ in lab.samples(run["id"])}
    # ...while the rows that cost no more than the boot stay, and still compare.
    syscall = next(m for m in report["metrics"] if m["name"] == "syscall.null")
    assert syscall["verdict"]["b"]["kind"] == "worse"
    assert {"size.text", "build.wall", "boot.agent_ready.printk", "mem.kernel.total"} <= {
        m["name"] for m in report["metrics"]}
    assert report["only_metrics"] == ["syscall.null", "meminfo.MemFree"]
    assert report["only_words"] == "KL_ONLY=syscall.null,meminfo noapictimer"


def test_the_words_reach_the_guests_command_line(lab, capsys):
    compare_json(lab, capsys, "a=tinyconfig", "--metric", "syscall.null,proc.fork_exit")
    boot_too, _ = compare_json(lab, capsys, "a=tinyconfig", "--metric", "syscall.null",
                               "--metric", "boot.agent_ready.printk")
    first, second = (run["id"] for run in lab.runs())
    capsys.readouterr()
    assert lab.main("log", str(first)) == 0
    assert "KL_ONLY=syscall.null,proc.fork_exit noapictimer" in capsys.readouterr().out
    # A figure of the boot asked for: the boot is not shortened (no noapictimer).
    assert lab.main("log", str(second)) == 0
    command_line = next(line for line in capsys.readouterr().out.splitlines() if "Command line:" in line)
    assert command_line.endswith("KL_ONLY=syscall.null") and "noapictimer" not in command_line
    assert boot_too["only_words"] == "KL_ONLY=syscall.null"


@pytest.mark.parametrize("args, says", [
    (("--metric", "syscall.nul"), "--metric: unknown metric 'syscall.nul', nor a metric of a --workload given: "
                                  "did you mean syscall.null"),
    (("--metric", "syscall.null", "--fail-on", "proc.fork_exit:+5"),
     "--fail-on proc.fork_exit: --metric leaves it out (it measures only syscall.null): add --metric "
     "proc.fork_exit, or drop the rule"),
])
def test_what_cannot_be_measured_so_is_one_line_before_anything_builds(lab, capsys, args, says):
    _, err = compare_json(lab, capsys, *VARIANTS, *args, expect=2)
    assert says in one_line_error(err)
    assert not (lab.cache / "artifacts").exists() and not lab.store.exists()


def test_a_rule_on_a_row_the_build_gives_gates_a_compare_of_some_metrics(lab, capsys):
    _, err = compare_json(lab, capsys, *VARIANTS, "--metric", "syscall.null", "--fail-on", "size.text:+10",
                          expect=3)
    assert "regression: size.text b: +43" in err


def test_a_workloads_metric_is_measured_with_its_workload_only(lab, capsys, tmp_path):
    own = workload_file(tmp_path, "own", 'echo "value: 42"')
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(own), "--metric", "own.value")
    assert measured(report) == {"own.value"}
    assert next(m for m in report["metrics"] if m["name"] == "own.value")["values"]["a"]["median"] == 42
    assert report["only_words"] == "KL_ONLY=meminfo noapictimer"   # the cheapest the agent has
    # A workload none of whose metrics is asked would run for nothing.
    _, err = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(own), "--metric", "syscall.null", expect=2)
    assert "--metric names no metric of the workload own: name one of its metrics (own.METRIC)" in one_line_error(err)


def test_the_header_says_only_the_metrics_asked_in_every_view(lab, capsys, monkeypatch):
    report, _ = compare_json(lab, capsys, *VARIANTS, "--metric", "syscall.null")
    saved = lab.tmp / "report.json"
    said = "only the metrics asked: syscall.null"
    for fmt in ("markdown", "html"):
        out = lab.tmp / f"report.{fmt}"
        assert lab.main("show", str(saved), "--format", fmt, "-o", str(out)) == 0
        assert f"{said} (booted with KL_ONLY=syscall.null noapictimer)" in out.read_text(), fmt
    monkeypatch.setenv("COLUMNS", "100")   # a terminal's short header
    capsys.readouterr()
    assert lab.main("show", str(saved)) == 0
    assert f"{said}; build, size and boot rows too" in capsys.readouterr().out.splitlines()[:4]
    # A report of every metric says nothing of the kind.
    compare_json(lab, capsys, *VARIANTS)
    assert lab.main("show", str(saved)) == 0
    assert "only the metrics asked" not in capsys.readouterr().out


def test_a_compare_of_some_metrics_and_one_of_all_never_stand_in_for_each_other(lab, capsys):
    """compare itself measures afresh; a study's reuse (the same plan with reuse) takes
    earlier runs only when they were booted with the same words: a run of some metrics is
    never a run of all of them, nor the reverse."""
    full, _ = compare_json(lab, capsys, "a=tinyconfig")
    assert "proc.fork_exit" in measured(full) and "only_metrics" not in full
    some, _ = compare_json(lab, capsys, "a=tinyconfig", "--metric", "syscall.null")
    assert measured(some) == {"syscall.null"} and len(lab.runs()) == 2   # booted anew

    exp = Experiment("reuse", [parse_short("a=tinyconfig", str(lab.tree), "x86_64")])
    store = Store(lab.store)
    try:
        def run(only):
            how = dataclasses.replace(compare.plan(exp, None, 1, None, 300.0, only=only), reuse=True)
            report, failures = compare.run_experiment(exp, store, how, log=lambda m: None)
            assert not failures
            return report, [r["id"] for r in report["variants"][0]["runs"]]

        report, ids = run(["syscall.null"])
        assert ids == [lab.runs()[1]["id"]] and measured(report) == {"syscall.null"}   # the subset run, taken
        report, ids = run(["proc.fork_exit"])
        assert ids == [lab.runs()[2]["id"]] and measured(report) == {"proc.fork_exit"}   # other words: booted
        report, ids = run([])
        assert ids == [lab.runs()[0]["id"]] and "only_metrics" not in report   # the full run, taken
        assert {"syscall.null", "proc.fork_exit", "syscall.read"} <= measured(report)
    finally:
        store.close()
    assert len(lab.runs()) == 3
