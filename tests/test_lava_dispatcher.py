"""`kernellab lava-job` and `kernellab import-lava` against real LAVA: Debian's lava-dispatcher
(`lava-run`, the dispatcher without a server) runs the job kernellab writes for LAVA's QEMU
device type, with LAVA's own job validation, on the device dictionary lava-server renders for
a qemu device (tests/data/lava/qemu-x86_64.yaml, under TCG), and the log it writes is
imported as a run, with a workload run from the Debian userland the job's ramdisk carries.
The kernel is the integration lane's one lab-minimal build."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import kernellab
from kernellab.experiments import lab, lava
from kernellab.targets.lava import read_log

pytestmark = pytest.mark.integration

LAVA_RUN = shutil.which("lava-run")
DEVICE = Path(__file__).parent / "data" / "lava" / "qemu-x86_64.yaml"


@pytest.mark.skipif(LAVA_RUN is None, reason="lava-run is not installed: apt-get install --no-install-recommends "
                    "lava-dispatcher (src/kernellab/packages.txt lists it)")
def test_a_job_run_by_lavas_own_dispatcher_imports_as_a_run(minimal, store, tmp_path):
    prepared, build = minimal
    # The lab's file server: the dispatcher downloads file:// URLs itself. The job carries a
    # workload: its ramdisk is the agent's initramfs with hackbench's Debian userland appended,
    # the files the job's header says to serve.
    served = tmp_path / "served"
    served.mkdir()
    job_file = tmp_path / "job.yaml"
    workload = "hackbench:groups=1,loops=10"
    written = kernellab("lava-job", "lab-minimal=lab-minimal", "--device-type", "qemu", "--boot-method", "qemu",
                        "--artifact-url", served.as_uri(), "--workload", workload, "-o", str(job_file),
                        store_path=store.path)
    assert written.returncode == 0, written.stderr
    image, initrd = (Path(p) for p in re.match(r"# Written by kernellab lava-job\. Serve (\S+) and (\S+)\n",
                                                 job_file.read_text()).groups())
    assert image == build.image and initrd != lab.initramfs_for(prepared)
    for path in (image, initrd):
        (served / path.name).symlink_to(path)

    # The dispatcher keeps a job's files in /var/lib/lava/dispatcher/tmp/JOB: a number no
    # other job running now has.
    job = str(os.getpid())
    log = tmp_path / "lava-run.log"
    with log.open("wb") as stderr:   # where lava-run writes its log, without a server to send it to
        ran = subprocess.run([LAVA_RUN, "--job-id", job, "--output-dir", str(tmp_path / "out"),
                              "--device", str(DEVICE), str(job_file)],
                             stdout=subprocess.DEVNULL, stderr=stderr, timeout=900)
    said = [e.msg for e in read_log(log).entries if e.lvl != "target"]
    assert ran.returncode == 0 and "Job finished correctly" in said, log.read_text()[-3000:]
    assert {"case": "validate", "definition": "lava", "result": "pass"} in said   # LAVA's own validation
    [command] = [m for m in said if isinstance(m, str) and m.startswith("Boot command: ")]
    assert "-enable-kvm" not in command and '-append "console=ttyS0 ' in command
    # The boot ended on the agent's end record, the one prompt the job gives.
    assert f"Matched prompt #10: {lava.END_PROMPT}" in said

    done = kernellab("import-lava", str(log), "lab-minimal=lab-minimal", "--device-type", "qemu",
                     "--workload", workload, store_path=store.path)
    assert done.returncode == 0, done.stderr
    run_id = int(re.fullmatch(rf"job {job}: run (\d+), ok, \d+ samples\n", done.stdout).group(1))
    run = store.run(run_id)
    assert (run["target"], run["status"], run["mode"], run["initramfs"]) == ("lava", "ok", "wall", initrd.name)
    info = json.loads(run["target_info"])
    assert (info["label"], info["details"]["job_id"]) == ("LAVA device qemu", job)
    metrics = store.run_metrics(run_id)
    assert metrics["syscall.null"] and all(v > 0 for v in metrics["syscall.null"])
    # hackbench ran on the board from the same userland a QEMU guest of the arch boots.
    [ran_workload] = store.run_workloads(run_id)
    assert ran_workload["status"] == "ok", ran_workload
    assert metrics["hackbench.process_socket_time"] and all(v > 0 for v in metrics["hackbench.process_socket_time"])
    assert metrics["proc.fork_exit"] and all(v > 0 for v in metrics["proc.fork_exit"])
    # The kernel's first line follows SeaBIOS's terminal reset: its printk time is read all the same.
    assert {"boot.linux_version.host", "boot.linux_version.printk", "boot.init_start.printk",
            "boot.agent_ready.host"} <= set(metrics)
