import sqlite3

import pytest

from kernellab.errors import LabError
from kernellab.sources import Source
from kernellab.store import Store


def test_samples_are_committed_as_they_arrive(tmp_path):
    path = tmp_path / "lab.sqlite"
    store = Store(path)
    src = Source("debian:6.1", "debian", "6.1.1", "ab" * 32, tmp_path)
    vid = store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", [])
    assert store.add_variant("v", src, "x86_64", "lab-minimal", {}, "cafe", []) == vid
    run = store.start_run(vid, "key", "qemu", "icount", ["qemu"])
    store.add_sample(run, "syscall.null", "ns", 0, 16, 206.0)
    # Another connection (another process, after a crash) already sees it.
    other = sqlite3.connect(path)
    assert other.execute("SELECT value FROM samples").fetchall() == [(206.0,)]
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.add_sample(run, "syscall.null", "ns", 1, 16, 207.0)
    assert store.run_metrics(run) == {"syscall.null": [206.0, 207.0]}
    store.finish_run(run, "timeout", "killed")
    rows = store.runs()
    assert rows[0]["status"] == "timeout" and rows[0]["samples"] == 2


def test_unwritable_store_is_one_clear_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(LabError, match="--store PATH"):
        Store(blocker / "lab.sqlite")


def test_store_path_that_is_a_directory(tmp_path):
    with pytest.raises(LabError, match="cannot write the store"):
        Store(tmp_path)
