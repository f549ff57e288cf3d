"""compare's experiment loop on the fake target: interleaved, counterbalanced rounds, and in
wall mode more runs while some median is imprecise, up to the cap."""

import random
from pathlib import Path

import pytest

import labfakes
from kernellab.experiments import compare, lab
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.store import Store


@pytest.fixture
def fake_lab(monkeypatch):
    monkeypatch.setattr(lab, "prepare", lambda spec, machine=None: labfakes.prepared(spec))
    monkeypatch.setattr(lab, "ensure_built", lambda p, store, log=None, cold=False: labfakes.build(f"k-{p.spec.name}"))
    monkeypatch.setattr(lab, "initramfs_for", lambda p, workloads=(): Path("/nonexistent/initramfs-fake.cpio"))


def run(tmp_path, noise_pct, mode="wall", runs=None, max_runs=None, log=lambda m: None, reuse=False):
    rng = random.Random(7)
    order = []

    def script(cmdline):
        b = "quiet" in cmdline
        order.append("b" if b else "a")
        # Each run's 5 repeats share the run's own offset: the boot is the unit of noise.
        offset = 1 + rng.gauss(0, noise_pct / 100)
        values = [(300.0 if b else 200.0) * offset * (1 + rng.gauss(0, 0.001)) for _ in range(5)]
        return labfakes.BOOT + labfakes.agent_lines({"syscall.null": values})

    exp = Experiment("loop", [parse_short("a=lab-minimal"), parse_short("b=lab-minimal+boot:quiet")], mode=mode)
    how = compare.plan(exp, None, runs, max_runs, 60.0)
    how = compare.Plan(how.mode, how.min_runs, how.max_runs, how.options,
                       target=lambda p, b: labfakes.FakeTarget(script), reuse=reuse)
    report, failures = compare.run_experiment(exp, Store(tmp_path / "s.sqlite"), how, log=log)
    assert failures == []
    return report, order


def test_precise_wall_runs_stop_at_the_minimum_in_counterbalanced_order(tmp_path, fake_lab):
    report, order = run(tmp_path, noise_pct=0.2)
    assert report["runs_per_variant"] == {"a": 5, "b": 5}
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    null = next(m for m in report["metrics"] if m["name"] == "syscall.null")
    assert null["comparison"]["b"]["significant"] and 49 < null["delta_pct"]["b"] < 51
    assert null["values"]["a"]["runs"] == 5 and len(null["values"]["a"]["run_medians"]) == 5


def test_noisy_wall_runs_continue_to_the_cap(tmp_path, fake_lab):
    report, _ = run(tmp_path, noise_pct=20.0, max_runs=8)
    assert report["runs_per_variant"] == {"a": 8, "b": 8}


def test_runs_taken_from_the_store_are_not_announced_as_more_runs(tmp_path, fake_lab):
    run(tmp_path, noise_pct=20.0, max_runs=8)
    lines: list[str] = []
    report, order = run(tmp_path, noise_pct=20.0, max_runs=8, log=lines.append, reuse=True)
    assert order == [] and report["runs_per_variant"] == {"a": 8, "b": 8}
    assert not [m for m in lines if "another run" in m], lines


def test_icount_runs_once_per_variant(tmp_path, fake_lab):
    report, order = run(tmp_path, noise_pct=20.0, mode="icount")
    assert report["runs_per_variant"] == {"a": 1, "b": 1} and sorted(order) == ["a", "b"]
    null = next(m for m in report["metrics"] if m["name"] == "syscall.null")
    assert null["comparison"]["b"]["testable"] is False and null["comparison"]["b"]["ci_low_pct"] is None  # exact
