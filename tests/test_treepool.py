"""The probes' build trees: each probe builds next to the configuration nearest its own."""

import fcntl
import os
import re
import threading
import time
from pathlib import Path

import pytest

from kernellab import treepool
from kernellab.experiments import lab as lab_stage
from kernellab.experiments.probe import Prober
from kernellab.experiments.spec import parse_short
from kernellab.locks import locked
from kernellab.store import Store


def _tree(path: Path, config: dict[str, str], objects: dict[str, list[str]]) -> Path:
    """A build tree as kbuild leaves it: .config, and a .cmd record per object naming the
    options its sources read."""
    path.mkdir(parents=True)
    (path / ".config").write_text("".join(f"{o}={v}\n" for o, v in config.items()))
    (path / "vmlinux").write_bytes(b"built")
    for obj, options in objects.items():
        deps = "".join(f"  $(wildcard include/config/{o.removeprefix('CONFIG_')}) \\\n" for o in options)
        (path / f".{obj}.cmd").write_text(f"cmd_{obj} := gcc -c {obj}\n\ndeps_{obj} := \\\n{deps}\n")
    return path


# 40 objects: LIST is named by 30 of them (wide), NLS by one (narrow).
OBJECTS = {f"f{i}.o": ["CONFIG_LIST"] if i < 30 else ["CONFIG_NLS"] if i == 39 else [] for i in range(40)}


@pytest.fixture
def pool(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text("ifdef CONFIG_FTRACE\n  KBUILD_CFLAGS += -pg\nendif\n"
                                  "ifdef CONFIG_KASAN\n  KBUILD_CFLAGS += -fsanitize=kernel-address\nendif\n")
    home = _tree(tmp_path / "build" / "6.1-x86_64-gcc", {"CONFIG_LIST": "n", "CONFIG_NLS": "n"}, OBJECTS)
    return treepool.TreePool(home, src, "x86_64")


def _config(tree: Path) -> str:
    return (tree / ".config").read_text()


def _build(pool, values: dict[str, str]) -> treepool.Choice:
    """What a build does after the choice: the shared tree holds the new config."""
    choice = pool.choose(values)
    assert choice.tree == pool.home     # every build runs at the shared tree's path
    (pool.home / ".config").write_text("".join(f"{o}={v}\n" for o, v in values.items()))
    (pool.home / "vmlinux").write_bytes(b"built")
    return choice


def test_a_narrow_change_builds_in_place_and_a_wide_one_parks_a_copy_first(pool):
    start = _config(pool.home)
    narrow = pool.choose({"CONFIG_LIST": "n", "CONFIG_NLS": "y"})
    assert (narrow.came_from, narrow.kept, narrow.estimate) == (None, None, 1)
    assert narrow.label() == "in place"
    wide = pool.choose({"CONFIG_LIST": "y", "CONFIG_NLS": "n"})
    assert (wide.came_from, wide.kept, wide.estimate) == (None, "1", 30)
    assert wide.label().startswith("in place; a copy kept as tree 1 (")
    # The copy holds the tree's files, timestamps and all (what make compares).
    parked = pool.parking / "1"
    assert _config(parked) == start
    for name in (".config", ".f0.o.cmd"):
        assert (parked / name).stat().st_mtime_ns == (pool.home / name).stat().st_mtime_ns


def test_a_compiler_flag_counts_as_the_whole_tree(pool):
    choice = pool.choose({"CONFIG_LIST": "n", "CONFIG_NLS": "n", "CONFIG_FTRACE": "y"})
    assert (choice.estimate, choice.kept) == (40, "1")


def test_the_nearest_parked_tree_is_swapped_in_and_the_least_recently_used_one_reused(pool):
    home0 = _config(pool.home)
    _build(pool, {"CONFIG_LIST": "y", "CONFIG_FTRACE": "y"})   # wide: home0 parked as 1
    _build(pool, {"CONFIG_FTRACE": "y"})                       # wide: LIST+FTRACE parked as 2
    # LIST: nearest is home0 (parked 1: LIST differs) rather than the shared tree (FTRACE
    # and LIST) or parked 2 (FTRACE): swapped in, the shared tree's FTRACE parked as 1;
    # wide, so home0 is kept as 3 before the build.
    third = _build(pool, {"CONFIG_LIST": "y"})
    assert (third.came_from, third.kept) == ("1", "3")
    assert [_config(pool.parking / n) for n in ("1", "2", "3")] == [
        "CONFIG_FTRACE=y\n", "CONFIG_LIST=y\nCONFIG_FTRACE=y\n", home0]
    # Nearest to LIST+FTRACE+NLS: parked tree 2 (only NLS differs), swapped in; the
    # shared tree's state (LIST) takes its place; a narrow build: no copy.
    again = _build(pool, {"CONFIG_LIST": "y", "CONFIG_FTRACE": "y", "CONFIG_NLS": "y"})
    assert (again.came_from, again.kept, again.estimate) == ("2", None, 1)
    assert _config(pool.parking / "2") == "CONFIG_LIST=y\n"
    # Wide from every tree (KASAN is a compiler flag), every slot taken: the nearest is
    # the shared tree; its copy goes over the least recently used parked tree (1).
    kept = {n: _config(pool.parking / n) for n in ("2", "3")}
    before = _config(pool.home)
    wide = pool.choose({"CONFIG_LIST": "y", "CONFIG_FTRACE": "y", "CONFIG_NLS": "y", "CONFIG_KASAN": "y"})
    assert (wide.came_from, wide.kept, wide.estimate) == (None, "1", 40)
    assert _config(pool.parking / "1") == before
    assert {n: _config(pool.parking / n) for n in kept} == kept


def _stopped_halfway(pool, values: dict[str, str]) -> None:
    """A build of `values` killed before its link: the new .config, the old vmlinux."""
    vmlinux = pool.home / "vmlinux"
    (pool.home / ".config").write_text("".join(f"{o}={v}\n" for o, v in values.items()))
    past = vmlinux.stat().st_mtime_ns - 10**9
    os.utime(vmlinux, ns=(past, past))


def test_a_tree_whose_build_stopped_halfway_is_neither_trusted_nor_copied(pool):
    """Its .config names a state the tree does not hold: judged by it, a probe of that
    state would look free, and a copy would park half a build."""
    _stopped_halfway(pool, {"CONFIG_LIST": "y"})
    alone = pool.choose({"CONFIG_LIST": "y"})
    assert (alone.came_from, alone.kept, alone.estimate) == (None, None, 0)
    assert not any((pool.parking / n).exists() for n in ("1", "2", "3"))
    # With a finished tree parked, that one is the nearest, whatever the stopped one says.
    _build(pool, {"CONFIG_LIST": "n", "CONFIG_NLS": "n"})
    _build(pool, {"CONFIG_LIST": "y", "CONFIG_NLS": "n"})      # wide: LIST=n parked as 1
    _stopped_halfway(pool, {"CONFIG_LIST": "n", "CONFIG_NLS": "y"})
    choice = pool.choose({"CONFIG_LIST": "n", "CONFIG_NLS": "y"})
    assert (choice.came_from, choice.estimate) == ("1", 1)


def test_before_anything_is_built_the_shared_tree_is_used(tmp_path):
    pool = treepool.TreePool(tmp_path / "build" / "t", tmp_path, "x86_64")
    choice = pool.choose({"CONFIG_A": "y"})
    assert (choice.tree, choice.came_from, choice.kept) == (pool.home, None, None)


# -- with the fake kernel tree: what make really recompiles ---------------------------------

def _compiled(build_log: Path) -> list[str]:
    return re.findall(r"^  CC      (\S+)$", build_log.read_text(), re.MULTILINE)


def test_a_probe_that_returns_to_an_earlier_state_recompiles_only_its_own_options(lab, capsys):
    """DEBUG_LIST is named by every object that includes <linux/list.h>; DEBUG_ATOMIC_SLEEP
    by kernel/sched.o alone. With one shared tree, the third and fourth probes would each
    recompile the list users again."""
    base = parse_short("base=tinyconfig+CONFIG_DEBUG_KERNEL=y", source=str(lab.tree))
    text = lab_stage.prepare(base).config.text
    prober = Prober(Store(lab.store), base, text, ["size.text"])
    a, b, c, d = prober.probe_all([
        ("a", {}), ("b", {"CONFIG_DEBUG_LIST": "y"}), ("c", {"CONFIG_DEBUG_ATOMIC_SLEEP": "y"}),
        ("d", {"CONFIG_DEBUG_LIST": "y", "CONFIG_DEBUG_ATOMIC_SLEEP": "y"})])
    compiled = {p.label: _compiled(p.build.artifacts / "build.log") for p in (a, b, c, d)}
    list_users = compiled["b"]
    assert len(list_users) >= 5 and "kernel/sched.o" in list_users
    assert compiled["c"] == ["kernel/sched.o"]    # next to a's build, not b's
    assert compiled["d"] == ["kernel/sched.o"]    # next to b's build, not c's
    assert b.tree is not None and b.tree.kept is not None    # a's state parked before b's build
    # c: a's state swapped in (b's parked in its place); d: b's state swapped in.
    assert c.tree.came_from == b.tree.kept and d.tree.came_from == c.tree.came_from
    # Every probe's kernel is the one its config asks for, whichever tree built it.
    for p in (a, b, c, d):
        assert (p.build.artifacts / "config").read_text() == lab_stage.prepare(
            prober._spec(p.label, p.requested)).config.text


def _held(lock_file: Path) -> bool:
    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_a_lock_granted_on_a_tree_parked_meanwhile_is_taken_again_at_the_path(tmp_path):
    """A build waiting for the shared tree while the pool swaps another tree into its
    place must end up holding the tree at the path, not the one parked."""
    tree, parked = tmp_path / "tree", tmp_path / "parked"
    seen = []

    def waiter():
        with locked(tree):
            seen.append((_held(tree / ".kernellab.lock"), _held(parked / ".kernellab.lock")))

    with locked(tree):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.3)             # the waiter is blocked on the old tree's lock file
        os.rename(tree, parked)
        tree.mkdir()
    thread.join(10)
    assert seen == [(True, False)]
