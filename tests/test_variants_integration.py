"""Integration: variants of a real lab-minimal kernel a few objects away from it, built in
the shared x86_64 build tree before the ssh tests' guest moves that tree two thirds of the
way from lab-minimal (conftest.py's order): without the AF_ALG cipher sockets, and the
kernel's tick profiler (+CONFIG_PROFILING) while the agent runs the null system call."""

import json

import pytest

from conftest import kernellab
from kernellab import modes
from kernellab.experiments import lab
from kernellab.experiments.spec import parse_short

pytestmark = pytest.mark.integration


def test_metric_the_kernel_cannot_support_is_not_available_with_the_option_it_needs(minimal, store):
    """lab-minimal without the AF_ALG cipher sockets: the in-kernel AES metric says which
    option it needs, never a zero. (An incremental rebuild of the shared build tree: two
    objects of crypto/ and the link; CONFIG_UNIX=n, tried first, recompiled a third of it.)"""
    from kernellab.experiments import compare
    from kernellab.experiments.spec import Experiment

    exp = Experiment("no-alg", [parse_short("base=lab-minimal"),
                                parse_short("noalg=lab-minimal+CONFIG_CRYPTO_USER_API_SKCIPHER=n")])
    words = "KL_ONLY=syscall.null,crypto.aes256cbc_kernel,crypto.aes256cbc_user"
    how = compare.Plan(modes.get("icount"), 1, 1, lab.RunOptions("icount", timeout_s=300, cmdline_extra=words))
    report, failures = compare.run_experiment(exp, store, how, log=lambda m: None)
    assert failures == []
    metrics = {m["name"]: m for m in report["metrics"]}
    kernel = metrics["crypto.aes256cbc_kernel"]
    assert kernel["values"]["noalg"] == {"not_available": "needs CONFIG_CRYPTO_USER_API_SKCIPHER"}
    assert kernel["values"]["base"]["median"] > 0
    assert "noalg" not in kernel["delta_pct"]
    # The same cipher in user space, and a system call, need no such socket.
    for name in ("syscall.null", "crypto.aes256cbc_user"):
        assert metrics[name]["values"]["noalg"]["median"] > 0


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
