"""The disk fills up under the store: one clear error, and the store stays sound with
everything written before. Runs in a private mount namespace on a small tmpfs (root)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

WRITER = textwrap.dedent("""
    import sqlite3, sys
    from kernellab.errors import LabError
    from kernellab.store import Store
    path = sys.argv[1] + "/lab.sqlite"
    store = Store(path)
    written = 0
    try:
        while True:
            store.add_sample(1, "syscall.null", "ns", written, 1024, 100.0 + written, seq=written)
            written += 1
    except LabError as exc:
        print("ERROR", exc)
    store.close()
    db = sqlite3.connect(path)
    print("INTEGRITY", db.execute("PRAGMA integrity_check").fetchone()[0])
    print("KEPT", db.execute("SELECT count(*) FROM samples").fetchone()[0], "WRITTEN", written)
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_a_full_disk_is_one_error_and_the_store_keeps_what_it_had(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    script = (f"mount -t tmpfs -o size=2m tmpfs {mount} && "
              f"{sys.executable} -c '{WRITER}' {mount}")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["ERROR"].startswith(f"cannot write the store at {mount}/lab.sqlite (database or disk is full)")
    assert lines["ERROR"].endswith("free some space or pass --store PATH")
    assert lines["INTEGRITY"] == "ok"
    kept, written = int(lines["KEPT"].split()[0]), int(lines["KEPT"].split()[2])
    assert kept == written > 100      # every sample acknowledged is there, none beyond
    assert "Traceback" not in done.stderr
