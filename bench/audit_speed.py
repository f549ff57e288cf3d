"""How long a full audit of Debian's amd64 6.1 config takes, cold and with the parsed
Kconfig tree cached (config/kconfig.py), side by side in one run.

Each audit runs in a fresh interpreter, so nothing parsed stays in memory between them:
- cold: the cached tree is deleted first, so kconfiglib parses the Kconfig files and the
  preprocessor runs its compiler probes again (the state after installing kernellab, or
  after a new compiler or kernel);
- cached: the same audit again, with the tree the cold run cached.
Both are timed inside the process (import, parse, load, audit, fragment, render: goal
<= 4 s cold and <= 1 s cached) and as `python -m kernellab.cli audit` end to end, which
also pays for importing the whole command line.

Run:  .venv/bin/python bench/audit_speed.py [--profile throughput-server] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import lzma
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = time.perf_counter()

GOAL_COLD_S = 4.0
GOAL_CACHED_S = 1.0
STEPS = ("import", "parse tree", "load config", "audit", "fragment", "render")


def audit_once(config: str, profile_name: str) -> dict[str, float]:
    """One full audit, as `kernellab audit CONFIG --profile P --fragment F` does it."""
    times = {}
    mark = time.perf_counter()

    def step(name):
        nonlocal mark
        now = time.perf_counter()
        times[name] = now - mark
        mark = now

    from kernellab import arches, sources, toolchain
    from kernellab.config import audit, kconfig
    from kernellab.knowledge import rules_for
    from kernellab.report import auditreport
    times["import"] = time.perf_counter() - START   # interpreter start-up included
    mark = time.perf_counter()
    profile = arches.load("x86_64")
    tree = kconfig.open_tree(sources.resolve("debian:6.1"), profile, toolchain.detect(profile))
    gc.freeze()   # as the command line does (cli._kconfig_tree)
    step("parse tree")
    tree.load(config)
    step("load config")
    report = audit.audit(tree, rules_for(profile_name), profile_name)
    step("audit")
    audit.fragment(tree, report)
    step("fragment")
    auditreport.render_table(report)
    step("render")
    return times


def tree_cache() -> Path:
    """The cached parse of Debian's 6.1 Kconfig for x86_64."""
    from kernellab import arches, sources, toolchain
    from kernellab.config import kconfig
    profile = arches.load("x86_64")
    return kconfig.cache_path(sources.resolve("debian:6.1"), profile, toolchain.detect(profile))


def run(argv: list[str], cold: bool) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + sys, the compiler probes included) of one command."""
    if cold:
        tree_cache().unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, result.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="throughput-server")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each kind; medians are printed")
    ap.add_argument("--once", metavar="CONFIG", help=argparse.SUPPRESS)   # the child process
    args = ap.parse_args()
    if args.once:
        print(json.dumps(audit_once(args.once, args.profile)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "debian-6.1-amd64.config"
        config.write_bytes(lzma.decompress(Path("/usr/src/linux-config-6.1/config.amd64_none_amd64.xz").read_bytes()))
        child = [sys.executable, __file__, "--profile", args.profile, "--once", str(config)]
        cli = [sys.executable, "-m", "kernellab.cli", "audit", str(config), "--profile", args.profile,
               "--fragment", str(Path(tmp) / "fragment.config")]
        steps = {kind: [] for kind in ("cold", "cached")}
        walls = {kind: [] for kind in ("cold", "cached", "cli cold", "cli cached")}
        cpus = {kind: [] for kind in ("cold", "cached")}
        for _ in range(args.repeat):
            for kind in ("cold", "cached"):
                wall, cpu, out = run(child, cold=kind == "cold")
                steps[kind].append(json.loads(out))
                walls[kind].append(wall)
                cpus[kind].append(cpu)
            for kind in ("cli cold", "cli cached"):
                walls[kind].append(run(cli, cold=kind == "cli cold")[0])

    def med(values):
        return statistics.median(values)

    print(f"full audit of Debian's amd64 6.1 config, profile {args.profile}, "
          f"median of {args.repeat} runs each, fresh interpreter per run\n")
    print(f"{'':34}{'cold':>9}{'cached':>9}{'cold/cached':>13}")
    for name in STEPS:
        cold, cached = (med([t[name] for t in steps[k]]) for k in ("cold", "cached"))
        print(f"  {name:32}{cold:8.2f}s{cached:8.2f}s{cold / cached:12.1f}x")
    totals = {k: med([sum(t.values()) for t in steps[k]]) for k in steps}
    print(f"{'in-process total':34}{totals['cold']:8.2f}s{totals['cached']:8.2f}s"
          f"{totals['cold'] / totals['cached']:12.1f}x")
    print(f"{'process wall time':34}{med(walls['cold']):8.2f}s{med(walls['cached']):8.2f}s"
          f"{med(walls['cold']) / med(walls['cached']):12.1f}x")
    print(f"{'process CPU time (user+sys)':34}{med(cpus['cold']):8.2f}s{med(cpus['cached']):8.2f}s"
          f"{med(cpus['cold']) / med(cpus['cached']):12.1f}x")
    print(f"{'`kernellab audit` end to end':34}{med(walls['cli cold']):8.2f}s{med(walls['cli cached']):8.2f}s"
          f"{med(walls['cli cold']) / med(walls['cli cached']):12.1f}x")
    print(f"\nload average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"goal: cold <= {GOAL_COLD_S:.0f} s, cached <= {GOAL_CACHED_S:.0f} s (process wall time): "
          f"cold {'met' if med(walls['cold']) <= GOAL_COLD_S else 'NOT met'}, "
          f"cached {'met' if med(walls['cached']) <= GOAL_CACHED_S else 'NOT met'}")


if __name__ == "__main__":
    main()
