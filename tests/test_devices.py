"""Extra devices as a variant's axis: `devices:N` (`devices = N` in a file) boots the machine
with N devices of the arch profile's cheap kind ([qemu] extra_device). Part of what a run
measured (its key, its target's details), never of the build."""

import dataclasses
import json
from pathlib import Path

import pytest

from kernellab import arches
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.spec import experiment_from_data, parse_short
from kernellab.targets.qemu import QemuTarget


def test_the_short_syntax_and_files_take_devices():
    assert parse_short("d=lab-minimal+devices:100", arch="s390x").devices == 100
    assert parse_short("lab-minimal").devices is None
    exp = experiment_from_data({"arch": "s390x", "variant": [{"name": "d", "base": "lab-minimal", "devices": 500}]},
                               "e.toml")
    assert exp.variants[0].devices == 500


@pytest.mark.parametrize("text, message", [
    ("x=lab-minimal+devices:many", r"'devices:many' needs a number of extra devices \(devices:100\)"),
    ("x=lab-minimal+devices:-1", "needs a number of extra devices"),
    ("x=lab-minimal+devices:4097", "devices must be 0 to 4096, got 4097"),
])
def test_a_bad_device_count_is_one_line(text, message):
    with pytest.raises(LabError, match=message) as err:
        parse_short(text)
    assert "\n" not in str(err.value)


def test_qemu_adds_the_profiles_device_n_times_and_says_so():
    profile = arches.load("s390x")
    assert profile.require_machine().extra_device == "virtio-rng-ccw"
    argv = QemuTarget(profile, 0, devices=3).command(Path("k"), None, "", "icount")
    assert argv.count("-device") == 3 and argv.count("virtio-rng-ccw") == 3
    assert QemuTarget(profile, 0, devices=3).describe("icount").details["extra_devices"] == "3 virtio-rng-ccw"
    for none in (None, 0):
        target = QemuTarget(profile, 0, devices=none)
        assert "virtio-rng-ccw" not in target.command(Path("k"), None, "", "icount")
        assert "extra_devices" not in target.describe("icount").details


def test_an_arch_without_an_extra_device_refuses_before_any_build(lab, capsys):
    assert arches.load("x86_64").require_machine().extra_device == ""
    with pytest.raises(LabError, match="^devices:5 is not available on x86_64: its arch profile names no "
                                       "extra_device"):
        QemuTarget(arches.load("x86_64"), 0, devices=5)
    assert lab.main("compare", "a=tinyconfig", "d=tinyconfig+devices:5") == 2
    err = capsys.readouterr().err
    assert "d: devices:5 is not available on x86_64" in err and err.count("\n") == 1
    assert not (lab.cache / "artifacts").exists()   # nothing was built


def test_runs_with_other_devices_never_share_a_key(tmp_path):
    options, initrd = lab.RunOptions("icount"), tmp_path / "agent.cpio"
    none, zero, hundred = (parse_short(f"a=lab-minimal{s}", arch="s390x") for s in ("", "+devices:0", "+devices:100"))
    assert options.key(initrd, hundred) != options.key(initrd, none)
    assert options.key(initrd, hundred).endswith(" devices=100")
    assert options.key(initrd, zero) == options.key(initrd, none)   # the same machine, the same run


def test_a_compare_reports_the_devices_each_variant_ran_with(lab, monkeypatch):
    fake_load = arches.load   # the fake lab's: x86_64 boots its fake QEMU

    def load(name):
        profile = fake_load(name)
        assert profile.qemu is not None
        return dataclasses.replace(profile, qemu=dataclasses.replace(profile.qemu, extra_device="virtio-rng-pci"))

    monkeypatch.setattr(arches, "load", load)
    out = lab.tmp / "r.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+devices:2", "--format", "json", "-o", str(out)) == 0
    report = json.loads(out.read_text())
    a, b = report["variants"]
    assert "devices" not in a and b["devices"] == 2
    assert "extra_devices" not in a["runs"][0]["target"]["details"]
    assert b["runs"][0]["target"]["details"]["extra_devices"] == "2 virtio-rng-pci"
    assert a["build"]["key"] == b["build"]["key"]   # one kernel, two machines
