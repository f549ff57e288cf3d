"""The number of virtual CPUs as a variant's axis: `vcpus:N` (`vcpus = N` in a file).
It is part of what a run measured (its key, its target's details), never of the build."""

import json
from pathlib import Path

import pytest

from kernellab import arches
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.spec import experiment_from_data, parse_short
from kernellab.targets.qemu import QemuTarget


def test_the_short_syntax_and_files_take_vcpus():
    assert parse_short("two=lab-minimal+vcpus:2").vcpus == 2
    assert parse_short("lab-minimal").vcpus is None
    exp = experiment_from_data({"variant": [{"name": "four", "base": "lab-minimal", "vcpus": 4}]}, "e.toml")
    assert exp.variants[0].vcpus == 4


@pytest.mark.parametrize("text, message", [
    ("x=lab-minimal+vcpus:two", "needs a number of virtual CPUs"),
    ("x=lab-minimal+vcpus:0", "vcpus must be 1 to 64, got 0"),
    ("x=lab-minimal+vcpus:65", "vcpus must be 1 to 64, got 65"),
])
def test_a_bad_vcpu_count_is_one_line(text, message):
    with pytest.raises(LabError, match=message):
        parse_short(text)


def test_qemu_boots_the_variants_number_of_vcpus_and_says_so():
    profile = arches.load("x86_64")
    argv = QemuTarget(profile, 0, vcpus=2).command(Path("k"), None, "", "icount")
    assert argv.count("-smp") == 1 and argv[argv.index("-smp") + 1] == "2"
    assert QemuTarget(profile, 0, vcpus=2).describe("icount").details["vcpus"] == "2"
    default = QemuTarget(profile, 0).command(Path("k"), None, "", "icount")
    assert default[default.index("-smp") + 1] == "1"


def test_runs_with_other_vcpus_never_share_a_key(tmp_path):
    options, initrd = lab.RunOptions("icount"), tmp_path / "agent.cpio"
    one, two = parse_short("a=lab-minimal"), parse_short("a=lab-minimal+vcpus:2")
    assert options.key(initrd, one) != options.key(initrd, two)
    assert options.key(initrd, two).endswith(" vcpus=2")


def test_wall_mode_refuses_more_vcpus_than_host_cores(lab, capsys, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert lab.main("compare", "--mode", "wall", "a=tinyconfig", "b=tinyconfig+vcpus:4") == 2
    err = capsys.readouterr().err
    assert "b: more vCPUs than this host's 2 cores" in err and err.count("\n") == 1


def test_a_compare_reports_the_vcpus_each_variant_ran_with(lab, capsys):
    out = lab.tmp / "r.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+vcpus:2", "--mode", "wall", "--runs", "1",
                    "--max-runs", "1", "--format", "json", "-o", str(out)) == 0
    report = json.loads(out.read_text())
    a, b = report["variants"]
    assert "vcpus" not in a and b["vcpus"] == 2
    assert a["runs"][0]["target"]["details"]["vcpus"] == "1" and b["runs"][0]["target"]["details"]["vcpus"] == "2"
    assert a["build"]["key"] == b["build"]["key"]   # one kernel, two machines


def test_an_opt_in_group_reaches_the_agent_and_the_run_key(lab, capsys):
    assert lab.main("compare", "a=tinyconfig", "--with", "net", "--format", "json",
                    "-o", str(lab.tmp / "r.json")) == 0
    (run,) = lab.runs()
    import sqlite3
    command, key = sqlite3.connect(lab.store).execute("SELECT command, options_key FROM runs").fetchone()
    assert "KL_WITH=net" in command and key.endswith("KL_WITH=net")
    assert lab.main("compare", "a=tinyconfig", "--with", "nett") == 2
    assert "--with: unknown metric group 'nett' to run too (groups: net)" in capsys.readouterr().err
    exp = experiment_from_data({"with": ["net"], "variant": [{"name": "a", "base": "tinyconfig"}]}, "e.toml")
    assert exp.with_groups == ["net"]
    with pytest.raises(LabError, match="experiment e.toml: with: unknown metric group 'disk'"):
        experiment_from_data({"with": ["disk"], "variant": [{"name": "a", "base": "tinyconfig"}]}, "e.toml")


def test_a_probe_keeps_the_bases_compiler_boot_words_and_machine(tmp_path, monkeypatch):
    """Sweeps and bisects change the config only: a probe of a clang, 2-vCPU base is one too."""
    from kernellab.experiments.probe import Prober
    from kernellab.store import Store
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    base = parse_short("b=lab-minimal+cc:clang+vcpus:2+boot:quiet")
    prober = Prober(Store(tmp_path / "s.sqlite"), base, "CONFIG_X=y\n", ["syscall.null"])
    spec = prober._spec("flip", {"CONFIG_HZ_1000": "y"})
    assert (spec.toolchain, spec.vcpus, spec.boot_args) == ("clang", 2, ["quiet"])
    assert spec.options == ["CONFIG_HZ_1000=y"] and spec.base == str(prober.base_path) and spec.fragments == []


def test_a_machine_that_hangs_on_more_vcpus_under_icount_is_refused_before_any_build(lab, capsys):
    """x86_64 under QEMU 7.2's icount never brings up a second CPU: say so, not a 10-minute timeout."""
    assert lab.main("compare", "a=tinyconfig+vcpus:2") == 2
    err = capsys.readouterr().err
    assert "a: x86_64 under icount brings up at most 1 vCPU(s)" in err and "use --mode wall or vcpus:1" in err
    assert lab.runs() == []
    assert lab.main("compare", "--mode", "wall", "--runs", "1", "--max-runs", "1", "a=tinyconfig+vcpus:2") == 0
