"""Kernels the integration tests need last, built ahead in the background, beside the tests.

A cold run of the test command builds about 50 CPU-minutes of kernels, and spends about
as long in QEMU boots and the fake lab's tests. The kernels that no other test builds
around, a small s390x lab-minimal (a tree of its own), the debug-cost study's debug kernel
(lockdep: a rebuild of every object, also on the way back) and lab-minimal+workloads (fio's
cross-check band; System V IPC changes the task struct: most objects), the last two in trees
of their own, so that the shared tree keeps the state the other tests' incremental builds
start from, are
built here, in the background, from the start, at the priority of the tests beside the
x86_64 tree's chain (conftest.py): that chain (its builds, then QEMU boots one after
another) is the run's longest path and goes first; this build shares the rest of the CPU
with the other tests (kernellab's make stays in the caller's session, where nice counts:
kernellab.build).

The ssh tests' guest is not built here: lab-minimal with KEXEC recompiles two thirds of
the objects, which costs less in the shared tree, right before its tests, than a whole
build in a tree of its own (and its kexec'd variants and the attribution tests' probes
then build a few objects away from it).

A test that needs one of these kernels waits for this first (the `prefetched` fixture). The
build itself is kernellab's: a kernel another command is building is waited for, never
made twice (kernellab.build), so a test that got there first costs nothing but the wait.
A prefetch that fails says nothing here: the test builds the kernel itself and shows the
error.

    python tests/prefetch.py LOG    # what conftest starts; LOG gets what it did
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The priority of this build: that of the tests beside the x86_64 tree's chain (conftest):
# the chain's builds and boots go first, this build shares the rest with those tests.
BESIDE_THE_CHAIN = 10
# The non-x86 kernel of test_arch_integration.py: lab-minimal without what its metrics do
# not need (the fragment says why).
ARCH_SMALL = f"small=lab-minimal+{Path(__file__).resolve().parent / 'data' / 'arch-small.config'}"
# (variant, arch, in a tree of its own), in the order the tests need them (conftest's _LAST).
KERNELS = ((ARCH_SMALL, "s390x", False),
           ("debug=lab-minimal+debug-kernel", "x86_64", True),
           # fio's cross-check band (System V IPC: most objects again, also on the way back)
           ("workloads=lab-minimal+workloads", "x86_64", True))
# The test files whose kernels these are (integration tests only, each file marked so): a session
# without them starts nothing.
FOR = ("test_arch_integration.py", "test_study_integration.py", "test_crosscheck_wall.py")


class Prefetch:
    """The background build, started once per test run (by pytest-xdist's controller when
    the tests run on workers). It holds an exclusive lock on `lock` for as long as it runs,
    so a test in any process waits for it with `wait_for`."""

    def __init__(self, log: Path, lock: Path):
        self.log = log
        held = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
            # A process group of its own (stop() ends make and its compilers too), in the tests'
            # session: with the scheduler's autogroups (kernel.sched_autogroup_enabled), a new
            # session would get an equal share of the CPU whatever its nice value. The lock's
            # descriptor goes with it: the lock is released when the prefetch ends, however.
            self.proc = subprocess.Popen([sys.executable, __file__, str(log)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, pass_fds=(held,),
                                         process_group=0, preexec_fn=lambda: os.nice(BESIDE_THE_CHAIN))
        finally:
            os.close(held)
        self.started = time.monotonic()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            self.proc.wait()


def wait_for(lock: Path) -> None:
    """Until the background build that holds `lock` is done (its kernels are then in the
    cache, or the test builds what failed); at once when none was started."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def _build_all(log) -> None:
    from kernellab import paths
    from kernellab.build import build_tree
    from kernellab.experiments import lab
    from kernellab.experiments.spec import parse_short
    from kernellab.store import Store

    with tempfile.TemporaryDirectory(prefix="kl-prefetch-") as scratch:
        store = Store(Path(scratch) / "prefetch.sqlite")
        for variant, arch, own_tree in KERNELS:
            t0 = time.monotonic()
            prepared = lab.prepare(parse_short(variant, arch=arch))
            assert prepared.toolchain is not None
            shared = build_tree(prepared.source, prepared.profile, prepared.toolchain)
            # Made only when there is something to build; its artifacts are kept, the tree is not.
            own = paths.cache_dir("build").joinpath(paths.component("tree", shared.name + ".prefetch"))
            build = lab.ensure_built(prepared, store, log=lambda line: print(line, file=log, flush=True),
                                     where=(lambda tree=own: tree) if own_tree else None)
            shutil.rmtree(own, ignore_errors=True)
            print(f"{variant} {arch}: {'cached' if build.cached else 'built'} in {time.monotonic() - t0:.0f} s",
                  file=log, flush=True)


if __name__ == "__main__":
    with open(sys.argv[1], "a") as out:
        try:
            _build_all(out)
        except Exception as exc:   # the test that needs the kernel builds it and says why
            print(f"prefetch failed: {exc!r}", file=out, flush=True)
            sys.exit(1)
