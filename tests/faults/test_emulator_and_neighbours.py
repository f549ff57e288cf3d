"""QEMU dying in the middle of a run, and two kernellab commands on one store and one build
tree at once."""

import json

import pytest
from test_kill import Kernellab, query


def test_qemu_dying_mid_run_fails_that_run_and_the_experiment_goes_on(lab, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_QEMU_CRASH_AFTER", f"4:{tmp_path / 'crashed-once'}")
    code = lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json",
                    "-o", str(tmp_path / "r.json"))
    assert code == 1    # a run failed: it wins over everything but a usage error
    runs = lab.runs()
    [crashed] = [r for r in runs if r["status"] != "ok"]
    assert crashed["status"] == "incomplete"
    assert crashed["reason"].startswith("qemu-system-x86_64 died of SIGABRT")
    assert crashed["samples"] >= 4                     # what it measured before is kept
    assert [r["name"] for r in runs if r["status"] == "ok"] == [n for n in ("a", "b") if n != crashed["name"]]
    report = json.loads((tmp_path / "r.json").read_text())
    assert {v["name"] for v in report["variants"]} == {"a", "b"}


@pytest.mark.lab
def test_two_commands_on_one_store_and_one_build_tree_both_finish_right(tmp_path, monkeypatch):
    from fakes import fake_lab
    kl = Kernellab(fake_lab(tmp_path, monkeypatch))
    first = kl.start("compare", "a=tinyconfig", "--format", "json")
    second = kl.start("compare", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json")
    out = {}
    for name, proc in (("a", first), ("b", second)):
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        out[name] = json.loads(stdout)
    null = {name: next(m for m in report["metrics"] if m["name"] == "syscall.null")
            for name, report in out.items()}
    # Each got its own kernel's figure: the fake's null syscall is 95 ns, 25% more with FAKE_SLOW.
    assert null["a"]["values"]["a"]["median"] == 95.0 and null["b"]["values"]["b"]["median"] == 95.0 * 1.25
    assert [r[0] for r in query(kl.lab.store, "SELECT status FROM runs")] == ["ok", "ok"]
    assert query(kl.lab.store, "SELECT count(*) FROM (SELECT run_id, seq FROM samples WHERE seq IS NOT NULL"
                               " GROUP BY run_id, seq HAVING count(*) > 1)") == [(0,)]
