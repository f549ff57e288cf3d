"""A workload metric's provenance in sweep and bisect results (issue 31: "with their
provenance (program, version, command line) in every report"; issue 34's list): the
program, the version and package it came from when kernellab assembled the guest's
userland from Debian's packages, its command line and the target, one line per workload in
the table and the HTML page, a list in the JSON; a result written before it said so is
still shown.

The fake lab boots the fake QEMU, which runs the agent and the workload on this machine;
the guest's userland is assembled for real here, from the fake apt of tests/test_userland.py
(its programs are never run: the fake QEMU reads the first cpio of the initramfs only).
"""

import html
import json

import pytest

from kernellab import apt, userland
from test_userland import TRIPLET, FakeApt, host_programs
from test_workloads_everywhere import run_json, timed_workload

REAL_SEGMENT = userland.segment   # the fake lab replaces it by an empty segment
DASH = "0.5.12-2"


@pytest.fixture
def debian_userland(lab, monkeypatch):
    """The workloads' userland assembled from a fake apt's dash (/bin/sh) and libc6."""
    true, libc, loader = host_programs()
    fake = FakeApt({
        "dash": (["libc6"], {"bin/sh": true}),
        "libc6": ([], {f"lib/{TRIPLET}/libc.so.6": libc, f"lib/{TRIPLET}/ld-linux-x86-64.so.2": loader,
                       "lib64/ld-linux-x86-64.so.2": f"/lib/{TRIPLET}/ld-linux-x86-64.so.2"}),
    }, modes={"bin/sh": 0o755, f"lib/{TRIPLET}/libc.so.6": 0o755, f"lib/{TRIPLET}/ld-linux-x86-64.so.2": 0o755},
        versions={"dash": DASH, "libc6": "2.36-9+deb12u4"})
    monkeypatch.setattr(apt, "run", fake)
    monkeypatch.setattr(userland, "segment", REAL_SEGMENT)
    return fake


def show(lab, capsys, result, tmp_path, *args):
    """`kernellab show` of `result` written to a file: what it printed."""
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    assert lab.main("show", str(path), *args) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_a_sweep_says_which_program_of_which_package_its_workload_metric_came_from(lab, capsys, tmp_path,
                                                                                   debian_userland):
    spec = str(timed_workload(tmp_path))
    result = run_json(lab, capsys, "sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "timed.time",
                      "--workload", spec, "--mode", "icount")
    [provenance] = result["workloads"]
    assert {k: provenance[k] for k in ("label", "program", "version", "package", "package_versions", "argv",
                                       "target")} == {
        "label": "timed", "program": "sh", "version": DASH, "package": "dash", "package_versions": {"dash": DASH},
        "argv": ["sh", "{workdir}/run.sh", "1"], "target": "qemu"}
    line = f"workload timed: sh {DASH} from Debian's dash on qemu: sh '{{workdir}}/run.sh' 1"
    assert line in show(lab, capsys, result, tmp_path).splitlines()
    assert line in html.unescape(show(lab, capsys, result, tmp_path, "--format", "html"))


def test_a_bisect_says_which_program_its_workload_metric_came_from(lab, capsys, tmp_path):
    """Without an assembled userland (the fake lab's empty segment) the version is not known,
    and the line says so rather than leave it out."""
    spec = str(timed_workload(tmp_path))
    result = run_json(lab, capsys, "bisect", "good=tinyconfig", "bad=tinyconfig+CONFIG_FAKE_SLOW=y",
                      "--metric", "timed.time", "--workload", spec, "--mode", "icount")
    [provenance] = result["workloads"]
    assert (provenance["program"], provenance["version"], provenance["package"], provenance["target"]) == (
        "sh", None, None, "qemu")
    line = "workload timed: sh (version not known) on qemu: sh '{workdir}/run.sh' 1"
    text = show(lab, capsys, result, tmp_path).splitlines()
    assert text[2] == line   # the header: the metric, the endpoints, then what the metric came from
    assert line in html.unescape(show(lab, capsys, result, tmp_path, "--format", "html"))


def test_sweep_and_bisect_results_written_before_they_named_their_workloads_are_still_shown(lab, capsys, tmp_path):
    from kernellab.experiments.bisect import BisectResult
    from kernellab.experiments.sweep import SweepResult
    from kernellab.report import kinds
    sweep = SweepResult("icount", ["syscall.null"], {"syscall.null": 1.0}, [], 1, 1, 2.0)
    bisect = BisectResult("syscall.null", "ns", "icount", 1.0, 1.0, 0, [], 2.0, 0.0, None, 2, 2, 3.0, [], [], [], [],
                          None)
    for kind, result in (("sweep", sweep), ("bisect", bisect)):
        written = json.loads(kinds.get(kind).render(result.to_dict(), "json"))
        assert "workloads" not in written
        assert not any(line.startswith("workload ") for line in show(lab, capsys, written, tmp_path).splitlines())
