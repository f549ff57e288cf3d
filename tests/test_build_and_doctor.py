import os
import signal
import time

import pytest

from fakes import each_in_a_thread
from kernellab import doctor
from kernellab.build import _timed_make, first_error
from kernellab.progress import Task


def test_first_error_names_the_first_compiler_error(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("  CC      kernel/fork.o\n"
                   "kernel/fork.c:12:1: warning: unused variable 'x'\n"
                   "kernel/fork.c:40:5: error: 'foo' undeclared (first use in this function)\n"
                   "kernel/exit.c:9:1: error: expected ';' before '}' token\n"
                   "make[2]: *** [scripts/Makefile.build:250: kernel/fork.o] Error 1\n")
    assert first_error(log) == "kernel/fork.c:40:5: error: 'foo' undeclared (first use in this function)"


def test_first_error_falls_back_to_make_errors(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("  LD      vmlinux\nmake[1]: *** [Makefile:1234: vmlinux] Error 139\nmake: *** [all] Error 2\n")
    assert first_error(log) == "make[1]: *** [Makefile:1234: vmlinux] Error 139"


def test_doctor_names_what_is_missing_and_how_to_install_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    checks = doctor.checks()
    missing = {c.what: c for c in checks if not c.ok}
    assert {"make", "flex", "bison", "ccache", "gcc", "qemu-system-x86_64"} <= set(missing)
    command = doctor.install_command(list(missing.values()))
    assert command.startswith("apt-get install -y")
    for package in ("make", "flex", "bison", "ccache", "gcc", "qemu-system-x86"):
        assert f" {package}" in command


def test_stopping_a_build_stops_every_process_make_started(tmp_path):
    """A make interrupted by Ctrl-C or a kill must not leave compilers writing into the
    shared build tree behind it."""
    pids = tmp_path / "pids"
    # A stand-in for make -j2: two "compilers" in the background, then wait for them.
    script = f"sleep 60 & echo $! >> {pids}; sleep 60 & echo $! >> {pids}; wait"

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            _timed_make(["sh", "-c", script], dict(os.environ), tmp_path / "build.log", Task(None, None))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2
    time.sleep(0.2)
    assert [pid for pid in children if _running(pid)] == []


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever inherited it to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_kernel_another_build_is_making_is_waited_for_and_taken_not_made_twice(lab, tmp_path):
    """Two builds of one kernel at once, each in a tree of its own (as tests/prefetch.py
    builds ahead beside the shared tree): one runs make, the other waits for it and takes
    its build; neither tree is used by both."""
    from kernellab.experiments import lab as lab_stage
    from kernellab.experiments.spec import parse_short
    from kernellab.store import Store

    prepared = lab_stage.prepare(parse_short("a=tinyconfig", str(lab.tree)))
    results, errors = each_in_a_thread(
        lambda name: lab_stage.ensure_built(prepared, Store(tmp_path / f"{name}.sqlite"),
                                            where=lambda: tmp_path / f"tree-{name}"), ("one", "two"))
    assert errors == []
    made = [name for name, b in results.items() if not b.cached]
    assert len(made) == 1, results
    (taken,) = set(results) - set(made)
    assert results[taken].key == results[made[0]].key and results[taken].image == results[made[0]].image
    assert (tmp_path / f"tree-{made[0]}" / "vmlinux").exists()
    assert not (tmp_path / f"tree-{taken}" / "vmlinux").exists()   # no make ran there


def test_a_build_runs_in_a_process_group_of_its_own_in_the_callers_session(lab, tmp_path, monkeypatch):
    """Its own group, so that stopping kernellab stops every compiler; the caller's session,
    so that `nice kernellab ...` holds: with the scheduler's autogroups (on by default) a new
    session would take an equal share of the CPU whatever its nice value."""
    where = tmp_path / "group"
    monkeypatch.setenv("KERNELLAB_FAKE_MAKE_GROUP", str(where))
    assert lab.main("build", "a=tinyconfig") == 0
    group, session = (int(n) for n in where.read_text().split())
    assert session == os.getsid(0)
    assert group not in (os.getpgid(0), session)


def test_a_cold_build_runs_the_compiler_once_per_object_not_its_preprocessor_too(lab, tmp_path, monkeypatch):
    """ccache in depend mode: an object it has not seen costs one compiler run, not a
    preprocessor run to hash and then the compile (about 45% more for a kernel's objects)."""
    import shutil
    wrapper = tmp_path / "compiler" / "gcc"
    wrapper.parent.mkdir()
    calls = tmp_path / "calls"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("gcc")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "unused"))   # kernellab's own ccache is used
    assert lab.main("build", "b=tinyconfig+CONFIG_FAKE_SLOW=y") == 0
    kernel_objects = [c for c in calls.read_text().splitlines() if str(lab.tree) in c and " -c " in c]
    assert kernel_objects, "the build compiled nothing through the wrapper"
    assert [c for c in calls.read_text().splitlines() if " -E " in c and str(lab.tree) in c] == []


def test_a_fast_test_that_would_build_a_real_kernel_is_stopped_before_make(tmp_path, _no_real_kernel_in_the_fast_lane):
    """The fast lane's guard (conftest): a Linux tree reached by a test outside the
    integration lane is refused before anything runs, and the test is named as the culprit."""
    from kernellab import build as kernel_build
    from kernellab.sources import Source
    tree = tmp_path / "linux"
    (tree / "kernel" / "sched").mkdir(parents=True)
    (tree / "kernel" / "sched" / "core.c").write_text("/* the scheduler */\n")
    source = Source("debian:6.1", "debian", "6.1.0", "0" * 64, tree)
    with pytest.raises(RuntimeError, match=r"must not build a real kernel \(debian:6.1\)"):
        kernel_build._build("key", tmp_path / "artifacts", source, None, None, None, None, None, "", None, False)
    assert _no_real_kernel_in_the_fast_lane == ["debian:6.1"]
    _no_real_kernel_in_the_fast_lane.clear()   # seen: this test is the guard's, not a culprit
