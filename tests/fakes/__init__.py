"""A fake lab for end-to-end tests in seconds: a fake kernel tree and a fake QEMU.

    from fakes import fake_lab, lab    # `lab`: the fixture

    def test_something(lab, capsys):
        assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y",
                        "--format", "json", "-o", str(lab.tmp / "r.json")) == 0

- tests/fakes/kernel: a kernel tree kernellab accepts as `--source PATH` (`make
  kernelversion`, the config targets on a small Kconfig resolved by kconfiglib, a build
  of an ELF vmlinux, System.map and arch/x86/boot/bzImage in under a second, with
  kbuild-like .cmd files). Its Makefile runs kconfiglib with $KERNELLAB_FAKE_PYTHON.
- tests/fakes/qemu/qemu-system-x86_64: boots that tree's images; what it prints follows
  from the image's config (CONFIG_FAKE_SLOW, _PANIC, _HANG, _REAL_AGENT: see its
  docstring). Only the x86_64 profile is redirected to it.

Everything kernellab writes goes to the test's tmp directory (KERNELLAB_CACHE and the
store), but for the agent binary, which every boot's initramfs holds and which takes gcc
about two seconds, and the ccache: those are shared between tests, and kept in pytest's
cache directory from one session to the next.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sqlite3
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernellab import initramfs, userland

FAKES = Path(__file__).resolve().parent
KERNEL_TREE = FAKES / "kernel"
FAKE_QEMU = FAKES / "qemu" / "qemu-system-x86_64"


@dataclass
class FakeLab:
    tmp: Path
    tree: Path     # the fake kernel tree: --source
    cache: Path    # KERNELLAB_CACHE
    store: Path    # --store
    qemu: Path     # the fake qemu-system-x86_64 the x86_64 profile runs

    def main(self, command: str, *args: str) -> int:
        """`kernellab COMMAND --source TREE ARGS... --store STORE`, in-process; the exit code."""
        from kernellab.cli import main
        sub = list(args[:1]) if args and f"{command} {args[0]}" in SOURCE_COMMANDS else []
        source = ["--source", str(self.tree)] if sub or command in SOURCE_COMMANDS else []
        return main([command, *sub, *source, *args[len(sub):], "--store", str(self.store)])

    def runs(self) -> list[dict]:
        """The store's runs, oldest first, with their variant's name and sample count (none
        when the store was never made: a command refused before it touched one)."""
        if not self.store.exists():
            return []
        db = sqlite3.connect(self.store)
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute(
                "SELECT r.id, r.status, r.reason, r.build_key, v.name,"
                " (SELECT count(*) FROM samples s WHERE s.run_id = r.id) AS samples"
                " FROM runs r JOIN variants v ON v.id = r.variant_id ORDER BY r.id")]
        finally:
            db.close()

    def samples(self, run_id: int) -> list[tuple[str, float]]:
        db = sqlite3.connect(self.store)
        try:
            return list(db.execute("SELECT metric, value FROM samples WHERE run_id=? ORDER BY id",
                                   (run_id,)))
        finally:
            db.close()


# The commands that build a kernel: given the fake tree, never Debian's (a real build: minutes).
SOURCE_COMMANDS = ("compare", "build", "resolve", "sweep", "bisect", "size", "noise-floor", "audit",
                   "workload crosscheck", "why")


def compare_json(lab: FakeLab, capsys, *args: str, expect: int = 0) -> tuple[dict | None, str]:
    """`kernellab compare ARGS --format json -o FILE` in the fake lab: (the report, or None
    when none was written; what it said on stderr), its exit code checked."""
    import json
    out = lab.tmp / "report.json"
    out.unlink(missing_ok=True)
    rc = lab.main("compare", *args, "--format", "json", "-o", str(out))
    err = capsys.readouterr().err
    assert rc == expect, err
    return (json.loads(out.read_text()) if out.exists() else None), err


def each_in_a_thread(work, names) -> tuple[dict, list]:
    """`work(name)` for each name, all at once in threads: -> ({name: its result}, the
    exceptions raised), for tests of what two commands do when they meet."""
    results, errors = {}, []

    def one(name):
        try:
            results[name] = work(name)
        except Exception as exc:   # the caller asserts on it
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def patch_arches(binary: str) -> None:
    """use_fake_qemu for a process of its own (a Dask worker): no monkeypatch to undo it.
    Again in the same process, the last binary counts (the profile loader is wrapped once)."""
    from kernellab import arches
    real_load = getattr(arches, "_unpatched_load", arches.load)

    def load(name):
        profile = real_load(name)
        if name == "x86_64" and profile.qemu is not None:
            profile = dataclasses.replace(profile, qemu=dataclasses.replace(profile.qemu, binary=binary))
        return profile

    arches._unpatched_load = real_load
    arches.load = load


# What a test's fake lab sets in the environment (fake_lab), and what the fault tests set
# for the fake QEMU: a worker shared between tests takes each test's own (point_worker).
LAB_ENVIRONMENT = ("KERNELLAB_CACHE", "XDG_STATE_HOME", "KERNELLAB_FAKE_PYTHON", "FAKE_QEMU_SIGNAL_PARENT",
                   "FAKE_QEMU_HANG_AFTER")


def point_worker(environment: dict[str, str | None], cwd: str, qemu: str) -> None:
    """A Dask worker process set as this test's process is: its fake lab's environment
    (None: unset), its current directory and its fake QEMU."""
    import os
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    os.chdir(cwd)
    patch_arches(qemu)


def use_fake_qemu(monkeypatch, binary: Path) -> None:
    """THE hook into kernellab's arch profiles: the x86_64 profile boots with `binary`.
    Kept in this one function because the arch and target code is being refactored:
    this is what to adapt when it changes."""
    from kernellab import arches

    real_load = arches.load

    def load(name):
        profile = real_load(name)
        if name == "x86_64" and profile.qemu is not None:
            profile = dataclasses.replace(profile, qemu=dataclasses.replace(profile.qemu, binary=str(binary)))
        return profile

    monkeypatch.setattr(arches, "load", load)


# The fixtures that run the lab end to end (lab_fixture): conftest marks every test that
# uses one, directly or through another fixture, `lab`, which the quick lane leaves out.
LAB_FIXTURES: set[str] = set()
# Whether the test running now is marked `lab` or `integration` (conftest sets it before
# the test's fixtures are made; None outside pytest's run loop).
in_lab_lane: bool | None = None


def lab_fixture(function=None, **kwargs):
    """`pytest.fixture` for a fixture that runs the lab end to end: a fake lab's builds and
    boots, a Dask cluster, Chromium. Seconds each, where the quick lane's tests take
    milliseconds: the tests that use it are marked `lab` (docs/contributing.md)."""
    def register(f):
        LAB_FIXTURES.add(f.__name__)
        return pytest.fixture(**kwargs)(f)
    return register(function) if function is not None else register


def fake_lab(tmp_path: Path, monkeypatch, shared: Path | None = None) -> FakeLab:
    """Point kernellab at the fake tree and QEMU, with everything in tmp_path; `shared`:
    where the agent binary and the ccache live across tests (default: the session's tmp
    directory)."""
    if in_lab_lane is False:
        raise RuntimeError("a test that makes a fake lab must be in the lab lane: make its fixture with "
                           "fakes.lab_fixture, or mark it @pytest.mark.lab")
    cache = tmp_path / "cache"
    cache.mkdir()
    shared = shared or tmp_path.parent / "fake-lab-shared"  # tmp_path.parent: the session's
    # kernellab writes the agent binary into <cache>/agent atomically (a rename) and keys
    # it by its source and compiler, and ccache is safe to share: sharing the directories
    # saves every test but the first a 2 s compilation of the agent, and makes the builds
    # ccache hits. If kernellab's cache layout changes, the tests still pass, slower.
    for name in ("agent", "ccache"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(shared / name, target_is_directory=True)
    monkeypatch.setenv("KERNELLAB_CACHE", str(cache))
    # The key that seals kernellab's own cache files lives in the user's state directory.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("KERNELLAB_FAKE_PYTHON", sys.executable)  # kconfiglib for the tree's Makefile
    monkeypatch.delenv("FAKE_QEMU_SIGNAL_PARENT", raising=False)
    # The fake QEMU runs with this Python, whatever `python3` is on PATH.
    qemu = tmp_path / "bin" / "qemu-system-x86_64"
    qemu.parent.mkdir()
    qemu.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_QEMU}" "$@"\n')
    qemu.chmod(0o755)
    use_fake_qemu(monkeypatch, qemu)
    # The fake QEMU runs the agent on this machine, with this machine's programs: a guest's
    # userland from Debian's packages (kernellab.userland, tested with a fake apt in
    # tests/test_userland.py) would never be looked at, and must not be downloaded.
    empty = tmp_path / "userland.cpio"
    empty.write_bytes(initramfs.build_cpio({}))
    monkeypatch.setattr(userland, "segment", lambda instances, profile, compression="gzip": empty)
    return FakeLab(tmp_path, KERNEL_TREE, cache, tmp_path / "lab.sqlite", qemu)


def shared_dir(request) -> Path | None:
    """pytest's cache directory for the agent binary and ccache, kept from one session to the next."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("kernellab-fake-lab") if cache is not None else None


@contextlib.contextmanager
def module_lab(tmp_path_factory, request, name: str):
    """A FakeLab for a module-scoped fixture (files made once and read by many tests)."""
    tmp = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as mp:
        yield fake_lab(tmp, mp, shared_dir(request))


@lab_fixture
def lab(tmp_path, monkeypatch, request):
    """A FakeLab; restores the signal handlers `kernellab.cli.main` installs."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        yield fake_lab(tmp_path, monkeypatch, shared_dir(request))
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
