"""The report views, fed by the real report builder: an experiment run through compare, the
lab, the measurement session and the store, on the fake target."""

import csv
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

import labfakes
from kernellab import modes
from kernellab.errors import LabError
from kernellab.experiments import compare, lab
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.report import kinds, render
from kernellab.report.conclusion import summary
from kernellab.report.model import FORMAT_VERSION
from kernellab.store import Store


def check_readable(document, origin):
    """As `kernellab show` reads a file: by the kind it says, or a compare report of before kinds."""
    return kinds.read(document, origin)[1]


SCHEMA = json.loads((Path(__file__).parent.parent / "src/kernellab/report/schema.json").read_text())
NULL = {"a": [200.0, 200.0, 202.0, 198.0, 200.0], "b": [300.0, 300.0, 303.0, 297.0, 300.0]}


def script(cmdline: str) -> list[str]:
    """Variant b's null syscall costs 50% more; b lacks CONFIG_UNIX; b panics at the end."""
    b = "mitigations=off" in cmdline
    lines = labfakes.BOOT + labfakes.agent_lines({"syscall.null": NULL["b" if b else "a"],
                                                  "ipc.unix_rtt": [] if b else [900.0] * 5},
                                                 {"ipc.unix_rtt": "socket(AF_UNIX) failed"} if b else None,
                                                 end=not b,
                                                 flaws=None if b else {"meltdown": "Not_affected",
                                                                       "spectre_v2": "Mitigation__Retpolines"})
    return lines + (["[    1.000000] Kernel panic - not syncing: fake"] if b else [])


@pytest.fixture
def report(tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "prepare", lambda spec, machine=None: labfakes.prepared(
        spec, "CONFIG_X=y\n" if spec.name == "a" else "# CONFIG_UNIX is not set\n"))
    monkeypatch.setattr(lab, "ensure_built", lambda p, store, log=None, cold=False: labfakes.build(
        f"k-{p.spec.name}", 2048 if p.spec.name == "a" else 2100))
    monkeypatch.setattr(lab, "initramfs_for", lambda p, workloads=(): Path("/nonexistent/initramfs-fake.cpio"))
    exp = Experiment("t", [parse_short("a=lab-minimal"),
                           parse_short("b=lab-minimal+debug-kernel+boot:mitigations=off+sysctl:vm.swappiness=10")])
    how = compare.plan(exp, None, None, None, 60.0)
    how = compare.Plan(how.mode, how.min_runs, how.max_runs, how.options,
                       target=lambda p, b: labfakes.FakeTarget(script))
    built, failures = compare.run_experiment(exp, Store(tmp_path / "s.sqlite"), how, log=lambda m: None)
    assert len(failures) == 1 and re.match(r"b run \d+ panic: Kernel panic - not syncing: fake", failures[0])
    return built


def test_the_report_matches_its_schema_and_version(report):
    jsonschema.validate(report, SCHEMA)
    assert report["format_version"] == FORMAT_VERSION
    written = check_readable(json.loads(render(report, "json")), "r.json")
    assert written.pop("format") == "kernellab-compare" and written == report   # its kind, stamped when written


def test_show_refuses_a_report_it_cannot_read():
    with pytest.raises(LabError, match="r.json has no format_version .*reads formats 2, 3, 4: rerun"):
        check_readable({"metrics": []}, "r.json")
    with pytest.raises(LabError, match="r.json is format 9; this kernellab reads formats 2, 3, 4"):
        check_readable({"metrics": [], "format_version": 9}, "r.json")


def test_show_reads_a_format_2_report_which_has_no_size_nor_verdicts(report):
    """A report of an earlier format is judged on reading, as kernellab judges one it writes."""
    older = json.loads(json.dumps({k: v for k, v in report.items() if k not in ("size", "noise_floor")}
                                  | {"format_version": 2}))
    for m in older["metrics"]:
        del m["verdict"]
    read = check_readable(older, "old.json")
    assert read["format_version"] == FORMAT_VERSION
    assert [m["verdict"] for m in read["metrics"]] == [m["verdict"] for m in report["metrics"]]
    for fmt in ("table", "markdown", "csv", "json"):
        assert render(read, fmt)
    with pytest.raises(LabError, match="is not a kernellab report"):
        check_readable([1, 2], "r.json")


def test_a_mitigation_forced_at_boot_is_said_beside_the_cpu_not_affected(report):
    a = next(v for v in report["variants"] if v["name"] == "a")
    a["boot_args"] = ["pti=on"]
    assert ("CPU flaws as a saw them: not affected: meltdown; mitigated: spectre_v2; meltdown mitigation "
            "forced on by pti=on (the kernel still reports the CPU not affected)") in render(report, "table")


def test_table_says_mode_target_boot_parameters_and_failures(report):
    text = render(report, "table")
    assert "mode: icount" in text and "not hardware" in text and "target: fake icount (cpu none)" in text
    assert "boot parameters and sysctls: mitigations=off sysctl vm.swappiness=10" in text
    assert "CPU flaws as a saw them: not affected: meltdown; mitigated: spectre_v2" in text
    assert re.search(r"run \d+ panic: Kernel panic - not syncing: fake", text)
    assert "+50.0%" in text and "200.0 ±0.0% n=5" in text
    # The reason names the option the variant lacks (from the catalog's needs), not the agent's words.
    assert "n/a: needs CONFIG_UNIX" in text


def test_markdown_and_summary(report):
    md = render(report, "markdown")
    # Marked as the terminal marks it: * a difference by the cell's verdict, and the legend.
    assert "| null syscall (getppid) | ns (icount) | 200.0 ±0.0% n=5 | 300.0 ±0.0% n=5 | +50.0%* |" in md
    assert "Δ: * marks a difference" in md and summary(report) in md
    # icount: every exact difference beyond the floor (none here) and the spread is named, with
    # the catalog's direction; what cannot be believed from one run is said not compared.
    said = summary(report)
    assert said.startswith("b vs a (icount mode):\n") and "- syscalls: null syscall (getppid) +50% (worse)" in said
    assert "| boot image | KiB | 2,048 | 2,100 | +2.5%* |" in md
    assert "boot image +3% (worse)" in said


def test_csv_has_one_row_per_metric_and_variant(report):
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    b_null = next(r for r in rows if r["variant"] == "b" and r["metric"] == "syscall.null")
    assert float(b_null["median"]) == 300.0 and float(b_null["delta_pct"]) == 50.0 and b_null["mode"] == "icount"
    assert len(rows) == sum(len(m["values"]) for m in report["metrics"])
    unix = next(r for r in rows if r["variant"] == "b" and r["metric"] == "ipc.unix_rtt")
    assert unix["not_available"] == "needs CONFIG_UNIX"
    # Each cell's verdict as the report holds it; the first variant is the one compared with.
    assert (b_null["verdict"], unix["verdict"]) == ("worse", "not compared")
    assert unix["reason"] == "not available on b: needs CONFIG_UNIX"
    assert {r["verdict"] for r in rows if r["variant"] == "a"} == {""}


def test_runs_measured_differently_are_never_pooled(tmp_path):
    """Two runs of one variant by agents of other record versions, or with other run
    options, must not become one cell."""
    from kernellab.experiments.lab import RunOutcome
    from kernellab.report.model import VariantRecord, samples
    store = Store(tmp_path / "s.sqlite")
    p = labfakes.prepared(parse_short("a=lab-minimal"))
    vid = lab.record_variant(p, store)
    ids = []
    for key, version in (("icount i.cpio ", 1), ("icount i.cpio KL_REPEATS=3", 1), ("icount i.cpio ", 2)):
        run = store.start_run(vid, "k", "fake", {"label": "fake"}, "icount", ["fake"], key, "i.cpio")
        store.add_sample(run, "syscall.null", "ns", 0, 1, 200.0)
        store.finish_run(run, "ok", "", agent_version=version)
        ids.append(run)
    record = VariantRecord(p, labfakes.build("k"), [RunOutcome(i, "ok", "", 1) for i in ids[:1]])
    assert samples(record, store)["syscall.null"] == ("ns", [[200.0]])
    for other in ids[1:]:
        record.runs = [RunOutcome(ids[0], "ok", "", 1), RunOutcome(other, "ok", "", 1)]
        with pytest.raises(LabError, match="its runs were measured differently and cannot be pooled"):
            samples(record, store)


def test_a_cell_of_three_samples_shows_its_range_not_a_quartile_spread():
    """Three samples with one out of line: inclusive quartiles put half the outlier in the
    IQR (+-11,750% here); the cell shows the range, which a reader can check."""
    from kernellab.report import fmt_cell
    from kernellab.stats import summarize
    s = summarize([11_600.0, 20_400.0, 47_000.0])
    cell = {"median": s.median, "n": s.n, "q1": s.q1, "q3": s.q3, "min": s.low, "max": s.high}
    assert fmt_cell(cell, "ns") == "20,400 (11,600..47,000) n=3"
    five = summarize([198.0, 200.0, 200.0, 202.0, 300.0])
    assert fmt_cell({"median": five.median, "n": 5, "q1": five.q1, "q3": five.q3, "min": five.low,
                     "max": five.high}, "ns") == "200.0 ±0.5% n=5"


def test_timer_latency_is_left_out_under_icount_with_more_than_one_vcpu(tmp_path, monkeypatch):
    """QEMU's icount with two vCPUs woke the timer-latency thread seconds late: a report with
    such a variant keeps the samples but says the rows mean nothing there, and why."""
    def two_metrics(cmdline: str) -> list[str]:
        return labfakes.BOOT + labfakes.agent_lines({"syscall.null": NULL["a"], "lat.timer_p99": [20_000.0] * 3})
    monkeypatch.setattr(lab, "prepare", lambda spec, machine=None: labfakes.prepared(spec, "CONFIG_X=y\n"))
    monkeypatch.setattr(lab, "ensure_built", lambda p, store, log=None, cold=False: labfakes.build("k", 2048))
    monkeypatch.setattr(lab, "initramfs_for", lambda p, workloads=(): Path("/nonexistent/initramfs-fake.cpio"))
    exp = Experiment("t", [parse_short("one=lab-minimal"), parse_short("two=lab-minimal+vcpus:2")])
    how = compare.Plan(modes.get("icount"), 1, 1, lab.RunOptions("icount"),
                       target=lambda p, b: labfakes.FakeTarget(two_metrics))
    report, failures = compare.run_experiment(exp, Store(tmp_path / "s.sqlite"), how, log=lambda m: None)
    assert failures == []
    valid = {m["name"]: m["valid_in_mode"] for m in report["metrics"]}
    assert valid["lat.timer_p99"] is False and valid["syscall.null"] is True
    text = render(report, "table")
    assert "not shown, meaningless in icount mode with 2 vCPUs (measured, kept in JSON/CSV): lat.timer_p99" in text
    one = compare.run_experiment(Experiment("t", exp.variants[:1]), Store(tmp_path / "s1.sqlite"), how,
                                 log=lambda m: None)[0]
    assert {m["name"]: m["valid_in_mode"] for m in one["metrics"]}["lat.timer_p99"] is True
