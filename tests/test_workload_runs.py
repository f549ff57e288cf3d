"""A workload run end to end: `compare --workload SPEC`, the agent running the program
(agent/workload.c), its output framed into records, reassembled, parsed and stored as
WORKLOAD.METRIC samples with their provenance, or marked not available with the reason.

The fake lab's QEMU runs the real agent on the host when the initramfs holds workloads
(tests/fakes/qemu), so these tests run the agent's own code for the programs; the
integration test at the end runs a static program in a real lab-minimal guest.
"""

import dataclasses
import json
import shutil
import socket
import sqlite3
import subprocess
from pathlib import Path

import jsonschema
import pytest

from fakes import compare_json
from kernellab.experiments import compare
from kernellab.experiments.placement import Placement
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.guest import workloads as guest_workloads
from kernellab.guest.records import InvalidRecord, frame, parse
from kernellab.metrics import catalog
from kernellab.store import SCHEMA_VERSION, Store
from kernellab.targets import TargetOptions
from kernellab.workloads import Server, resolve
from workloadfiles import workload_file

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
    ("traffic from the host, which QEMU's guest has no link for", ("--workload", "{net}", "--mode", "wall"),
     "talks to the host over a network link, which --target qemu does not give: run it in wall mode on "
     "--target local or --target ssh://HOST"),
    ("an unknown workload", ("--workload", "nosuch"), "no workload 'nosuch'"),
    ("a bad parameter", ("--workload", "fio:rw=sideways"), "workload fio: rw= 'sideways' is not one of"),
])
def test_what_cannot_run_is_refused_in_one_line_before_any_build(lab, capsys, tmp_path, why, args, says):
    own = workload_file(tmp_path, "own", 'echo "value: $1"', command='["sh", "{workdir}/run.sh", "{n}"]')
    net = workload_file(tmp_path, "net", 'echo "value: 1"', extra='[needs]\nnetwork = "host"\n')
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


# -- the records and the reader ---------------------------------------------------------

def test_workload_records_are_checked_like_the_agents_own():
    assert parse(frame("seq=1 t=wl_out w=0 data=a%20b%0A")).fields == {"w": "0", "data": "a%20b%0A"}
    for bad in ("seq=1 t=wl_out w=0 data=50%", "seq=1 t=wl_end w=0 status=fine code=0 elapsed_ns=1",
                "seq=1 t=wl_begin w=x name=a", "seq=1 t=wl_end w=0 status=ok code=0"):
        with pytest.raises(InvalidRecord):
            parse(frame(bad))


class _Sink:
    def __init__(self):
        self.samples, self.na = {}, {}

    def sample(self, s):
        self.samples[s[0]] = s[2]

    def unavailable(self, metric, reason):
        self.na[metric] = reason


def test_the_reader_joins_the_pieces_and_tells_what_never_ended(tmp_path):
    own = resolve(str(workload_file(tmp_path, "own", "")))
    other = resolve(str(workload_file(tmp_path, "other", "")))
    sink, ended = _Sink(), []
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
    sink, ended = _Sink(), []
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
    assert words[:2] == [b"kernellab-workloads 2", b"2"]
    start = words.index(b"redis-server")
    assert words[start - 1] == b"11"    # its argv's length, "" for --save among them
    assert words[start + 11:start + 16] == [b"line", b"Ready to accept connections", b"30000", b"TERM",
                                            str(round(Server.stop_grace_s * 1000)).encode()]
    start = len(words) - 1 - words[::-1].index(b"nginx")   # the server's argv[0], after its label and files
    assert words[start + 7:start + 10] == [b"port", b"8080", b"30000"]


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
    sink, ended = _Sink(), []
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
        sink = _Sink()
        reader = guest_workloads.Reader([own], "wall", sink, lambda *a: a, lambda e: None, "ssh://nas", debian=debian)
        for payload in ("seq=0 t=wl_begin w=0 name=own", "seq=1 t=wl_end w=0 status=exec_failed code=2 elapsed_ns=1"):
            reader.record(parse(frame(payload)))
        assert sink.na == {"own.value": said}
