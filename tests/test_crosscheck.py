"""Cross-checks (issue 31): the agent's microbenchmarks beside standard tools in the same guest
and kernel. The pairs are data (metrics/crosschecks.toml); the ratio and verdict of each come
from one compare report (report/crosscheck.py); docs/crosschecks.md gives the bands a real
guest's ratios must stay in (the integration test at the end)."""

import dataclasses
import re
from pathlib import Path

import pytest

from kernellab import datafile
from kernellab.errors import LabError
from kernellab.guest.workloads import Provenance
from kernellab.report import crosscheck, kinds

DOCS = Path(__file__).parent.parent / "docs/crosschecks.md"
SETTING = {"base": "lab-minimal", "source": "debian:6.1", "arch": "x86_64", "mode": "icount", "target": "qemu",
           "date": "2026-11-27"}


def cell(median, spread=0.0, n=3):
    return {"median": median, "n": n, "runs": 1, "samples": [median] * n, "run_medians": [median],
            "q1": median, "q3": median, "min": median - spread, "max": median + spread}


# A stored provenance of perf bench, as a report's run carries it (guest.workloads.Provenance).
PERF = {"workload": "perf-bench", "label": "perf-bench", "program": "perf", "argv": ["perf", "bench"],
        "version": "6.1.158-1", "package": "linux-perf", "packages": ["linux-perf"], "fixed_work": True,
        "why": "a fixed number of loops (-l)"}


def report(values, mode="icount"):
    """A compare report of one variant "x" holding `values` (metric -> cell)."""
    return {"mode": mode, "mode_note": "the mode's note", "runs_per_variant": {"x": 1},
            "variants": [{"name": "x", "runs": [{"workloads": [
                {"label": "perf-bench", "status": "ok",   # the defaults' label
                 "provenance": PERF}]}]}],
            "metrics": [{"name": m, "label": m, "unit": "ns", "values": {"x": c}} for m, c in values.items()]}


def two_pairs(band=(0.5, 2.0)):
    return crosscheck.Crosschecks("lab-minimal", "debian:6.1", "x86_64", "icount", (
        crosscheck.Pair("null syscall", "syscall.null", "perf-bench:bench=syscall_basic,loops=20000",
                        "perf-bench.syscall_basic_op_time", 1.0, band, "loops differ"),
        crosscheck.Pair("ctx", "ctx.ring2_0k", "perf-bench:bench=sched_pipe,loops=2000",
                        "perf-bench.sched_pipe_op_time", 0.5, band, "loops differ")))


def test_the_shipped_pairs_load_and_name_workloads_and_metrics_that_exist():
    from kernellab.metrics.catalog import catalog
    from kernellab.workloads import resolve

    checks = crosscheck.load()
    assert len(checks.pair) >= 6
    known = catalog()
    for p in checks.pair:
        assert p.agent in known, p.agent
        inst = resolve(p.workload)
        assert p.metric in {f"{inst.workload.name}.{m.name}" for m in inst.metrics()}, (p.metric, p.workload)


@pytest.mark.parametrize(("change", "said"), [
    ({"bnad": [1, 2]}, "unknown key 'bnad'"),
    ({"band": [2.0, 1.0]}, "band must be two numbers 0 < low < high"),
    ({"scale": 0}, "scale must be positive"),
    ({"metric": "fio.read_bw"}, "is not a metric of workload"),
])
def test_a_pair_that_cannot_hold_is_refused_in_one_line(change, said):
    pair = {"name": "p", "agent": "syscall.null", "workload": "perf-bench", "metric": "perf-bench.x",
            "scale": 1.0, "band": [0.5, 2.0], "differ": "d", **change}
    data = {"band_variant": "lab-minimal", "band_source": "debian:6.1", "band_arch": "x86_64", "band_mode": "icount",
            "pair": [pair]}
    with pytest.raises(LabError, match=re.escape(said)) as e:
        datafile.load(crosscheck.Crosschecks, data, "crosschecks.toml")
    assert "\n" not in str(e.value)


def test_each_ratio_is_the_tools_figure_scaled_over_the_agents_and_judged_against_its_band():
    r = report({"syscall.null": cell(200.0), "perf-bench.syscall_basic_op_time": cell(300.0, 10),
                "ctx.ring2_0k": cell(1000.0), "perf-bench.sched_pipe_op_time": cell(6000.0)})
    result = crosscheck.judge(r, SETTING, two_pairs())
    syscall, ctx = result["pairs"]
    assert syscall["ratio"] == pytest.approx(1.5) and syscall["verdict"] == crosscheck.IN_BAND
    assert syscall["tool"]["min"] == 290.0 and syscall["program"] == "perf 6.1.158-1 from Debian's linux-perf"
    assert ctx["ratio"] == pytest.approx(3.0) and ctx["verdict"] == crosscheck.OUTSIDE   # 6000 x 0.5 / 1000
    assert crosscheck.failed(result) == ["ctx"]


def test_a_tools_program_and_version_are_in_every_reports_words_with_why_a_version_is_not_known():
    r = report({"syscall.null": cell(200.0), "perf-bench.syscall_basic_op_time": cell(300.0)})
    [run] = r["variants"][0]["runs"]
    run["workloads"][0]["provenance"] = {**PERF, "version": None, "package": None,
                                         "version_unknown": "/usr/local/bin/perf on this machine is in no Debian "
                                                            "package"}
    syscall, _ = crosscheck.judge(r, {**SETTING, "target": "local", "mode": "wall"}, two_pairs())["pairs"]
    said = "perf (version not known: /usr/local/bin/perf on this machine is in no Debian package)"
    assert syscall["program"] == said
    assert f"workload perf-bench: {said} on " in Provenance.from_dict({**run["workloads"][0]["provenance"],
                                                                         "target": "local"}).line()
    run["workloads"][0]["provenance"]["version_unknown"] = ""   # a run stored before the reason was
    syscall, _ = crosscheck.judge(r, SETTING, two_pairs())["pairs"]
    assert syscall["program"] == "perf (version not known)"


def test_a_missing_side_is_not_measured_with_its_reason_and_another_setting_has_no_band():
    r = report({"syscall.null": cell(200.0), "perf-bench.syscall_basic_op_time": {"not_available": "not installed"},
                "ctx.ring2_0k": cell(1000.0), "perf-bench.sched_pipe_op_time": cell(6000.0)})
    syscall, _ = crosscheck.judge(r, SETTING, two_pairs())["pairs"]
    assert syscall["verdict"] == crosscheck.NOT_MEASURED and syscall["ratio"] is None
    assert syscall["why"] == "tool: not installed"
    elsewhere = crosscheck.judge(r, {**SETTING, "target": "local", "mode": "wall"}, two_pairs())
    assert elsewhere["pairs"][1]["verdict"] == crosscheck.NO_BAND and elsewhere["pairs"][1]["ratio"] == 3.0
    assert crosscheck.failed(elsewhere) == []


def test_a_host_timed_pair_is_judged_by_its_own_wall_band_on_its_own_kernel_and_nowhere_else():
    """fio's pair: its band holds in wall mode on lab-minimal+workloads+fs:ext4-4k under QEMU;
    under icount it has none, and the other pairs keep theirs (icount, lab-minimal)."""
    checks = two_pairs(band=(0.5, 2.0))
    wall = dataclasses.replace(checks.pair[0], band_variant="lab-minimal+workloads+fs:ext4-4k", band_mode="wall")
    checks = dataclasses.replace(checks, pair=(wall, checks.pair[1]))
    r = report({"syscall.null": cell(200.0), "perf-bench.syscall_basic_op_time": cell(300.0),
                "ctx.ring2_0k": cell(1000.0), "perf-bench.sched_pipe_op_time": cell(3000.0)})
    on_its_kernel = {**SETTING, "base": "lab-minimal+workloads+fs:ext4-4k", "mode": "wall"}
    row, other = crosscheck.judge(r, on_its_kernel, checks)["pairs"]
    assert (row["verdict"], row["why"]) == (crosscheck.IN_BAND, "band 0.5..2")
    assert other["verdict"] == crosscheck.NO_BAND
    assert other["why"] == "the band is for lab-minimal of debian:6.1, x86_64, icount mode, under QEMU"
    r["metrics"][1]["values"]["x"] = cell(1000.0)   # the tool's figure 5x the agent's
    assert crosscheck.failed(crosscheck.judge(r, on_its_kernel, checks)) == ["null syscall"]
    row, other = crosscheck.judge(r, {**on_its_kernel, "mode": "icount"}, checks)["pairs"]
    assert row["verdict"] == crosscheck.NO_BAND and row["why"].startswith("host-timed figures: the pair's band is "
                                                                           "for wall mode")
    row, _ = crosscheck.judge(r, {**on_its_kernel, "target": "local"}, checks)["pairs"]
    assert row["verdict"] == crosscheck.NO_BAND and "under QEMU" in row["why"]
    row, _ = crosscheck.judge(r, {**on_its_kernel, "base": "lab-minimal+workloads"}, checks)["pairs"]
    assert row["verdict"] == crosscheck.NO_BAND


def test_the_pairs_asked_for_are_the_only_ones_run_and_an_unknown_one_is_refused_in_one_line():
    checks = two_pairs()
    assert [p.name for p in checks.only(["ctx"]).pair] == ["ctx"]
    assert checks.only(["ctx"]).workloads == ("perf-bench:bench=sched_pipe,loops=2000",)
    with pytest.raises(LabError, match="no cross-check pair 'nul syscall': the pairs are 'null syscall', 'ctx'"):
        checks.only(["nul syscall"])


def test_a_pair_with_a_band_mode_that_is_no_mode_is_refused():
    pair = {"name": "p", "agent": "syscall.null", "workload": "perf-bench", "metric": "perf-bench.x",
            "scale": 1.0, "band": [0.5, 2.0], "differ": "d", "band_mode": "walll"}
    data = {"band_variant": "lab-minimal", "band_source": "debian:6.1", "band_arch": "x86_64", "band_mode": "icount",
            "pair": [pair]}
    with pytest.raises(LabError, match="band_mode must be one of icount, wall"):
        datafile.load(crosscheck.Crosschecks, data, "crosschecks.toml")


def test_the_result_is_a_kind_that_round_trips_and_renders():
    r = report({"syscall.null": cell(200.0), "perf-bench.syscall_basic_op_time": cell(300.0),
                "ctx.ring2_0k": cell(1000.0), "perf-bench.sched_pipe_op_time": cell(6000.0)})
    result = crosscheck.judge(r, SETTING, two_pairs())
    kind = kinds.get("crosscheck")
    import json
    back_kind, back = kinds.read(json.loads(kind.render(result, "json")), "crosscheck.json")
    assert back_kind is kind and back["pairs"][0]["ratio"] == 1.5
    table = kind.render(result, "table")
    assert "null syscall" in table and "1.5" in table and "outside band" in table
    assert "ctx: outside band: band 0.5..2" in table
    md = kind.render(result, "markdown")
    assert md.count("\n| ") == 3 and "**ctx**" in md   # header and two rows; the loops' differences


def test_the_docs_give_every_pairs_band_as_the_data_does():
    """The bands a test holds a real guest to are the ones the docs show."""
    text = DOCS.read_text()
    for p in crosscheck.load().pair:
        row = next((line for line in text.splitlines() if line.startswith(f"| {p.name} |")), None)
        assert row is not None, f"docs/crosschecks.md has no row for {p.name}"
        assert f"| {p.band[0]:g}..{p.band[1]:g} |" in row, (p.name, row)


def test_crosscheck_refuses_a_bad_variant_in_one_line_before_anything_runs(lab, capsys):
    assert lab.main("workload", "crosscheck", "x=lab-minimal+CONFIG_NOPE=maybe", "--source", str(lab.tree)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kernellab: error:" in err
    assert lab.runs() == []


@pytest.mark.integration
def test_the_agent_and_the_tools_agree_within_the_docs_bands_in_a_real_guest(tmp_path):
    """lab-minimal x86_64 under icount (the bands' setting): every pair with a band is in it."""
    from kernellab.experiments import crosscheck as run_crosscheck
    from kernellab.experiments.spec import parse_short
    from kernellab.store import Store

    result, failures = run_crosscheck.run(Store(tmp_path / "store.db"), parse_short("lab-minimal"), None, 1,
                                          600, None, log=lambda line: None)
    assert failures == []
    verdicts = {p["name"]: (p["verdict"], p["ratio"], p["why"]) for p in result["pairs"]}
    banded = {name: v for name, v in verdicts.items() if v[0] != crosscheck.NO_BAND}
    assert banded and all(v[0] == crosscheck.IN_BAND for v in banded.values()), verdicts
    assert verdicts["sequential read, O_DIRECT"][0] == crosscheck.NO_BAND   # host-timed: wall only


def test_crosscheck_runs_every_pair_in_one_run_and_writes_a_checked_result(lab, capsys):
    """In the fake lab (its QEMU runs the real agent and the tools on this host): one run of one
    kernel holds both sides of every pair; outside the bands' setting (the fake tree's kernel is
    not lab-minimal's) every measured pair has a ratio and no band, and the exit is 0."""
    import json

    out = lab.tmp / "crosscheck.json"
    rc = lab.main("workload", "crosscheck", "--source", str(lab.tree), "--format", "json", "-o", str(out))
    assert rc == 0, capsys.readouterr().err
    _, result = kinds.load(out, "crosscheck")
    assert [r["name"] for r in lab.runs()] == ["lab-minimal"]
    assert len(result["pairs"]) == len(crosscheck.load().pair)
    for p in result["pairs"]:
        assert p["verdict"] in (crosscheck.NO_BAND, crosscheck.NOT_MEASURED), p
        if p["name"] == "sequential read, O_DIRECT":   # lab-minimal has no ext4 for file.*'s disk (nor fio's)
            assert p["agent"] == {"not_available": "needs CONFIG_EXT4_FS"}, p
            continue
        assert "median" in p["agent"], p
        if p["verdict"] == crosscheck.NO_BAND:
            assert p["ratio"] > 0 and "the band is for lab-minimal of debian:6.1" in p["why"]
    measured = [p for p in result["pairs"] if p["ratio"] is not None]
    assert measured, json.dumps(result["pairs"], indent=1)[:2000]


def test_a_variant_changed_from_the_bands_base_is_not_judged_by_its_bands():
    """lab-minimal+CONFIG_HZ_1000=y is another kernel: its ratios are shown, with no band."""
    from kernellab.experiments.crosscheck import _kernel
    from kernellab.experiments.spec import parse_short

    assert _kernel(parse_short("lab-minimal")) == "lab-minimal"
    assert _kernel(parse_short("x=lab-minimal+workloads+fs:ext4-4k")) == "lab-minimal+workloads+fs:ext4-4k"
    changed = _kernel(parse_short("x=lab-minimal+CONFIG_HZ_1000=y+boot:nosmt"))
    assert changed == "lab-minimal+CONFIG_HZ_1000=y+boot:nosmt"
    r = report({"syscall.null": cell(200.0), "perf-bench.syscall_basic_op_time": cell(200.0),
                "ctx.ring2_0k": cell(1000.0), "perf-bench.sched_pipe_op_time": cell(6000.0)})
    rows = crosscheck.judge(r, {**SETTING, "base": changed}, two_pairs())["pairs"]
    assert [p["verdict"] for p in rows] == [crosscheck.NO_BAND, crosscheck.NO_BAND]
