"""compare on a Dask cluster, on the fake lab: the same figures as the local lab, the client
alone writing the store, and a worker killed mid-boot costing a lost run and nothing more."""

import contextlib
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from fakes import LAB_ENVIRONMENT, lab_fixture, point_worker
from faults.test_kill import Kernellab, children, group_alive, query, wait_for

distributed = pytest.importorskip("distributed")


TESTS = os.path.dirname(os.path.abspath(__file__))


def _start_cluster(workers=2):
    """Worker processes on this host (two), which can import the tests' fakes."""
    local = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(local)
    client.run(sys.path.insert, 0, TESTS)
    return local, client


@lab_fixture(scope="module")
def shared_cluster():
    """One cluster for the module's tests that neither kill a worker nor leave anything in
    its environment: starting one costs seconds of CPU."""
    local, client = _start_cluster()
    yield local, client
    client.close()
    local.close()


def _point_workers(client, lab):
    client.run(point_worker, {name: os.environ.get(name) for name in LAB_ENVIRONMENT}, os.getcwd(), str(lab.qemu))


@pytest.fixture
def cluster(lab, shared_cluster):
    """The module's workers, booting this test's fake QEMU with its fake lab's cache."""
    _point_workers(shared_cluster[1], lab)
    return shared_cluster


@pytest.fixture
def own_cluster(lab):
    """A cluster of this test's own: for a test that kills a worker or sets its environment."""
    local, client = _start_cluster()
    _point_workers(client, lab)
    yield local, client
    client.close()
    local.close()


def values(lab, name):
    return sorted(query(lab.store, "SELECT s.metric, s.rep, s.value FROM samples s JOIN runs r ON r.id = s.run_id"
                                   " JOIN variants v ON v.id = r.variant_id WHERE v.name = ? AND s.seq IS NOT NULL"
                                   " AND r.status = 'ok'", name))


def test_icount_figures_from_the_cluster_are_the_local_ones(lab, capsys, cluster, tmp_path):
    local, _ = cluster
    variants = ["a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y"]
    assert lab.main("compare", *variants, "--cluster", local.scheduler_address) == 0
    remote = {name: values(lab, name) for name in "ab"}
    assert all(remote.values()) and remote["a"] != remote["b"]
    capsys.readouterr()
    # The cluster's store set aside, the same comparison measured by the local lab.
    with sqlite3.connect(lab.store) as db, sqlite3.connect(tmp_path / "remote.sqlite") as copy:
        db.backup(copy)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{lab.store}{suffix}").unlink(missing_ok=True)
    assert lab.main("compare", *variants) == 0
    assert {name: values(lab, name) for name in "ab"} == remote
    assert query(tmp_path / "remote.sqlite", "SELECT count(*) FROM (SELECT 1 FROM samples WHERE seq IS NOT NULL"
                                             " GROUP BY run_id, seq HAVING count(*) > 1)") == [(0,)]


def test_a_worker_killed_mid_boot_costs_a_lost_run_and_the_task_runs_again(lab, own_cluster, tmp_path):
    local, client = own_cluster
    kl = Kernellab(lab)
    # The first guest hangs after 5 samples: its worker is then killed, mid-boot. (QEMU runs
    # on the workers: the setting goes to their environment.)
    client.run(os.environ.__setitem__, "FAKE_QEMU_HANG_AFTER", f"5:{tmp_path / 'hung-once'}")
    started = kl.start("compare", "a=tinyconfig", "--cluster", local.scheduler_address)
    wait_for(lambda: (tmp_path / "hung-once").exists() and
             len(query(lab.store, "SELECT 1 FROM samples WHERE seq IS NOT NULL")) >= 5, "the hung guest's samples")
    [qemu] = wait_for(lambda: [c for c in children(lab) if "boot" in c["what"]], "the hung QEMU")
    worker_pids = set(client.run(os.getpid).values())
    assert qemu["owner"] in worker_pids          # a worker boots it, not the client
    os.kill(qemu["owner"], signal.SIGKILL)
    try:
        out, err = started.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(qemu["pgid"], signal.SIGKILL)   # should the test fail before it is reaped
    assert started.returncode == 0, err
    # The dead worker's QEMU was stopped by the next task on this machine (kernellab.reaper).
    wait_for(lambda: not group_alive(qemu["pgid"]), "the lost boot's QEMU reaped", timeout=10)
    runs = query(lab.store, "SELECT id, status, reason FROM runs ORDER BY id")
    assert [r[1] for r in runs] == ["lost", "ok"]
    assert "its Dask worker was lost mid-run" in runs[0][2]
    lost = query(lab.store, "SELECT seq FROM samples WHERE run_id = ? AND seq IS NOT NULL", runs[0][0])
    assert len(lost) >= 5 and len(lost) == len(set(lost))    # what arrived before the loss, once
    assert f"run {runs[0][0]} lost with its worker; measured again" in err


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "scheduler.example.org:8786"])
def test_a_scheduler_on_another_host_is_reached_only_over_tls(address):
    from kernellab.errors import LabError
    from kernellab.experiments.executor import _check_address
    with pytest.raises(LabError, match="only over TLS"):
        _check_address(address)
    _check_address("tls://scheduler.example.org:8786")
    _check_address("tcp://127.0.0.1:8786")


def test_an_unreachable_scheduler_is_one_line(lab, capsys, monkeypatch):
    # A refused connection is tried again until the client's timeout (kernellab's 10 s):
    # one second says the same here.
    real = distributed.Client
    monkeypatch.setattr(distributed, "Client", lambda address, timeout: real(address, timeout="1s"))
    assert lab.main("compare", "a=tinyconfig", "--cluster", "tcp://127.0.0.1:9") == 2
    err = capsys.readouterr().err
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err and "Traceback" not in err


def test_a_study_on_the_cluster_concludes_as_locally_and_resumes_from_the_store(lab, capsys, cluster):
    from test_study import run_study, study_file
    local, _ = cluster
    path = study_file(lab)
    remote, _ = run_study(lab, capsys, path, "--quick", "--cluster", local.scheduler_address)
    again, err = run_study(lab, capsys, path, "--quick", "--cluster", local.scheduler_address)
    assert "earlier run(s) taken from the store" in err
    assert again["summary"] == remote["summary"]
    runs = query(lab.store, "SELECT count(*) FROM runs")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{lab.store}{suffix}").unlink(missing_ok=True)
    here, _ = run_study(lab, capsys, path, "--quick")
    assert here["summary"] == remote["summary"] and runs == [(len(here["reports"]["x86_64"]["variants"]),)]


def _fresh_store(lab):
    for suffix in ("", "-wal", "-shm"):
        Path(f"{lab.store}{suffix}").unlink(missing_ok=True)


def _once_per_record(lab):
    return query(lab.store, "SELECT count(*) FROM (SELECT 1 FROM samples WHERE seq IS NOT NULL"
                            " GROUP BY run_id, seq HAVING count(*) > 1)") == [(0,)]


def test_a_sweep_on_the_cluster_flips_at_once_and_ranks_as_the_local_one(lab, capsys, cluster):
    import json
    local, _ = cluster
    args = ("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "DEBUG_LIST,DEBUG_ATOMIC_SLEEP,FAKE_SLOW",
            "--metric", "syscall.null", "--format", "json")
    assert lab.main(*args, "--cluster", local.scheduler_address) == 0
    remote = json.loads(capsys.readouterr().out)
    assert _once_per_record(lab)
    assert (remote["builds"], remote["boots"]) == (4, 4)
    _fresh_store(lab)
    assert lab.main(*args) == 0
    here = json.loads(capsys.readouterr().out)

    def effects(result):
        return sorted((f["option"], f["value"], f["effects"]["syscall.null"]["delta_pct"]) for f in result["flips"])
    assert effects(remote) == effects(here) and remote["baseline"] == here["baseline"]
    assert ("CONFIG_FAKE_SLOW", "y", pytest.approx(25.0)) in effects(remote)
    # The blast radius was read on a worker, from the tree that built the baseline.
    assert [f["option"] for f in remote["flips"]] == ["CONFIG_FAKE_SLOW", "CONFIG_DEBUG_ATOMIC_SLEEP",
                                                       "CONFIG_DEBUG_LIST"]


def _shown(lab, capsys, result):
    """`kernellab show` of a result written as a file."""
    import json
    path = lab.tmp / "shown.json"
    path.write_text(json.dumps(result))
    assert lab.main("show", str(path)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_a_bisect_on_the_cluster_probes_as_the_local_one_and_confirms_its_culprit(lab, capsys, cluster):
    import json

    from test_fake_lab import BAD
    local, _ = cluster
    args = ("bisect", "good=tinyconfig", BAD, "--metric", "syscall.null", "--format", "json")
    assert lab.main(*args) == 0
    here = json.loads(capsys.readouterr().out)
    _fresh_store(lab)
    assert lab.main(*args, "--cluster", local.scheduler_address) == 0
    remote = json.loads(capsys.readouterr().out)
    assert _once_per_record(lab)
    assert [(c["option"], c["value"]) for c in remote["culprits"]] == [("CONFIG_FAKE_SLOW", "y")]
    assert remote["confirmation"]["each"]["CONFIG_FAKE_SLOW"]["verdict"] == "different"

    def probes(result):
        return [(p["label"], p["value"]) for p in result["probes"]]
    # The cluster's two workers measured ahead the halving after the first that the search
    # would take had the culprit been in the second half; this machine's, one probe a
    # round, never asked for it (the culprit is in the first).
    taken = [p for p in probes(remote) if p in probes(here)]
    assert taken == probes(here) and remote["culprits"] == here["culprits"]
    [unused] = [label for label, _ in probes(remote) if label not in dict(probes(here))]
    # That probe is marked and counted apart; those the search asked for are not.
    assert [p["label"] for p in remote["probes"] if p["ahead"]] == [unused]
    assert not any(p["ahead"] for p in here["probes"])
    shown = _shown(lab, capsys, remote)
    assert f"{len(remote['probes'])} probe(s) (1 of them measured ahead on idle workers and not needed)" in shown
    assert [line.split()[0] for line in shown.splitlines() if line.endswith("measured ahead, not needed")] == [unused]
    # A result written before probes were marked (format 1) is still shown, with no count.
    old = {**remote, "format_version": 1, "probes": [{k: v for k, v in p.items() if k != "ahead"}
                                                     for p in remote["probes"]]}
    shown = _shown(lab, capsys, old)
    assert f"{len(remote['probes'])} probe(s), " in shown and "measured ahead" not in shown
    # The kernels this machine built are the cluster's (the workers share its cache here).
    assert remote["boots"] == here["boots"] + 1 and here["builds"] > 0 == remote["builds"] - 1
    # That probe is in the store, built and measured: the same bisect again takes every
    # probe from it.
    assert query(lab.store, "SELECT count(*) FROM runs r JOIN variants v ON v.id = r.variant_id "
                            "WHERE v.name = ? AND r.status = 'ok'", f"probe:{unused}") == [(1,)]
    assert lab.main(*args, "--cluster", local.scheduler_address) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["builds"], again["boots"]) == (0, 0) and probes(again) == probes(remote)
    assert [p["ahead"] for p in again["probes"]] == [p["ahead"] for p in remote["probes"]]


# A bisect whose culprit (SLUB_DEBUG_ON: forks 20% slower) is three halvings deep among options
# that each move fork+exit less than the threshold, or not at all (defconfig has DEBUG_KERNEL).
DEEP = ("bisect", "good=defconfig", "bad=defconfig+CONFIG_DEBUG_LIST=y+CONFIG_DEBUG_ATOMIC_SLEEP=y"
        "+CONFIG_FAKE_LAYOUT_1=y+CONFIG_FAKE_DATA_KB=16+CONFIG_FAKE_BSS_KB=32+CONFIG_SLUB_DEBUG_ON=y",
        "--metric", "proc.fork_exit", "--format", "json")


def _rounds(monkeypatch):
    """The rounds a search asks of its prober, on this machine or a cluster: the labels of
    the probes of each, which a cluster builds and boots at once."""
    from kernellab.experiments import cluster_probe, probe
    rounds = []
    for cls in (probe.Prober, cluster_probe.ClusterProber):
        def recording(self, asks, *args, _real=cls.probe_all, **kwargs):
            rounds.append([label for label, _ in asks])
            return _real(self, asks, *args, **kwargs)
        monkeypatch.setattr(cls, "probe_all", recording)
    return rounds


def test_idle_workers_measure_the_next_halvings_ahead_and_one_worker_measures_nothing_ahead(lab, capsys, cluster,
                                                                                            monkeypatch):
    import json

    def bisect(*where):
        _fresh_store(lab)
        rounds.clear()
        assert lab.main(*DEEP, *where) == 0
        return json.loads(capsys.readouterr().out), list(rounds)

    def probes(result):
        return [(p["label"], p["value"]) for p in result["probes"]]
    rounds = _rounds(monkeypatch)
    here, serial = bisect()
    assert [(c["option"], c["value"]) for c in here["culprits"]] == [("CONFIG_SLUB_DEBUG_ON", "y")]
    halvings = [r for r in serial if r[0][0].isdigit()]     # labelled BASE+HALF@...
    assert len(halvings) >= 3 and all(len(r) == 1 for r in halvings)

    # Two workers: a halving's round holds the halvings after it, whichever way its verdict
    # goes; the one the verdict picks costs no round of its own.
    remote, ahead_rounds = bisect("--cluster", cluster[0].scheduler_address)
    assert remote["culprits"] == here["culprits"] and _once_per_record(lab)
    assert len(ahead_rounds) < len(serial)
    first = next(r for r in ahead_rounds if r[0][0].isdigit())
    assert first[0] == halvings[0][0] and set(first[1:]) >= {halvings[1][0]}
    assert [p for p in probes(remote) if p in probes(here)] == probes(here)
    # A probe measured ahead that the search then asked for (the second halving's, in the
    # first's round) is used like any other: not marked; only those never asked for are.
    ahead = {p["label"]: p["ahead"] for p in remote["probes"]}
    assert ahead[halvings[1][0]] is False and not any(p["ahead"] for p in here["probes"])
    assert {label for label, marked in ahead.items() if marked} == set(ahead) - set(dict(probes(here)))
    # One worker: no worker is idle, so the search goes as on this machine, round for round.
    local, client = _start_cluster(workers=1)
    try:
        _point_workers(client, lab)
        one, one_rounds = bisect("--cluster", local.scheduler_address)
    finally:
        client.close()
        local.close()
    assert one_rounds == serial and probes(one) == probes(here) and not any(p["ahead"] for p in one["probes"])


def test_in_wall_mode_a_lost_boot_worker_stops_the_experiment_with_one_line(lab, own_cluster, tmp_path):
    """Wall-mode boots all run on one worker, to compare fairly: when it dies they cannot
    go on elsewhere, so the command stops, its runs marked lost, what finished kept."""
    local, client = own_cluster
    kl = Kernellab(lab)
    client.run(os.environ.__setitem__, "FAKE_QEMU_HANG_AFTER", f"5:{tmp_path / 'hung-once'}")
    started = kl.start("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--mode", "wall",
                       "--runs", "2", "--cluster", local.scheduler_address)
    wait_for(lambda: (tmp_path / "hung-once").exists() and
             len(query(lab.store, "SELECT 1 FROM samples WHERE seq IS NOT NULL")) >= 5, "the hung guest's samples")
    [qemu] = wait_for(lambda: [c for c in children(lab) if "boot" in c["what"]], "the hung QEMU")
    os.kill(qemu["owner"], signal.SIGKILL)
    try:
        out, err = started.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(qemu["pgid"], signal.SIGKILL)
    assert started.returncode == 1, err
    [line] = [x for x in err.splitlines() if x.startswith("kernellab: error:")]
    assert "which boots every wall-mode run of this experiment" in line and "1 run(s) marked lost" in line
    assert "Traceback" not in err
    runs = query(lab.store, "SELECT status, reason FROM runs ORDER BY id")
    assert runs[-1][0] == "lost" and "sample(s) that arrived are kept" in runs[-1][1]
    assert all(status in ("ok", "lost") for status, _ in runs)


def test_files_a_variant_names_travel_to_workers_that_cannot_see_them(lab, cluster, tmp_path, monkeypatch):
    """A base config and a fragment given as paths on the client's machine: the workers run
    elsewhere (here: another directory, so the relative paths name nothing there) and get
    their text."""
    local, client = cluster
    here, elsewhere = tmp_path / "client", tmp_path / "worker"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    Path("base.config").write_text("# a user's own config\n# CONFIG_DEBUG_KERNEL is not set\n")
    Path("slow.config").write_text("CONFIG_FAKE_SLOW=y\n")
    client.run(os.chdir, str(elsewhere))
    assert lab.main("compare", "a=tinyconfig", "b=base.config+slow.config", "--cluster", local.scheduler_address) == 0
    assert values(lab, "b") and values(lab, "b") != values(lab, "a")
    hashes = dict(query(lab.store, "SELECT name, config_hash FROM variants"))
    assert lab.main("compare", "b=base.config+slow.config") == 0   # the same kernel, measured here
    assert dict(query(lab.store, "SELECT name, config_hash FROM variants")) == hashes


class ListQueue:
    """A Dask queue's put and get(batch=True), in this process."""

    def __init__(self):
        self.items = []

    def put(self, item):
        self.items.append(item)

    def get(self, batch=False):
        items, self.items = self.items, []
        return items


class Source:
    """labfakes' source, as plain data: what a worker sends travels pickled."""
    version, spec, id, kind, content_hash = "6.1.192", "debian:6.1", "6.1.192-fake", "debian", "0" * 64

    def to_dict(self):
        return {"spec": self.spec, "kind": self.kind, "version": self.version, "content_hash": self.content_hash,
                "tree": "/nonexistent"}


def test_a_workers_run_reaches_the_clients_store_as_it_would_locally(tmp_path):
    """Every write lab.run makes goes through the forwarding store, by the Store's own
    write methods (executor.WRITES): the replayed store holds what a local run stores."""
    import dataclasses

    import labfakes
    from kernellab.experiments import executor
    from kernellab.experiments import lab as lab_stage
    from kernellab.experiments.spec import parse_short
    from kernellab.store import Store

    p = dataclasses.replace(labfakes.prepared(parse_short("a=lab-minimal")), source=Source())
    target = labfakes.FakeTarget(lambda cmdline: labfakes.BOOT + labfakes.agent_lines(
        {"syscall.null": [200.0, 201.0]}, unavailable={"ctx.pipe": "no pipe"}, flaws={"meltdown": "Not_affected"}))
    local = Store(tmp_path / "local.sqlite")
    lab_stage.run(p, labfakes.build("k"), local, lab_stage.RunOptions("icount"), tmp_path / "agent.cpio", target)
    queue = ListQueue()
    forwarding = executor._Forwarding(queue, "task", "token")
    try:
        lab_stage.run(p, labfakes.build("k"), forwarding, lab_stage.RunOptions("icount"), tmp_path / "agent.cpio",
                      target)
    finally:
        forwarding.close()
    client = Store(tmp_path / "client.sqlite")
    executor.Replay(client).drain(queue)

    def stored(store):
        [run] = store.runs()
        return (run["status"], store.run_metrics(run["id"]), store.run_unavailable(run["id"]),
                store.run_vulnerabilities(run["id"]), store.run_log(run["id"]))

    assert stored(client) == stored(local)
    assert stored(client)[1]["syscall.null"] == [200.0, 201.0] and stored(client)[2] == {"ctx.pipe": "no_pipe"}
    assert {"add_variant": True, "start_run": True, "add_log": True, "add_sample": False,
            "finish_run": False} == {name: executor.WRITES[name] for name in
                                     ("add_variant", "start_run", "add_log", "add_sample", "finish_run")}


def test_a_worker_cannot_read_the_clients_store_nor_run_anything_on_it_but_a_write(tmp_path):
    from kernellab.errors import LabError
    from kernellab.experiments import executor
    from kernellab.store import Store

    forwarding = executor._Forwarding(ListQueue(), "task", "token")
    forwarding.close()
    with pytest.raises(AttributeError, match="only writes to the store: run_metrics is not one of its write"):
        forwarding.run_metrics(1)
    with pytest.raises(LabError, match="a Dask worker sent 'close', which is not one of the store's write methods"):
        executor.Replay(Store(tmp_path / "s.sqlite")).apply("token", [("close", None, (), {})])
