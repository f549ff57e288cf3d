"""What a commit probe's build costs next to a cold build, side by side in one run (issue 32:
median probe build at most 15% of a cold build).

A throwaway git repository is made in a temporary directory from a real kernel tree (by
default Debian's linux-source-6.1, as kernellab extracts it into its cache for
`debian:6.1`): commit 1 is the tree as shipped, commit 2 adds one line of code to one
file (kernel/fork.c). Then lab-minimal (x86_64) is built at
  1. commit 1: cold (a new cache: empty ccache, no build tree);
  2. commit 2: the repository's checkout for builds moves one commit on, and kbuild
     recompiles what the commit touched;
  3. commit 1 again (its cached artifacts removed first, as after `cache prune`): back,
     in the same tree and with the same paths, so ccache can help too;
and each build's wall and CPU seconds and objects compiled are printed, with the
incremental builds' share of the cold one. Everything kernellab writes goes to a private
cache (--cache, default a new temporary directory); only the source tree is read from the
main cache.

Run:  .venv/bin/python bench/commit_probes.py [--source debian:6.1] [--file kernel/fork.c] [--cache DIR]
About 15 to 20 minutes on 2 cores (the cold build), and 4 GB of disk in the cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernellab import sources
from kernellab.build import Build
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.spec import VariantSpec
from kernellab.proc import stop_on_signals
from kernellab.store import Store

GIT_ENV = {"GIT_AUTHOR_NAME": "kernellab bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "kernellab bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1"}
CHANGE = "\n/* kernellab bench: commit 2 */\nint kernellab_bench_commit_2;\n"


def git(repo: Path, *args: str, work_tree: Path | None = None, stdin: str | None = None) -> str:
    where = ["--git-dir", str(repo / ".git")] + (["--work-tree", str(work_tree)] if work_tree else [])
    return subprocess.run(["git", *where, *args], check=True, capture_output=True, text=True, input=stdin,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def make_repository(tree: Path, repo: Path, changed: str) -> tuple[str, str]:
    """A repository of `tree` (commit 1) and of `tree` with one line added to `changed`
    (commit 2), made with git's plumbing: `tree` (the cache's extraction) is only read,
    and no second copy of it is checked out. -> (commit 1, commit 2)"""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "bench")
    print(f"git add of {tree} (a minute or two)...", flush=True)
    git(repo, "add", "-A", "--force", work_tree=tree)   # --force: the tarball's files, whatever .gitignore says
    git(repo, "commit", "-q", "-m", "the tree as shipped", work_tree=tree)
    first = git(repo, "rev-parse", "HEAD")
    text = (tree / changed).read_text(errors="surrogateescape") + CHANGE
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text)
    git(repo, "update-index", "--cacheinfo", f"100644,{blob},{changed}")
    git(repo, "commit", "-q", "-m", f"{changed}: one line more")
    return first, git(repo, "rev-parse", "HEAD")


def build_at(repo: Path, sha: str, store: Store) -> Build:
    p = lab.prepare(VariantSpec("lab-minimal", "lab-minimal", source=f"git:{repo}@{sha}"))
    return lab.ensure_built(p, store, log=print)


def line(label: str, b: Build, cold: Build | None) -> str:
    cpu = b.user_s + b.sys_s
    share = ""
    if cold is not None and cold is not b:
        share = (f"  ({b.wall_s / cold.wall_s:.1%} of the cold build's wall time, "
                 f"{cpu / (cold.user_s + cold.sys_s):.1%} of its CPU)")
    hits = f", ccache hits {b.ccache_hit_pct:.0f}%" if b.ccache_hit_pct is not None else ""
    return (f"{label:<26} wall {b.wall_s:7.1f} s  CPU {cpu:7.1f} s  objects compiled {b.compiled}{hits}"
            f"{share}")


def main() -> int:
    ap = argparse.ArgumentParser(description="A commit probe's incremental build against a cold build of the "
                                 "same kernel, in one run.")
    ap.add_argument("--source", default="debian:6.1", help="the kernel tree to make the repository of "
                    "(default: debian:6.1, from kernellab's main cache)")
    ap.add_argument("--file", default="kernel/fork.c", help="the file commit 2 adds a line of code to")
    ap.add_argument("--cache", help="private cache directory (default: a new temporary one, removed at the end)")
    args = ap.parse_args()
    stop_on_signals()
    tree = sources.resolve(args.source).tree   # in the main cache: extracted once, kept
    if not (tree / args.file).is_file():
        raise LabError(f"--file {args.file}: no such file in {tree}")
    root = Path(args.cache or tempfile.mkdtemp(prefix="kernellab-commit-probes-"))
    os.environ["KERNELLAB_CACHE"] = str(root / "cache")   # read at each use: from here on, private
    try:
        first, second = make_repository(tree, root / "linux", args.file)
        store = Store(root / "kernellab.sqlite")
        builds = []
        for label, sha in (("1. commit 1, cold", first), ("2. commit 2", second), ("3. commit 1 again", first)):
            print(f"\n== {label}: {sha[:12]}", flush=True)
            if label.startswith("3."):
                shutil.rmtree(builds[0].artifacts)   # built again, not taken from the cache
            builds.append(build_at(root / "linux", sha, store))
        print()
        for label, b in zip(("1. commit 1, cold", "2. commit 2", "3. commit 1 again"), builds, strict=True):
            print(line(label, b, builds[0]))
    finally:
        if not args.cache:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
