"""A store file that is not kernellab's, or is damaged, is named and refused, never
recreated over; a store written by the schema that stored repeated records twice keeps
one of each."""

import sqlite3

import pytest

from kernellab.errors import LabError
from kernellab.store import SCHEMA_VERSION, Store


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "lab.sqlite"
    path.write_bytes(b"my notes, not a database\n" * 100)
    before = path.read_bytes()
    with pytest.raises(LabError, match=f"{path} is not a kernellab store .*pass --store PATH"):
        Store(path)
    assert path.read_bytes() == before


def test_someone_elses_database_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "lab.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE photos (id INTEGER, name TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(LabError, match="is an SQLite database but not a kernellab store \\(its tables: photos\\)"):
        Store(path)
    assert path.read_bytes() == before   # not even switched to WAL


def test_a_store_cut_short_is_refused(tmp_path):
    path = tmp_path / "lab.sqlite"
    store = Store(path)
    for i in range(2000):
        store.add_sample(1, "syscall.null", "ns", i, 1, 100.0 + i, seq=i)
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 3] + b"\xff" * 512)
    with pytest.raises(LabError) as refused:
        Store(path).db.execute("SELECT count(*) FROM samples").fetchall()
    assert str(path) in str(refused.value)


def test_schema_2_stores_keep_one_copy_of_each_record(tmp_path):
    path = tmp_path / "v2.sqlite"
    store = Store(path)
    store.db.execute("DROP INDEX samples_seq")     # as schema 2 was
    store.db.execute("PRAGMA user_version = 2")
    for seq in (0, 1, 1, 2, 2, 2):
        store.db.execute("INSERT INTO samples (run_id, metric, unit, rep, iters, value, seq)"
                         " VALUES (1, 'syscall.null', 'ns', ?, 1, 100.0, ?)", (seq, seq))
    store.db.execute("INSERT INTO samples (run_id, metric, unit, rep, iters, value, seq)"
                     " VALUES (1, 'boot.agent_ready.printk', 's', 0, 1, 0.3, NULL)")
    store.close()
    migrated = Store(path)
    assert migrated.schema_version() == SCHEMA_VERSION == 5
    rows = migrated.db.execute("SELECT seq FROM samples ORDER BY id").fetchall()
    assert [r[0] for r in rows] == [0, 1, 2, None]
    assert migrated.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
