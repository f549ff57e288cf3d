"""What ccache costs a cold kernel build, in its default mode and in depend mode.

kernellab compiles every kernel through ccache, and most of a cold run's compiles are
misses. On a miss ccache's default mode runs the preprocessor once more to hash its
output; depend mode (CCACHE_DEPEND, what kernellab.build sets) keys the object on the
dependency file the compiler writes anyway. This replays the compiler command lines kbuild
recorded for objects of a built tree (its .NAME.o.cmd files), writing to a scratch
directory (the tree is not touched), side by side in one run:

- gcc alone;
- ccache, default mode, an empty cache (every object a miss);
- ccache, depend mode, an empty cache;
- ccache, depend mode, the same cache again (every object a hit);

each round in that order, ROUNDS rounds, and prints the compiler CPU time (user + system of
the children) of each, and the ratios to gcc alone.

Run:  .venv/bin/python bench/ccache_modes.py [TREE] [--objects N] [--rounds R]
      (default TREE: lab-minimal's x86_64 build tree in kernellab's cache; N=60, R=2:
      about 6 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from kernellab import paths

_CMD = re.compile(r"^cmd_(\S+\.o) := ccache (\S*gcc) (.*)$")


def commands(tree: Path, count: int) -> list[list[str]]:
    """The compile command lines of `count` objects of the tree (a fixed random sample),
    without ccache, writing into the scratch directory instead of the tree."""
    found = []
    for cmd_file in sorted(tree.rglob(".*.o.cmd")):
        match = _CMD.match(cmd_file.read_text(errors="replace").splitlines()[0])
        if match and " -c " in f" {match.group(3)} ":
            found.append((match.group(2), match.group(3)))
    if not found:
        sys.exit(f"no compiler command lines (cmd_X.o := ccache gcc ...) under {tree}: build it first")
    random.Random(1).shuffle(found)
    out = []
    for compiler, args in found[:count]:
        argv = [compiler, *shlex.split(args.split(" ; ")[0])]   # without the objtool run kbuild chains on
        argv = [re.sub(r"^-Wp,-MMD,.*", "-Wp,-MMD,{scratch}/dep.d", a) for a in argv]
        if "-o" in argv:
            argv[argv.index("-o") + 1] = "{scratch}/out.o"
        out.append(argv)
    return out


def compiles(argv: list[str], tree: Path, scratch: Path) -> bool:
    """Whether the object still compiles against the tree's generated headers (which hold
    the tree's last config: an object of an earlier build may not), not counted."""
    return subprocess.run([a.replace("{scratch}", str(scratch)) for a in argv], cwd=tree,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def cpu_seconds(argvs: list[list[str]], tree: Path, scratch: Path, env: dict[str, str],
                prefix: tuple[str, ...] = ()) -> float:
    before = os.times()
    for argv in argvs:
        subprocess.run([*prefix, *(a.replace("{scratch}", str(scratch)) for a in argv)], cwd=tree, env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", type=Path,
                        default=paths.cache_dir("build") / "6.1.192-4d415b3d3648-x86_64-gcc-12.2.0")
    parser.add_argument("--objects", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    totals: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kl-ccache-bench-") as tmp:
        scratch = Path(tmp)
        argvs = [a for a in commands(args.tree, args.objects) if compiles(a, args.tree, scratch)]
        print(f"{len(argvs)} objects of {args.tree}, {args.rounds} rounds; compiler CPU seconds (user + system)")
        for r in range(args.rounds):
            base = dict(os.environ, CCACHE_MAXSIZE="5G")
            default = dict(base, CCACHE_DIR=str(scratch / f"default-{r}"))
            depend = dict(base, CCACHE_DIR=str(scratch / f"depend-{r}"), CCACHE_DEPEND="1")
            row = {"gcc alone": cpu_seconds(argvs, args.tree, scratch, base),
                   "ccache default, cold": cpu_seconds(argvs, args.tree, scratch, default, ("ccache",)),
                   "ccache depend, cold": cpu_seconds(argvs, args.tree, scratch, depend, ("ccache",)),
                   "ccache depend, warm": cpu_seconds(argvs, args.tree, scratch, depend, ("ccache",))}
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.1f} s" for k, v in row.items()))
            for k, v in row.items():
                totals[k] = totals.get(k, 0.0) + v
    gcc = totals["gcc alone"]
    for k, v in totals.items():
        print(f"{k:22} {v:7.1f} s   {v / gcc:5.2f}x gcc alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
