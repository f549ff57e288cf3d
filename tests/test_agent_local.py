"""The agent compiled for this machine and run as an ordinary program (local mode)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import zlib

import pytest

from kernellab.agent.compile import agent_binary
from kernellab.errors import LabError

METRICS = (
    "syscall.null",
    "syscall.read",
    "syscall.write",
    "syscall.open_close",
    "ipc.pipe_rtt",
    "proc.fork_exit",
    "proc.fork_exec",
)
RECORD = re.compile(r"@KL (?P<payload>[^#]*) #(?P<crc>[0-9a-f]{8})")

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield agent_binary()


def run_agent(agent, *args: str) -> list[dict[str, str]]:
    result = subprocess.run([str(agent), *args], capture_output=True, text=True, timeout=30, check=True)
    lines = result.stdout.splitlines()
    records = []
    for line in lines:
        match = RECORD.fullmatch(line)
        assert match, f"malformed record line: {line!r}"
        payload = match["payload"]
        assert f"{zlib.crc32(payload.encode()):08x}" == match["crc"], line
        tokens = [token.split("=", 1) for token in payload.split(" ")]
        assert all(len(token) == 2 for token in tokens), line
        assert [key for key, _ in tokens[:2]] == ["seq", "t"], line
        records.append(dict(tokens))
    return records


@pytest.fixture(scope="module")
def full_run(agent):
    return run_agent(agent, "--repeats", "3", "--target-us", "200")


def samples(records, metric: str) -> list[dict[str, str]]:
    return [r for r in records if r["t"] == "sample" and r["metric"] == metric]


def test_framing(full_run):
    assert [int(r["seq"]) for r in full_run] == list(range(len(full_run)))
    hello, end = full_run[0], full_run[-1]
    assert hello["t"] == "hello"
    assert hello["mode"] == "local"
    assert hello["repeats"] == "3" and hello["target_us"] == "200"
    assert end == {"seq": str(len(full_run) - 1), "t": "end", "records": str(len(full_run) - 1)}
    assert all(r["t"] not in ("hello", "end") for r in full_run[1:-1])


def test_every_metric_has_its_samples(full_run):
    assert not [r for r in full_run if r["t"] == "na"]
    for metric in METRICS:
        got = samples(full_run, metric)
        assert [r["rep"] for r in got] == ["0", "1", "2"], metric
        for r in got:
            value = float(r["value"])
            assert r["unit"] == "ns" and int(r["iters"]) >= 1
            assert math.isfinite(value) and value > 0, r


def test_meminfo(full_run):
    (total,) = samples(full_run, "meminfo.MemTotal")
    assert total["unit"] == "KiB" and int(total["value"]) > 0
    assert all("(" not in r["metric"] for r in full_run if r["t"] == "sample")


def test_only_runs_the_chosen_metric(agent):
    records = run_agent(agent, "--repeats", "2", "--target-us", "200", "--only", "syscall.null")
    assert {r["metric"] for r in records if r["t"] == "sample"} == {"syscall.null"}
    assert len(samples(records, "syscall.null")) == 2
    assert records[-1]["records"] == str(len(records) - 1)


def test_recompile_is_a_cache_hit(agent, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(agent.parent.parent))
    mtime = agent.stat().st_mtime_ns
    assert agent_binary() == agent
    assert agent.stat().st_mtime_ns == mtime


def test_missing_compiler_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabError, match=r"apt-get install -y gcc-aarch64-linux-gnu"):
        agent_binary("aarch64-linux-gnu-gcc", "arm64")
