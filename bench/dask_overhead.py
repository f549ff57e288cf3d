"""What the Dask executor costs against the local lab, and what a second worker buys, on
the same experiment with its kernels already built, side by side in one run.

Each form runs `kernellab compare` on the default experiment's two kernels (lab-minimal
and debug, icount mode, both already in the cache, so no build), with a store of its own:
- local: the local lab (the two boots run at once in icount, as the local lab does);
- --workers 1: a local Dask cluster of one worker: the overhead of the executor (cluster
  start, the workers' cache lookups, every store write forwarded to the client);
- --workers 2: two workers, the boots of the round on both at once.
The figures must also be the same: the bench compares each form's samples with the
local ones (icount reruns are bit-identical; host-clock rows, real seconds, are left out).

Run:  .venv/bin/python bench/dask_overhead.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMS = {"local": [], "--workers 1": ["--workers", "1"], "--workers 2": ["--workers", "2"]}
KERNELLAB = [sys.executable, "-m", "kernellab.cli"]


def once(extra: list[str], where: Path) -> tuple[float, dict[str, list[float]]]:
    report = where / "report.json"
    store = where / "store.sqlite"
    for old in where.glob("store.sqlite*"):
        old.unlink()
    start = time.perf_counter()
    done = subprocess.run([*KERNELLAB, "compare", "--store", str(store), "--format", "json", "-o", str(report),
                           *extra], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"kernellab compare {' '.join(extra)} failed: {done.stderr.strip().splitlines()[-1:]}")
    if "built in" in done.stderr:
        sys.exit("a kernel was built: run `kernellab compare` once first so that both are in the cache")
    data = json.loads(report.read_text())
    # Host-clock rows (boot milestones in real seconds) differ from any run to the next.
    samples = {f"{m['name']}/{v}": sorted(cell["samples"]) for m in data["metrics"] if m["clock"] != "host"
               for v, cell in m["values"].items() if cell and cell.get("samples")}
    return wall, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs of each form, interleaved (default 2)")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {form: [] for form in FORMS}
    reference: dict[str, list[float]] | None = None
    differ: dict[str, set[str]] = {}   # form -> the metric/variant cells unlike the first run's
    with tempfile.TemporaryDirectory(prefix="kl-dask-bench-") as tmp:
        for _ in range(args.repeat):
            for form, extra in FORMS.items():
                wall, samples = once(extra, Path(tmp))
                walls[form].append(wall)
                reference = reference or samples
                cells = set(samples) | set(reference)
                differ.setdefault(form, set()).update(c for c in cells if samples.get(c) != reference.get(c))
    local = statistics.median(walls["local"])
    print(f"default experiment, both kernels cached, icount, {args.repeat} run(s) of each form, interleaved:")
    for form, times in walls.items():
        median = statistics.median(times)
        print(f"  {form:12} median {median:6.1f} s  ({median / local:.2f}x local)  runs: "
              + ", ".join(f"{t:.1f}" for t in times))
    two, one = statistics.median(walls["--workers 2"]), statistics.median(walls["--workers 1"])
    print(f"  two workers against one: {two / one:.2f}x the time")
    for form, cells in differ.items():
        print(f"  samples of {form} against the first local run: "
              + ("identical" if not cells else f"{len(cells)} cell(s) differ: {', '.join(sorted(cells)[:8])}"))


if __name__ == "__main__":
    main()
