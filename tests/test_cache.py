"""`kernellab cache`: what the cache holds, and pruning it by age, by source and by use,
never while another kernellab command uses it."""

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes import fake_lab
from kernellab import cache, paths
from kernellab.errors import LabError
from kernellab.store import Store


def shown(lab, capsys, *args):
    assert lab.main("cache", "show", "--all", "--format", "json", *args) == 0
    return json.loads(capsys.readouterr().out)


def test_show_names_what_recent_runs_used_and_prune_unused_keeps_it(lab, capsys):
    assert lab.main("compare", "a=tinyconfig") == 0
    assert lab.main("compare", "b=tinyconfig+CONFIG_FAKE_SLOW=y") == 0
    capsys.readouterr()
    report = shown(lab, capsys)
    artifacts = {e["path"]: e for e in report["entries"] if e["kind"] == "artifacts"}
    assert len(artifacts) == 2 and sorted(len(e["used_by"]) for e in artifacts.values()) == [1, 1]
    [build_tree] = [e for e in report["entries"] if e["kind"] == "build"]
    assert len(build_tree["used_by"]) == 2                  # both runs' source
    kinds = {k["kind"]: k for k in report["kinds"]}
    assert kinds["artifacts"]["prunable"] and not kinds["ccache"]["prunable"]

    # Only the latest run counts as recent: a's build goes, b's and the shared tree stay.
    assert lab.main("cache", "prune", "--unused", "--recent", "1") == 0
    out = capsys.readouterr()
    assert "freed " in out.out and "removing artifacts/" in out.err
    after = shown(lab, capsys)
    left = [e for e in after["entries"] if e["kind"] == "artifacts"]
    assert len(left) == 1 and left[0]["used_by"]
    assert any(e["kind"] == "build" for e in after["entries"])
    # a, measured again, is built again (its artifacts are gone), and measured right.
    assert lab.main("compare", "a=tinyconfig") == 0
    assert "a: built in" in capsys.readouterr().err


def test_prune_by_source_and_dry_run(lab, capsys):
    assert lab.main("compare", "a=tinyconfig") == 0
    capsys.readouterr()
    assert lab.main("cache", "prune", "--source", str(lab.tree), "--dry-run") == 0
    out = capsys.readouterr()
    assert "would remove build/6.1.0-fake-" in out.err and "would free" in out.out
    assert any(e["kind"] == "build" for e in shown(lab, capsys)["entries"])   # a dry run removes nothing
    assert lab.main("cache", "prune", "--source", str(lab.tree)) == 0
    capsys.readouterr()
    assert not any(e["kind"] == "build" for e in shown(lab, capsys)["entries"])


def test_prune_by_age_picks_only_what_is_older():
    old = cache.Entry("artifacts", paths.cache_root() / "old", 10, time.time() - 10 * cache.DAY_S, [])
    new = cache.Entry("artifacts", paths.cache_root() / "new", 10, time.time(), [])
    floors = cache.Entry("floors", paths.cache_root() / "f.json", 10, 0.0, [])
    assert cache.select([old, new, floors], older_than_days=7) == [old]
    with pytest.raises(LabError, match="say what to prune"):
        cache.select([old])


def test_prune_refuses_while_another_command_uses_the_cache(lab, capsys):
    Store(lab.store).close()   # a store, empty: `cache` refuses a --store that does not exist
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"f = open({str(lab.cache / '.in-use')!r}, 'a'); fcntl.flock(f, fcntl.LOCK_SH)\n"
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lab.main("cache", "prune", "--unused") == 2
        assert "another kernellab command is using the cache" in capsys.readouterr().err
        assert lab.main("cache", "show") == 0                # looking is always allowed
    finally:
        holder.kill()
        holder.wait()
    assert lab.main("cache", "prune", "--unused") == 0
    # And the prune leaves nothing locked behind it: another command may start at once.
    with open(lab.cache / ".in-use", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_build_tree_is_used_by_the_runs_of_its_arch_and_toolchain_only(lab, capsys):
    """Issue 33: `cache show --all` said another arch's tree (same source) was used by the x86_64
    runs, and cut the x86_64 tree's list at three runs without saying so."""
    assert lab.main("compare", "a=tinyconfig", "--runs", "4") == 0      # runs 1-4, x86_64
    assert lab.main("compare", "b=tinyconfig+CONFIG_FAKE_SLOW=y") == 0  # run 5: made an s390x run below
    capsys.readouterr()
    db = sqlite3.connect(lab.store)
    db.execute("UPDATE variants SET arch = 's390x' WHERE name = 'b'")
    db.commit()
    db.close()
    [x86_64] = (lab.cache / "build").iterdir()
    source_id = x86_64.name.partition("-x86_64-")[0]
    compiler = x86_64.name.rpartition("-x86_64-")[2]                     # gcc-VERSION: the host's gcc
    s390x = lab.cache / "build" / f"{source_id}-s390x-s390x-linux-gnu-{compiler}"
    clang = lab.cache / "build" / f"{source_id}-x86_64-clang-99.0.0"    # same source and arch, another compiler
    for tree in (s390x, clang):
        tree.mkdir()

    used = {Path(e["path"]).name: e["used_by"] for e in shown(lab, capsys)["entries"] if e["kind"] == "build"}
    assert used == {x86_64.name: [1, 2, 3, 4], s390x.name: [5], clang.name: []}
    resolve = {Path(e["path"]).name: e["used_by"] for e in shown(lab, capsys)["entries"] if e["kind"] == "resolve"}
    assert resolve[f"{source_id}-symbols.json"] == [1, 2, 3, 4, 5]      # the source's, whatever the arch
    assert resolve[x86_64.name] == [1, 2, 3, 4]

    assert lab.main("cache", "show", "--all") == 0
    lines = {line.split(":")[0].strip(): line for line in capsys.readouterr().out.splitlines()}
    assert lines[f"build/{x86_64.name}"].endswith("used by runs 1-4")
    assert lines[f"build/{s390x.name}"].endswith("used by run 5")
    assert lines[f"build/{clang.name}"].endswith("unused")


def test_the_runs_an_entry_was_used_by_are_all_named_as_ranges():
    assert cache.runs_text([1, 2, 3, 4, 6, 9, 10]) == "runs 1-4, 6, 9-10"
    assert cache.runs_text([7]) == "run 7"
    many = cache.runs_text(list(range(1, 40, 2)))
    assert many.startswith("runs 1, 3, 5,") and many.endswith("and 12 more")


def _age(path: Path, days: float) -> None:
    then = time.time() - days * cache.DAY_S
    os.utime(path, (then, then))


@pytest.mark.lab
def test_the_agent_and_initramfs_a_run_booted_are_used_and_dated_by_their_last_use(tmp_path, monkeypatch, capsys):
    """They always showed as unused, dated by when they were first made."""
    # An agent directory of its own: the fake lab's shared one holds other tests' agents,
    # and this test writes and ages files in it.
    lab = fake_lab(tmp_path, monkeypatch, shared=tmp_path / "own")
    assert lab.main("compare", "a=tinyconfig") == 0                       # run 1
    [agent] = (lab.cache / "agent").iterdir()
    [initrd] = (lab.cache / "initramfs").iterdir()
    older_agent = lab.cache / "agent" / "agent-x86_64-0123456789abcdef"   # an agent no run booted
    older_agent.write_bytes(b"\x7fELF an older agent")
    not_cpio = lab.cache / "initramfs" / "0123456789abcdef0123.cpio"      # damaged: no archive at all
    not_cpio.write_bytes(b"070701zzzz")
    for path in (agent, initrd):
        _age(path, 30)
    assert lab.main("compare", "a=tinyconfig", "--runs", "2") == 0        # runs 2-3: the same agent, taken
    capsys.readouterr()

    entries = {Path(e["path"]).name: e for e in shown(lab, capsys)["entries"]}
    assert entries[agent.name]["used_by"] == entries[initrd.name]["used_by"] == [1, 2, 3]
    assert entries[older_agent.name]["used_by"] == entries[not_cpio.name]["used_by"] == []
    for name in (agent.name, initrd.name):                                # last used now, not 30 days ago
        assert time.time() - entries[name]["modified"] < cache.DAY_S
    assert lab.main("cache", "show", "--all") == 0
    lines = {line.split(":")[0].strip(): line for line in capsys.readouterr().out.splitlines()}
    assert lines[f"agent/{agent.name}"].endswith("0 day(s) old, used by runs 1-3")
    assert lines[f"initramfs/{initrd.name}"].endswith("used by runs 1-3")
    assert lines[f"agent/{older_agent.name}"].endswith("unused")

    # A machine runs the agent as a program: the run names the binary itself.
    db = sqlite3.connect(lab.store)
    db.execute("UPDATE runs SET initramfs = ? WHERE id = 3", (agent.name,))
    db.execute("UPDATE runs SET initramfs = '../agent/' || ? WHERE id = 2", (agent.name,))   # no path is opened
    db.commit()
    db.close()
    entries = {Path(e["path"]).name: e for e in shown(lab, capsys)["entries"]}
    assert entries[agent.name]["used_by"] == [1, 3] and entries[initrd.name]["used_by"] == [1]


def _userland(lab) -> dict[str, Path]:
    """The cache's userland as `workload userland` leaves it, for two Debian architectures."""
    root = lab.cache / "userland"
    made = {"amd64": root / "amd64", "amd64-request": root / "amd64-0123456789abcdef0123.json",
            "amd64-segment": root / "amd64-89abcdef0123456789ab.cpio.gz", "arm64": root / "arm64",
            "arm64-segment": root / "arm64-0123456789abcdef0123.cpio.gz"}
    for name, path in made.items():
        if "-" in name:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"segment or request")
        else:
            (path / "debs").mkdir(parents=True)
            (path / "debs" / "fio_3.33-3_amd64.deb").write_bytes(b"a package")
    return made


def _ran_a_workload(lab, run_id: int, packages: list[str]) -> None:
    db = sqlite3.connect(lab.store)
    db.execute("INSERT INTO workloads (run_id, label, provenance, status) VALUES (?, 'w', ?, 'ok')",
               (run_id, json.dumps({"workload": "w", "packages": packages})))
    db.commit()
    db.close()


def test_userland_is_pruned_as_the_other_large_kinds_are_and_kept_while_runs_use_it(lab, capsys):
    """cache.PRUNABLE lacked `userland`: Debian's packages for the workloads, unpacked, were
    never pruned."""
    assert lab.main("compare", "a=tinyconfig", "--runs", "2") == 0       # runs 1-2, x86_64: amd64
    made = _userland(lab)
    _ran_a_workload(lab, 2, ["fio"])
    _ran_a_workload(lab, 1, [])                                          # a workload of the user's own programs
    capsys.readouterr()
    report = shown(lab, capsys)
    assert {k["kind"]: k["prunable"] for k in report["kinds"]}["userland"] is True
    used = {Path(e["path"]).name: e["used_by"] for e in report["entries"] if e["kind"] == "userland"}
    assert used == {"amd64": [2], made["amd64-request"].name: [2], made["amd64-segment"].name: [2],
                    "arm64": [], made["arm64-segment"].name: []}

    assert lab.main("cache", "prune", "--unused") == 0
    assert "removing userland/arm64" in capsys.readouterr().err
    assert not made["arm64"].exists() and not made["arm64-segment"].exists()
    assert all(made[k].exists() for k in ("amd64", "amd64-request", "amd64-segment"))
    # By age, as the others: when it was last assembled or taken from the cache.
    _age(made["amd64-request"], 10)
    assert lab.main("cache", "prune", "--older-than", "7") == 0
    capsys.readouterr()
    assert not made["amd64-request"].exists() and made["amd64-segment"].exists()
