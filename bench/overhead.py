"""kernellab's own overhead, and how repeatable its two timing modes are.

1. Build + boot + measure one variant (lab-minimal, Debian 6.1, x86_64) with kernellab,
   and the same work with the raw commands (`make olddefconfig`, `make -jN bzImage`,
   `qemu-system-x86_64 ...` until the agent's last record), side by side in one run, in
   fresh build trees. Both compile through the same ccache (warm: the figure is then
   kernellab's own overhead on a short job, the harder case for a ratio), or with
   `--cold` both without it. Prints the ratio (goal: <= 1.03x).
2. Spread of 3 reruns of the same kernel in icount mode vs wall mode: per metric, the
   range of the per-run medians as % of their median.

Run:  .venv/bin/python bench/overhead.py [--cold]   (warm: ~5 minutes; cold: ~15, on 2 cores)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernellab import paths
from kernellab.agent.compile import agent_binary
from kernellab.build import REPRODUCIBLE_ENV
from kernellab.experiments import lab
from kernellab.experiments.spec import parse_short
from kernellab.initramfs import agent_initramfs
from kernellab.store import Store
from kernellab.targets import qemu

METRICS = ["syscall.null", "syscall.read", "syscall.write", "syscall.open_close",
           "ipc.pipe_rtt", "proc.fork_exit", "proc.fork_exec", "boot.agent_ready.printk",
           "boot.agent_ready.host"]


def raw_commands(prepared, workdir: Path) -> float:
    """What a kernel engineer would type, timed end to end."""
    profile = prepared.profile
    start = time.monotonic()
    (workdir / ".config").write_text(prepared.config.text)
    make = ["make", "-s", "-C", str(prepared.source.tree), f"O={workdir}", f"ARCH={profile.kernel_arch}",
            "CC=ccache gcc"]
    env = dict(os.environ, **REPRODUCIBLE_ENV)  # the same work as kernellab's build, byte for byte
    subprocess.run(make + ["olddefconfig"], check=True, env=env)
    subprocess.run(make + [f"-j{os.cpu_count()}", profile.build_target], check=True, stdout=subprocess.DEVNULL, env=env)
    initrd = agent_initramfs(agent_binary(profile.cc, profile.name))
    with tempfile.TemporaryDirectory() as tmp:
        scratch = qemu.scratch_disk(Path(tmp), qemu.SCRATCH_MIB)
        return _boot_raw(qemu.QemuTarget(profile).command(workdir / profile.boot_image, initrd, "", "icount",
                                                          scratch=scratch), start)


def _boot_raw(argv: list[str], start: float) -> float:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, errors="replace")
    for line in proc.stdout:
        if "t=end" in line:
            break
    proc.kill()
    proc.wait()
    return time.monotonic() - start


def kernellab_run(cache: Path) -> float:
    """The same work through kernellab's command line, in a cache with no build in it."""
    env = dict(os.environ, KERNELLAB_CACHE=str(cache))
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "kernellab.cli", "compare", "lab-minimal",
                    "--store", str(cache / "bench.sqlite")], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def spread(store, prepared, build, mode: str, reruns: int = 3) -> dict[str, float]:
    medians: dict[str, list[float]] = {m: [] for m in METRICS}
    for _ in range(reruns):
        outcome = lab.run(prepared, build, store, lab.RunOptions(mode))
        rows = store.run_samples(outcome.run_id)
        for m in METRICS:
            values = [r["value"] for r in rows if r["metric"] == m]
            if values:
                medians[m].append(statistics.median(values))
    return {m: 100 * (max(v) - min(v)) / statistics.median(v) for m, v in medians.items() if len(v) == reruns}


def main() -> None:
    cold = "--cold" in sys.argv[1:]
    if cold:
        os.environ["CCACHE_DISABLE"] = "1"
    os.environ["CCACHE_DIR"] = str(paths.cache_dir("ccache"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = Store(tmp / "bench.sqlite")
        prepared = lab.prepare(parse_short("lab-minimal=lab-minimal"))
        # The bench cache shares the extracted source tree, not builds or artifacts.
        cache = tmp / "cache"
        cache.mkdir()
        (cache / "sources").symlink_to(paths.cache_dir("sources"))
        (cache / "ccache").symlink_to(paths.cache_dir("ccache"))
        shutil.copy(paths.cache_root() / "source-hashes.json", cache / "source-hashes.json")
        raw_dir = tmp / "raw"
        raw_dir.mkdir()
        raw = raw_commands(prepared, raw_dir)
        ours = kernellab_run(cache)
        how = "cold compile (ccache off)" if cold else "through one shared ccache"
        print(f"build + boot + measure, lab-minimal, Debian 6.1, x86_64, icount, {how}, 1 run each:")
        print(f"  raw make + qemu  {raw:8.1f} s")
        print(f"  kernellab        {ours:8.1f} s")
        print(f"  ratio            {ours / raw:8.3f}x  (goal <= 1.03x)")

        build = lab.ensure_built(prepared, store)
        print("\nspread of 3 reruns of one kernel: (max - min) / median of the per-run medians")
        icount = spread(store, prepared, build, "icount")
        wall = spread(store, prepared, build, "wall")
        print(f"  {'metric':26} {'icount':>10} {'wall':>10}")
        for m in METRICS:
            print(f"  {m:26} {icount.get(m, float('nan')):9.3f}% {wall.get(m, float('nan')):9.3f}%")


if __name__ == "__main__":
    main()
