"""The measurement session's verdicts, and the lab's run on the fake target: what is
stored, when, and under which key."""

from pathlib import Path

import pytest

import labfakes
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.spec import parse_short
from kernellab.guest import vulnerabilities
from kernellab.guest.session import Session
from kernellab.store import Store
from labfakes import BOOT, FakeConsole, ListSink, agent_lines


def read(script, **kw):
    sink = ListSink()
    console = FakeConsole(script, **kw)
    return Session(sink).read(console), sink, console


def test_a_complete_boot_is_ok_with_agent_and_console_samples():
    result, sink, _ = read(BOOT + agent_lines({"syscall.null": [200.0, 201.0]}, {"ipc.unix_rtt": "no AF_UNIX"}))
    assert (result.status, result.reason, result.agent_version, result.clocksource) == ("ok", "", 1, "tsc")
    by_metric = {s.metric: s for s in sink.samples}
    assert [s.value for s in sink.samples if s.metric == "syscall.null"] == [200.0, 201.0]
    assert by_metric["syscall.null"].seq == 3  # the agent's record number travels with the sample
    assert by_metric["boot.agent_ready.printk"].value == 0.3 and by_metric["mem.kernel.available"].value == 239636
    assert sink.unavailable_metrics == {"ipc.unix_rtt": "no_AF_UNIX"}


def test_a_panic_is_the_verdict_and_what_came_before_is_kept():
    script = BOOT + agent_lines({"syscall.null": [200.0]}, end=False) + [
        "[    1.0] Kernel panic - not syncing: Attempted to kill init!", "[    1.0] CPU: 0 PID: 1",
        "[    1.0] Call Trace:"]
    result, sink, _ = read(script)
    assert result.status == "panic" and result.reason == "Kernel panic - not syncing: Attempted to kill init!"
    assert [s.value for s in sink.samples if s.metric == "syscall.null"] == [200.0]
    assert "Call Trace:" in result.console_log  # the backtrace after the panic is logged


def test_a_hang_is_a_timeout():
    result, sink, _ = read(BOOT + agent_lines({"syscall.null": [200.0]}, end=False), hang=True)
    assert result.status == "timeout" and "killed" in result.reason and len(sink.samples) > 1


def test_a_kernel_that_stops_early_is_incomplete():
    result, _, _ = read(BOOT[:2])
    assert result.status == "incomplete" and "stopped before the agent finished" in result.reason


def test_timings_from_a_tick_clock_are_discarded():
    result, sink, _ = read(BOOT + agent_lines({"syscall.null": [0.0, 4000000.0]}, clocksource="jiffies"))
    assert result.status == "coarse-clock" and "jiffies" in result.reason
    assert not [s for s in sink.samples if s.metric == "syscall.null"]


def test_damaged_records_are_rejected_and_said():
    lines = agent_lines({"syscall.null": [200.0, 201.0]})
    lines[3] = lines[3].replace("value=201.0", "value=9201.0")  # the checksum no longer matches
    result, sink, _ = read(BOOT + lines)
    assert result.status == "damaged" and "first: checksum mismatch" in result.reason
    assert [s.value for s in sink.samples if s.metric == "syscall.null"] == [200.0]


def test_a_sysctl_the_kernel_refused_stops_the_run():
    script = BOOT[:1] + ["[    0.1] Failed to set sysctl parameter 'vm.swapiness=10': parameter not found"] + BOOT[1:]
    result, _, console = read(script + agent_lines({"syscall.null": [200.0]}))
    assert result.status == "bad-sysctl" and "vm.swapiness=10" in result.reason
    assert console.stopped and console.read == 2


def test_an_agent_of_another_record_version_is_refused():
    result, sink, console = read(BOOT + agent_lines({"syscall.null": [200.0]}, version=2))
    assert result.status == "agent-mismatch" and "record version 2" in result.reason
    assert console.stopped and not [s for s in sink.samples if s.metric == "syscall.null"]


# -- the lab's run on the fake target ------------------------------------------------

def _run(tmp_path, target, text="x=lab-minimal", config="CONFIG_X=y\n"):
    store = Store(tmp_path / "s.sqlite")
    p = labfakes.prepared(parse_short(text), config)
    build = labfakes.build("k1")
    initrd = Path("/nonexistent/initramfs-abc.cpio")
    return store, lab.run(p, build, store, lab.RunOptions("icount", 60.0), initrd, target)


def test_a_run_stores_samples_facts_and_the_reason_a_metric_is_missing(tmp_path):
    target = labfakes.FakeTarget(lambda c: BOOT + agent_lines({"syscall.null": [200.0]}, {"ipc.unix_rtt": "x"}))
    store, outcome = _run(tmp_path, target, config="# CONFIG_UNIX is not set\n")
    row = store.run(outcome.run_id)
    assert (outcome.status, row["agent_version"], row["clocksource"], row["initramfs"]) == (
        "ok", 1, "tsc", "initramfs-abc.cpio")
    assert '"label": "fake icount"' in row["target_info"]
    assert store.run_unavailable(outcome.run_id) == {"ipc.unix_rtt": "needs CONFIG_UNIX"}
    assert store.run_metrics(outcome.run_id)["syscall.null"] == [200.0]


def test_boot_parameters_and_sysctls_reach_the_kernel_and_the_run_key(tmp_path):
    target = labfakes.FakeTarget(lambda c: BOOT + agent_lines({"syscall.null": [200.0]}))
    store, outcome = _run(tmp_path, target, "x=lab-minimal+boot:mitigations=off+sysctl:vm.swappiness=10")
    assert target.cmdlines == ["mitigations=off sysctl.vm.swappiness=10"]
    key = store.run(outcome.run_id)["options_key"]
    assert key == "icount initramfs-abc.cpio mitigations=off sysctl.vm.swappiness=10"
    assert store.finished_runs("k1", "icount", key) == [outcome.run_id]
    plain = lab.RunOptions("icount", 60.0).key(Path("initramfs-abc.cpio"), parse_short("x=lab-minimal"))
    assert store.finished_runs("k1", "icount", plain) == []


def test_an_interrupted_run_keeps_its_samples_milestones_and_console(tmp_path):
    script = BOOT + agent_lines({"syscall.null": [200.0, 201.0, 202.0]})
    target = labfakes.FakeTarget(lambda c: script, interrupt_after=len(BOOT) + 4)
    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(KeyboardInterrupt):
        lab.run(labfakes.prepared(parse_short("x=lab-minimal")), labfakes.build("k1"), store,
                lab.RunOptions("icount", 60.0), Path("/nonexistent/i.cpio"), target)
    (row,) = store.runs()
    assert (row["status"], row["reason"]) == ("interrupted", "interrupted (SIGTERM)")
    measured = store.run_metrics(row["id"])
    assert measured["syscall.null"] == [200.0, 201.0] and measured["boot.agent_ready.printk"] == [0.3]
    assert "kernellab-agent: ready" in store.run_log(row["id"])


def test_a_mismatched_agent_is_a_clear_error_and_the_run_is_recorded(tmp_path):
    target = labfakes.FakeTarget(lambda c: BOOT + agent_lines({"syscall.null": [200.0]}, version=7))
    with pytest.raises(LabError, match="the agent speaks record version 7, this kernellab reads version 1"):
        _run(tmp_path, target)
    (row,) = Store(tmp_path / "s.sqlite").runs()
    assert row["status"] == "agent-mismatch"


def test_resolving_a_variant_does_not_touch_the_store(tmp_path, monkeypatch):
    """prepare() reads; only a build or a run records the variant."""
    from kernellab import arches, sources, toolchain
    from kernellab.config import resolve as resolve_module
    monkeypatch.setattr(sources, "resolve", lambda spec: labfakes.prepared(parse_short("x")).source)
    monkeypatch.setattr(toolchain, "detect", lambda profile, kind="gcc": None)
    monkeypatch.setattr(lab, "resolve", lambda *a: resolve_module.ResolvedConfig("lab-minimal", "CONFIG_X=y\n", []))
    store = Store(tmp_path / "s.sqlite")
    p = lab.prepare(parse_short("x=lab-minimal"))
    assert p.profile == arches.load("x86_64")
    assert store.db.execute("SELECT count(*) FROM variants").fetchone()[0] == 0
    lab.record_variant(p, store)
    assert store.db.execute("SELECT count(*) FROM variants").fetchone()[0] == 1


def test_a_target_without_deterministic_time_refuses_icount(tmp_path):
    """A target whose clock is the host's (a real machine) cannot give icount figures."""
    from kernellab.targets import Capabilities
    target = labfakes.FakeTarget(lambda c: BOOT + agent_lines({"syscall.null": [200.0]}))
    target.capabilities = Capabilities(boots_kernels=True, measures_running=True, deterministic=False)
    with pytest.raises(LabError, match="the fake target cannot run icount mode .*use --mode wall"):
        _run(tmp_path, target)
    assert target.cmdlines == []  # refused before anything started


# -- the CPU's speculation flaws, as the kernel saw them -------------------------------

FLAWS = {"meltdown": "Not_affected", "spectre_v2": "Mitigation__Retpolines__STIBP__disabled",
         "retbleed": "Vulnerable"}


def test_the_kernels_word_on_cpu_flaws_is_kept_with_the_run(tmp_path):
    target = labfakes.FakeTarget(lambda c: BOOT + agent_lines({"syscall.null": [200.0]}, flaws=FLAWS))
    store, outcome = _run(tmp_path, target)
    assert outcome.status == "ok"
    assert store.run_vulnerabilities(outcome.run_id) == FLAWS
    assert vulnerabilities.readable(FLAWS["spectre_v2"]) == "Mitigation: Retpolines, STIBP, disabled"
    assert vulnerabilities.summary(FLAWS) == "not affected: meltdown; vulnerable: retbleed; mitigated: spectre_v2"


def test_a_run_without_the_flaws_directory_stores_none(tmp_path):
    target = labfakes.FakeTarget(lambda c: BOOT + agent_lines({"syscall.null": [200.0]}))
    store, outcome = _run(tmp_path, target)
    assert store.run_vulnerabilities(outcome.run_id) == {}


def test_a_mitigation_is_inactive_only_where_every_run_said_not_affected():
    runs = [FLAWS, {**FLAWS, "spectre_v2": "Not_affected"}]
    assert vulnerabilities.inactive(runs, ["meltdown", "spectre_v2"]) == ["meltdown"]
    assert vulnerabilities.inactive(runs, ["retbleed"]) == []
    # A run that did not report a flaw (an older kernel, another arch) claims nothing.
    assert vulnerabilities.inactive([*runs, {}], ["meltdown"]) == []
    assert vulnerabilities.inactive([], ["meltdown"]) == []
