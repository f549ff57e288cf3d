"""Integration: the kernel's tick profiler on a real lab-minimal kernel (+CONFIG_PROFILING)
while the agent runs the null system call."""

import json

import pytest

from conftest import kernellab

pytestmark = pytest.mark.integration


def profile(tmp_path, store_name):
    r = kernellab("profile", "a=lab-minimal", "b=lab-minimal", "--metric", "syscall.null", "--repeats", "21",
                  "--format", "json", store_path=tmp_path / store_name, timeout=1800)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_the_profile_shows_the_system_call_path_and_icount_reruns_give_the_same_ticks(tmp_path):
    first, err = profile(tmp_path, "one.sqlite")
    a, b = first["kernels"]
    assert a["ticks"] > 50 and a["metric_value"] > 0
    assert b["run"] == a["run"] and "(from the store)" in err   # the same kernel and command line: one boot
    assert all(c["delta"] == 0 for c in first["changes"])
    top = sorted(first["changes"], key=lambda c: -c["a_share"])[:8]
    # getppid() in a loop: the kernel's time is the system call path.
    assert any(name in c["function"] for c in top for name in ("syscall", "getppid", "entry_SYSCALL"))
    assert "icount mode" in first["how"] and "CONFIG_PROFILING=y" in first["how"]

    second, _ = profile(tmp_path, "two.sqlite")   # a new store: booted again
    assert second["kernels"][0]["ticks"] == a["ticks"]
    assert second["changes"] == first["changes"]
