"""Integration: variants of a real lab-minimal kernel a few objects away from it, built in
the shared x86_64 build tree before the ssh tests' guest moves that tree two thirds of the
way from lab-minimal (conftest.py's order): without the AF_ALG cipher sockets, the
kernel's tick profiler (+CONFIG_PROFILING) while the agent runs the null system call, and
ext4 (+ext4: about 60 objects here, about 900 after the ssh tests) for a workload's disk."""

import json
import subprocess

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


DISKWRITE_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	static char block[1 << 20];
	struct statfs fs;
	int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
	long mib = atol(argv[2]);
	for (long i = 0; fd >= 0 && i < mib; i++)
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			return 1;
	if (fd < 0 || fsync(fd) < 0 || statfs(argv[1], &fs) < 0)
		return 1;
	printf("magic: %lu\nwritten MiB: %ld\n", (unsigned long)fs.f_type, mib);
	return 0;
}
"""

DISKWRITE_TOML = """name = "diskwrite"
description = "writes N MiB to a file under its directory and says the file system's magic"
packages = []
binaries = ["diskwrite"]
command = ["diskwrite", "{workdir}/big.dat", "{mib}"]
fixed_work = true
why = "a fixed number of bytes"

[run]
iterations = "mib"
timeout_s = 120

[params.mib]
default = "96"
pattern = '[1-9][0-9]{0,3}'
help = "MiB written"

[output]
format = "text"

[needs]
kernel = ["CONFIG_VIRTIO_BLK", "CONFIG_EXT4_FS"]
disk_mib = 128

[[metric]]
name = "magic"
unit = "count"
better = "higher"
modes = ["wall"]
regex = '^magic: ([0-9]+)$'

[[metric]]
name = "written"
unit = "MiB"
better = "higher"
modes = ["wall"]
regex = '^written MiB: ([0-9]+)$'
"""


@pytest.mark.integration
def test_a_workload_that_needs_a_disk_writes_on_ext4_on_a_virtio_disk_or_says_the_kernel_lacks_ext4(
        minimal, store, tmp_path):
    """In wall mode QEMU attaches an ext4 disk with room for the workload's disk_mib (the
    variant names no fs:), the agent mounts it, and the program (static, the user's own)
    writes 96 MiB there: more than the guest's tmpfs could take beside the agent, on a file
    system whose magic is ext4's. lab-minimal has no ext4: the agent finds the disk, cannot
    mount it, does not run the program on the tmpfs instead, and its metrics say what the
    kernel lacks."""
    from kernellab.agent.compile import cross_targets
    from kernellab.experiments import compare

    cc = cross_targets()["x86_64"].cc
    (tmp_path / "diskwrite.c").write_text(DISKWRITE_C)
    subprocess.run([cc, "-static", "-O1", "-o", str(tmp_path / "diskwrite"), str(tmp_path / "diskwrite.c")],
                   check=True)
    (tmp_path / "diskwrite.toml").write_text(DISKWRITE_TOML)
    instances = compare.resolve_workloads([str(tmp_path / "diskwrite.toml")])
    options = lab.RunOptions(mode="wall", timeout_s=600, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=3",
                             workloads=instances)
    with_ext4 = lab.prepare(parse_short("ext4=lab-minimal+ext4"))
    for prepared, build in ((with_ext4, lab.ensure_built(with_ext4, store)), minimal):
        outcome = lab.run(prepared, build, store, options)
        assert outcome.status == "ok", outcome.reason
        details = json.loads(store.run(outcome.run_id)["target_info"])["details"]
        assert details["file_system"].startswith("ext4-4k (the workloads' disk: the variant names no fs:): ext4, "
                                                 "4 KiB blocks, no /tst.dd, 128 MiB free"), details
        [row] = store.run_workloads(outcome.run_id)
        metrics = store.run_metrics(outcome.run_id)
        if prepared is with_ext4:
            assert row["status"] == "ok", (row, store.run_log(outcome.run_id)[-3000:])
            assert "t=meta key=file_system value=ext4,/dev/vd" in store.run_log(outcome.run_id)
            assert metrics["diskwrite.magic"] == [float(0xEF53)]   # EXT4_SUPER_MAGIC: not the tmpfs's
            assert metrics["diskwrite.written"] == [96.0]
        else:
            assert row["status"] == "no_disk" and row["reason"].endswith(
                "has no file system on one: kernel_has_no_ext4; not run on the tmpfs instead"), row
            assert "diskwrite.written" not in metrics
            assert store.run_unavailable(outcome.run_id)["diskwrite.written"] == "needs CONFIG_EXT4_FS"
