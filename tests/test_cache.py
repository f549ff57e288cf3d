"""`kernellab cache`: what the cache holds, and pruning it by age, by source and by use,
never while another kernellab command uses it."""

import fcntl
import json
import subprocess
import sys
import time

import pytest

from kernellab import cache, paths
from kernellab.errors import LabError


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
