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

from browser import browser  # noqa: F401  (one headless Chromium, for the HTML reports' tests)
from fakes import lab  # noqa: F401  (the fake lab's fixture, for tests/test_fake_lab.py)
from kernellab.experiments import lab as lab_stage
from kernellab.experiments.spec import parse_short
from kernellab.store import Store
from prefetch import FOR, Prefetch


@pytest.fixture(autouse=True)
def _no_width_asked(monkeypatch):
    """Output goes to a pipe, as on CI, unless a test asks for a width: pytest-xdist's
    workers set COLUMNS=80, which kernellab takes as a width asked for (report.terminal)."""
    monkeypatch.delenv("COLUMNS", raising=False)


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


# The x86_64 integration tests share one build tree, where a variant a few objects away
# from the last build costs seconds and one that flips an option in widely included
# headers costs most of a cold build, also on the way back. The ssh tests' guest kernel
# (KEXEC selects CRASH_CORE: 845 of 1291 objects) is such a config: its tests run last, so
# that the other tests' variants stay incremental builds of lab-minimal. The attribution
# tests come after them and probe around the ssh guest's config (which compiles in their
# DEBUG_PAGEALLOC too), a few objects at a time. The debug-cost study's debug kernel
# (PROVE_LOCKING, SLUB_DEBUG_ON: every object, in a tree of its own) and s390x are built
# ahead in the background (tests/prefetch.py): the tests that need them come late, to give
# that build the time the others leave a core idle.
_LAST = ("test_arch_integration.py", "test_study_integration.py", "test_ssh_target.py",
         "test_attribution_integration.py")


def pytest_collection_modifyitems(config, items):
    # stable: the rest keep their order, first
    items.sort(key=lambda item: _LAST.index(item.path.name) + 1 if item.path.name in _LAST else 0)


_prefetch: list[Prefetch] = []


def pytest_collection_finish(session):
    """Start building the late tests' kernels now, when the session will run those tests."""
    if session.config.option.collectonly:
        return
    if any(item.path.name in FOR and item.get_closest_marker("integration") for item in session.items):
        _prefetch.append(Prefetch(Path(tempfile.gettempdir()) / f"kl-prefetch-{os.getpid()}.log"))


def pytest_sessionfinish(session):
    for p in _prefetch:
        p.stop()


@pytest.fixture(scope="session")
def prefetched():
    """The background build of tests/prefetch.py, done (its kernels are in the cache now, or
    the test builds them itself)."""
    for p in _prefetch:
        p.wait()
