"""kill -9 of kernellab during a build, a boot and a store write, on the fake lab: the same
command again resumes, every sample measured before the kill is there once, the run it was
measuring is marked interrupted at the next start, the make or QEMU it left running is
reaped, and the console log and milestones read before the kill are in the store."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from fakes import fake_lab, lab_fixture, shared_dir

TESTS = Path(__file__).resolve().parents[1]
# kernellab as a process of its own, with the x86_64 profile booting the fake QEMU.
LAUNCHER = f"""
import dataclasses, sys
sys.path.insert(0, {str(TESTS)!r})
from kernellab import arches
real = arches.load
def load(name):
    profile = real(name)
    if name == "x86_64" and profile.qemu is not None:
        profile = dataclasses.replace(profile, qemu=dataclasses.replace(profile.qemu, binary=sys.argv[1]))
    return profile
arches.load = load
from kernellab.cli import main
sys.exit(main(sys.argv[2:]))
"""


class Kernellab:
    def __init__(self, lab):
        self.lab = lab

    def argv(self, *args: str) -> list[str]:
        source = ["--source", str(self.lab.tree)] if args[0] in ("compare", "build") else []
        return [sys.executable, "-c", LAUNCHER, str(self.lab.qemu), *args, *source, "--store", str(self.lab.store)]

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), env={**os.environ, **env}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=300)


def wait_for(condition, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def query(store: Path, sql: str, *args) -> list[tuple]:
    if not store.exists():
        return []
    db = sqlite3.connect(store)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:   # not created yet
        return []
    finally:
        db.close()


def children(lab) -> list[dict]:
    return [json.loads(p.read_text()) for p in (lab.cache / "children").glob("*.json")]


def in_group(pgid: int) -> list[tuple[str, str]]:
    """(command, state) of every process in the process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, tail = stat.read_text().rsplit(")", 1)
        except OSError:   # gone meanwhile
            continue
        fields = tail.split()
        if int(fields[2]) == pgid:
            found.append((head.split("(", 1)[1], fields[0]))
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # A zombie leader (reaped by nobody yet) counts as gone.
    state = Path(f"/proc/{pgid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pgid}").exists() \
        else "Z"
    return state != "Z"


@lab_fixture
def kl(tmp_path, monkeypatch, request):
    # The agent binary and the ccache shared with the other fake-lab tests: no gcc run each.
    return Kernellab(fake_lab(tmp_path, monkeypatch, shared_dir(request)))


def agent_samples(lab, run_id: int) -> list[int]:
    return [r[0] for r in query(lab.store, "SELECT seq FROM samples WHERE run_id = ? AND seq IS NOT NULL", run_id)]


def test_kill_during_a_boot_keeps_what_was_measured_and_the_rerun_resumes(kl):
    lab = kl.lab
    killed = kl.start("compare", "a=tinyconfig", FAKE_QEMU_HANG_AFTER="5")
    wait_for(lambda: len(query(lab.store, "SELECT 1 FROM samples WHERE seq IS NOT NULL")) >= 5, "five samples")
    [qemu] = wait_for(lambda: [c for c in children(lab) if "boot" in c["what"]], "QEMU's registration")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert group_alive(qemu["pgid"])            # what a kill -9 leaves behind

    # The next command, whatever it is, reaps QEMU and marks the run.
    after = kl.run("runs")
    assert after.returncode == 0, after.stderr
    assert f"reaped qemu-system-x86_64 (a boot) (process group {qemu['pgid']})" in after.stderr
    wait_for(lambda: not group_alive(qemu["pgid"]), "QEMU reaped", timeout=10)
    [(run_id, status, reason)] = query(lab.store, "SELECT id, status, reason FROM runs")
    assert status == "interrupted" and "died while it measured this run" in reason
    seqs = agent_samples(lab, run_id)
    assert len(seqs) == len(set(seqs)) >= 5       # each once, none lost
    # The console and the milestones read before the kill were stored as they arrived.
    [(console,)] = query(lab.store, "SELECT text FROM logs WHERE run_id = ? AND kind = 'console'", run_id)
    assert "Linux version 6.1.0-fake" in console and "@KL seq=4 " in console
    milestones = {r[0] for r in query(lab.store, "SELECT metric FROM samples WHERE run_id = ? AND metric LIKE 'boot.%'",
                                      run_id)}
    assert {"boot.linux_version.host", "boot.init_start.printk"} <= milestones

    again = kl.run("compare", "a=tinyconfig")
    assert again.returncode == 0, again.stderr
    assert "building" not in again.stderr          # the build of the killed command is reused
    statuses = [r[0] for r in query(lab.store, "SELECT status FROM runs ORDER BY id")]
    assert statuses == ["interrupted", "ok"]
    assert agent_samples(lab, run_id) == seqs      # the first run's samples, untouched


def test_kill_during_a_build_leaves_no_make_running_and_the_rerun_builds(kl):
    lab = kl.lab
    killed = kl.start("compare", "a=tinyconfig", KERNELLAB_FAKE_MAKE_SLEEP="60")
    [make] = wait_for(lambda: [c for c in children(lab) if c["what"].startswith("make")], "make's registration")
    wait_for(lambda: "sleep" in (comm for comm, _ in in_group(make["pgid"])), "the build under way")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert group_alive(make["pgid"])

    after = kl.run("runs")
    assert f"process group {make['pgid']}" in after.stderr and "reaped make" in after.stderr
    wait_for(lambda: not group_alive(make["pgid"]), "make reaped", timeout=10)
    # Not make alone: the compilers and the sleep it started, its whole group.
    wait_for(lambda: all(state == "Z" for _, state in in_group(make["pgid"])), "make's children reaped", timeout=10)

    again = kl.run("compare", "a=tinyconfig")
    assert again.returncode == 0, again.stderr
    assert [r[0] for r in query(lab.store, "SELECT status FROM runs")] == ["ok"]
    assert children(lab) == []                     # nothing left registered


def test_kill_inside_a_store_write_loses_only_that_sample(kl):
    lab = kl.lab
    killed = kl.start("compare", "a=tinyconfig", KERNELLAB_FAULT_KILL_AT_SAMPLE="9")
    killed.wait(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    [(run_id,)] = query(lab.store, "SELECT id FROM runs")
    # Eight writes committed; the ninth died between its INSERT and its COMMIT.
    assert len(query(lab.store, "SELECT 1 FROM samples WHERE run_id = ?", run_id)) == 8
    assert query(lab.store, "SELECT count(*) FROM samples WHERE metric = 'fault'") == [(0,)]
    assert query(lab.store, "PRAGMA integrity_check") == [("ok",)]
    again = kl.run("compare", "a=tinyconfig")
    assert again.returncode == 0, again.stderr
    assert f"run {run_id}: kernellab (pid {killed.pid}) died while it measured this run" in again.stderr
    assert [r[0] for r in query(lab.store, "SELECT status FROM runs ORDER BY id")] == ["interrupted", "ok"]
