"""Workloads that talk to the host (needs.network = "host"): the server where the kernel runs,
the command on the host against it, over a link the target gives: a QEMU guest's NIC and
user networking's port forward in wall mode, a real machine's own address.

The fake lab's QEMU runs the real agent on the host and relays its -netdev hostfwd ports
there (tests/fakes/qemu), so these tests run the agent's, the Reader's and the target's own
code end to end; the real guest (virtio-net, 10.0.2.15) is the integration lane's.
"""

import json
import signal
import socket
import sqlite3
import subprocess

import pytest

from fakes import compare_json
from kernellab.experiments import compare
from kernellab.guest import workloads as guest_workloads
from kernellab.guest.records import InvalidRecord, frame, parse
from kernellab.targets import running
from kernellab.workloads import resolve
from workloadfiles import HOST_SERVER, RecordingSink, free_port, host_workload_file, running_kernel_report

WALL = ("--mode", "wall", "--runs", "1", "--max-runs", "1")
# A kernel with the NIC's driver and its transport (x86_64: virtio on PCI), and one without.
NIC = "tinyconfig+CONFIG_NET=y+CONFIG_PCI=y+CONFIG_VIRTIO_MENU=y+CONFIG_VIRTIO_PCI=y+CONFIG_VIRTIO_NET=y"
NO_DRIVER = "tinyconfig+CONFIG_NET=y+CONFIG_PCI=y+CONFIG_VIRTIO_MENU=y+CONFIG_VIRTIO_PCI=y"
# The driver, but no transport the NIC could be found on: the guest has no network device.
NO_DEVICE = "tinyconfig+CONFIG_NET=y+CONFIG_VIRTIO_MENU=y+CONFIG_VIRTIO_MMIO=y+CONFIG_VIRTIO_NET=y"


def values(report, metric: str) -> dict:
    return next(m for m in report["metrics"] if m["name"] == metric)["values"]


def workloads_of(report, variant: int = 0) -> dict[str, dict]:
    return {w["label"]: w for w in report["variants"][variant]["runs"][0]["workloads"]}


def last_qemu_command(lab) -> list[str]:
    [(command,)] = sqlite3.connect(lab.store).execute("SELECT command FROM runs ORDER BY id DESC LIMIT 1")
    return json.loads(command)


def log(lab, label: str) -> str:
    [(text,)] = sqlite3.connect(lab.store).execute(
        "SELECT text FROM logs WHERE kind = ? ORDER BY id DESC LIMIT 1", (f"workload {label}",))
    return text


def test_the_host_sends_into_the_guest_over_its_nic_in_wall_mode(lab, capsys, tmp_path):
    """The server runs in the guest, the command here against it through QEMU's forward of a
    free port of 127.0.0.1 to the guest's 10.0.2.15; two such workloads get a forward each.
    The host command's output is what is parsed; the server's is in the log after it."""
    one, two = host_workload_file(tmp_path, "one"), host_workload_file(tmp_path, "two")
    report, _ = compare_json(lab, capsys, f"a={NIC}", "--workload", f"{one}:n=300000", "--workload", str(two),
                             *WALL)
    assert values(report, "one.sent")["a"]["median"] == 300000
    assert values(report, "one.received")["a"]["median"] == 300000   # what the server counted
    assert values(report, "two.received")["a"]["median"] == 100000
    assert values(report, "syscall.null")["a"]["n"] == 3   # the agent's own, as ever
    wl = workloads_of(report)["one:n=300000"]
    assert wl["status"] == "ok" and wl["reason"] == "" and wl["elapsed_s"] > 0
    assert wl["provenance"]["argv"][-4:] == ["{address}", "{port}", "300000", "0"]
    # Every view's line says where the program ran: here, not in the guest.
    assert wl["provenance"]["command_on_host"] is True
    line = guest_workloads.Provenance.from_dict(wl["provenance"]).line()
    assert " on this machine, the host, against its server on qemu: " in line, line
    client, server = log(lab, "one:n=300000").split("--- the server's output (python3) ---\n")
    assert json.loads(client) == {"end": {"sent": 300000, "received": 300000}}
    assert server.startswith("listening on ") and server.endswith("received 300000\n")
    command = last_qemu_command(lab)
    [netdev] = [command[i + 1] for i, w in enumerate(command[:-1]) if w == "-netdev"]
    forwards = netdev.split(",")[2:]
    assert netdev.startswith("user,id=kl-net,") and len(forwards) == 2
    for forward, server_port in zip(forwards, sorted(server_ports(one, two)), strict=True):
        assert forward.startswith("hostfwd=tcp:127.0.0.1:") and forward.endswith(f"-10.0.2.15:{server_port}")
    assert "virtio-net-pci,netdev=kl-net" in command
    details = report["variants"][0]["runs"][0]["target"]["details"]
    assert details["host_link"].startswith("virtio-net-pci, QEMU user networking")


def server_ports(*files) -> list[int]:
    return [resolve(str(f)).workload.server.port for f in files]


def test_under_icount_it_is_refused_in_one_line_before_any_build(lab, capsys, tmp_path):
    net = host_workload_file(tmp_path, "net")
    _, err = compare_json(lab, capsys, f"a={NIC}", "--workload", str(net), "--mode", "icount", expect=2)
    assert err.count("\n") == 1 and "workload net talks to the host over the network, which the host's clock " \
        "times: wall mode only, not icount (pass --mode wall)" in err, err
    assert (not lab.store.exists() or lab.runs() == []) and not (lab.cache / "artifacts").exists()


def test_an_arch_without_a_nic_is_refused_in_one_line_before_any_build(lab, capsys, tmp_path):
    net = host_workload_file(tmp_path, "net")
    _, err = compare_json(lab, capsys, "a=tinyconfig", "--arch", "i386", "--workload", str(net), *WALL, expect=2)
    assert err.count("\n") == 1, err
    assert ("workload net talks to the host over a network link, and the i386 QEMU machine has no network device "
            "for one (its arch profile names no net_device in [qemu]): run it on arm64, s390x, x86_64, or on "
            "--target local") in err, err
    assert not (lab.cache / "artifacts").exists()


def test_a_host_without_the_program_is_told_in_one_line_before_any_build(lab, capsys, tmp_path):
    net = host_workload_file(tmp_path, "net", program="kl-no-such-client")
    _, err = compare_json(lab, capsys, f"a={NIC}", "--workload", str(net), *WALL, expect=2)
    assert err.count("\n") == 1 and ("workload net runs kl-no-such-client on this machine, the host's side of its "
                                     "link, and kl-no-such-client is not installed here: install Debian's python3"
                                     ) in err, err
    assert not (lab.cache / "artifacts").exists()


def test_a_kernel_without_the_nics_driver_is_not_given_the_workload(lab, capsys, tmp_path):
    """Its metrics say what the variant lacks, before anything runs: the config is never
    changed to fit; the variant that has the driver measures it."""
    net = host_workload_file(tmp_path, "net")
    report, _ = compare_json(lab, capsys, f"with={NIC}", f"without={NO_DRIVER}", "--workload", str(net), *WALL)
    assert values(report, "net.sent")["with"]["median"] == 100000
    why = "needs CONFIG_VIRTIO_NET (the guest's network device)"
    assert values(report, "net.sent")["without"] == {"not_available": why}
    assert values(report, "net.received")["without"] == {"not_available": why}
    wl = workloads_of(report, 1)["net"]
    assert (wl["status"], wl["reason"], wl["elapsed_s"]) == ("not_run", why, None)
    assert values(report, "syscall.null")["without"]["median"] > 0   # the rest of its run, measured


def test_a_guest_with_no_network_device_does_not_run_it_and_says_why(lab, capsys, tmp_path):
    """The driver without a transport for the NIC (virtio-mmio, the NIC on PCI): the agent
    finds no interface to bring up, and does not start the server."""
    net = host_workload_file(tmp_path, "net")
    report, _ = compare_json(lab, capsys, f"a={NO_DEVICE}", "--workload", str(net), *WALL)
    why = ("talks to the host over a network link, and the guest has no network device it could bring up for it "
           "(no_network_device): not run")
    assert values(report, "net.received")["a"] == {"not_available": why}
    assert (workloads_of(report)["net"]["status"], workloads_of(report)["net"]["reason"]) == ("no_link", why)
    assert log(lab, "net") == ""   # its server never started


def test_the_host_command_failing_is_the_workloads_reason_and_the_rest_is_kept(lab, capsys, tmp_path):
    bad, good = host_workload_file(tmp_path, "bad", status=3), host_workload_file(tmp_path, "good")
    report, _ = compare_json(lab, capsys, f"a={NIC}", "--workload", str(bad), "--workload", str(good), *WALL)
    why = "the host's python3 exited with status 3: refusing to go on (exit 3)"
    assert values(report, "bad.sent")["a"] == {"not_available": why}
    assert values(report, "good.sent")["a"]["median"] == 100000
    assert values(report, "syscall.null")["a"]["n"] == 3
    assert (workloads_of(report)["bad"]["status"], workloads_of(report)["bad"]["reason"]) == ("host_exit", why)
    assert '"received": 100000' in log(lab, "bad")   # its output, kept in the log


def test_on_this_machine_the_host_reaches_the_server_on_its_loopback(tmp_path):
    """--target local: the agent runs the server as a program here, the link is 127.0.0.1."""
    instances = compare.resolve_workloads([f"{host_workload_file(tmp_path, 'net')}:n=4242"])
    report = running_kernel_report(tmp_path, instances)
    assert values(report, "net.received")["running"]["median"] == 4242


def test_over_ssh_the_host_reaches_the_address_its_connection_reached(tmp_path, monkeypatch):
    """An ssh machine's address as kernellab's connection reached it: $SSH_CONNECTION's
    third word, there (here a shell of this machine posing as a remote one)."""
    from test_remote_workloads import PosingShell
    monkeypatch.setattr(running, "AGENT_DIR", str(tmp_path / "remote"))
    monkeypatch.setenv("SSH_CONNECTION", "192.0.2.7 50000 127.0.0.1 22")
    instances = compare.resolve_workloads([f"{host_workload_file(tmp_path, 'net')}:n=77"])
    report = running_kernel_report(tmp_path, instances, PosingShell())
    assert values(report, "net.received")["running"]["median"] == 77
    assert running.ssh_server_address("fe80::1 4 2001:db8::2 22\n", "ssh://x") == "2001:db8::2"
    for bad in ("", "1.2.3.4 5 nas 22", "1.2.3.4 5 6.7.8.9"):
        with pytest.raises(Exception, match="cannot tell the address of ssh://x as kernellab's ssh connection"):
            running.ssh_server_address(bad, "ssh://x")


# -- the Reader and the records, without a run ------------------------------------------------

def test_the_ready_record_and_the_no_link_status_are_checked_like_the_others():
    assert parse(frame("seq=1 t=wl_ready w=0")).fields == {"w": "0"}
    no_link = parse(frame("seq=1 t=wl_end w=0 status=no_link code=0 elapsed_ns=0 reason=no_network_device"))
    assert no_link.fields["reason"] == "no_network_device"
    for bad in ("seq=1 t=wl_ready w=0 data=x", "seq=1 t=wl_ready", "seq=1 t=wl_end w=0 status=no_link code=0 "
                "elapsed_ns=0"):
        with pytest.raises(InvalidRecord):
            parse(frame(bad))


def test_the_reader_runs_the_host_command_from_ready_to_end_and_kills_what_outlives_the_run(tmp_path):
    """The command starts at t=wl_ready against the link's address; a server's failure is
    the workload's reason before the host's; a command still running when the run ends is
    killed, its whole group."""
    port = free_port()
    done = resolve(str(host_workload_file(tmp_path, "done", port=port)))
    failed = resolve(str(host_workload_file(tmp_path, "failed", port=port, status=2)))
    # A server that never answers: its host command waits on it until the run ends.
    silent = socket.create_server(("127.0.0.1", 0))
    silent_port = silent.getsockname()[1]
    late = resolve(str(host_workload_file(tmp_path, "late", port=silent_port)))
    asked = []

    def link(guest_port):
        asked.append(guest_port)
        return "127.0.0.1", guest_port

    sink, ended = RecordingSink(), []
    reader = guest_workloads.Reader([done, failed, late], "wall", sink, lambda *a: a, ended.append, host_link=link)
    server = subprocess.Popen(["python3", "-c", HOST_SERVER, str(port), "2"], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline() == f"listening on {port}\n"
    for payload in ("seq=0 t=wl_begin w=0 name=done", "seq=1 t=wl_ready w=0", "seq=2 t=wl_begin w=1 name=failed",
                    "seq=3 t=wl_ready w=1"):
        reader.record(parse(frame(payload)))
    assert server.wait(timeout=20) == 0   # both connected, sent and were answered
    for payload in ("seq=4 t=wl_end w=0 status=ok code=0 elapsed_ns=5000",
                    "seq=5 t=wl_end w=1 status=server_died code=1 elapsed_ns=5000",
                    "seq=6 t=wl_begin w=2 name=late", "seq=7 t=wl_ready w=2"):
        reader.record(parse(frame(payload)))
    [left] = [h for h in reader.hosts.values() if isinstance(h, guest_workloads._HostCommand)]
    with pytest.raises(subprocess.TimeoutExpired):
        left.proc.wait(timeout=0.5)   # still waiting for the server's answer
    reader.finish("the guest stopped")
    silent.close()
    assert left.proc.returncode == -signal.SIGKILL
    assert asked == [port, port, silent_port]
    assert sink.samples == {"done.sent": 100000, "done.received": 100000}
    assert sink.na["failed.sent"] == ("the server python3 exited with status 1 while the host's python3 ran (its "
                                      "output is in the run's log)")
    assert sink.na["late.sent"] == "the run ended before workload late did (the guest stopped)"
    assert [e.status for e in ended] == ["ok", "server_died", "not_run"]


def test_without_a_link_the_host_command_is_not_started_and_says_why(tmp_path):
    net = resolve(str(host_workload_file(tmp_path, "net")))
    sink, ended = RecordingSink(), []
    reader = guest_workloads.Reader([net], "wall", sink, lambda *a: a, ended.append, where="ssh://nas")
    for payload in ("seq=0 t=wl_begin w=0 name=net", "seq=1 t=wl_ready w=0",
                    "seq=2 t=wl_end w=0 status=ok code=0 elapsed_ns=1"):
        reader.record(parse(frame(payload)))
    assert sink.na["net.sent"] == "the host could not reach the server of net: ssh://nas gives the host no link to it"
    assert [e.status for e in ended] == ["host_exec_failed"]


def test_the_agents_file_gives_a_host_workload_its_server_and_no_argv(tmp_path):
    """After its label, timeout and disk word: 1, its client is the host's; then no argv
    words (the host runs its command), and its server's."""
    net = resolve(str(host_workload_file(tmp_path, "net")))
    words = guest_workloads.encode([net]).split(b"\0")
    assert words[:2] == [b"kernellab-workloads 5", b"1"]
    assert words[2:9] == [b"net", b"30000", b"0", b"1", b"1", b"0", b"stdout"]
    at = words.index(b"serve.py")
    assert words[at + 2:at + 5] == [b"0", b"3", b"python3"]   # no argv; the server's 3 words


def test_the_guests_userland_holds_the_server_not_the_hosts_command(tmp_path):
    from kernellab import userland
    net = resolve(str(host_workload_file(tmp_path, "net", program="kl-host-only")))
    assert userland.wanted([net]).programs == ("python3",)


def test_workload_show_says_where_each_part_runs(lab, capsys):
    assert lab.main("workload", "show", "iperf3-host:bytes=4M") == 0
    out = capsys.readouterr().out
    assert ("command:  iperf3 '--client={address}' '--port={port}' --bytes=4M --json  (on the host, kernellab's "
            "machine, against the server's port 5201)") in out
    assert "server:   iperf3 --server --port=5201 --one-off --forceflush  (where the kernel runs; ready:" in out
    assert "means something in wall" in out and "network host" in out
