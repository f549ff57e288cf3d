"""Shared fixtures: one lab-minimal build for every integration test.

The kernel source tree, build tree, artifacts and ccache live in kernellab's normal cache
(~/.cache/kernellab, or $KERNELLAB_CACHE), so the main job and the tests share them and a
second test session builds nothing.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import fakes
from browser import browser  # noqa: F401  (one headless Chromium, for the HTML reports' tests)
from fakes import lab  # noqa: F401  (the fake lab's fixture, for tests/test_fake_lab.py)
from kernellab import build as kernel_build
from kernellab.experiments import lab as lab_stage
from kernellab.experiments.spec import parse_short
from kernellab.store import Store
from prefetch import BESIDE_THE_CHAIN, FOR, Prefetch, wait_for


@pytest.fixture(autouse=True)
def _no_width_asked(monkeypatch):
    """Output goes to a pipe, as on CI, unless a test asks for a width: pytest-xdist's
    workers set COLUMNS=80, which kernellab takes as a width asked for (report.terminal)."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(autouse=True)
def _no_real_kernel_in_the_fast_lane(request, monkeypatch):
    """A test outside the integration lane that would build a real kernel (a Linux tree, not
    the fake one: say a default source reached by mistake) fails at once with its name,
    instead of spending minutes of the fast lane on a build (in-process builds: a command
    line run as a subprocess is not watched)."""
    caught: list[str] = []   # the sources it refused (a test of the guard asks for this list)
    if _integration(request.node):
        yield caught
        return
    real = kernel_build._build

    def refused(key, artifacts, source, *args, **kwargs):
        if (source.tree / "kernel" / "sched" / "core.c").is_file():
            caught.append(source.spec)
            raise RuntimeError(f"a fast-lane test must not build a real kernel ({source.spec})")
        return real(key, artifacts, source, *args, **kwargs)

    monkeypatch.setattr(kernel_build, "_build", refused)
    yield caught
    if caught:
        pytest.fail(f"{request.node.nodeid} builds a real kernel ({', '.join(caught)}) but is not marked "
                    "integration: mark it, or give it the fake lab", pytrace=False)


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    return Store(tmp_path_factory.mktemp("store") / "lab.sqlite")


@pytest.fixture(scope="session")
def minimal(store):
    """Debian 6.1, x86_64, lab-minimal: prepared and built."""
    prepared = lab_stage.prepare(parse_short("lab-minimal=lab-minimal"))
    return prepared, lab_stage.ensure_built(prepared, store)


def kernellab(*args, store_path, timeout=900):
    """Run the real command line, as a user would."""
    return subprocess.run([sys.executable, "-m", "kernellab.cli", *args, "--store", str(store_path)],
                          capture_output=True, text=True, timeout=timeout)


# The x86_64 integration tests that build variants share one build tree, where a variant a
# few objects away from the last build costs seconds and one that flips an option in widely
# included headers costs most of a cold build, also on the way back. They run in one
# process, in this order: with the README's `-n 2 --dist loadscope`, one pytest-xdist unit
# (the chain, on one worker, handed out first; every other file's tests on the other as it
# frees up, and on both once the chain is done). The chain builds lab-minimal first and its
# near variants; then the ssh tests' guest kernel (KEXEC selects CRASH_CORE: 845 of 1291
# objects), so that the variants before it stay incremental builds of lab-minimal; then the
# attribution tests, which probe around the ssh guest's config (which compiles in their
# DEBUG_PAGEALLOC too), a few objects at a time. Tests that only boot lab-minimal (whoever
# builds it first, the others wait for that build) are not in the chain. The debug-cost
# study's debug kernel (PROVE_LOCKING, SLUB_DEBUG_ON: every object, in a tree of its own),
# lab-minimal+workloads (fio's cross-check band: System V IPC, most objects; a tree of its
# own too) and s390x are built ahead in the background (tests/prefetch.py): the tests that
# need them come last.
_X86_TREE = ("test_variants_integration.py", "test_ssh_target.py", "test_attribution_integration.py")
_LAST = ("test_arch_integration.py", "test_study_integration.py", "test_crosscheck_wall.py", "test_ssh_target.py",
         "test_attribution_integration.py")


def _integration(item) -> bool:
    return item.get_closest_marker("integration") is not None


def _order(item) -> tuple[int, int]:
    """The x86_64 tree's build chain first, then the fast tests, then the other integration
    tests; the late ones (_LAST) last in each, in its order."""
    name = item.path.name
    late = _LAST.index(name) if name in _LAST else -1
    if not _integration(item):
        return 1, late
    return (0 if name in _X86_TREE else 2), late


def pytest_collection_modifyitems(config, items):
    for item in items:
        if fakes.LAB_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)
    items.sort(key=_order)   # stable: the rest keep their order


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the test's fixtures are made: whether it may make a fake lab (fakes.fake_lab
    refuses in a test of the quick lane, so that the lane cannot slow down unnoticed)."""
    fakes.in_lab_lane = any(item.get_closest_marker(m) is not None for m in ("lab", "integration"))


# The x86_64 tree's chain is the run's longest path (its builds, then QEMU boots one after
# another): every other test yields the CPU to it. A process's first test outside the
# chain lowers that process's priority for good, to tests/prefetch.py's build's: the
# worker with the chain runs the other tests only once the chain is done.
_yielding: list[bool] = []


@pytest.fixture(autouse=True)
def _beside_the_chain(request):
    if not _yielding and not (request.node.path.name in _X86_TREE and _integration(request.node)):
        os.nice(BESIDE_THE_CHAIN)
        _yielding.append(True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` with the x86_64 tree's files as one scope: xdist's own loadscope
    keeps each file's tests on one worker (a module's fixture, a Dask cluster or a fake git
    history, is made once); here the build chain's files are one unit too, handed out first
    (units go out in the collection's order, _order, not largest first). Not xdist_group
    marks: with pytest 9.2 xdist's loadgroup no longer groups (pytest-xdist#1386)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "x86-tree" if Path(path).name in _X86_TREE else path

    config.option.loadscopereorder = False
    return Scopes(config, log)


# The background build (tests/prefetch.py) is started once per run by the process that
# is not an xdist worker: pytest itself, or xdist's controller once a worker has collected
# (before any test runs). Every process finds it by the lock it holds.
_prefetch: list[Prefetch] = []
_LOCK_ENV = "KERNELLAB_TEST_PREFETCH_LOCK"


def _worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config):
    if not _worker(config):   # before xdist starts its workers: they inherit it
        os.environ[_LOCK_ENV] = str(Path(tempfile.gettempdir()) / f"kl-prefetch-{os.getpid()}.lock")


def _start_prefetch(test_files) -> None:
    if not _prefetch and any(name in FOR for name in test_files):
        log = Path(tempfile.gettempdir()) / f"kl-prefetch-{os.getpid()}.log"
        _prefetch.append(Prefetch(log, Path(os.environ[_LOCK_ENV])))


def pytest_collection_finish(session):
    """Start building the late tests' kernels now, when the session will run those tests."""
    if not session.config.option.collectonly and not _worker(session.config):
        _start_prefetch(item.path.name for item in session.items if _integration(item))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    # ids are what the worker will run (after -m), "tests/x.py::name[...]"; FOR's files hold
    # integration tests only (pytestmark), so a file of theirs in ids means a test that needs it.
    if not node.config.option.collectonly:
        _start_prefetch(Path(i.split("::")[0]).name for i in ids)


def pytest_sessionfinish(session):
    for p in _prefetch:
        p.stop()
    if not _worker(session.config):
        Path(os.environ[_LOCK_ENV]).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def prefetched():
    """The background build of tests/prefetch.py, done (its kernels are in the cache now, or
    the test builds them itself)."""
    wait_for(Path(os.environ[_LOCK_ENV]))
