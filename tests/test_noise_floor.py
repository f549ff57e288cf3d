"""The noise floor: neutral options flipped one at a time; the largest change each metric
sees is its floor, kept per kernel, and the reports, the gate and bisect read it."""

import json
import os
import sys
from pathlib import Path

import pytest

from kernellab.experiments import floor

LAYOUT = ",".join(f"FAKE_LAYOUT_{k}" for k in range(1, 9))


def measure(lab, capsys, *extra):
    assert lab.main("noise-floor", "tinyconfig", "--options", LAYOUT, "--format", "json", *extra) == 0
    return json.loads(capsys.readouterr().out)


def test_the_floor_is_the_largest_change_a_neutral_flip_causes(lab, capsys):
    result = measure(lab, capsys)
    assert result["pct"]["proc.fork_exit"] == pytest.approx(4.0)
    assert result["by"]["proc.fork_exit"] == "CONFIG_FAKE_LAYOUT_8"
    assert result["pct"]["syscall.null"] == 0
    assert len(result["flips"]) == 8 and "8 neutral options flipped on tinyconfig in icount mode" in result["measured"]


def test_the_base_boots_once_and_its_floor_has_only_what_it_measures(lab, capsys):
    """The boot that finds what the base measures is the sweep's baseline: one boot of the
    base, then one per flip; a metric the kernel does not measure has no floor."""
    result = measure(lab, capsys)
    names = [r["name"] for r in lab.runs()]
    assert names.count("probe:baseline") == 1 and len(names) == 9
    assert "syscall.null" in result["pct"] and "ipc.unix_rtt" not in result["pct"]   # n/a without CONFIG_UNIX


def test_a_floor_on_dask_workers_is_the_serial_one(lab, capsys, monkeypatch):
    """--workers N as sweep takes it: the same floor as measured here, one flip after another."""
    pytest.importorskip("distributed")
    from fakes import LAB_ENVIRONMENT, point_worker
    from kernellab.experiments import executor
    connect = executor.connect

    def pointed(workers, address):
        """The command's own local cluster, its workers booting this test's fake QEMU."""
        cluster = connect(workers, address)
        cluster.client.run(sys.path.insert, 0, str(Path(__file__).parent))
        cluster.client.run(point_worker, {name: os.environ.get(name) for name in LAB_ENVIRONMENT}, os.getcwd(),
                           str(lab.qemu))
        return cluster

    monkeypatch.setattr(executor, "connect", pointed)
    parallel = measure(lab, capsys, "--workers", "2")
    assert len(lab.runs()) == 9
    for suffix in ("", "-wal", "-shm"):   # measured again here, from a store of none of those runs
        Path(f"{lab.store}{suffix}").unlink(missing_ok=True)
    serial = measure(lab, capsys)
    assert parallel["pct"]["proc.fork_exit"] == pytest.approx(4.0)
    assert (parallel["pct"], parallel["by"], sorted(parallel["flips"])) == (serial["pct"], serial["by"],
                                                                          sorted(serial["flips"]))


def test_a_change_within_the_floor_is_no_difference_in_report_and_gate(lab, capsys):
    measure(lab, capsys)
    # +1.5% on fork+exit: exact, but within the 4% floor of these kernels.
    args = ("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_LAYOUT_3=y")
    assert lab.main(*args, "--fail-on", "proc.fork_exit:+1") == 0
    out = capsys.readouterr().out
    assert "within floor (+1.5%, floor 4.0%)" in out
    assert "noise floor: measured: 8 neutral options flipped on tinyconfig" in out
    # Without the floor the same change breaks the rule.
    (lab.cache / "floors").rename(lab.tmp / "floors-away")
    assert lab.main(*args, "--fail-on", "proc.fork_exit:+1") == 3
    capsys.readouterr()


def test_bisect_takes_its_threshold_from_the_floor(lab, capsys):
    measure(lab, capsys)
    assert lab.main("bisect", "good=tinyconfig", "bad=tinyconfig+CONFIG_FAKE_SLOW=y+CONFIG_FAKE_LAYOUT_2=y",
                    "--metric", "proc.fork_exit", "--format", "json") == 0
    captured = capsys.readouterr()
    assert "threshold 4.00% for proc.fork_exit: its noise floor" in captured.err
    result = json.loads(captured.out)
    assert result["threshold_pct"] == 4.0
    assert [c["option"] for c in result["culprits"]] == ["CONFIG_FAKE_SLOW"]   # the layout flip is below it


def test_too_few_neutral_options_is_refused(lab, capsys):
    assert lab.main("noise-floor", "tinyconfig", "--options", "FAKE_LAYOUT_1,FAKE_LAYOUT_2") == 2
    assert "needs at least 8 neutral options, got 2" in capsys.readouterr().err
    # Options the kernel refuses do not count.
    assert lab.main("noise-floor", "tinyconfig", "--options", LAYOUT.replace("FAKE_LAYOUT_8", "NO_SUCH_OPTION")) == 2
    assert "only 7 of the neutral options could be set on tinyconfig" in capsys.readouterr().err


def test_wall_mode_has_no_floor(lab, capsys):
    assert lab.main("noise-floor", "tinyconfig", "--mode", "wall") == 2
    assert "measured in a deterministic mode (icount)" in capsys.readouterr().err


def test_the_shipped_neutral_list_has_enough_options():
    names = [o.name for o in floor.neutral_options()]
    assert len(names) >= floor.MIN_FLIPS and len(set(names)) == len(names)
    assert all(n.startswith("CONFIG_") for n in names)


def test_with_no_floor_an_unchanged_metric_is_not_called_within_one():
    """The verdict of a probe pair: no floor, no change -> identical; a change within the
    floor -> no difference, said so with the floor; beyond it -> a difference."""
    from kernellab.report.conclusion import verdict_text
    from kernellab.report.model import NoiseFloor, judge_probes
    same = judge_probes({"syscall.null": [100.0]}, {"syscall.null": [100.0]}, "icount")["syscall.null"]
    assert same["verdict"]["kind"] == "no difference" and "floor_pct" not in same["verdict"]
    floor = NoiseFloor({"syscall.null": 1.0})
    within = judge_probes({"syscall.null": [100.0]}, {"syscall.null": [99.5]}, "icount", floor)["syscall.null"]
    assert verdict_text(within["verdict"], within) == "within floor (-0.5%, floor 1.0%)"
    beyond = judge_probes({"syscall.null": [100.0]}, {"syscall.null": [98.0]}, "icount", floor)["syscall.null"]
    assert beyond["verdict"]["kind"] == "better" and verdict_text(beyond["verdict"], beyond) == "-2.0%*"
