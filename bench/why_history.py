"""`kernellab why` on a real kernel's history with planted changes (issue 32, "Proving it
without the internet": the kernel's own git history cannot be downloaded here).

1. A throwaway git repository is made (in --work, default a new temporary directory) from
   Debian's linux-source-6.1, as kernellab extracts it into its main cache for `debian:6.1`,
   with git's plumbing: the extracted tree is only read, never copied or checked out. The
   repository is bare (no checkout of its own: `why` refuses a repository with uncommitted
   changes, and a bare one has none), its first commit the tree as shipped (GOOD), then 20
   small commits with fixed authors and dates, so the same tarball always gives the same
   commit ids (HISTORY below says what each plants):
     - one that adds work to the system-call path `syscall.null` measures (the agent's
       syscall.null calls getppid: src/kernellab/agent/syscall.c, run_null);
     - one that breaks the build (kernel/fork.c, which every kernel compiles), the 10th: the
       first commit a bisection of 20 commits probes, so it is built; the next one fixes it;
     - one that changes only a comment (init/main.c);
     - one that changes a Kconfig default lab-minimal's resolved config picks up
       (ACPI_DOCK: innocuous, see KCONFIG_DEFAULT);
     - innocuous ones in files lab-minimal does not build (DRM, USB, SCSI, sound, ...).
2. `kernellab why` is run on it, through the real command line, with a private cache
   (--cache, default a new temporary directory; the builds, checkouts, ccache and store all
   go there): A = lab-minimal at GOOD, B = lab-minimal plus one option (--option, default
   CONFIG_DEBUG_ATOMIC_SLEEP=y) at the last commit, --metric syscall.null, icount mode,
   --format json. The answer's culprits and shares, its probes (build seconds, objects
   compiled) and wall time are printed, and whether `why` named the planted commit and the
   planted option and skipped the broken commit: exit 1 if not.
3. --dry-run makes the repository only, checks the range as `why` will before any build
   (kernellab.experiments.commits.history), and prints the commits and the command line.

Run:  .venv/bin/python bench/why_history.py [--work DIR] [--cache DIR] [--output FILE] [--dry-run]

Expected: the commit search probes the broken commit (skipped: does not build), then 4
more, and the culprit's revert: 6 commit builds (the bound, confirmation included, is
ceil(log2 20) + 3 = 8). The option bisection names DEBUG_ATOMIC_SLEEP (PREEMPT_COUNT
brought along), not ACPI_DOCK. About a dozen builds and a dozen boots in all.
Time: making the repository takes 1 to 2 minutes (git add of 79,000 files). The `why`
itself took 23.9 minutes on 2 cores (2026-11-27, docs/why.md): A and B near-cold builds
(475 and 459 s: B's option is in headers nearly every object includes), the split's build
13 s, each commit probe an incremental build in the repository's one checkout for builds
(5.5 to 13.6 s), the option probes 44 to 48 s, one short icount boot per probe.
Disk: the repository 0.5 GB (--dry-run prints it); the private cache the builds, ccache,
the checkout for builds and 24 MB per commit probed (its Kconfig files, scripts and
Makefiles); a confirmation makes a temporary worktree of the whole tree (1.5 GB, removed).
A rerun with the same --work and --cache reuses the repository and resumes `why` from its
store. Directories the script made itself (no --work, no --cache) are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernellab import sources
from kernellab.errors import LabError
from kernellab.experiments import commits

AUTHOR = ("Ada Lovelace", "ada@example.org")
BRANCH = "why"
REPO_NAME = "linux.git"
FIRST_SUBJECT = "Linux 6.1 as Debian ships it (linux-source-6.1)"
# Commit i is dated i hours after this: a history, and the same commit ids on every run.
EPOCH = 1704067200   # 2024-01-01T00:00:00Z


@dataclass(frozen=True)
class Change:
    """One commit: in `path`, `old` (which must occur exactly once) replaced by `new`;
    `old` None appends `new` to the file."""
    subject: str
    path: str
    old: str | None
    new: str
    role: str = "innocuous"


def innocuous(subject: str, path: str) -> Change:
    """An edit in a file lab-minimal does not build: each of these lives behind an option
    that Debian 6.1's lab-minimal (x86_64) leaves unset (DRM, USB_SUPPORT, BTRFS_FS, SOUND,
    SCSI, NETDEVICES, XFS_FS, MMC, BT, MEDIA_SUPPORT, BLK_DEV_NVME, ISO9660_FS), or is not
    kernel code at all (Documentation, tools)."""
    comment = ".." if path.endswith(".rst") else "//"
    return Change(subject, path, None, f"{comment} {subject}\n")


# The planted work: a spin of cpu_relax() (the PAUSE instruction) in getppid, the system
# call the agent's syscall.null makes (src/kernellab/agent/syscall.c, run_null). Under
# icount a null system call on lab-minimal is about 200 instructions (docs/reading-results.md:
# 202 ns, at one instruction a nanosecond); 32 spins are 32 to 96 more (PAUSE, and the
# loop's decrement and branch unless gcc unrolls it), +15% to +50%: far above the 2%
# threshold, and small enough that the option's own change, measured on top of it on
# B's source, stays above the threshold too (a few thousand spins would make the null
# system call 10 to 30 times longer and hide any option of a few % under it). PAUSE, not an
# empty barrier(): a loop gcc unrolled would leave no instruction of an empty asm.
SPINS = 32
GETPPID = "\tpid = task_tgid_vnr(rcu_dereference(current->real_parent));\n\trcu_read_unlock();\n"


def planted(spins: int) -> Change:
    return Change("sys: getppid waits for a stable parent", "kernel/sys.c", GETPPID,
                  GETPPID + f"\n\t/* kernellab why_history: the planted work, {spins} spins */\n"
                  f"\tfor (int spin = 0; spin < {spins}; spin++)\n\t\tcpu_relax();\n",
                  role="planted")


BROKEN = Change("fork: call the new clone hook", "kernel/fork.c",
                "\ttrace_sched_process_fork(current, p);\n",
                "\ttrace_sched_process_fork(current, p);\n\tkernellab_clone_hook(p);\n", role="broken")
FIX = Change("fork: drop the clone hook", "kernel/fork.c",
             "\tkernellab_clone_hook(p);\n", "", role="fix")
COMMENT = Change("init: reword a comment in start_kernel", "init/main.c",
                 "Interrupts are still disabled. Do necessary setups, then",
                 "Interrupts are still disabled here. Do the necessary setups, then", role="comment")
# ACPI_DOCK: visible once ACPI is on, which only lab-minimal's fragment turns on, after
# tinyconfig's allnoconfig: so olddefconfig gives it its Kconfig default, as it gives
# ACPI_AC, ACPI_FAN and ACPI_THERMAL theirs (default y: =y in lab-minimal's resolved config).
# B (lab-minimal resolved on the last commit) then has ACPI_DOCK=y and A does not: a
# second option in which they differ, with no effect on syscall.null (a driver for docking
# stations, which QEMU has none of: dock.c registers a scan handler that never matches).
# That is the point: the option bisection must not blame it, and A's configuration held
# at the commit probes keeps it off there (A's config says "is not set").
KCONFIG_DEFAULT = Change("ACPI: dock: enable docking station support by default", "drivers/acpi/Kconfig",
                         'config ACPI_DOCK\n\tbool "Dock"\n', 'config ACPI_DOCK\n\tbool "Dock"\n\tdefault y\n',
                         role="kconfig")
KCONFIG_OPTION = "CONFIG_ACPI_DOCK"


def history(spins: int) -> list[Change]:
    """The 20 commits after GOOD, oldest first. The broken one is the 10th: the first
    commit a bisection of 20 probes (the middle), so it is built, whatever else happens."""
    return [
        innocuous("Documentation: howto: note the maintainer", "Documentation/process/howto.rst"),
        COMMENT,
        innocuous("drm/i915: note the probe order", "drivers/gpu/drm/i915/i915_driver.c"),
        planted(spins),
        innocuous("usb: xhci: note the ring size", "drivers/usb/host/xhci.c"),
        innocuous("btrfs: note the mount options", "fs/btrfs/super.c"),
        KCONFIG_DEFAULT,
        innocuous("ALSA: hda: note the codec probe", "sound/pci/hda/hda_intel.c"),
        innocuous("scsi: error: note the retry", "drivers/scsi/scsi_error.c"),
        BROKEN,
        FIX,
        innocuous("e1000e: note the interrupt mode", "drivers/net/ethernet/intel/e1000e/netdev.c"),
        innocuous("xfs: note the log size", "fs/xfs/xfs_super.c"),
        innocuous("mmc: core: note the bus width", "drivers/mmc/core/core.c"),
        innocuous("wifi: iwlwifi: note the firmware name", "drivers/net/wireless/intel/iwlwifi/iwl-drv.c"),
        innocuous("Bluetooth: btusb: note the quirk", "drivers/bluetooth/btusb.c"),
        innocuous("media: uvcvideo: note the format", "drivers/media/usb/uvc/uvc_driver.c"),
        innocuous("nvme: core: note the queue depth", "drivers/nvme/host/core.c"),
        innocuous("perf stat: note the interval", "tools/perf/builtin-stat.c"),
        innocuous("isofs: note the Joliet check", "fs/isofs/inode.c"),
    ]


# -- the repository -----------------------------------------------------------------------

def git(repo: Path, *args: str, work_tree: Path | None = None, stdin: bytes | None = None,
        when: int = EPOCH) -> bytes:
    """git's stdout, whole (a blob's last newline is part of it)."""
    where = ["--git-dir", str(repo)] + (["--work-tree", str(work_tree)] if work_tree else [])
    date = f"@{when} +0000"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1],
           "GIT_COMMITTER_NAME": AUTHOR[0], "GIT_COMMITTER_EMAIL": AUTHOR[1],
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    result = subprocess.run(["git", *where, *args], capture_output=True, input=stdin, env=env)
    if result.returncode != 0:
        raise LabError(f"git {' '.join(args[:2])} in {repo} failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def commit_index(repo: Path, subject: str, when: int) -> str:
    """The index as a commit on BRANCH, after its tip (if any)."""
    tree = git(repo, "write-tree").decode().strip()
    parent = ["-p", f"refs/heads/{BRANCH}"] if has_branch(repo) else []
    sha = git(repo, "commit-tree", tree, *parent, "-m", subject, when=when).decode().strip()
    git(repo, "update-ref", f"refs/heads/{BRANCH}", sha)
    return sha


def has_branch(repo: Path) -> bool:
    return subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "--verify", "--quiet",
                           f"refs/heads/{BRANCH}"], capture_output=True).returncode == 0


def apply(repo: Path, change: Change) -> None:
    """`change` made in the index (no file is written anywhere but git's object store)."""
    mode, _, _ = git(repo, "ls-files", "--stage", "--", change.path).decode().partition(" ")
    if not mode:
        raise LabError(f"{change.path}: no such file in the tree (commit {change.subject!r})")
    text = git(repo, "cat-file", "blob", f":{change.path}").decode(errors="surrogateescape")
    if change.old is None:
        text += change.new
    elif text.count(change.old) != 1:
        raise LabError(f"{change.path}: the text commit {change.subject!r} edits occurs {text.count(change.old)} "
                       f"times, not once: {change.old!r}")
    else:
        text = text.replace(change.old, change.new)
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.encode(errors="surrogateescape")).decode().strip()
    git(repo, "update-index", "--cacheinfo", f"{mode},{blob},{change.path}")


def make_repository(tree: Path, repo: Path, changes: list[Change]) -> list[str]:
    """A bare repository of `tree` (GOOD) and `changes`, one commit each. -> the commit
    ids, GOOD first."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "--bare", "-b", BRANCH)
    print(f"git add of {tree} (1 to 3 minutes)...", flush=True)
    git(repo, "add", "-A", "--force", work_tree=tree)   # --force: every file of the tarball, whatever .gitignore says
    shas = [commit_index(repo, FIRST_SUBJECT, EPOCH)]
    for hour, change in enumerate(changes, start=1):
        apply(repo, change)
        shas.append(commit_index(repo, change.subject, EPOCH + 3600 * hour))
    (repo / "index").unlink()   # a bare repository keeps none; its work was the commits'
    return shas


def existing_repository(repo: Path, changes: list[Change]) -> list[str]:
    """The commits of a repository an earlier run made, when it holds this history."""
    log = git(repo, "log", "--reverse", "--format=%H %s", f"refs/heads/{BRANCH}").decode().splitlines()
    subjects = [line.partition(" ")[2] for line in log]
    if subjects != [FIRST_SUBJECT] + [c.subject for c in changes]:
        raise LabError(f"{repo} holds another history: remove it, or give another --work")
    return [line.partition(" ")[0] for line in log]


# -- the run ------------------------------------------------------------------------------

def why_command(repo: Path, shas: list[str], option: str, metric: str, output: Path) -> list[str]:
    kernellab = Path(sys.executable).with_name("kernellab")
    return [str(kernellab if kernellab.exists() else "kernellab"), "why",
            "a=lab-minimal", f"b=lab-minimal+{option}",
            "--source-range", f"git:{repo}@{shas[0]}..{shas[-1]}",
            "--metric", metric, "--mode", "icount", "--format", "json", "-o", str(output)]


def print_commits(shas: list[str], changes: list[Change]) -> None:
    print(f"\n{'#':>3}  {'commit':<12}  {'role':<9}  subject (file)")
    print(f"{'':>3}  {shas[0][:12]}  {'GOOD':<9}  {FIRST_SUBJECT}")
    for i, (sha, change) in enumerate(zip(shas[1:], changes, strict=True)):
        print(f"{i:>3}  {sha[:12]}  {change.role:<9}  {change.subject} ({change.path})")


def summarize(answer: dict[str, Any], metric: str, shas: list[str], changes: list[Change], option: str,
              wall_s: float) -> list[str]:
    """Prints the answer; -> the checks that failed."""
    by_role = {c.role: sha for sha, c in zip(shas[1:], changes, strict=True) if c.role != "innocuous"}
    [m] = [m for m in answer["metrics"] if m["metric"] == metric]
    unit = m["unit"]
    pct = f" ({m['total_pct']:+.1f}%)" if m.get("total_pct") is not None else ""
    print(f"\n{metric}: A {m['a']:.1f} -> B {m['b']:.1f} {unit}, {m['total']:+.2f} {unit}{pct}, "
          f"threshold {m['threshold_pct']}%")
    for p in m["parts"]:
        print(f"  part {p['part']:<14} {p['delta']:+9.2f} {unit}  {share(p)}  {p['verdict']['verdict']}")
    print("culprits:")
    for c in m["culprits"]:
        what = (f"commit {c['commit']['sha'][:12]} {c['commit']['subject']!r}" if c["kind"] == "commit"
                else f"{c['kind']} {c['name']}")
        extra = f"  brought along: {', '.join(c['brought_along'])}" if c.get("brought_along") else ""
        suspects = f"  one of {len(c['suspects'])} commits" if c.get("suspects") else ""
        print(f"  {what}: {c['share']:+.2f} {unit}  {share(c)}  {c['verdict']['verdict']}{suspects}{extra}")
    print(f"  remainder: {m['remainder']:+.2f} {unit}  ({m['remainder_pct'] or 0:.0f}%), "
          f"within the noise floor: {'yes' if m['within_noise'] else 'no'}")
    search = m.get("commit_search") or {}
    skipped = {s["sha"] for s in search.get("skipped", [])}
    if search:
        print(f"commit search: {search.get('candidates')} candidates, {len(search.get('steps', []))} probe(s), "
              f"{search.get('builds')} build(s) (bound {search.get('max_builds')})")
        for step in search.get("steps", []):
            verdict = step["verdict"]
            print(f"  {step['commit'][:12]}  " + (f"{verdict['verdict']}: {verdict['reason']}" if verdict
                                                 else f"skipped: {step['skipped'][:100]}"))
    print_probes(answer["probes"])
    print(f"builds {answer['builds']}, boots {answer['boots']}, why's wall time {answer['wall_s']:.0f} s "
          f"({answer['wall_s'] / 60:.1f} min); this script's run of it {wall_s:.0f} s")
    culprit_shas = {c["commit"]["sha"] for c in m["culprits"] if c["kind"] == "commit"}
    options = {c.get("option") for c in m["culprits"] if c["kind"] == "option"}
    wanted_option = option.partition("=")[0]
    checks = {"planted commit named": by_role["planted"] in culprit_shas,
              f"planted option {wanted_option} named": wanted_option in options,
              "broken commit skipped": by_role["broken"] in skipped}
    print(f"(the Kconfig default's {KCONFIG_OPTION}, innocuous on {metric}, named: "
          f"{'yes' if KCONFIG_OPTION in options else 'no'})")
    for label, ok in checks.items():
        print(f"{label}: {'yes' if ok else 'NO'}")
    return [label for label, ok in checks.items() if not ok]


def share(item: dict[str, Any]) -> str:
    return f"{item['share_pct']:5.0f}%" if item.get("share_pct") is not None else "     -"


def print_probes(probes: list[dict[str, Any]]) -> None:
    print(f"probes ({len(probes)}):")
    for p in probes:
        built = (f"build {p['build_s']:6.1f} s" if p.get("build_s") else "build      -") \
            + ("" if p.get("built") or p.get("skipped") else " (cached)") \
            + (f", {p['compiled']} objects" if p.get("compiled") is not None else "")
        values = ", ".join(f"{k} {v:.1f}" for k, v in (p.get("values") or {}).items())
        skipped = f"  skipped: {p['skipped'][:80]}" if p.get("skipped") else ""
        print(f"  {p['label']:<24} {p['role']:<10} {built:<32} {values}{skipped}")


def disk_use(path: Path) -> str:
    out = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout.split()
    return out[0] if out else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description="kernellab why on a throwaway git history of Debian's 6.1 tree with "
                                 "planted changes: names the planted commit and option?")
    ap.add_argument("--source", default="debian:6.1", help="the kernel tree to make the repository of "
                    "(default: debian:6.1, from kernellab's main cache)")
    ap.add_argument("--work", help="where the repository goes (default: a new temporary directory, removed at the "
                    "end); an earlier run's repository there is reused")
    ap.add_argument("--cache", help="private KERNELLAB_CACHE for why (default: a new temporary directory, removed "
                    "at the end); a rerun with the same one resumes")
    ap.add_argument("--output", help="where why's JSON answer goes (default: why-history.json in the work "
                    "directory, or in the system's temporary directory when the work directory is temporary)")
    ap.add_argument("--option", default="CONFIG_DEBUG_ATOMIC_SLEEP=y", help="the option B adds (default "
                    "CONFIG_DEBUG_ATOMIC_SLEEP=y: +4.9%% syscall.null alone on 6.1 lab-minimal under icount, with "
                    "the PREEMPT_COUNT it selects; see knowledge/debugging.toml)")
    ap.add_argument("--metric", default="syscall.null", help="the metric (default syscall.null, which the planted "
                    "commit moves)")
    ap.add_argument("--spins", type=int, default=SPINS, help=f"cpu_relax() spins the planted commit adds to getppid "
                    f"(default {SPINS})")
    ap.add_argument("--dry-run", action="store_true", help="make the repository, print the commits and the why "
                    "command line; build nothing")
    args = ap.parse_args()
    if args.spins < 1:
        raise LabError("--spins must be at least 1")
    tree = sources.resolve(args.source).tree   # in the main cache: extracted once, kept; only read here
    changes = history(args.spins)
    made: list[Path] = []
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="kernellab-why-history-"))
    made += [] if args.work else [work]
    try:
        repo = work.resolve() / REPO_NAME
        started = time.monotonic()
        shas = existing_repository(repo, changes) if repo.exists() else make_repository(tree, repo, changes)
        print(f"repository {repo}: {len(shas)} commits, {disk_use(repo)}, made in {time.monotonic() - started:.0f} s")
        print_commits(shas, changes)
        h = commits.history(f"git:{repo}@{shas[0]}", f"git:{repo}@{shas[-1]}")   # why's own checks, before a build
        assert h is not None
        print(f"\nwhy will bisect {len(h.commits)} first-parent commits (at most {h.max_builds()} builds for one "
              "culprit, confirmation included)")
        output = Path(args.output or (Path(tempfile.gettempdir()) if made else work) / "why-history.json").resolve()
        command = why_command(repo, shas, args.option, args.metric, output)
        if args.dry_run:
            cache_text = shlex.quote(str(Path(args.cache).resolve())) if args.cache else "NEW_EMPTY_DIR"
            print(f"\nKERNELLAB_CACHE={cache_text} {shlex.join(command)}")
            if not args.work:
                print(f"({work} is removed now: give --work to keep the repository)")
            return 0
        cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="kernellab-why-cache-"))
        made += [] if args.cache else [cache]
        print(f"\nKERNELLAB_CACHE={shlex.quote(str(cache.resolve()))} {shlex.join(command)}", flush=True)
        started = time.monotonic()
        rc = subprocess.run(command, env={**os.environ, "KERNELLAB_CACHE": str(cache.resolve())}).returncode
        wall_s = time.monotonic() - started
        if rc != 0:
            print(f"kernellab why exited with {rc} after {wall_s:.0f} s", file=sys.stderr)
            return 1
        print(f"\nthe answer: {output}; the private cache holds {disk_use(cache)}")
        failed = summarize(json.loads(output.read_text()), args.metric, shas, changes, args.option, wall_s)
        return 1 if failed else 0
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
