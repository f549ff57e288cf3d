"""kernellab's ssh target against a real ssh server: the QEMU guest of tests/sshguest.py
(dropbear, kexec-tools, busybox) plays the remote machine. kernellab measures its running
kernel, kexecs it into a variant of its own config built here, measures that, returns it
to its default kernel; a sweep kexecs its probes there in wall mode; a variant that never
comes back is power-cycled and fails; bad hosts, users and keys are one line each; an agent
killed there loses nothing measured; workloads run the guest's own programs and the user's,
copied there."""

import dataclasses
import json
import shutil
import subprocess
import threading
import time

import pytest

from conftest import kernellab
from kernellab.errors import LabError
from kernellab.experiments import compare, lab
from kernellab.experiments.placement import Placement, TargetOptions
from kernellab.experiments.spec import Experiment, parse_short
from sshguest import ALIAS, VARIANT, initramfs, ssh_guest

pytestmark = pytest.mark.integration

QUICK = "KL_REPEATS=3 KL_TARGET_US=500 KL_IDLE_MS=100"
ONLY = "KL_ONLY=syscall.null,syscall.open_close,proc.fork_exit,ipc.pipe_rtt,irq.idle_total"
# Every kexec'd boot of the guest reaches ssh in about 6 s under TCG; a hung one is
# given up on after this.
COME_BACK_S = 45.0


@pytest.fixture(scope="module")
def guest(store):
    prepared = lab.prepare(parse_short(VARIANT))
    build = lab.ensure_built(prepared, store)
    initrd, keys = initramfs()
    with ssh_guest(build.image, initrd, keys) as g:
        yield g


def options(guest, **kw) -> TargetOptions:
    return TargetOptions(f"ssh://{ALIAS}", ssh_config=guest.ssh_config, power_cycle=guest.power_cycle_command,
                         come_back_s=COME_BACK_S, **kw)


def run(guest, store, *variants, cmdline=f"{QUICK} {ONLY}", workloads=(), **kw):
    messages: list[str] = []
    placement = Placement(options(guest, **kw), log=messages.append)
    exp = Experiment("ssh", [parse_short(v) for v in variants])
    how = compare.plan(exp, None, 1, None, 300.0, placement=placement, workloads=workloads)
    opts = dataclasses.replace(how.options, cmdline_extra=cmdline)
    how = dataclasses.replace(how, options=opts, target=lambda p, b: placement.target(p, b, opts))
    report, failures = compare.run_experiment(exp, store, how, log=messages.append)
    return report, failures, messages


def medians(report, variant):
    return {m["name"]: m["values"][variant]["median"] for m in report["metrics"]
            if "median" in m["values"].get(variant, {})}


def test_running_kernel_then_a_kexecd_variant_then_back(guest, store):
    before = guest.boot_id()
    t0 = time.monotonic()
    report, failures, messages = run(guest, store, "running", "ecb=running+CONFIG_CRYPTO_ECB=y")
    assert failures == [], messages
    running, ecb = medians(report, "running"), medians(report, "ecb")
    for metric in ("syscall.null", "proc.fork_exit", "ipc.pipe_rtt"):
        assert running[metric] > 0 and ecb[metric] > 0
    # The kexec'd kernel's own boot, from its log (printk) and kernellab's clock (ssh).
    assert 0 < ecb["boot.ssh_ready.host"] < COME_BACK_S
    assert "boot.linux_version.printk" in ecb
    runs = {v["name"]: v["runs"][0] for v in report["variants"]}
    assert runs["running"]["target"]["label"].startswith("hardware: ")
    assert runs["ecb"]["target"]["details"]["target"] == f"ssh://{ALIAS}"
    # The variant is a build of the guest's own config with one option changed.
    (variant,) = [v for v in report["variants"] if v["name"] == "ecb"]
    assert variant["base"] == "running" and variant["build"] is not None
    # Back in the default kernel: a new boot, without kernellab's marker.
    assert guest.boot_id() != before
    assert "kernellab.boot=" not in guest.output("cat /proc/cmdline")
    print(f"kexec round trip: ssh reachable {ecb['boot.ssh_ready.host']:.1f} s after kexec -e; "
          f"whole experiment {time.monotonic() - t0:.0f} s")


def test_a_sweep_kexecs_its_probes_there_in_wall_mode_and_runs_the_workloads_copied_after_each_boot(
        guest, store, tmp_path):
    """`kernellab sweep --workload ... --target ssh://...`: the baseline and the flip are
    kernels of the guest's own config (both built already by the test above: a sweep costs
    boots here), each kexec'd in turn and measured with the agent as a program, the verdict a
    wall-mode one. A kexec'd kernel's /tmp starts empty: the workloads are copied after its
    boot, as the agent is. (One sweep for both: each of its kexec'd boots costs ~35 s here.)"""
    before = guest.boot_id()
    spec = f"{own_workload(tmp_path)}:n=2"
    r = kernellab("sweep", "running+CONFIG_CRYPTO_ECB=n", "--toggle", "CRYPTO_ECB", "--metric", "syscall.null",
                  "--workload", spec, "--runs", "2", "--format", "json", "--target", f"ssh://{ALIAS}",
                  "--ssh-config", str(guest.ssh_config), "--power-cycle", guest.power_cycle_command,
                  "--kexec-timeout", str(COME_BACK_S), store_path=store.path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["mode"] == "wall" and result["boots"] == 4 and result["builds"] == 0, result
    (flip,) = result["flips"]
    assert (flip["option"], flip["value"]) == ("CONFIG_CRYPTO_ECB", "y")
    effect = flip["effects"]["syscall.null"]
    assert effect["n_ref"] == effect["n_other"] == 2 and effect["testable"], effect
    # Every probe ran on the guest, kexec'd, with the workload copied there after its boot,
    # and the guest is back in its default kernel.
    probes = store.runs(4)
    assert {(row["target"], row["mode"], row["status"]) for row in probes} == {(f"ssh://{ALIAS}", "wall", "ok")}
    assert {row["name"] for row in probes} == {"probe:baseline", "probe:flip:CONFIG_CRYPTO_ECB=y"}
    for row in probes:
        assert store.run_metrics(row["id"])["own.value"] == [42.0]
        assert [w["status"] for w in store.run_workloads(row["id"])] == ["ok"]
    assert guest.boot_id() != before
    assert "kernellab.boot=" not in guest.output("cat /proc/cmdline")


def test_a_variant_that_never_comes_back_is_power_cycled_and_fails(guest, store):
    # No init ("Requested init /none failed": a panic) and no panic timeout: the kexec'd
    # kernel hangs, as a bad variant would.
    dead = "dead=running+CONFIG_CRYPTO_ECB=y+boot:rdinit=/none+boot:init=/none+boot:panic=0"
    report, failures, messages = run(guest, store, dead)
    assert len(failures) == 1 and "the variant never came back" in failures[0]
    assert "power-cycled" in failures[0] and "back in its default kernel" in failures[0]
    guest.wait_for_ssh(60)  # the server may turn away a connection or two while it settles
    assert "kernellab.boot=" not in guest.output("cat /proc/cmdline")


def test_a_variant_without_its_network_driver_is_refused_before_anything_starts(guest, store):
    before = guest.boot_id()
    with pytest.raises(LabError, match="lacks CONFIG_VIRTIO_NET .virtio_net, for net:eth0.*never answer ssh again"):
        run(guest, store, "nonet=running+CONFIG_VIRTIO_NET=n")
    assert guest.boot_id() == before


def test_an_agent_killed_there_keeps_what_it_measured(guest, store):
    # (the guest's busybox has no pkill)
    kill = "kill -9 $(ps | awk '$3 ~ /^[\\/]tmp[\\/]kernellab[\\/]agent-/ { print $1 }')"
    killer = threading.Timer(8.0, lambda: guest.ssh(kill))
    killer.start()
    try:
        report, failures, _ = run(guest, store, "running",
                                  cmdline="KL_REPEATS=3 KL_ONLY=syscall.null,irq.idle_total KL_IDLE_MS=20000")
    finally:
        killer.cancel()
    assert len(failures) == 1 and "killed by signal 9" in failures[0]
    assert medians(report, "running")["syscall.null"] > 0  # measured before the kill, kept


def test_hosts_keys_and_users_that_are_wrong_are_one_line_each(guest, tmp_path):
    config = guest.ssh_config.read_text()
    changed = tmp_path / "changed.config"
    changed.write_text(config.replace(str(guest.known_hosts), str(guest.alternate_known_hosts())))
    with pytest.raises(LabError, match="host key of ssh://kl-guest has CHANGED"):
        Placement(TargetOptions(f"ssh://{ALIAS}", ssh_config=changed), print).machine.facts  # noqa: B018
    unknown = tmp_path / "unknown.config"
    empty = tmp_path / "known_hosts.empty"
    empty.write_text("")
    unknown.write_text(config.replace(str(guest.known_hosts), str(empty)))
    with pytest.raises(LabError, match="not in known_hosts: .*--accept-new-host-key"):
        Placement(TargetOptions(f"ssh://{ALIAS}", ssh_config=unknown), print).machine.facts  # noqa: B018
    accepted = Placement(TargetOptions(f"ssh://{ALIAS}", ssh_config=unknown, accept_new_host_key=True), print)
    assert accepted.machine.facts["machine"] == "x86_64"
    assert guest.keys.host_public.split()[1] in empty.read_text()  # recorded, as ssh's accept-new does
    with pytest.raises(LabError, match="refused the login .*check the user"):
        Placement(TargetOptions(f"ssh://nobody@{ALIAS}", ssh_config=guest.ssh_config), print).machine.facts  # noqa: B018


# The user's own program: static, as the guest has no C library of its own.
OWN_PROGRAM_C = '#include <stdio.h>\nint main(void) { puts("40"); return 0; }\n'

# A user's workload: a script ([files]) that adds its parameter to what the user's program
# (binaries, in bin/) prints.
OWN_TOML = """name = "own"
description = "a user's script and program"
packages = []
binaries = ["own-program"]
command = ["sh", "{workdir}/run.sh", "{n}"]
fixed_work = true
why = "prints a sum"

[files]
"run.sh" = '''
echo "value: $(($1 + $(own-program)))"
'''

[run]
iterations = "n"
timeout_s = 60

[output]
format = "text"

[params.n]
default = "1"
pattern = '[0-9]+'
help = "a number"

[[metric]]
name = "value"
unit = "count"
better = "higher"
regex = '^value: ([0-9]+)$'
"""

# A program from a Debian package the guest has (busybox-static's wc), on a file of its
# directory.
COUNT_TOML = """name = "count"
description = "the bytes of a file, counted by the machine's own wc"
packages = ["busybox-static"]
command = ["wc", "-c", "{workdir}/data"]
fixed_work = true
why = "a fixed file"

[files]
"data" = "0123456789"

[run]
iterations = "n"
timeout_s = 60

[output]
format = "text"

[params.n]
default = "1"
pattern = '[0-9]+'
help = "unused"

[[metric]]
name = "bytes"
unit = "B"
better = "higher"
regex = '^ *([0-9]+) '
"""


def own_workload(tmp_path) -> str:
    """The user's workload file, its program built beside it."""
    from kernellab.agent.compile import cross_targets

    cc = cross_targets()["x86_64"].cc
    assert shutil.which(cc), cc
    (tmp_path / "own-program.c").write_text(OWN_PROGRAM_C)
    subprocess.run([cc, "-static", "-Os", "-o", str(tmp_path / "own-program"), str(tmp_path / "own-program.c")],
                   check=True)
    (tmp_path / "own.toml").write_text(OWN_TOML)
    return str(tmp_path / "own.toml")


def test_workloads_run_the_remotes_programs_and_the_users_copied_there(guest, store, tmp_path):
    """compare --workload on the ssh target: the user's workload file ([files]) and program
    (binaries) copied beside the agent, a Debian program the guest has, a shipped workload
    whose program it lacks (one line naming its package); nothing is installed there."""
    own_workload(tmp_path)
    (tmp_path / "count.toml").write_text(COUNT_TOML)
    instances = compare.resolve_workloads([f"{tmp_path / 'own.toml'}:n=2", str(tmp_path / "count.toml"),
                                           "hackbench:ipc=pipe"])
    installed = guest.output("ls /bin /sbin /usr/bin /usr/sbin")
    report, failures, messages = run(guest, store, "running", cmdline="KL_REPEATS=3 KL_ONLY=syscall.null",
                                     workloads=instances)
    assert failures == [], messages
    values = {m["name"]: m["values"]["running"] for m in report["metrics"]}
    assert values["own.value"]["median"] == 42
    assert values["count.bytes"]["median"] == 10
    # The guest has no /etc/os-release (a busybox userland): not known to take Debian's names.
    assert values["hackbench.process_pipe_time"]["not_available"] == (
        f"hackbench is not installed on ssh://{ALIAS}: install Debian's rt-tests, or its like with "
        f"ssh://{ALIAS}'s own package manager")
    assert values["syscall.null"]["median"] > 0
    [run_] = report["variants"][0]["runs"]
    by_label = {w["label"]: w for w in run_["workloads"]}
    assert by_label["own:n=2"]["status"] == "ok" and by_label["count"]["status"] == "ok"
    assert by_label["count"]["provenance"]["argv"] == ["wc", "-c", "{workdir}/data"]
    assert by_label["count"]["provenance"]["packages"] == ["busybox-static"]
    assert by_label["own:n=2"]["provenance"]["argv"] == ["sh", "{workdir}/run.sh", "2"]
    assert by_label["hackbench:ipc=pipe"]["status"] == "exec_failed"
    # Copied beside the agent, named by content; nothing installed among the machine's programs.
    copies = guest.output("ls /tmp/kernellab")
    assert any(name.startswith("workloads-") for name in copies.split()), copies
    assert guest.output("ls /bin /sbin /usr/bin /usr/sbin") == installed


def test_iperf3_from_the_host_into_a_qemu_guest_over_virtio_net(guest, store):
    """The guest's kernel here (lab-minimal with virtio-net built in, already built for the
    ssh guest) booted under QEMU with the agent, in wall mode: the agent brings up the NIC,
    starts iperf3's server, says it is ready; this machine's iperf3 sends through QEMU's
    port forward and user networking into the guest. The traffic crosses a NIC model, timed
    by the host's clock: an emulated figure, stored with its provenance."""
    r = kernellab("compare", VARIANT, "--mode", "wall", "--runs", "1",
                  "--metric", "syscall.null,iperf3-host.received_bw,iperf3-host.sent_bw",
                  "--workload", "iperf3-host:bytes=8M",
                  "--format", "json", store_path=store.path, timeout=900)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    received = next(m for m in report["metrics"] if m["name"] == "iperf3-host.received_bw")
    assert received["values"]["ssh-guest"]["median"] > 0, received
    [run] = report["variants"][0]["runs"]
    [wl] = run["workloads"]
    assert wl["status"] == "ok" and wl["elapsed_s"] > 0, wl
    assert wl["provenance"]["program"] == "iperf3"
    print(f"iperf3 host -> guest over virtio-net (TCG, wall): {received['values']['ssh-guest']['median']:.1f} MB/s")
