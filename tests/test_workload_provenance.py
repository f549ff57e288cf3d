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

import dataclasses
import html
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from kernellab import apt, userland
from kernellab.experiments import compare
from kernellab.experiments.placement import Placement
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.guest.workloads import Provenance
from kernellab.store import Store
from kernellab.targets import TargetOptions
from kernellab.targets.machine import OWNER_SCRIPT, Facts, Owner, program_owners
from kernellab.targets.shell import LocalShell
from test_userland import TRIPLET, FakeApt, host_programs
from test_workloads_everywhere import run_json, timed_workload
from workloadfiles import workload_file

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


# -- on a machine that runs its own programs: its dpkg says where each came from --------

def dpkg_version(package):
    """The version of `package` installed here, as dpkg says, or None."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return done.stdout or None


class CountingShell(LocalShell):
    """This machine's shell, counting the times its dpkg is asked where programs came from."""

    def __init__(self):
        self.asked: list[list[str]] = []

    def run(self, script, stdin=None, timeout_s=60.0):
        if script.endswith(OWNER_SCRIPT):
            self.asked.append(shlex.split(script.splitlines()[0])[2:])
        return super().run(script, stdin, timeout_s)


def run_local(tmp_path, shell, specs, runs=2):
    """`compare running --target local --workload SPEC...`, through `shell`: its report and store."""
    instances = compare.resolve_workloads(specs)
    placement = Placement(TargetOptions("local"), log=lambda m: None)
    assert placement.machine is not None
    placement.machine.shell = shell
    exp = Experiment("local", [parse_short("running")])
    how = compare.plan(exp, None, runs, None, 300.0, placement=placement, workloads=instances)
    options = dataclasses.replace(how.options, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=1")
    how = dataclasses.replace(how, options=options, target=lambda p, b: placement.target(p, b, options))
    store = Store(tmp_path / "s.sqlite")
    report, failures = compare.run_experiment(exp, store, how, log=lambda m: None)
    assert failures == []
    return report, store


def test_on_the_local_target_a_programs_version_is_its_debian_packages(tmp_path, monkeypatch):
    """`sh` is dash's here (a merged-/usr machine's PATH finds /usr/bin/sh, which dpkg
    records as /bin/sh): its version is dash's in the stored provenance and the report's
    line. A program of no package, one not installed, and the workload's own program each
    say why their version is not known. dpkg is asked once per program in a command."""
    dash = dpkg_version("dash")
    if dash is None or not Path("/bin/sh").resolve().name == "dash":
        pytest.skip("this machine's sh is not Debian's dash")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "my-tool").write_text("#!/bin/sh\necho 'value: 7'\n")
    (bin_dir / "my-tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "own-program").write_text("#!/bin/sh\necho 'value: 8'\n")
    specs = [str(workload_file(tmp_path, "shell", 'echo "value: $((1 + $1))"',
                               command='["sh", "{workdir}/run.sh", "{n}"]')) + ":n=41",
             str(workload_file(tmp_path, "mine", "", command='["my-tool"]')),
             str(workload_file(tmp_path, "own", "", command='["own-program"]', extra='binaries = ["own-program"]')),
             str(workload_file(tmp_path, "absent", "", command='["kl-not-installed"]'))]
    shell = CountingShell()
    report, store = run_local(tmp_path, shell, specs)
    values = {m["name"]: m["values"]["running"] for m in report["metrics"]}
    assert (values["shell.value"]["median"], values["mine.value"]["median"], values["own.value"]["median"]) == (
        42, 7, 8)
    runs = [r["id"] for r in report["variants"][0]["runs"]]
    assert len(runs) == 2
    assert shell.asked == [["sh", "my-tool", "kl-not-installed"]]   # once in the command, not once a run
    stored = {w["label"]: Provenance.from_dict(w["provenance"]) for w in store.run_workloads(runs[1])}
    assert {k: stored["shell:n=41"].to_dict()[k] for k in ("program", "version", "package", "package_versions",
                                                           "target", "version_unknown")} == {
        "program": "sh", "version": dash, "package": "dash", "package_versions": {"dash": dash},
        "target": "local", "version_unknown": ""}
    assert stored["shell:n=41"].line() == f"workload shell:n=41: sh {dash} from Debian's dash on local: " \
                                          "sh '{workdir}/run.sh' 41"
    assert stored["mine"].line() == (f"workload mine: my-tool (version not known: {bin_dir}/my-tool on this "
                                     "machine is in no Debian package) on local: my-tool")
    assert stored["own"].version_unknown == "the workload file's own program (binaries)"
    assert stored["absent"].version_unknown == "kl-not-installed is not found in PATH on this machine"
    assert all(stored[label].version is None for label in ("mine", "own", "absent"))


def test_a_machine_not_debians_is_not_asked_and_says_so():
    shell = CountingShell()
    owners = program_owners(shell, Facts({"os_id": "fedora"}), ["fio"])
    assert shell.asked == []
    assert owners["fio"] == Owner(why="this machine is not Debian's (its os-release): only dpkg is asked which "
                                      "package a program is from")


def test_a_machine_without_dpkg_query_says_so(tmp_path, monkeypatch):
    """A Debian-like machine whose PATH has no dpkg-query (a fake PATH of sh and what the
    script needs, nothing else)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "readlink", "sed", "head", "printf"):
        if (found := shutil.which(tool)) is not None:
            (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    owners = program_owners(LocalShell(), Facts({"os_id": "debian"}), ["sed"])
    assert owners["sed"] == Owner(why="this machine has no dpkg-query")
