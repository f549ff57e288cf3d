import json
import sqlite3
from pathlib import Path

import pytest

from kernellab.errors import LabError
from kernellab.sources import Source
from kernellab.store import SCHEMA_VERSION, Store

V1_DUMP = Path(__file__).parent / "data" / "store-v1.sql"


def _run(store: Store, tmp_path) -> tuple[int, int]:
    src = Source("debian:6.1", "debian", "6.1.1", "ab" * 32, tmp_path)
    vid = store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", [])
    run = store.start_run(vid, "key", "qemu", {"label": "QEMU TCG icount"}, "icount", ["qemu"],
                          "icount initramfs-1.cpio ", "initramfs-1.cpio")
    return vid, run


def test_samples_are_committed_as_they_arrive(tmp_path):
    path = tmp_path / "lab.sqlite"
    store = Store(path)
    vid, run = _run(store, tmp_path)
    src = Source("debian:6.1", "debian", "6.1.1", "ab" * 32, tmp_path)
    assert store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", []) == vid
    store.add_sample(run, "syscall.null", "ns", 0, 16, 206.0, seq=3)
    # Another connection (another process, after a crash) already sees it.
    other = sqlite3.connect(path)
    assert other.execute("SELECT value, seq FROM samples").fetchall() == [(206.0, 3)]
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.add_sample(run, "syscall.null", "ns", 1, 16, 207.0)
    assert store.run_metrics(run) == {"syscall.null": [206.0, 207.0]}
    store.finish_run(run, "timeout", "killed", agent_version=1, clocksource="tsc")
    rows = store.runs()
    assert rows[0]["status"] == "timeout" and rows[0]["samples"] == 2
    assert (store.run(run)["agent_version"], store.run(run)["clocksource"]) == (1, "tsc")


def test_boot_parameters_and_sysctls_make_another_variant(tmp_path):
    store = Store(tmp_path / "lab.sqlite")
    src = Source("debian:6.1", "debian", "6.1.1", "ab" * 32, tmp_path)
    plain = store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", [])
    off = store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", [], boot_args="mitigations=off")
    swappy = store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", [], sysctls='{"vm.swappiness": "10"}')
    assert len({plain, off, swappy}) == 3


def test_finished_runs_are_found_by_their_options_key(tmp_path):
    store = Store(tmp_path / "lab.sqlite")
    _vid, run = _run(store, tmp_path)
    store.finish_run(run, "ok", "")
    assert store.finished_runs("key", "icount", "icount initramfs-1.cpio ") == [run]
    assert store.finished_runs("key", "icount", "icount initramfs-1.cpio mitigations=off") == []


def test_a_schema_1_store_migrates_and_keeps_every_sample(tmp_path):
    """A store written by kernellab before the schema had a version (tests/data/store-v1.sql,
    made by tests/data/make_store_v1.py with that kernellab)."""
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(V1_DUMP.read_text())
    before = old.execute("SELECT run_id, metric, unit, rep, iters, value FROM samples ORDER BY id").fetchall()
    old.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    after = store.db.execute("SELECT run_id, metric, unit, rep, iters, value FROM samples ORDER BY id").fetchall()
    assert [tuple(r) for r in after] == before and len(before) == 8
    ok, panicked = store.run(1), store.run(2)
    assert ok["options_key"] == "icount initramfs-0123456789abcdef.cpio KL_ONLY=syscall.null noapictimer"
    assert (ok["initramfs"], ok["clocksource"], ok["agent_version"]) == ("initramfs-0123456789abcdef.cpio", "tsc", 1)
    assert panicked["status"] == "panic"
    assert store.run_unavailable(2) == {"ipc.unix_rtt": "socket(AF_UNIX): Address family not supported"}
    assert store.run_unavailable(1) == {}
    # The facts moved into columns left the logs; the console and rejected records stay.
    assert store.run_logs(1, "options") == [] and "Linux version" in store.run_log(1)
    assert store.run_logs(2, "rejected-records") == ["checksum mismatch: '@KL seq=5 t=sample'"]
    # A migrated run is found again by the same key, so an interrupted bisect resumes.
    assert store.finished_runs(ok["build_key"], "icount", ok["options_key"]) == [1]
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    Store(path).close()  # opening it again changes nothing


def test_a_failed_migration_leaves_the_old_store_as_it_was(tmp_path, monkeypatch):
    from kernellab import store as store_module
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(V1_DUMP.read_text())
    old.close()

    def broken(db):
        store_module._migrate_1_to_2(db)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setitem(store_module.MIGRATIONS, 1, broken)
    with pytest.raises(LabError, match="cannot open the store"):
        Store(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM logs WHERE kind='options'").fetchone()[0] == 2
    assert db.execute("SELECT count(*) FROM samples").fetchone()[0] == 8


def test_a_store_from_a_newer_kernellab_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(LabError, match=f"schema version {SCHEMA_VERSION + 1}; this kernellab reads up to"):
        Store(path)


def test_unwritable_store_is_one_clear_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(LabError, match="--store PATH"):
        Store(blocker / "lab.sqlite")


def test_store_path_that_is_a_directory(tmp_path):
    with pytest.raises(LabError, match="cannot open the store"):
        Store(tmp_path)


# -- the runs of one command ----------------------------------------------------------------

def test_two_commands_in_one_process_are_two_groups_of_runs(lab, capsys):
    """`runs` grouped by the process that measured: two commands run in one Python process
    (a script calling main, the fake lab) were one group."""
    assert lab.main("compare", "a=tinyconfig", "--runs", "2") == 0    # runs 1 and 2
    assert lab.main("compare", "b=tinyconfig") == 0                   # run 3, same process
    capsys.readouterr()
    assert lab.main("runs", "--format", "json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["group"]) for r in listed] == [(3, 3), (2, 1), (1, 1)]


def test_a_store_of_schema_4_keeps_grouping_its_runs_by_process(tmp_path):
    """Runs measured before the store knew commands group by their process, as they did;
    the runs measured since, by their command."""
    path = tmp_path / "s.sqlite"
    store = Store(path)
    _, first = _run(store, tmp_path)
    _, second = _run(store, tmp_path)
    store.close()
    db = sqlite3.connect(path)   # as schema 4 wrote them: one process, no command
    db.execute("ALTER TABLE runs DROP COLUMN invocation")
    db.execute("UPDATE runs SET owner = '4242 1'")
    db.execute("PRAGMA user_version = 4")
    db.commit()
    db.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    _, third = _run(store, tmp_path)                       # this process, a command of its own
    assert [(r["id"], r["command_run"]) for r in store.runs()] == [(third, third), (second, first),
                                                                   (first, first)]
