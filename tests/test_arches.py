"""Arch profiles, without building or booting anything: every profile loads and says how
to build and boot its arch, QEMU command lines come out right for each machine, each
lab-minimal fragment parses, build-only profiles refuse to boot, and doctor checks each
arch's compiler and emulator."""

import dataclasses
import json
import time
import types
from pathlib import Path

import pytest

import labfakes
from kernellab import arches, datafile, doctor, modes, packages
from kernellab.agent.compile import cross_targets
from kernellab.arches import BUILD_ONLY_NOTE, ArchProfile
from kernellab.config.resolve import packaged_fragment
from kernellab.errors import LabError
from kernellab.experiments import compare, lab
from kernellab.experiments.spec import Experiment, packaged_fragments, parse_short
from kernellab.guest.records import frame
from kernellab.guest.session import EXIT_GRACE_S, Session
from kernellab.report import render
from kernellab.report.model import VariantRecord, _variant_json
from kernellab.store import Store
from kernellab.targets.qemu import QemuTarget
from labfakes import ListSink


def boot(profile, tmp_path, mode="icount", timeout_s=30.0):
    """Boot `profile`'s machine the way the lab does: its target, read by a session."""
    with QemuTarget(profile).start(tmp_path / "vmlinux", tmp_path / "i", "", mode, timeout_s) as console:
        return Session(ListSink()).read(console)

PROFILES = arches.available()
BOOTABLE = [n for n in PROFILES if not arches.load(n).build_only]
BUILD_ONLY = [n for n in PROFILES if arches.load(n).build_only]
# What each machine must be given, from QEMU's and the kernel's documentation.
EXPECTED = {
    "x86_64": ("qemu-system-x86_64", "pc", "ttyS0", "bzImage"),
    "i386": ("qemu-system-i386", "pc", "ttyS0", "bzImage"),
    "arm64": ("qemu-system-aarch64", "virt", "ttyAMA0", "Image"),
    "ppc44x": ("qemu-system-ppc", "bamboo", "ttyS0", "vmlinux"),
    "ppc460": ("qemu-system-ppc", "sam460ex", "ttyS0", "vmlinux"),
    "ppc32": ("qemu-system-ppc", "mac99,via=pmu", "ttyPZ0", "vmlinux"),
    "s390x": ("qemu-system-s390x", "s390-ccw-virtio", "ttysclp0", "bzImage"),
}
PAGE_OPTIONS = {"ppc44x": "CONFIG_PPC_{}_PAGES", "arm64": "CONFIG_ARM64_{}_PAGES",
                "mpc885": "CONFIG_PPC_{}_PAGES"}


def test_the_profiles_the_lab_knows():
    assert {"x86_64", "i386", "arm64", "ppc44x", "ppc460", "ppc32", "s390x", "mpc885"} <= set(PROFILES)
    assert set(EXPECTED) <= set(BOOTABLE) and "mpc885" in BUILD_ONLY


@pytest.mark.parametrize("name", PROFILES)
def test_profile_loads_with_what_a_build_needs(name):
    p = arches.load(name)
    assert p.name == name
    for field in ("kernel_arch", "build_target", "boot_image", "lab_minimal_base", "lab_minimal_fragment"):
        assert getattr(p, field), f"{name}: empty {field}"
    # Only the host's own arch builds with the host compiler.
    assert p.cross_compile.endswith("-") or (name == "x86_64" and p.cross_compile == "")
    # The package manifest names the package of its compiler.
    assert p.cc.endswith("gcc") and packages.package_for(p.cc).startswith("gcc")
    assert p.lab_minimal_base == "tinyconfig" or p.lab_minimal_base.endswith("_defconfig")


@pytest.mark.parametrize("name", BOOTABLE)
def test_bootable_profile_names_its_emulator_and_agent(name):
    p = arches.load(name)
    assert p.qemu.binary.startswith("qemu-system-") and packages.package_for(p.qemu.binary).startswith("qemu-system-")
    assert p.qemu.console and p.qemu.args
    # The agent build it runs exists, and is compiled for the same ISA as the kernel.
    target = cross_targets()[p.agent_arch]
    assert target.cc == p.cc or (name == "x86_64" and target.cc == "gcc")


@pytest.mark.parametrize("name", PROFILES)
def test_lab_minimal_fragment_parses_and_covers_the_agent(name):
    p = arches.load(name)
    settings = {s.name: s.value for s in packaged_fragment(p.lab_minimal_fragment)}
    for option in ("CONFIG_PRINTK_TIME", "CONFIG_BLK_DEV_INITRD", "CONFIG_BINFMT_ELF", "CONFIG_PROC_FS",
                   "CONFIG_SYSFS", "CONFIG_DEVTMPFS", "CONFIG_TMPFS", "CONFIG_PROC_SYSCTL", "CONFIG_FUTEX",
                   "CONFIG_MULTIUSER", "CONFIG_NET", "CONFIG_INET", "CONFIG_UNIX",
                   "CONFIG_CRYPTO_USER_API_SKCIPHER", "CONFIG_CRYPTO_AES", "CONFIG_CRYPTO_CBC",
                   "CONFIG_NO_HZ_IDLE", "CONFIG_HIGH_RES_TIMERS"):
        assert settings.get(option) == "y", f"{p.lab_minimal_fragment}: {option}"
    # A 32-bit agent's glibc uses the 32-bit time syscalls whenever the values fit.
    if p.agent_arch in cross_targets() and cross_targets()[p.agent_arch].elf.class_ == 32:
        assert settings.get("CONFIG_COMPAT_32BIT_TIME") == "y", p.lab_minimal_fragment
    # The scratch disk: virtio-blk in the kernel exactly where the machine gets one.
    if not p.build_only and p.qemu.disk_args:
        assert settings.get("CONFIG_VIRTIO_BLK") == "y"


def test_page_size_fragments_set_their_arch_option():
    names = [f for f in packaged_fragments() if "-page-" in f]
    assert {"ppc44x-page-4k", "ppc44x-page-16k", "ppc44x-page-64k",
            "arm64-page-4k", "arm64-page-16k", "arm64-page-64k"} <= set(names)
    for fragment in names:
        arch, _, size = fragment.partition("-page-")
        spec = parse_short(f"x=lab-minimal+{fragment}", arch=arch)
        (setting,) = spec.settings()
        assert setting.name == PAGE_OPTIONS[arch].format(size.upper()) and setting.value == "y"


@pytest.mark.parametrize("name", BOOTABLE)
@pytest.mark.parametrize("mode", modes.NAMES)
def test_qemu_command_line(name, mode, tmp_path):
    p = arches.load(name)
    binary, machine, console, image_name = EXPECTED.get(name, (p.qemu.binary, None, p.qemu.console, None))
    image, initrd, disk = tmp_path / Path(p.boot_image).name, tmp_path / "i.cpio", tmp_path / "d.img"
    argv = QemuTarget(p).command(image, initrd, "KL_ONLY=syscall.null", mode, scratch=disk)
    assert argv[0] == binary
    if machine:
        assert argv[argv.index("-machine") + 1] == machine
        assert image.name == image_name and p.boot_image.endswith(image_name)
    assert argv[argv.index("-kernel") + 1] == str(image) and argv[argv.index("-initrd") + 1] == str(initrd)
    cmdline = argv[argv.index("-append") + 1]
    assert cmdline.startswith(f"console={console} ") and cmdline.endswith("KL_ONLY=syscall.null")
    assert p.qemu.kernel_args in cmdline and "  " not in cmdline
    # One serial port, the console, on stdio; no default devices; a reboot ends QEMU.
    assert argv[argv.index("-serial") + 1] == "stdio" and "-nodefaults" in argv and "-no-reboot" in argv
    assert ("-icount" in argv) == (mode == "icount")
    if mode == "icount":
        assert argv[argv.index("-icount") + 1] == "shift=0,sleep=off"
        # The guest's randomness (s390x TRNG, virt's rng-seed) must not come from the host.
        assert "-seed" in argv
    assert not any("{path}" in a for a in argv)
    assert (str(disk) in " ".join(argv)) == bool(p.qemu.disk_args)


def test_no_scratch_disk_without_a_scratch_path(tmp_path):
    argv = QemuTarget(arches.load("s390x")).command(tmp_path / "bzImage", tmp_path / "i.cpio", "", "icount")
    assert not any("virtio-blk" in a for a in argv)


def test_profile_icount_args_replace_the_default(tmp_path):
    p = arches.load("arm64")
    own = dataclasses.replace(p.qemu, icount_args=("-icount", "shift=0,sleep=off"))
    argv = QemuTarget(dataclasses.replace(p, qemu=own)).command(tmp_path / "Image", tmp_path / "i", "", "icount")
    assert argv[-2:] == ["-icount", "shift=0,sleep=off"] and "-rtc" not in argv


@pytest.mark.parametrize("name", BUILD_ONLY)
def test_build_only_profile_refuses_to_boot(name, tmp_path):
    p = arches.load(name)
    assert p.qemu is None
    for attempt in (lambda: QemuTarget(p), lambda: lab.initramfs_for(types.SimpleNamespace(profile=p))):
        with pytest.raises(LabError, match=f"cannot boot {name}: {BUILD_ONLY_NOTE}"):
            attempt()


def fake_prepared(spec, machine=None) -> lab.Prepared:
    return labfakes.prepared(spec, "CONFIG_PPC_8xx=y\n")


def test_build_only_compare_reports_build_rows_and_says_build_only(monkeypatch, tmp_path):
    """compare --arch mpc885: builds, boots nothing, and every report view says why."""
    monkeypatch.setattr(lab, "prepare", fake_prepared)
    monkeypatch.setattr(lab, "ensure_built", lambda p, store, log=None, cold=False: labfakes.build(f"k{p.spec.name}"))
    monkeypatch.setattr(lab, "run", lambda *a, **k: pytest.fail("a build-only variant was booted"))
    exp = Experiment("t", [parse_short("a=lab-minimal", arch="mpc885"),
                           parse_short("b=lab-minimal+mpc885-page-4k", arch="mpc885")])
    messages = []
    report, failures = compare.run_experiment(exp, Store(tmp_path / "s.sqlite"),
                                              compare.plan(exp, None, None, None, 60.0), log=messages.append)
    assert failures == [] and report["runs_per_variant"] == {"a": 0, "b": 0}
    assert all(v["build_only"] and v["build_only_note"] == BUILD_ONLY_NOTE for v in report["variants"])
    assert all(v["runs"] == [] for v in report["variants"])
    assert {m["name"] for m in report["metrics"]} == {"build.wall", "build.user", "build.sys", "size.image",
                                                      "size.vmlinux", "size.text", "size.data", "size.bss"}
    assert any(BUILD_ONLY_NOTE in m for m in messages)
    assert json.loads(render(report, "json"))["variants"][0]["build_only"] is True
    for fmt in ("table", "markdown"):
        text = render(report, fmt)
        assert text.count(BUILD_ONLY_NOTE) == 2, fmt  # once per variant, in the header
        assert "target: none (build only)" in text, fmt


def test_booted_variants_are_not_marked_build_only(tmp_path):
    variant = _variant_json(VariantRecord(fake_prepared(parse_short("a", arch="s390x")), labfakes.build("k")),
                            Store(tmp_path / "s.sqlite"))
    assert variant["build_only"] is False and "build_only_note" not in variant


def test_doctor_checks_each_arch_compiler_and_emulator(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    checks = doctor.checks()
    missing = [c for c in checks if not c.ok]
    command = doctor.install_command(missing)
    for name in PROFILES:
        p = arches.load(name)
        assert f" {packages.package_for(p.cc)}" in command
        if not p.build_only:
            assert f" {packages.package_for(p.qemu.binary)}" in command
    # Each tool is checked once, though profiles share them (the ppc compiler, qemu-system-ppc).
    whats = [c.what for c in checks]
    assert len(whats) == len(set(whats))
    assert {"s390x-linux-gnu-gcc", "qemu-system-s390x", "qemu-system-aarch64", "i686-linux-gnu-gcc"} <= set(whats)


def test_missing_cross_compiler_is_one_line_with_the_install_command(monkeypatch):
    from kernellab import toolchain
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LabError) as err:
        toolchain.detect(arches.load("s390x"))
    assert str(err.value).startswith("s390x-linux-gnu-gcc not found: run `apt-get install -y gcc-s390x-linux-gnu`")


def test_missing_emulator_is_one_line_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LabError, match=r"qemu-system-ppc not found: run `apt-get install -y qemu-system-ppc`"):
        boot(arches.load("ppc44x"), tmp_path)


def test_malformed_profiles_are_one_line_errors():
    good = {"name": "t", "kernel_arch": "t", "cross_compile": "t-", "build_target": "vmlinux",
            "boot_image": "vmlinux", "lab_minimal_fragment": "x", "debian_config": ""}
    assert datafile.load(ArchProfile, dict(good), "t.toml").build_only
    with pytest.raises(LabError, match="^t.toml: missing key 'boot_image'$"):
        datafile.load(ArchProfile, {k: v for k, v in good.items() if k != "boot_image"}, "t.toml")
    with pytest.raises(LabError, match=r"^t.toml: unknown key 'bootimage' \(allowed: agent, boot_image, "):
        datafile.load(ArchProfile, {**good, "bootimage": "x"}, "t.toml")
    with pytest.raises(LabError, match=r"^t.toml \[qemu\]: missing key 'console'$"):
        datafile.load(ArchProfile, {**good, "qemu": {"binary": "q", "args": []}}, "t.toml")
    with pytest.raises(LabError, match=r"^t.toml \[qemu\]: args: expected a list, got a string 'x'$"):
        datafile.load(ArchProfile, {**good, "qemu": {"binary": "q", "args": "x", "console": "c"}}, "t.toml")
    with pytest.raises(LabError, match="unknown arch 'vax': use one of .*mpc885.*s390x"):
        arches.load("vax")


def machine_ignoring_reset(tmp_path, last_words: list[str]) -> ArchProfile:
    """A stand-in for QEMU on a machine whose reset does nothing (as bamboo's): it prints
    the agent's records and the kernel's last words, then spins instead of exiting."""
    script = tmp_path / "qemu-system-fake"
    body = "".join(f"echo '{line}'\n" for line in last_words)
    script.write_text(f"#!/bin/sh\n{body}exec sleep 60\n")
    script.chmod(0o755)
    p = arches.load("ppc44x")
    return dataclasses.replace(p, qemu=dataclasses.replace(p.qemu, binary=str(script)))


def test_boot_stops_at_the_kernels_last_line_when_the_reset_is_ignored(tmp_path):
    profile = machine_ignoring_reset(tmp_path, [frame("seq=0 t=hello v=1"), frame("seq=1 t=end records=1"),
                                                "[    3.159660] reboot: Restarting system"])
    start = time.monotonic()
    result = boot(profile, tmp_path)
    assert result.status == "ok" and result.reason == ""
    assert time.monotonic() - start < EXIT_GRACE_S  # not the grace, let alone the limit


def test_reboot_before_the_agent_finished_is_incomplete_at_once(tmp_path):
    profile = machine_ignoring_reset(tmp_path, [frame("seq=0 t=hello v=1"), "[    1.0] reboot: Power down"])
    start = time.monotonic()
    result = boot(profile, tmp_path)
    assert result.status == "incomplete" and result.reason == "the guest rebooted before the agent finished"
    assert time.monotonic() - start < EXIT_GRACE_S


def test_early_console_lines_ending_in_newline_carriage_return_keep_their_printk_time(tmp_path):
    """powermac's early console (udbg_scc, ppc32's sccdbg) ends lines with "\\n\\r"."""
    script = tmp_path / "qemu-system-fake"
    script.write_text("#!/bin/sh\nprintf '[    0.000000] Linux version 6.1.192\\n\\r"
                      "[    0.5] Run /init as init process\\n\\r'\n")
    script.chmod(0o755)
    p = arches.load("ppc32")
    profile = dataclasses.replace(p, qemu=dataclasses.replace(p.qemu, binary=str(script)))
    result = boot(profile, tmp_path)
    assert [(ln.text, ln.printk_s) for ln in result.lines] == [
        ("[    0.000000] Linux version 6.1.192", 0.0), ("[    0.5] Run /init as init process", 0.5)]
