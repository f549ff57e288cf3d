"""Real machines: the local target (the real agent against the kernel these tests run on),
the ssh target's shell and its errors, the kexec target's refusals, KVM's probe, and how
every figure is labelled. The ssh target against a real ssh server and kexec are in
test_ssh_target.py."""

import dataclasses
import hashlib
import json
import os
import stat
from pathlib import Path

import jsonschema
import pytest

import labfakes
from kernellab import arches
from kernellab.errors import LabError
from kernellab.experiments import compare, lab
from kernellab.experiments.placement import Placement, TargetOptions
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.report.model import VariantRecord, build_report, samples
from kernellab.store import Store
from kernellab.targets import accel, running
from kernellab.targets.kexec import KexecTarget
from kernellab.targets.running import LOG_METRICS, RunningTarget, agent_options
from kernellab.targets.shell import LocalShell, Result, SshShell, parse_ssh_url

# A short but complete agent run: every metric, few repeats.
QUICK = "KL_REPEATS=3 KL_TARGET_US=200 KL_IDLE_MS=50"


class ScriptedShell(LocalShell):
    """This machine's shell posing as a remote one: scripts that contain a key get its
    canned answer; everything else (copying and running the agent) really runs here."""
    here = False

    def __init__(self, answers: dict[str, Result] | None = None):
        self.where = "ssh://scripted"
        self.answers = answers or {}
        self.scripts: list[str] = []

    def run(self, script, stdin=None, timeout_s=60.0):
        self.scripts.append(script)
        for key, answer in self.answers.items():
            if key in script:
                return answer
        return super().run(script, stdin, timeout_s)


def local_compare(tmp_path, placement, *variants, cmdline=QUICK):
    exp = Experiment("local", [parse_short(v) for v in variants])
    how = compare.plan(exp, None, 1, None, 300.0, placement=placement)
    options = dataclasses.replace(how.options, cmdline_extra=cmdline)
    how = dataclasses.replace(how, options=options, target=lambda p, b: placement.target(p, b, options))
    store = Store(tmp_path / "s.sqlite")
    return compare.run_experiment(exp, store, how, log=lambda m: None), store


def agent_metrics(report, variant):
    """The runtime metrics measured (not /proc/meminfo's fields, not the boot's)."""
    return {m["name"]: m["values"][variant] for m in report["metrics"]
            if m["source"] == "agent" and not m["name"].startswith(("meminfo.", "boot.", "mem.kernel."))
            and "median" in m["values"].get(variant, {})}


def test_local_target_measures_the_running_kernel(tmp_path):
    placement = Placement(TargetOptions("local"), log=lambda m: None)
    (report, failures), store = local_compare(tmp_path, placement, "running")
    assert failures == []
    assert report["mode"] == "wall" and "hardware figure" in report["mode_note"]
    measured = agent_metrics(report, "running")
    assert len(measured) >= 20, sorted(measured)
    assert all(v["median"] > 0 for name, v in measured.items() if not name.startswith("irq."))
    (variant,) = report["variants"]
    assert variant["build"] is None and variant["source"] == "running"
    assert variant["source_version"] == os.uname().release
    target = variant["runs"][0]["target"]
    assert target["label"].startswith("hardware: ") and target["details"]["release"] == os.uname().release
    assert {"loadavg", "loadavg_after", "cmdline", "cpus", "governor"} <= set(target["details"])
    # The running kernel's config is found (and is the variant's), or why not is said.
    if "note" in variant:
        assert variant["note"].startswith("config unknown: the running kernel's config is not in /proc/config.gz")
    else:
        assert len(variant["config_hash"]) == 64 and store.db.execute(
            "SELECT config_hash FROM variants WHERE name='running'").fetchone()[0] == variant["config_hash"]
    schema = json.loads((Path(__file__).parent.parent / "src/kernellab/report/schema.json").read_text())
    jsonschema.validate(report, schema)
    # Never a zero where the agent could not measure: blk.* without --block-dir say why.
    blk = next(m for m in report["metrics"] if m["name"] == "blk.seq_write_direct")
    assert "needs --block-dir" in blk["values"]["running"]["not_available"]


def test_local_target_block_io_runs_on_a_file_in_the_named_directory(tmp_path):
    block_dir = tmp_path / "scratch"
    block_dir.mkdir()
    placement = Placement(TargetOptions("local", block_dir=str(block_dir)), log=lambda m: None)
    (report, failures), _ = local_compare(tmp_path, placement, "running",
                                          cmdline=f"{QUICK} KL_BLOCK_MB=4 KL_ONLY=blk.seq_write_cached")
    assert failures == []
    assert agent_metrics(report, "running")["blk.seq_write_cached"]["median"] > 0
    assert list(block_dir.iterdir()) == []  # the scratch file is gone


def test_an_unreadable_kernel_log_says_needs_root(tmp_path, monkeypatch):
    monkeypatch.setattr(running, "AGENT_DIR", str(tmp_path / "remote"))   # not this machine's /tmp/kernellab
    shell = ScriptedShell({"dmesg": Result(1, b"", "dmesg: read kernel buffer failed: Operation not permitted")})
    real = RunningTarget(LocalShell(), "local").facts
    real.values.update(uid="1000", dmesg_restrict="1")
    target = RunningTarget(shell, "ssh")
    target.facts = real
    with target.start(None, labfakes_agent(), "KL_ONLY=syscall.null KL_REPEATS=3", "wall", 60) as console:
        lines = list(console.lines())
    assert not any(line.replayed for line in lines)
    assert console.unavailable() == {m: "the kernel log: needs root (kernel.dmesg_restrict=1)" for m in LOG_METRICS}
    assert any(line.text.startswith("@KL ") and "t=end" in line.text for line in lines)
    assert [p.name.startswith("agent-") for p in (tmp_path / "remote").iterdir()] == [True]   # copied, as to a remote


def labfakes_agent() -> Path:
    from kernellab.agent.compile import agent_binary
    return agent_binary()


def test_real_machines_measure_in_wall_mode_only(tmp_path):
    placement = Placement(TargetOptions("local"), log=lambda m: None)
    exp = Experiment("x", [parse_short("running")])
    with pytest.raises(LabError, match="a real machine .* measures in wall mode: use --mode wall"):
        compare.plan(exp, "icount", None, None, 60.0, placement=placement)
    assert compare.plan(exp, None, None, None, 60.0, placement=placement).mode.name == "wall"


def test_the_running_kernel_is_measured_on_a_real_machine_only(tmp_path):
    p = lab.prepare(parse_short("running"))
    assert p.running and p.toolchain is None
    with pytest.raises(LabError, match="measure it with --target local or --target ssh"):
        lab.run(p, None, Store(tmp_path / "s.sqlite"), target=labfakes.FakeTarget(lambda c: []),
                initrd=Path("/nonexistent"))
    with pytest.raises(LabError, match="it is measured, not built"):
        lab.ensure_built(p, Store(tmp_path / "s.sqlite"))


def test_kernel_parameters_need_a_boot():
    with pytest.raises(LabError, match="mitigations=off: kernel parameters .* need a boot"):
        agent_options("KL_ONLY=syscall.null mitigations=off", kernel_booted=False)
    booted = agent_options("KL_ONLY=syscall.null mitigations=off", kernel_booted=True)
    assert booted.env == {"KL_ONLY": "syscall.null"} and booted.kernel_words == ["mitigations=off"]


@pytest.mark.parametrize("text,host,user,port", [
    ("ssh://nas", "nas", None, None), ("ssh://root@10.0.0.2:2222", "10.0.0.2", "root", 2222),
    ("ssh://me@[::1]:22", "::1", "me", 22)])
def test_ssh_urls(text, host, user, port):
    address = parse_ssh_url(text)
    assert (address.host, address.user, address.port) == (host, user, port)
    assert str(address) == text


@pytest.mark.parametrize("text", ["nas", "ssh://", "ssh://nas/path", "ssh://nas:99999", "http://nas"])
def test_bad_ssh_urls(text):
    with pytest.raises(LabError, match="expected ssh://"):
        parse_ssh_url(text)


@pytest.mark.parametrize("stderr,says", [
    ("@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@\n"
     "Host key verification failed.", "has CHANGED .* refuses it"),
    ("No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\n"
     "Host key verification failed.", "not in known_hosts: .* --accept-new-host-key"),
    ("root@127.0.0.1: Permission denied (publickey).", "refused the login .* check the user"),
    ("ssh: Could not resolve hostname nosuch: Name or service not known", "cannot resolve"),
    ("ssh: connect to host 10.0.0.9 port 22: Connection timed out", "cannot reach .* check the host and port"),
    ("something else entirely", r"ssh to ssh://h failed \(something else entirely\)")])
def test_ssh_failures_are_one_line_each(stderr, says):
    with pytest.raises(LabError, match=says) as err:
        SshShell(parse_ssh_url("ssh://h")).check(Result(255, b"", stderr))
    assert "\n" not in str(err.value)


def test_an_unreachable_host_is_one_line(tmp_path):
    """The real OpenSSH client against a port nobody listens on."""
    shell = SshShell(parse_ssh_url("ssh://127.0.0.1:1"), ssh_config=Path("/dev/null"))
    with pytest.raises(LabError, match=r"cannot reach ssh://127.0.0.1:1 \(.*Connection refused"):
        shell.run("true")


def test_ssh_never_accepts_a_changed_key_and_new_ones_only_when_asked():
    strict = SshShell(parse_ssh_url("ssh://h")).argv("true")
    assert "StrictHostKeyChecking=yes" in strict and "BatchMode=yes" in strict
    assert "StrictHostKeyChecking=accept-new" in SshShell(parse_ssh_url("ssh://h"), accept_new_host_key=True).argv("x")


# -- kexec: what is refused before anything starts ------------------------------------------

DRIVERS = Result(0, b"net:eth0 virtio_net\nnet:eth0 virtio-pci\nfs:/ rootfs\n", "")
MODULES = {"virtio_net": "CONFIG_VIRTIO_NET", "virtio_pci": "CONFIG_VIRTIO_PCI"}


def kexec_target(shell: ScriptedShell | None = None, **facts) -> KexecTarget:
    machine = RunningTarget(shell or ScriptedShell({"SSH_CONNECTION": DRIVERS}), "ssh")
    machine.facts = dataclasses.replace(RunningTarget(LocalShell(), "local").facts)
    machine.facts.values.update({"kexec": "/sbin/kexec", "kexec_load_disabled": "0", "lockdown": "", "uid": "0",
                                 **facts})
    return KexecTarget(machine)


def test_a_variant_must_keep_the_drivers_ssh_needs():
    target = kexec_target()
    target.check_variant("ok", {"CONFIG_VIRTIO_NET": "y", "CONFIG_VIRTIO_PCI": "y"}, MODULES)
    with pytest.raises(LabError, match="variant lean lacks CONFIG_VIRTIO_NET .virtio_net, for net:eth0.*never answer"):
        target.check_variant("lean", {"CONFIG_VIRTIO_PCI": "y"}, MODULES)
    with pytest.raises(LabError, match="CONFIG_VIRTIO_PCI=m .*copies no modules"):
        target.check_variant("mod", {"CONFIG_VIRTIO_NET": "y", "CONFIG_VIRTIO_PCI": "m"}, MODULES)


class LoadingShell(ScriptedShell):
    """A remote where `kexec -l`, its initramfs and the detached `kexec -e` are answered
    (nothing is loaded or started here); it lists AGENT_DIR as the load found it."""

    def __init__(self, remote: Path, load: Result):
        super().__init__({"kexec -l": load, "/boot/initrd.img-": Result(0, b"\n", ""), "setsid": Result(0, b"", "")})
        self.remote, self.at_load = remote, None

    def run(self, script, stdin=None, timeout_s=60.0):
        if "kexec -l" in script:
            self.at_load = sorted(p.name for p in self.remote.iterdir())
        return super().run(script, stdin, timeout_s)


@pytest.mark.parametrize("load", [Result(0, b"", ""), Result(1, b"", "kexec_load failed: Invalid argument")])
def test_a_kexecd_kernels_copy_is_removed_once_loaded(tmp_path, monkeypatch, load):
    """The kernel is on the remote for `kexec -l` only: loaded (or refused), its copy goes, so
    that kernels do not pile up in /tmp/kernellab on the user's machine."""
    remote = tmp_path / "remote"
    monkeypatch.setattr(running, "AGENT_DIR", str(remote))
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(b"a variant's kernel")
    shell = LoadingShell(remote, load)
    target = kexec_target(shell, systemd="no")
    target.come_back_s = 0.2   # this machine's boot id never changes: "still runs its default kernel"
    if load.code == 0:
        assert "still runs its default kernel" in target.boot(kernel, [])
    else:
        with pytest.raises(LabError, match="kexec -l on ssh://scripted failed: kexec_load failed"):
            target.boot(kernel, [])
    assert shell.at_load == [f"kernel-{hashlib.sha256(kernel.read_bytes()).hexdigest()[:16]}"]
    assert list(remote.iterdir()) == []


@pytest.mark.parametrize("facts,says", [
    ({"kexec": ""}, "has no kexec: install kexec-tools"),
    ({"kexec_load_disabled": "1"}, "forbids kexec .kernel.kexec_load_disabled=1"),
    ({"lockdown": "none [integrity] confidentiality"}, "kernel lockdown"),
    ({"uid": "1000"}, "needs root there")])
def test_kexec_is_refused_where_it_cannot_work(facts, says):
    with pytest.raises(LabError, match=says):
        kexec_target(**facts).check_variant("v", {"CONFIG_VIRTIO_NET": "y", "CONFIG_VIRTIO_PCI": "y"}, MODULES)


def test_only_variants_of_the_running_config_boot_on_a_remote(monkeypatch):
    placement = Placement(TargetOptions("ssh://h"), log=lambda m: None)
    p = labfakes.prepared(parse_short("lean=lab-minimal+CONFIG_X=y"))
    with pytest.raises(LabError, match="needs a variant based on `running`"):
        placement.target(p, labfakes.build("k"), lab.RunOptions("wall"))


def test_the_module_index_of_a_real_tree():
    from kernellab import sources
    from kernellab.config.modules import module_options
    tree = sources.resolve("debian:6.1").tree
    got = module_options(tree)
    assert got["virtio_net"] == "CONFIG_VIRTIO_NET" and got["ext4"] == "CONFIG_EXT4_FS"
    assert got["virtio_pci"] == "CONFIG_VIRTIO_PCI" and got["e1000e"] == "CONFIG_E1000E"


# -- KVM -------------------------------------------------------------------------------------

def fake_qemu(tmp_path: Path, says: str, code: int) -> arches.ArchProfile:
    """An x86_64 profile whose emulator prints `says` and exits with `code`."""
    binary = tmp_path / "qemu-fake"
    binary.write_text(f"#!/bin/sh\necho '{says}' {'>&2' if code else ''}\nexit {code}\n")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    profile = arches.load("x86_64")
    assert profile.qemu is not None
    accel._probe.cache_clear()
    return dataclasses.replace(profile, qemu=dataclasses.replace(profile.qemu, binary=str(binary)))


def test_auto_falls_back_to_tcg_and_says_why_when_the_probe_guest_fails(tmp_path):
    device = tmp_path / "kvm"
    device.write_bytes(b"")  # opens; the guest is what fails
    profile = fake_qemu(tmp_path, "Could not access KVM kernel module: Permission denied", 1)
    choice = accel.choose("auto", profile, "wall", tmp_path / "bzImage", device)
    assert choice.accel == "tcg"
    assert choice.why == (f"--accel auto: running under TCG: {device} opens but no KVM guest starts "
                          "(Could not access KVM kernel module: Permission denied)")
    with pytest.raises(LabError, match="--accel kvm: .* no KVM guest starts"):
        accel.choose("kvm", profile, "wall", tmp_path / "bzImage", device)


def test_auto_uses_kvm_when_a_kernel_prints_its_banner(tmp_path):
    device = tmp_path / "kvm"
    device.write_bytes(b"")
    profile = fake_qemu(tmp_path, "Linux version 6.1.0 (fake)", 0)
    assert accel.choose("auto", profile, "wall", tmp_path / "bzImage", device) == accel.Choice("kvm", "")
    missing = accel.choose("auto", profile, "wall", tmp_path / "bzImage", tmp_path / "absent")
    assert missing.accel == "tcg" and "absent cannot be opened (No such file or directory)" in missing.why


def test_icount_is_tcg_only(tmp_path):
    profile = arches.load("x86_64")
    assert accel.choose("auto", profile, "icount", tmp_path / "k") == accel.Choice("tcg", "")
    with pytest.raises(LabError, match="--mode icount counts instructions, which only TCG can"):
        accel.choose("kvm", profile, "icount", tmp_path / "k")


def test_kvm_figures_are_labelled_kvm_guest():
    from kernellab.targets.qemu import QemuTarget
    kvm = QemuTarget(arches.load("x86_64"), accel="kvm")
    assert kvm.describe("wall").label == "KVM guest" and not kvm.capabilities.deterministic
    assert "-accel" in (argv := kvm.command(Path("k"), None, "", "wall")) and argv[argv.index("-accel") + 1] == "kvm"
    assert QemuTarget(arches.load("x86_64")).describe("icount").label == "QEMU TCG icount"


# -- labels --------------------------------------------------------------------------------

def test_a_table_of_different_targets_says_so_and_never_pools_them(tmp_path):
    from kernellab.experiments.lab import RunOutcome
    store = Store(tmp_path / "s.sqlite")
    records = []
    for name, label, timing in (("q", "QEMU TCG wall", ""), ("h", "hardware: a NAS", "the machine's own clock")):
        p = labfakes.prepared(parse_short(f"{name}=lab-minimal"))
        run = store.start_run(lab.record_variant(p, store), "k", "x", {"label": label, "timing": timing}, "wall",
                              ["x"], "wall i.cpio ", "i.cpio")
        store.add_sample(run, "syscall.null", "ns", 0, 1, 200.0)
        store.finish_run(run, "ok", "", agent_version=1)
        records.append(VariantRecord(p, labfakes.build("k"), [RunOutcome(run, "ok", "", 1)]))
    report = build_report("mixed", "", records, store, "wall")
    assert report["mode_note"].startswith("MIXED TARGETS") and "the machine's own clock" in report["mode_note"]
    records[0].runs += records[1].runs
    with pytest.raises(LabError, match="cannot be pooled .*target QEMU TCG wall.*target hardware: a NAS"):
        samples(records[0], store)
    assert json.dumps(report)


def test_audit_takes_the_running_kernels_config(capsys):
    """`running` as audit's config: the kernel this machine runs (when its config is readable)."""
    from kernellab.cli import main
    from kernellab.targets.machine import running_config
    if running_config(LocalShell())[0] is None:
        assert main(["audit", "running", "--profile", "virtual-guest"]) == 2
        assert "not in /proc/config.gz" in capsys.readouterr().err
        return
    assert main(["audit", "running", "--profile", "virtual-guest", "--format", "json"]) == 0
    assert any(r["rule"] == "psi" for r in json.loads(capsys.readouterr().out)["findings"])


def test_a_variant_of_a_kernel_kernellab_has_no_source_for_asks_for_one():
    facts = RunningTarget(LocalShell(), "local").facts.values | {"release": "5.10.0-30-amd64"}
    answer = "".join(f"{k}={v}\n" for k, v in facts.items()).encode()
    machine = RunningTarget(ScriptedShell({"echo \"release=": Result(0, answer, "")}), "ssh")
    with pytest.raises(LabError, match=r"ssh://scripted runs Linux 5.10.0-30-amd64, and the source debian:6.1 is "
                                       r"6.1.\d+: pass --source with a tree \(or debian:X.Y\) of 5.10"):
        lab.prepare(parse_short("lean=running+CONFIG_SLUB_DEBUG_ON=y"), machine)
