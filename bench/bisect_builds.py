"""What a bisect's probe builds cost next to a cold build of the same tree, side by side
in one run, for two kinds of search (goal: median probe build <= 35% of the cold build):

--study debian (default): Debian's stock amd64 6.1 config, reduced, against lab-minimal.
  BAD is Debian's config reduced onto lab-minimal (kernellab.config.reduce: its
  debugging, hardening, mitigation and other kernel-wide choices, none of its drivers).
  Most of these options are compiler flags or sit in widely included headers.
--study bystanders: the self-test's search, lab-minimal against lab-minimal + 20 options
  of one file each + SLUB_DEBUG_ON, on fork+exit: options whose code is local.

Each study runs in a private cache (the source tree, agents and parsed Kconfig are shared
with the main cache; build tree, ccache, artifacts and store are fresh):
  1. a cold build of BAD (empty ccache, empty build tree): the reference wall time;
  2. the bisect, icount mode;
  3. the bisect's probe builds as a fraction of the cold build.

Run:  .venv/bin/python bench/bisect_builds.py [--study debian|bystanders] [--metric M]
                                               [--threshold PCT] [--cache DIR]
A rerun with the same --cache resumes: finished probes come from the store there.
The Debian study takes 1-2 hours on 2 cores; the bystanders study about 15 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from platformdirs import user_cache_dir

from kernellab.config.dotconfig import format_config
from kernellab.config.kconfig import open_tree
from kernellab.config.reduce import reduce
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.bisect import Bisector
from kernellab.experiments.spec import VariantSpec
from kernellab.proc import stop_on_signals
from kernellab.report.attribution import probe_build_s
from kernellab.report.bisect import bisect_text
from kernellab.store import Store

# kernellab reads KERNELLAB_CACHE at each use, so private_cache() can move it after import.
SHARED = ("sources", "kconfig", "agent", "initramfs", "source-hashes.json")


def private_cache(root: Path) -> None:
    """Point kernellab at `root`, sharing only what does not decide build cost."""
    main = Path(os.environ.get("KERNELLAB_CACHE") or user_cache_dir("kernellab"))
    root.mkdir(parents=True, exist_ok=True)
    for name in SHARED:
        link = root / name
        if (main / name).exists() and not link.exists():
            link.symlink_to(main / name)
    os.environ["KERNELLAB_CACHE"] = str(root)


def reduced_debian(lean, debian) -> dict[str, str]:
    """Debian's values, where they differ from lean's, for the options of the reduction."""
    return reduce(open_tree(lean.source, lean.profile, lean.toolchain), lean.config.values, debian.config.values)


def distribution(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"min {min(values):.0%}, q1 {q[0]:.0%}, median {q[1]:.0%}, q3 {q[2]:.0%}, max {max(values):.0%}"


STUDIES = {"debian": ("syscall.null", 5.0), "bystanders": ("proc.fork_exit", 10.0)}


def bad_settings(study: str, lean, store) -> tuple[str, dict[str, str]]:
    if study == "debian":
        return ("lab-minimal + Debian's debugging, hardening and mitigation choices",
                reduced_debian(lean, lab.prepare(VariantSpec("debian", "debian"))))
    # The self-test's known answer, one copy: its bystanders are one new file each.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_attribution_integration import BYSTANDERS
    return (f"lab-minimal + {len(BYSTANDERS)} bystanders + SLUB_DEBUG_ON",
            {f"CONFIG_{o}": "y" for o in [*BYSTANDERS, "SLUB_DEBUG_ON"]})


def wide_floor(result: dict, builds: int) -> str:
    """The fewest probe builds that toggle a wide family into a combination no earlier probe
    built, whatever the order: telling which k families of F hold culprits with
    same/different verdicts takes, on average over where they could lie, at least
    log2 C(F, k) probes (the entropy of the answer); the confirmation reverts each wide
    culprit from BAD, and all culprits together, once more."""
    families = result.get("families") or {}
    found = {families[c["option"]] for c in result["culprits"] if c["option"] in families}
    if not found:
        return "no culprit is wide: every probe could be incremental"
    f, k = len(set(families.values())), len(found)
    halvings = math.ceil(math.log2(math.comb(f, k)))
    reverts = k + (len(result["culprits"]) > 1)
    return (f"culprits in {k} of the {f} wide families: any search order is expected to make at least "
            f"{halvings + reverts} probe builds of a wide combination no earlier probe made ({halvings} to tell "
            f"which {k} of {f}, on average over where they could lie; {reverts} to revert them in the "
            f"confirmation); this bisect made {builds} probe builds")


def main() -> int:
    ap = argparse.ArgumentParser(description="What a bisect's probe builds cost next to a cold build.")
    ap.add_argument("--study", choices=sorted(STUDIES), default="debian")
    ap.add_argument("--metric", help="default: syscall.null (debian), proc.fork_exit (bystanders)")
    ap.add_argument("--threshold", type=float, help="percent (default: 5 (debian), 10 (bystanders))")
    ap.add_argument("--cache", help="private cache directory (default: a new temporary one)")
    args = ap.parse_args()
    metric, threshold = args.metric or STUDIES[args.study][0], args.threshold or STUDIES[args.study][1]
    root = Path(args.cache or tempfile.mkdtemp(prefix="kernellab-bench-"))
    private_cache(root)

    store = Store(root / "kernellab.sqlite")
    good = VariantSpec("lab-minimal", "lab-minimal")
    lean = lab.prepare(good)
    what, settings = bad_settings(args.study, lean, store)
    fragment = root / f"{args.study}.config"
    fragment.write_text(f"# {what}\n" + format_config(settings))
    bad = VariantSpec(args.study, "lab-minimal", [str(fragment)])
    prepared = lab.prepare(bad)
    print(f"cache {root}; BAD = {what}: {len(settings)} settings ({fragment}); "
          f"olddefconfig refused {len(prepared.config.dropped)}:", flush=True)
    for d in prepared.config.dropped:
        print(f"  {d['option']}: asked {d['asked']}, got {d['got']}")

    start = time.monotonic()
    cold = lab.ensure_built(prepared, store, log=lambda m: print(m, flush=True))
    cached = " (cached from an earlier run of this cache)" if cold.cached else ""
    print(f"cold build of BAD: {cold.wall_s:.0f} s{cached}", flush=True)
    bisector = Bisector.for_variants(store, good, bad, metric, "icount", threshold,
                                     log=lambda m: print(m, flush=True))
    result = bisector.run().to_dict()
    result["cold_build_s"] = cold.wall_s
    result["bench_wall_s"] = time.monotonic() - start
    (root / "bisect.json").write_text(json.dumps(result, indent=1))
    print()
    print(bisect_text(result), end="")
    # A probe's build includes the copy of a build tree it needed first (kernellab.treepool).
    built = [probe_build_s(p) / cold.wall_s for p in result["probes"] if p["built"]]
    if built:
        print(f"probe builds vs the cold build ({cold.wall_s:.0f} s, -j{os.cpu_count()}), "
              f"{len(built)} builds: {distribution(built)} (goal: median <= 35%)")
        print("each, in order: " + ", ".join(f"{b:.0%}" for b in built))
        print(wide_floor(result, len(built)))
    print(f"whole bench {result['bench_wall_s'] / 60:.1f} min; report {root / 'bisect.json'}")
    return 0


if __name__ == "__main__":
    stop_on_signals()  # a kill stops the build under way too, not only this process
    try:
        sys.exit(main())
    except LabError as exc:
        sys.exit(f"bisect_builds: error: {exc} (rerun with the same --cache to resume)")
    except KeyboardInterrupt as exc:
        sys.exit(f"bisect_builds: interrupted ({exc.args[0] if exc.args else 'Ctrl-C'}); "
                 "rerun with the same --cache to resume")
