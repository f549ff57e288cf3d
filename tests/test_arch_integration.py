"""Integration: a non-x86 kernel (s390x: the smallest and quickest to build and boot of the
profiles that boot; lab-minimal without the network, crypto and block layers, which these
metrics do not need: tests/data/arch-small.config), cross-built and booted under QEMU in
icount mode."""

import json
from dataclasses import replace

import pytest

from kernellab.experiments import lab
from kernellab.experiments.spec import parse_short
from kernellab.metrics.catalog import describe
from prefetch import ARCH_SMALL

pytestmark = pytest.mark.integration

ARCH = "s390x"
# Three metrics keep a boot short: the syscall path, process creation, and the idle
# timer interrupt rate (a guest-clock rate that must be exact under icount too).
ONLY = ("syscall.null", "proc.fork_exit", "irq.idle_timer")
MILESTONES = ["first_output", "linux_version", "freeing_unused", "init_start", "agent_ready"]


@pytest.fixture(scope="module")
def built(store, prefetched):
    prepared = lab.prepare(parse_short(ARCH_SMALL, arch=ARCH))
    return prepared, lab.ensure_built(prepared, store)


def test_icount_reruns_are_identical_and_milestones_ordered(built, store):
    prepared, build = built
    options = lab.RunOptions("icount", timeout_s=300, cmdline_extra=f"KL_ONLY={','.join(ONLY)}")
    runs = [lab.run(prepared, build, store, options) for _ in range(2)]
    assert [r.status for r in runs] == ["ok", "ok"], [r.reason for r in runs]
    first, second = (store.run_metrics(r.run_id) for r in runs)
    assert set(ONLY) <= set(first), sorted(first)
    assert all(min(first[m]) > 0 for m in ONLY)
    # Every guest-clock metric valid under icount is bit-identical run to run; host-clock
    # rows (boot.*.host) are real seconds and are not expected to be.
    valid = [m for m in first if not m.endswith(".host") and describe(m, "").valid_in("icount")]
    assert set(ONLY) <= set(valid)
    assert {m: first[m] for m in valid} == {m: second.get(m) for m in valid}
    for clock in ("printk", "host"):
        times = [first[f"boot.{name}.{clock}"][0] for name in MILESTONES]
        assert times == sorted(times), (clock, times)


def test_two_vcpu_icount_reruns_are_identical(built, store):
    """What studies on 2 or 4 vCPUs (preempt, zseries) rely on: under icount QEMU runs the
    vCPUs in turn on one thread, so a rerun is bit-identical with more than one vCPU too.
    (s390 is always SMP; its kernel is the one built above.)"""
    prepared, build = built
    two = replace(prepared, spec=replace(prepared.spec, vcpus=2))
    # Not the timer-latency metrics: under icount with two vCPUs QEMU wakes their thread
    # seconds late (metrics.toml, icount_max_vcpus), and a window then takes minutes.
    options = lab.RunOptions("icount", timeout_s=300, cmdline_extra=f"KL_ONLY={','.join(ONLY)},ctx.ring2_0k")
    runs = [lab.run(two, build, store, options) for _ in range(2)]
    assert [r.status for r in runs] == ["ok", "ok"], [r.reason for r in runs]
    first, second = (store.run_metrics(r.run_id) for r in runs)
    assert json.loads(store.run(runs[0].run_id)["target_info"])["details"]["vcpus"] == "2"
    assert {"ctx.ring2_0k", "syscall.null"} <= set(first)
    valid = [m for m in first if not m.endswith(".host") and describe(m, "").valid_in("icount")]
    assert {m: first[m] for m in valid} == {m: second.get(m) for m in valid}
    # Both vCPUs came up: the kernel's count of CPUs is in its console log.
    assert "smp: Brought up 1 node, 2 CPUs" in store.run_log(runs[0].run_id)
