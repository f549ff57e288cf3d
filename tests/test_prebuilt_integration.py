"""One of Debian's prebuilt kernels end to end: downloaded (6.12 cloud, the smallest: 34 MB),
booted twice in icount mode by `kernellab compare`, with the AF_ALG modules loaded by the
agent. The download stays in kernellab's cache: a second session fetches nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernellab.cli import main
from kernellab.store import Store

pytestmark = pytest.mark.integration

BASE = "debian-image:6.12-cloud"


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian) to download the image")
def test_a_prebuilt_image_is_measured_with_no_build_and_reruns_are_identical(tmp_path: Path) -> None:
    store_path, report_path = tmp_path / "lab.sqlite", tmp_path / "report.json"
    # A few metrics of different groups (compare --metric) prove what the whole agent would, in a
    # fraction of its time: system calls, processes, the kernel's crypto through the modules the
    # agent loads, and memory.
    asked = ["syscall.null", "proc.fork_exit", "crypto.aes256cbc_kernel", "meminfo.MemAvailable"]
    code = main(["compare", f"cloud={BASE}", "--runs", "2", "--format", "json", "-o", str(report_path),
                 "--store", str(store_path), *(a for m in asked for a in ("--metric", m))])
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["only_metrics"] == asked
    variant = report["variants"][0]
    assert variant["source"].startswith("linux-image-6.12.") and "=" in variant["source"]  # package=version
    assert variant["build"] is None and "not built (prebuilt by Debian)" in variant["note"]
    assert "af_alg, algif_skcipher" in variant["note"]
    metrics = {m["name"]: m["values"]["cloud"] for m in report["metrics"]}
    assert metrics["crypto.aes256cbc_kernel"]["median"] > 0          # the modules loaded
    assert metrics["size.text"]["median"] > 10_000                   # KiB, from the ELF in the bzImage
    assert metrics["build.wall"] == {"not_available": "not built (prebuilt by Debian)"}

    store = Store(store_path)
    first, second = ([(s["metric"], s["rep"], s["value"]) for s in store.run_samples(run["id"])
                      if not s["metric"].endswith(".host")]   # host-clock rows are real seconds
                     for run in variant["runs"])
    assert set(asked) <= {metric for metric, _, _ in first}
    assert first == second   # KASLR and all: the same kernel layout, the same instruction counts


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian) to download the image")
def test_the_distro_study_measures_debians_kernels_with_no_build(tmp_path: Path) -> None:
    """`kernellab study run distro --quick`: 6.1 and 6.12 cloud images, nothing built."""
    out = tmp_path / "distro.json"
    assert main(["study", "run", "distro", "--quick", "--format", "json", "-o", str(out),
                 "--store", str(tmp_path / "lab.sqlite")]) == 0
    study = json.loads(out.read_text())
    assert study["builds"] == 0 and study["failures"] == []
    variants = study["reports"]["x86_64"]["variants"]
    assert [v["name"] for v in variants] == ["6.1-cloud", "6.12-cloud"]
    assert all(v["prebuilt"].startswith("linux-image-") for v in variants)
    assert study["summary"][0].startswith("6.12 against 6.1, cloud kernels: boot and memory "
                                          "(6.12-cloud against 6.1-cloud): ")
    assert any(line.startswith("Linux 6.12: longterm") for line in study["support"])


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian) to download the image")
def test_a_preempt_rt_kernel_shows_the_agent_ready_line(tmp_path: Path) -> None:
    """PREEMPT_RT prints the console from a kernel thread once the system runs, and that
    thread drops what is below the console level when it gets to it: the agent's line must
    reach the console before the agent lowers the level for its records."""
    from kernellab.experiments import lab
    from kernellab.experiments.spec import parse_short

    prepared = lab.prepare(parse_short("rt=debian-image:6.1-rt"))
    store = Store(tmp_path / "lab.sqlite")
    outcome = lab.run(prepared, None, store, lab.RunOptions(cmdline_extra="KL_ONLY=syscall.null"))
    assert outcome.status == "ok", outcome.reason
    metrics = {s["metric"]: s["value"] for s in store.run_samples(outcome.run_id)}
    assert 0 < metrics["boot.init_start.printk"] < metrics["boot.agent_ready.printk"]
    assert metrics["syscall.null"] > 0
