"""A workload run end to end: `compare --workload SPEC`, the agent running the program
(agent/workload.c), its output framed into records, reassembled, parsed and stored as
WORKLOAD.METRIC samples with their provenance, or marked not available with the reason.

The fake lab's QEMU runs the real agent on the host when the initramfs holds workloads
(tests/fakes/qemu), so these tests run the agent's own code for the programs; the
integration test at the end runs a static program in a real lab-minimal guest.
"""

import dataclasses
import json
import os
import shutil
import socket
import sqlite3
import subprocess
from pathlib import Path

import jsonschema
import pytest

from fakes import compare_json
from kernellab.errors import LabError
from kernellab.experiments import compare
from kernellab.experiments.placement import Placement
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.guest import workloads as guest_workloads
from kernellab.guest.records import InvalidRecord, frame, parse
from kernellab.metrics import catalog
from kernellab.store import SCHEMA_VERSION, Store
from kernellab.targets import TargetOptions, fsimage, running
from kernellab.workloads import Server, resolve
from workloadfiles import RecordingSink, host_workload_file, running_kernel_report, workload_file

needs_mke2fs = pytest.mark.skipif(shutil.which("mke2fs") is None, reason="e2fsprogs not installed")

SCHEMA = Path(__file__).parent.parent / "src/kernellab/report/schema.json"



def metric(report, name):
    return next(m for m in report["metrics"] if m["name"] == name)


def test_a_users_workload_is_measured_stored_and_described(lab, capsys, tmp_path):
    spec = str(workload_file(tmp_path, "own", 'echo "value: $((40 + $1))"',
                             command='["sh", "{workdir}/run.sh", "{n}"]'))
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", f"{spec}:n=2", "--mode", "icount")
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    m = metric(report, "own.value")
    assert m["values"]["a"]["median"] == 42
    assert (m["source"], m["group"], m["better"], m["unit"]) == ("workload", "workload", "higher", "count")
    # The agent's own metrics of the same run are there too.
    assert metric(report, "syscall.null")["values"]["a"]["n"] == 3
    [run] = report["variants"][0]["runs"]
    [wl] = run["workloads"]
    assert wl["status"] == "ok" and wl["elapsed_s"] > 0
    assert wl["provenance"]["argv"] == ["sh", "{workdir}/run.sh", "2"]
    assert wl["provenance"]["program"] == "sh" and wl["provenance"]["label"] == "own:n=2"
    # The raw output is in the run's log, and the records in its console log.
    db = sqlite3.connect(lab.store)
    [(text,)] = db.execute("SELECT text FROM logs WHERE kind = 'workload own:n=2'").fetchall()
    assert text == "value: 42\n"
    assert lab.main("log", str(run["id"])) == 0
    assert "t=wl_out w=0 data=value:%2042%0A" in capsys.readouterr().out


def test_a_long_output_in_many_records_is_reassembled_exactly(lab, capsys, tmp_path):
    """More than a record's worth of output (pieces of 140 bytes), with spaces, '%' and '#'."""
    line = "x%# " * 100
    spec = workload_file(tmp_path, "long", f'for i in 1 2 3; do echo "{line}"; done\necho "value: 7"')
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(spec), "--mode", "icount")
    assert metric(report, "long.value")["values"]["a"]["median"] == 7
    [(text,)] = sqlite3.connect(lab.store).execute("SELECT text FROM logs WHERE kind = 'workload long'").fetchall()
    assert text == f"{line}\n" * 3 + "value: 7\n"


def test_each_failure_is_a_reason_and_the_rest_of_the_run_is_kept(lab, capsys, tmp_path):
    missing = workload_file(tmp_path, "missing", "", command='["no-such-program-kl"]')
    failing = workload_file(tmp_path, "failing", 'echo "value: 1"; exit 3')
    hanging = workload_file(tmp_path, "hanging", "echo started; sleep 30", timeout_s=0.5)
    garbled = workload_file(tmp_path, "garbled", "echo 'nothing to read here'")
    fine = workload_file(tmp_path, "fine", 'echo "value: 5"')
    args = [a for f in (missing, failing, hanging, garbled, fine) for a in ("--workload", str(f))]
    report, _ = compare_json(lab, capsys, "a=tinyconfig", *args, "--mode", "icount")
    why = {name: metric(report, f"{name}.value")["values"]["a"].get("not_available")
           for name in ("missing", "failing", "hanging", "garbled")}
    assert why["missing"] == "no-such-program-kl is not installed on the guest: install Debian's dash"
    assert why["failing"] == "sh exited with status 3 (its output is in the run's log)"
    assert why["hanging"] == "sh ran past its timeout of 0.5 s and was killed"
    assert "matches nothing in the output" in why["garbled"]
    assert metric(report, "fine.value")["values"]["a"]["median"] == 5   # after all of them
    assert metric(report, "syscall.null")["values"]["a"]["n"] == 3
    statuses = [w["status"] for w in report["variants"][0]["runs"][0]["workloads"]]
    assert statuses == ["exec_failed", "exit", "timeout", "unparsed", "ok"]
    [(text,)] = sqlite3.connect(lab.store).execute("SELECT text FROM logs WHERE kind = 'workload hanging'").fetchall()
    assert text == "started\n"


def test_a_wall_only_metric_under_icount_is_not_available_never_a_zero(lab, capsys, tmp_path):
    metrics = '''
[[metric]]
name = "bw"
unit = "MB/s"
better = "higher"
regex = '^bw: (\\d+)$'
modes = ["wall"]
'''
    spec = workload_file(tmp_path, "disk", 'echo "bw: 900"', metrics=metrics)
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(spec), "--mode", "icount")
    cell = metric(report, "disk.bw")["values"]["a"]
    assert "median" not in cell and "wall mode only" in cell["not_available"]


def test_the_gate_reads_a_workload_metric_whatever_the_order_of_the_options(lab, capsys, tmp_path):
    """The script prints what the variant's boot parameter says (the kernel hands KEY=value
    to init's environment, and the agent to the program)."""
    spec = workload_file(tmp_path, "gated", 'echo "value: $WL_VALUE"')
    variants = ("a=tinyconfig+boot:WL_VALUE=100", "b=tinyconfig+boot:WL_VALUE=80")
    report, err = compare_json(lab, capsys, *variants, "--fail-on", "gated.value:-5", "--workload", str(spec),
                                 "--mode", "icount", expect=3)
    assert "regression: gated.value b: -20" in err
    assert metric(report, "gated.value")["verdict"]["b"]["kind"] == "worse"
    # A saved report is gated on it as well.
    saved = lab.tmp / "saved.json"
    saved.write_text(json.dumps(report))
    assert lab.main("show", str(saved), "--fail-on", "gated.value:-30") == 0
    # A rule on a metric that neither the catalog nor a workload has is one line.
    _, err = compare_json(lab, capsys, *variants, "--fail-on", "gated.nosuch:-5", "--workload", str(spec), expect=2)
    assert err.strip().splitlines()[-1].startswith("kernellab: error: --fail-on: unknown metric 'gated.nosuch'")


SERVER = """command = ["sh", "{workdir}/serve.sh"]
ready_line = '^ready'
ready_timeout_s = 10"""
# A server that says it is ready, serves until SIGTERM and says it stops.
SERVE = """trap 'echo stopping; exit 0' TERM
echo starting
echo ready
while :; do sleep 0.05; done"""


def test_a_server_is_started_waited_for_stopped_and_its_output_kept(lab, capsys, tmp_path):
    spec = workload_file(tmp_path, "served", 'echo "value: 7"', server=SERVER, serve=SERVE)
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(spec), "--mode", "icount")
    assert metric(report, "served.value")["values"]["a"]["median"] == 7
    [wl] = report["variants"][0]["runs"][0]["workloads"]
    assert wl["status"] == "ok" and wl["reason"] == ""
    [(text,)] = sqlite3.connect(lab.store).execute("SELECT text FROM logs WHERE kind = 'workload served'").fetchall()
    client, server = text.split("--- the server's output (sh) ---\n")
    assert client == "value: 7\n"
    assert server.startswith("starting\nready\n") and server.endswith("stopping\n"), server   # SIGTERM


def test_a_server_ready_when_its_port_answers(lab, capsys, tmp_path):
    """ready_port: the client runs once 127.0.0.1:PORT accepts a connection (here it fetches
    a page from the server); a port that answers before the server starts is another
    program's, and the workload says so rather than measure it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = (f'command = ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"]\n'
              f"ready_port = {port}\nready_timeout_s = 20")
    fetch = (f"python3 -c \"import urllib.request as u; print('value:', "
             f"u.urlopen('http://127.0.0.1:{port}/').status)\"")
    spec = workload_file(tmp_path, "web", fetch, server=server)
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(spec), "--mode", "icount")
    assert metric(report, "web.value")["values"]["a"]["median"] == 200
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # the server's closed connections linger
        busy.bind(("127.0.0.1", port))
        busy.listen()
        report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(spec), "--mode", "icount")
    assert metric(report, "web.value")["values"]["a"]["not_available"] == (
        f"port {port} on 127.0.0.1 answered before the server python3 started: another program on the guest "
        "holds it (stop it, or give the workload another port)")


def test_each_server_failure_is_the_workloads_reason_and_the_rest_is_kept(lab, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(Server, "stop_grace_s", 0.3)
    value = 'echo "value: 1"'
    files = {
        "early": workload_file(tmp_path, "early", value, server=SERVER, serve="echo oops; exit 4"),
        "silent": workload_file(tmp_path, "silent", value, server=SERVER.replace("= 10", "= 0.5"),
                                serve="echo starting; sleep 30"),
        "dies": workload_file(tmp_path, "dies", f"sleep 1; {value}", server=SERVER,
                              serve="echo ready; sleep 0.2; exit 3"),
        "absent": workload_file(tmp_path, "absent", value,
                                server=SERVER.replace('"sh", "{workdir}/serve.sh"', '"no-such-server-kl"')),
        # Ignores SIGTERM (its children too): killed after its grace, and the figure stands.
        "stubborn": workload_file(tmp_path, "stubborn", value, server=SERVER,
                                  serve="trap '' TERM; echo ready; while :; do sleep 0.05; done"),
        "fine": workload_file(tmp_path, "fine", 'echo "value: 5"', server=SERVER, serve=SERVE),
    }
    args = [a for f in files.values() for a in ("--workload", str(f))]
    report, _ = compare_json(lab, capsys, "a=tinyconfig", *args, "--mode", "icount")
    why = {name: metric(report, f"{name}.value")["values"]["a"].get("not_available") for name in files}
    assert why == {
        "early": "the server sh exited with status 4 before it was ready (its output is in the run's log)",
        "silent": "the server sh printed no line matching '^ready' within 0.5 s and was killed (its output is in "
                  "the run's log)",
        "dies": "the server sh exited with status 3 while sh ran (its output is in the run's log)",
        "absent": "the server no-such-server-kl is not installed on the guest: install Debian's dash",
        "stubborn": None, "fine": None}
    assert metric(report, "stubborn.value")["values"]["a"]["median"] == 1
    assert metric(report, "fine.value")["values"]["a"]["median"] == 5
    statuses = [w["status"] for w in report["variants"][0]["runs"][0]["workloads"]]
    assert statuses == ["server_failed", "server_not_ready", "server_died", "server_exec_failed", "ok", "ok"]
    logs = dict(sqlite3.connect(lab.store).execute("SELECT kind, text FROM logs WHERE kind LIKE 'workload %'"))
    assert logs["workload early"] == "--- the server's output (sh) ---\noops\n"
    assert logs["workload silent"].endswith("starting\n")


@pytest.mark.parametrize("why, args, says", [
    ("the same metric names twice", ("--workload", "{own}:n=1", "--workload", "{own}:n=2"),
     "--workload own and --workload own:n=2 both give own.value"),
    ("a ready_line in Python's own syntax", ("--workload", "{srv}"), "matched in the guest by POSIX extended"),
    ("traffic from the host, which the host's clock times", ("--workload", "{net}", "--mode", "icount"),
     "workload net talks to the host over the network, which the host's clock times: wall mode only, not icount "
     "(pass --mode wall)"),
    ("an unknown workload", ("--workload", "nosuch"), "no workload 'nosuch'"),
    ("a bad parameter", ("--workload", "fio:rw=sideways"), "workload fio: rw= 'sideways' is not one of"),
])
def test_what_cannot_run_is_refused_in_one_line_before_any_build(lab, capsys, tmp_path, why, args, says):
    own = workload_file(tmp_path, "own", 'echo "value: $1"', command='["sh", "{workdir}/run.sh", "{n}"]')
    net = host_workload_file(tmp_path, "net")
    srv = workload_file(tmp_path, "srv", 'echo "value: 1"', server=SERVER.replace("^ready", "^ready \\\\d+"))
    args = [a.format(own=own, net=net, srv=srv) for a in args]
    _, err = compare_json(lab, capsys, "a=tinyconfig", *args, expect=2)
    assert err.count("\n") == 1 and says in err, err
    assert (not lab.store.exists() or lab.runs() == []) and not (lab.cache / "artifacts").exists()


def test_the_local_target_runs_the_program_installed_here(tmp_path):
    """The agent as a program (--target local), the workload's files written by it, the
    program found in this machine's PATH; a program that is not installed names its package."""
    own = resolve(str(workload_file(tmp_path, "own", 'echo "value: $((1 + $1))"',
                                    command='["sh", "{workdir}/run.sh", "{n}"]')) + ":n=41")
    absent = resolve(str(workload_file(tmp_path, "absent", "", command='["kl-not-installed"]')))
    instances = compare.resolve_workloads([own.loaded.origin + ":n=41", absent.loaded.origin])
    placement = Placement(TargetOptions("local"), log=lambda m: None)
    exp = Experiment("local", [parse_short("running")])
    how = compare.plan(exp, None, 1, None, 300.0, placement=placement, workloads=instances)
    options = dataclasses.replace(how.options, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=1")
    how = dataclasses.replace(how, options=options, target=lambda p, b: placement.target(p, b, options))
    store = Store(tmp_path / "s.sqlite")
    report, failures = compare.run_experiment(exp, store, how, log=lambda m: None)
    assert failures == []
    assert metric(report, "own.value")["values"]["running"]["median"] == 42
    assert metric(report, "absent.value")["values"]["running"]["not_available"] == (
        "kl-not-installed is not installed on this machine: install Debian's dash")


# -- needs.disk_mib: the room a workload's files need ---------------------------------------

def disk_workload(tmp_path: Path, name: str, mib: int) -> Path:
    """Prints its value, then the directory it ran in (which its run's log keeps)."""
    return workload_file(tmp_path, name, 'echo "value: 7"; pwd', extra=f"[needs]\ndisk_mib = {mib}\n")


def qemu_command(lab) -> list[str]:
    """The argv of the last run's QEMU, as the store keeps it."""
    [(command,)] = sqlite3.connect(lab.store).execute("SELECT command FROM runs ORDER BY id DESC LIMIT 1")
    return json.loads(command)


def file_system_drives(argv: list[str]) -> list[str]:
    """The -drive arguments of the disk holding a file system (snapshot=on), not the scratch disk's."""
    return [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "-drive" and "snapshot=on" in argv[i + 1]]


def kernel_words(argv: list[str]) -> list[str]:
    return argv[argv.index("-append") + 1].split()


def workload_log(lab, label: str) -> str:
    [(text,)] = sqlite3.connect(lab.store).execute(
        "SELECT text FROM logs WHERE kind = ? ORDER BY id DESC LIMIT 1", (f"workload {label}",))
    return text


WALL = ("--mode", "wall", "--runs", "1", "--max-runs", "1")


@needs_mke2fs
def test_a_workload_that_needs_a_disk_works_on_an_ext4_disk_of_its_size_in_wall_mode(lab, capsys, tmp_path):
    """As on a real machine: a fio-like workload needing 200 MiB gets a disk of its own
    holding an ext4 file system with that room (no fs: given: the default, ext4-4k), the
    agent mounts it (KL_FS=ext4) and the workload's directory is there; one that needs no
    disk keeps the guest's tmpfs. The run's target details name the disk."""
    big, small = disk_workload(tmp_path, "big", 200), disk_workload(tmp_path, "small", 0)
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(big), "--workload", str(small), *WALL)
    assert metric(report, "big.value")["values"]["a"]["median"] == 7
    assert metric(report, "small.value")["values"]["a"]["median"] == 7
    [run] = report["variants"][0]["runs"]
    details = run["target"]["details"]["file_system"]
    assert details.startswith("ext4-4k (the workloads' disk: the variant names no fs:): ext4, 4 KiB blocks, "
                              "no /tst.dd, 200 MiB free for the workloads' files"), details
    command = qemu_command(lab)
    [drive] = file_system_drives(command)
    image = Path(drive.split(",")[0].removeprefix("file="))
    assert image.stat().st_size >> 20 >= 200 + 128 and image.parent == lab.cache / "fs-images"
    assert "KL_FS=ext4" in kernel_words(command)
    assert "/mnt-fs/wl-0\n" in workload_log(lab, "big")          # the fake guest's mounted file system
    assert "/mnt-fs/" not in workload_log(lab, "small")
    # The raw scratch disk of the block metrics is still there, apart from it and as it was.
    [scratch] = [a for a in command if a.endswith("/scratch.img,format=raw,if=virtio,cache=writeback")]
    assert Path(scratch.split(",")[0].removeprefix("file=")).name == "scratch.img"


@needs_mke2fs
def test_with_an_fs_variant_the_workload_runs_on_the_file_system_compared(lab, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(fsimage, "FILE_MIB", 4)   # a small tst.dd beside the workloads' room
    big = disk_workload(tmp_path, "big", 200)
    report, _ = compare_json(lab, capsys, "a=tinyconfig+fs:ext4-1k", "--workload", str(big), *WALL)
    assert metric(report, "big.value")["values"]["a"]["median"] == 7
    details = report["variants"][0]["runs"][0]["target"]["details"]["file_system"]
    assert details.startswith("ext4-1k: ext4, 1 KiB blocks, /tst.dd 4 MiB allocated, 200 MiB free for the "
                              "workloads' files"), details
    [drive] = file_system_drives(qemu_command(lab))
    assert "ext4-1k-4m+200m-" in drive
    assert "/mnt-fs/wl-0\n" in workload_log(lab, "big")


def test_a_workload_that_needs_no_disk_gets_no_file_system_drive(lab, capsys, tmp_path):
    small = disk_workload(tmp_path, "small", 0)
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(small), *WALL)
    assert metric(report, "small.value")["values"]["a"]["median"] == 7
    assert "file_system" not in report["variants"][0]["runs"][0]["target"]["details"]
    command = qemu_command(lab)
    assert file_system_drives(command) == [] and not [w for w in kernel_words(command) if w.startswith("KL_FS")]


def test_under_icount_a_workload_that_needs_a_disk_is_not_run_and_says_why(lab, capsys, tmp_path):
    """No disk under icount (its I/O would end the determinism): the agent does not run the
    workload on the tmpfs for nothing, and its metrics say why, in the words of a metric's
    `modes`; the others run."""
    big, small = disk_workload(tmp_path, "big", 200), disk_workload(tmp_path, "small", 0)
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(big), "--workload", str(small),
                             "--mode", "icount")
    why = ("needs a disk for its files (needs.disk_mib = 200), which a guest gets in wall mode only (a disk's I/O "
           "completes in host time, which icount mode's determinism cannot have): in icount mode it is not run")
    assert metric(report, "big.value")["values"]["a"] == {"not_available": why}
    assert metric(report, "small.value")["values"]["a"]["median"] == 7
    status = {w["label"]: (w["status"], w["reason"]) for w in report["variants"][0]["runs"][0]["workloads"]}
    assert status == {"big": ("no_disk", why), "small": ("ok", "")}
    assert "-drive" not in qemu_command(lab)


def test_in_wall_mode_a_guest_without_the_disk_does_not_run_the_workload_and_says_why(tmp_path):
    """The agent's own reason (as file.* says it) when the file system did not mount."""
    big = resolve(str(disk_workload(tmp_path, "big", 200)))
    sink, ended = RecordingSink(), []
    reader = guest_workloads.Reader([big], "wall", sink, lambda *a: a, ended.append)
    for payload in ("seq=0 t=wl_begin w=0 name=big",
                    "seq=1 t=wl_end w=0 status=no_disk code=0 elapsed_ns=0 reason=kernel_has_no_ext4"):
        reader.record(parse(frame(payload)))
    why = ("needs a disk for its files (needs.disk_mib = 200), and the guest has no file system on one: "
           "kernel_has_no_ext4; not run on the tmpfs instead")
    assert sink.na == {"big.value": why}
    assert [(e.status, e.reason, e.elapsed_s) for e in ended] == [("no_disk", why, None)]


def test_a_disk_the_host_cannot_hold_is_one_line_before_any_build(lab, capsys, tmp_path, monkeypatch):
    """What a workload writes on its disk (snapshot=on) grows QEMU's overlay in $TMPDIR."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    huge = disk_workload(tmp_path, "huge", 1 << 40)   # an exbibyte
    _, err = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(huge), "--mode", "wall", expect=2)
    assert err.count("\n") == 1 and f"workload huge needs {1 << 40} MiB on its disk" in err, err
    assert f"QEMU keeps under {tmp_path}" in err and "or set TMPDIR to a directory with room" in err
    assert not (lab.cache / "artifacts").exists()


def test_a_workload_the_machine_has_no_room_for_is_not_available_and_the_next_runs(tmp_path, monkeypatch):
    """--target local: the free space under the agent's workdir (/tmp), by statvfs, before
    the workloads run; the workload that does not fit is n/a with why, the rest run."""
    real_statvfs = os.statvfs
    asked: list[str] = []

    def statvfs(path):
        found = real_statvfs(path)
        if str(path) != running.WORKDIR_PARENT:
            return found
        asked.append(str(path))
        return os.statvfs_result((4096, 4096, 1 << 20, 1 << 15, 50 * 256, *tuple(found)[5:]))   # 50 MiB free
    monkeypatch.setattr(os, "statvfs", statvfs)
    big, fits = disk_workload(tmp_path, "big", 100), disk_workload(tmp_path, "fits", 50)
    after = workload_file(tmp_path, "after", 'echo "value: $((1 + $1))"', command='["sh", "{workdir}/run.sh", "{n}"]')
    instances = compare.resolve_workloads([str(big), str(fits), f"{after}:n=41"])
    report = running_kernel_report(tmp_path, instances)
    assert asked == ["/tmp"]
    assert metric(report, "big.value")["values"]["running"] == {
        "not_available": "needs 100 MiB free under /tmp, the machine has 50 MiB"}
    assert metric(report, "fits.value")["values"]["running"]["median"] == 7
    assert metric(report, "after.value")["values"]["running"]["median"] == 42
    status = {w["label"]: (w["status"], w["reason"]) for w in report["variants"][0]["runs"][0]["workloads"]}
    assert status["big"] == ("not_run", "needs 100 MiB free under /tmp, the machine has 50 MiB")
    assert status["fits"][0] == status["after:n=41"][0] == "ok"


# -- needs.vcpus and needs.memory_mib: what a guest or a machine has -----------------------

def sized_workload(tmp_path: Path, name: str, needs: str) -> Path:
    """Prints its value; `needs`: the lines of its [needs] table."""
    return workload_file(tmp_path, name, 'echo "value: 7"', extra=f"[needs]\n{needs}\n")


def workload_status(report, variant: int = 0) -> dict[str, tuple[str, str]]:
    return {w["label"]: (w["status"], w["reason"]) for w in report["variants"][variant]["runs"][0]["workloads"]}


def test_a_workload_needing_more_vcpus_than_the_guest_is_not_run_until_the_variant_asks_for_them(
        lab, capsys, tmp_path, monkeypatch):
    """QEMU boots the variant as it says (one vCPU: the machine's -smp 1), never with more
    behind the user's back: the workload needing 2 is not run there, its metrics say why and
    how to ask; the next one runs. With vcpus:2 on the variant it runs. (The fake QEMU runs the
    agent on this machine, whose CPUs the agent counts too: two, as the tests' machines have.)"""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the fake guest's agent runs here, and this machine gives it one CPU")
    monkeypatch.setattr("os.cpu_count", lambda: 8)   # wall mode takes no more vCPUs than cores
    four, after = sized_workload(tmp_path, "four", "vcpus = 2"), sized_workload(tmp_path, "after", "")
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "b=tinyconfig+vcpus:2", "--workload", str(four),
                             "--workload", str(after), *WALL)
    why = "needs 2 vCPUs, the guest has 1: give the variant vcpus:2"
    assert metric(report, "four.value")["values"]["a"] == {"not_available": why}
    assert metric(report, "four.value")["values"]["b"]["median"] == 7
    assert metric(report, "after.value")["values"]["a"]["median"] == metric(report, "after.value")["values"]["b"][
        "median"] == 7
    assert workload_status(report, 0) == {"four": ("not_run", why), "after": ("ok", "")}
    assert workload_status(report, 1) == {"four": ("ok", ""), "after": ("ok", "")}
    # a's guest was booted as a asks, and its agent was not given the workload at all.
    assert [r["target"]["details"]["vcpus"] for v in report["variants"] for r in v["runs"]] == ["1", "2"]
    assert lab.main("log", str(report["variants"][0]["runs"][0]["id"])) == 0
    console = capsys.readouterr().out
    assert "name=after" in console and "name=four" not in console


def test_a_workload_needing_more_memory_than_the_guest_is_not_run_and_says_why(lab, capsys, tmp_path):
    """The guest's memory is the arch profile's -m (256M on x86_64): a need above it is n/a,
    one within it runs."""
    big = sized_workload(tmp_path, "big", "memory_mib = 512")
    fits = sized_workload(tmp_path, "fits", "memory_mib = 200")
    report, _ = compare_json(lab, capsys, "a=tinyconfig", "--workload", str(big), "--workload", str(fits),
                             "--mode", "icount")
    why = "needs 512 MiB of memory, the guest has 256 MiB"
    assert metric(report, "big.value")["values"]["a"] == {"not_available": why}
    assert metric(report, "fits.value")["values"]["a"]["median"] == 7
    assert workload_status(report) == {"big": ("not_run", why), "fits": ("ok", "")}
    command = qemu_command(lab)
    assert command[command.index("-m") + 1] == "256M"   # no memory given behind the user's back


def test_on_this_machine_the_cpus_it_may_use_and_its_memtotal_decide_what_runs(tmp_path, monkeypatch):
    """--target local: the CPUs of kernellab's affinity (what the agent's programs inherit)
    and /proc/meminfo's MemTotal; a workload needing more is n/a with why, the rest run."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemFree:         4096 kB\nMemTotal:        1048576 kB\nSwapTotal: 0 kB\n")
    monkeypatch.setattr(running, "MEMINFO", str(meminfo))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    two = sized_workload(tmp_path, "two", "vcpus = 2")
    big = sized_workload(tmp_path, "big", "memory_mib = 2048\nvcpus = 3")
    fits = sized_workload(tmp_path, "fits", "memory_mib = 1024")
    report = running_kernel_report(tmp_path, compare.resolve_workloads([str(two), str(big), str(fits)]))
    na = {"two": "needs 2 vCPUs, the machine has 1",
          "big": "needs 3 vCPUs, the machine has 1; needs 2048 MiB of memory, the machine has 1024 MiB"}
    for label, why in na.items():
        assert metric(report, f"{label}.value")["values"]["running"] == {"not_available": why}
    assert metric(report, "fits.value")["values"]["running"]["median"] == 7
    assert workload_status(report) == {"two": ("not_run", na["two"]), "big": ("not_run", na["big"]),
                                       "fits": ("ok", "")}


def test_this_machines_meminfo_without_memtotal_is_one_line(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemFree: 4096 kB\n")
    monkeypatch.setattr(running, "MEMINFO", str(meminfo))
    with pytest.raises(LabError, match="cannot read the CPUs and memory of this machine") as err:
        running.RunningTarget(running.LocalShell(), "local").capacity()
    assert "\n" not in str(err.value)


# -- the records and the reader ---------------------------------------------------------

def test_workload_records_are_checked_like_the_agents_own():
    assert parse(frame("seq=1 t=wl_out w=0 data=a%20b%0A")).fields == {"w": "0", "data": "a%20b%0A"}
    no_disk = parse(frame("seq=1 t=wl_end w=0 status=no_disk code=0 elapsed_ns=0 reason=mount_failed_errno_22"))
    assert no_disk.fields["reason"] == "mount_failed_errno_22"
    for bad in ("seq=1 t=wl_out w=0 data=50%", "seq=1 t=wl_end w=0 status=fine code=0 elapsed_ns=1",
                "seq=1 t=wl_begin w=x name=a", "seq=1 t=wl_end w=0 status=ok code=0",
                "seq=1 t=wl_end w=0 status=no_disk code=0 elapsed_ns=0",   # why not: missing
                "seq=1 t=wl_end w=0 status=ok code=0 elapsed_ns=0 reason=x",   # only no_disk has one
                "seq=1 t=wl_end w=0 status=no_disk code=0 elapsed_ns=0 reason=a%20b"):
        with pytest.raises(InvalidRecord):
            parse(frame(bad))


def test_the_reader_joins_the_pieces_and_tells_what_never_ended(tmp_path):
    own = resolve(str(workload_file(tmp_path, "own", "")))
    other = resolve(str(workload_file(tmp_path, "other", "")))
    sink, ended = RecordingSink(), []
    reader = guest_workloads.Reader([own, other], "icount", sink, lambda *a: a, ended.append)
    for payload in ("seq=0 t=wl_begin w=0 name=own", "seq=1 t=wl_out w=0 data=val",
                    "seq=2 t=wl_out w=0 data=ue:%2012%0A",
                    "seq=3 t=wl_end w=0 status=ok code=0 elapsed_ns=1500000000", "seq=4 t=wl_begin w=1 name=other",
                    "seq=5 t=wl_out w=1 data=partial"):
        reader.record(parse(frame(payload)))
    reader.finish("timeout")
    assert sink.samples == {"own.value": 12.0}
    assert sink.na == {"other.value": "the run ended before workload other did (timeout)"}
    assert [(e.status, e.elapsed_s, e.output) for e in ended] == [("ok", 1.5, "value: 12\n"),
                                                                  ("not_run", None, "partial")]


def test_server_records_are_checked_and_kept_apart_from_the_clients_output(tmp_path):
    """t=wl_srv carries the server's output: checked like wl_out, never parsed with the
    client's, and in the run's log after it; a server's failure is the workload's reason."""
    assert parse(frame("seq=1 t=wl_srv w=0 data=ready%0A")).fields == {"w": "0", "data": "ready%0A"}
    assert parse(frame("seq=1 t=wl_end w=0 status=server_died code=265 elapsed_ns=5")).fields["status"] == \
        "server_died"
    for bad in ("seq=1 t=wl_srv w=0 data=50%", "seq=1 t=wl_srv w=0", "seq=1 t=wl_end w=0 status=server_gone "
                "code=0 elapsed_ns=1"):
        with pytest.raises(InvalidRecord):
            parse(frame(bad))
    served = resolve(str(workload_file(tmp_path, "served", "", server=SERVER)))
    killed = resolve(str(workload_file(tmp_path, "killed", "", server=SERVER)))
    late = resolve(str(workload_file(tmp_path, "late", "", server=SERVER)))
    sink, ended = RecordingSink(), []
    reader = guest_workloads.Reader([served, killed, late], "icount", sink, lambda *a: a, ended.append)
    for payload in ("seq=0 t=wl_begin w=0 name=served", "seq=1 t=wl_srv w=0 data=value:%201%0Aready%0A",
                    "seq=2 t=wl_out w=0 data=value:%2012", "seq=3 t=wl_srv w=0 data=bye%0A",
                    "seq=4 t=wl_end w=0 status=ok code=0 elapsed_ns=2000000000",
                    "seq=5 t=wl_begin w=1 name=killed", "seq=6 t=wl_srv w=1 data=oops%0A",
                    "seq=7 t=wl_end w=1 status=server_failed code=265 elapsed_ns=0",
                    "seq=8 t=wl_begin w=2 name=late", "seq=9 t=wl_srv w=2 data=starting%0A"):
        reader.record(parse(frame(payload)))
    reader.finish("timeout")
    assert sink.samples == {"served.value": 12.0}   # the server's "value: 1" is not read
    assert sink.na == {
        "killed.value": "the server sh was killed by signal 9 before it was ready (its output is in the run's log)",
        "late.value": "the run ended before workload late did (timeout)"}
    heading = "--- the server's output (sh) ---\n"
    assert [(e.status, e.output) for e in ended] == [
        ("ok", f"value: 12\n{heading}value: 1\nready\nbye\n"), ("server_failed", f"{heading}oops\n"),
        ("not_run", f"{heading}starting\n")]


def test_the_agents_file_carries_the_server_and_how_it_is_ready():
    redis, nginx = resolve("redis:requests=2000"), resolve("nginx")
    words = guest_workloads.encode([redis, nginx]).split(b"\0")
    assert words[:2] == [b"kernellab-workloads 5", b"2"]
    start = words.index(b"redis-server")
    assert words[start - 1] == b"11"    # its argv's length, "" for --save among them
    assert words[start + 11:start + 16] == [b"line", b"Ready to accept connections", b"30000", b"TERM",
                                            str(round(Server.stop_grace_s * 1000)).encode()]
    start = len(words) - 1 - words[::-1].index(b"nginx")   # the server's argv[0], after its label and files
    assert words[start + 7:start + 10] == [b"port", b"8080", b"30000"]


def test_the_agents_file_says_which_workloads_need_a_disk(tmp_path):
    """After each workload's label and timeout: 1 if it needs a disk, else 0 (agent/workload.c);
    then 0: its client is not the host's; then the vCPUs (1) and MiB (0: any) it needs."""
    big, small = resolve(str(disk_workload(tmp_path, "big", 200))), resolve(str(disk_workload(tmp_path, "small", 0)))
    words = guest_workloads.encode([big, small]).split(b"\0")
    assert words[2:9] == [b"big", b"30000", b"1", b"0", b"1", b"0", b"stdout"]
    at = words.index(b"small")
    assert words[at:at + 7] == [b"small", b"30000", b"0", b"0", b"1", b"0", b"stdout"]


def test_the_catalog_describes_registered_workload_metrics(tmp_path):
    inst = resolve("fio:rw=randread")
    with catalog.command_scope():
        guest_workloads.register([inst])
        iops = catalog.describe("fio.randread_iops", "")
        assert (iops.source, iops.group, iops.better) == ("workload", "workload", "higher")
        assert not catalog.describe("fio.randread_clat_p99", "").valid_in("icount")
        assert catalog.groups()[-1] == "workload"
        assert catalog.sort_key("fio.randread_iops") > catalog.sort_key("syscall.null")
    assert catalog.describe("fio.randread_iops", "").group == "other"   # the scope's own


def test_a_commands_workload_metrics_are_gone_when_it_ends(lab, capsys):
    """Registered for the command that runs the workload, not for the process: the next
    command in it (a test's, a Dask worker's, a library user's) knows only its own."""
    assert lab.main("metrics", "--workload", "hackbench", "--format", "json") == 0
    named = [r["name"] for r in json.loads(capsys.readouterr().out) if r["name"].startswith("hackbench.")]
    assert named
    assert lab.main("metrics", "--format", "json") == 0
    assert not [r for r in json.loads(capsys.readouterr().out) if r["name"].startswith("hackbench.")]
    assert catalog.describe(named[0], "").group == "other"
    # Named without its workload, as in a fresh process: unknown, before anything is built.
    assert lab.main("compare", "a=tinyconfig", "--metric", named[0]) == 2
    assert f"--metric: unknown metric {named[0]!r}" in capsys.readouterr().err
    assert not lab.store.exists() or lab.runs() == []


def test_a_store_of_schema_3_gains_the_workloads_table(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE workloads")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION and store.run_workloads(1) == []


# -- a real guest -----------------------------------------------------------------------

SPIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct timespec a, b;
	volatile unsigned long x = 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		x += (unsigned long)i * 2654435761u;
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("loops: %ld\nns per loop: %.3f\n", n,
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
"""

SPIN_TOML = """name = "cspin"
description = "a static C loop of N iterations, timed by itself"
packages = []
binaries = ["cspin"]
command = ["cspin", "{loops}"]
fixed_work = true
why = "a fixed number of loop iterations"

[run]
iterations = "loops"
timeout_s = 60

[output]
format = "text"

[params.loops]
default = "2000000"
pattern = '[1-9][0-9]{0,8}'
help = "iterations of the loop"

[[metric]]
name = "loop_time"
unit = "ns"
better = "lower"
regex = '^ns per loop: ([0-9.]+)$'
"""


@pytest.mark.integration
def test_a_static_program_in_a_lab_minimal_guest_under_icount_twice_is_identical(minimal, store, tmp_path):
    from kernellab.agent.compile import cross_targets
    from kernellab.experiments import lab
    from kernellab.report.model import VariantRecord, build_report

    prepared, build = minimal
    cc = cross_targets()["x86_64"].cc
    assert shutil.which(cc), cc
    (tmp_path / "cspin.c").write_text(SPIN_C)
    subprocess.run([cc, "-static", "-O1", "-o", str(tmp_path / "cspin"), str(tmp_path / "cspin.c")], check=True)
    (tmp_path / "cspin.toml").write_text(SPIN_TOML)
    instances = compare.resolve_workloads([str(tmp_path / "cspin.toml")])
    options = lab.RunOptions(mode="icount", timeout_s=300, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=3",
                             workloads=instances)
    record = VariantRecord(prepared, build)
    for _ in range(2):
        outcome = lab.run(prepared, build, store, options)
        assert outcome.status == "ok", outcome.reason
        record.runs.append(outcome)
    values = [store.run_metrics(o.run_id)["cspin.loop_time"] for o in record.runs]
    assert values[0] == values[1] and values[0][0] > 0
    report = build_report("cspin", "", [record], store, "icount")
    [run, _] = report["variants"][0]["runs"]
    assert run["workloads"][0]["status"] == "ok"
    assert run["workloads"][0]["provenance"]["argv"] == ["cspin", "2000000"]


@pytest.mark.integration
def test_debians_hackbench_runs_in_a_lab_minimal_guest_from_its_userland_twice_identical(minimal, store):
    """A shipped workload from Debian's packages (rt-tests' hackbench, x86_64): its userland
    is assembled, appended to the agent's initramfs, and the guest runs it; under icount a
    fixed amount of work gives the same figure twice."""
    from kernellab.experiments import lab

    prepared, build = minimal
    instances = compare.resolve_workloads(["hackbench:groups=1,loops=10"])
    options = lab.RunOptions(mode="icount", timeout_s=600, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=3",
                             workloads=instances)
    initrd = lab.initramfs_for(prepared, instances)
    assert initrd != lab.initramfs_for(prepared)   # the userland's segment is in it
    values = []
    for _ in range(2):
        outcome = lab.run(prepared, build, store, options)
        assert outcome.status == "ok", outcome.reason
        (row,) = store.run_workloads(outcome.run_id)
        assert row["status"] == "ok", row
        values.append(store.run_metrics(outcome.run_id)["hackbench.process_socket_time"])
    assert values[0] == values[1] and values[0][0] > 0, values


@pytest.mark.integration
def test_servers_from_debian_in_a_lab_minimal_guest_twice_identical_or_what_they_need(minimal, store):
    """Two server workloads in one lab-minimal boot under icount, twice: iperf3 (its server,
    then its client, over loopback) gives the same figures both times; redis-server needs
    epoll, which lab-minimal lacks: it exits before it is ready, its metrics say "needs
    CONFIG_EPOLL" and its own words are in the run's log."""
    from kernellab.experiments import lab

    prepared, build = minimal
    instances = compare.resolve_workloads(["iperf3:bytes=4M", "redis:requests=2000"])
    guest_workloads.check(instances)
    guest_workloads.register(instances)
    options = lab.RunOptions(mode="icount", timeout_s=600, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=3",
                             workloads=instances)
    figures = []
    for _ in range(2):
        outcome = lab.run(prepared, build, store, options)
        assert outcome.status == "ok", outcome.reason
        iperf3, redis = store.run_workloads(outcome.run_id)
        assert iperf3["status"] == "ok", iperf3
        assert redis["status"] == "server_failed", redis
        metrics = store.run_metrics(outcome.run_id)
        figures.append((metrics["iperf3.sent_bw"], metrics["iperf3.received_bw"]))
        assert "redis.get_rps" not in metrics
        log = store.run_log(outcome.run_id, "workload redis:requests=2000")
        assert "--- the server's output (redis-server) ---" in log and "Failed creating the event loop" in log
        assert "Server listening on 5201" in store.run_log(outcome.run_id, "workload iperf3:bytes=4M")
    assert figures[0] == figures[1] and figures[0][0][0] > 0, figures
    unavailable = dict(sqlite3.connect(store.path).execute(
        "SELECT metric, reason FROM unavailable WHERE run_id = ?", (outcome.run_id,)))
    assert unavailable["redis.get_rps"] == "needs CONFIG_EPOLL"


def test_a_guest_whose_initramfs_did_not_unpack_says_so_in_each_failed_workloads_reason(tmp_path):
    """The kernel goes on without the files of an initramfs it could not unpack (a userland
    too large for the guest's memory): a workload that then fails says why its program may be
    missing, instead of a bare exit status 127; one that ran is kept."""
    from kernellab.guest.session import Session
    from labfakes import BOOT, FakeConsole, ListSink, agent_lines

    own = resolve(str(workload_file(tmp_path, "own", "")))
    other = resolve(str(workload_file(tmp_path, "other", "")))
    sink, ended = RecordingSink(), []
    reader = guest_workloads.Reader([own, other], "icount", sink, lambda *a: a, ended.append)
    lines = agent_lines({"syscall.null": [200.0]}, end=False)
    workload_records = [frame(f"seq={len(lines) + i} {p}") for i, p in enumerate((
        "t=wl_begin w=0 name=own", "t=wl_out w=0 data=value:%207%0A", "t=wl_end w=0 status=ok code=0 elapsed_ns=1",
        "t=wl_begin w=1 name=other", "t=wl_end w=1 status=exit code=127 elapsed_ns=1"))]
    end = frame(f"seq={len(lines) + 5} t=end records={len(lines) + 5}")
    script = [BOOT[0], "[    0.3] Initramfs unpacking failed: write error", *BOOT[1:], *lines, *workload_records, end]
    result = Session(ListSink(), workloads=reader).read(FakeConsole(script))
    assert result.status == "ok"
    assert sink.samples == {"own.value": 7.0}
    assert sink.na["other.value"] == ("sh exited with status 127 (its output is in the run's log); the kernel could "
                                      "not unpack all of the initramfs (write error), so the workloads' programs may "
                                      "be missing in the guest")


def test_a_guest_gets_the_memory_its_initramfs_needs_and_no_more(tmp_path):
    """A workloads' userland (tens of MiB) gets room to unpack: the machine's memory plus four
    times the image, in 64 MiB steps; the agent's own initramfs keeps the arch's 256 MiB, so
    the default experiment's memory rows do not move."""
    from kernellab import arches
    from kernellab.targets.qemu import QemuTarget, memory_mib

    assert memory_mib(256, 3 << 20) == 256
    assert memory_mib(256, 16 << 20) == 256          # 64 MiB of room: a quarter, still fits
    assert memory_mib(256, 47 << 20) == 256 + 192    # 188 MiB of room
    target = QemuTarget(arches.load("x86_64"))
    small, large = tmp_path / "agent.cpio", tmp_path / "userland.cpio"
    small.write_bytes(b"0" * (2 << 20))
    with large.open("wb") as f:
        f.truncate(47 << 20)
    memory = [argv[argv.index("-m") + 1] for argv in (target.command(tmp_path / "bzImage", i, "", "icount")
                                                      for i in (small, large))]
    assert memory == ["256M", "448M"]


def test_a_missing_program_on_a_machine_not_debians_names_its_own_package_manager_too(tmp_path):
    """A remote that is not Debian (os-release: no debian in ID or ID_LIKE) is told Debian's
    package name and to find its like with its own package manager."""
    own = resolve(str(workload_file(tmp_path, "own", "")))
    for debian, said in ((True, "sh is not installed on ssh://nas: install Debian's dash"),
                         (False, "sh is not installed on ssh://nas: install Debian's dash, or its like with "
                                 "ssh://nas's own package manager")):
        sink = RecordingSink()
        reader = guest_workloads.Reader([own], "wall", sink, lambda *a: a, lambda e: None, "ssh://nas", debian=debian)
        for payload in ("seq=0 t=wl_begin w=0 name=own", "seq=1 t=wl_end w=0 status=exec_failed code=2 elapsed_ns=1"):
            reader.record(parse(frame(payload)))
        assert sink.na == {"own.value": said}
