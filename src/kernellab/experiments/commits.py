"""Which commit moved a metric: the first-parent history between two refs of one git
repository, a bisection over it that skips what does not build or boot, and the revert
that confirms the culprit.

The search walks the first-parent line (as `git bisect --first-parent`): a merge is one
step, the branch it brings in is not searched inside, so every probe is a commit that
was once the tip of the line, built and tested as such. Each probe is told apart from the
reference (GOOD, or the last culprit found) by a three-way verdict; a probe that cannot
be measured (it does not build, its kernel panics) is skipped as `git bisect skip` does,
and the next probe is the untried commit nearest the middle. When only skipped commits
are left between the last commit like the reference and the first unlike it, the answer
is all of them: the culprit is one of those.

Everything here reads the repository but for the revert, made with git's plumbing in an
index of its own (no worktree, no checkout: on Linux a checkout is 1.5 GB written for one
commit); its commit is reachable by id only (no branch, no ref, the user's checkout
untouched) and has a fixed author, committer and date, so that the same revert is the same
commit, and its build is found again in the store after an interruption.
"""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..build import Build
from ..errors import LabError
from ..proc import require_tool
from .probe import DIFFERENT, SAME, Verdict

GIT = "git:"
RANGE = ".."


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str

    @property
    def short(self) -> str:
        return self.sha[:12]

    def to_dict(self) -> dict[str, str]:
        return {"sha": self.sha, "subject": self.subject, "author": self.author}


@dataclass(frozen=True)
class History:
    """GOOD, BAD and the first-parent commits after GOOD up to BAD, oldest first (BAD last)."""
    repo: Path
    good: Commit
    bad: Commit
    commits: tuple[Commit, ...]

    def source(self, sha: str) -> str:
        return f"{GIT}{self.repo}@{sha}"

    def max_builds(self) -> int:
        """The issue's bound for one culprit, confirmation included: ceil(log2 N) + 3."""
        return math.ceil(math.log2(max(len(self.commits), 1))) + 3

    def to_dict(self) -> dict[str, object]:
        return {"repo": str(self.repo), "good": self.good.to_dict(), "bad": self.bad.to_dict(),
                "first_parent": True, "commits": [c.to_dict() for c in self.commits]}


def git_ref(source: str) -> tuple[Path, str] | None:
    """(repository, ref) of a `git:PATH@REF` source; None for any other kind."""
    if not source.startswith(GIT):
        return None
    repo, at, ref = source.removeprefix(GIT).rpartition("@")
    if not at or not repo or not ref:
        raise LabError(f"bad source {source!r}: give git:PATH@REF (REF a branch, tag or commit)")
    return Path(repo).expanduser().resolve(), ref


def parse_range(text: str) -> tuple[str, str]:
    """`git:PATH@GOOD..BAD` -> the two sources `git:PATH@GOOD`, `git:PATH@BAD`."""
    repo, at, refs = text.removeprefix(GIT).rpartition("@")
    good, dots, bad = refs.partition(RANGE)
    if not text.startswith(GIT) or not at or not repo or not dots or not good or not bad or RANGE in bad:
        raise LabError(f"--source-range {text!r}: give git:PATH@GOOD..BAD (two refs of one repository)")
    return f"{GIT}{repo}@{good}", f"{GIT}{repo}@{bad}"


def history(good_source: str, bad_source: str) -> History | None:
    """The commits between two git sources of one repository, checked before anything is
    built; None when they are not refs of one repository (the code part then stays whole)."""
    good_ref, bad_ref = git_ref(good_source), git_ref(bad_source)
    if good_ref is None or bad_ref is None or good_ref[0] != bad_ref[0]:
        return None
    require_tool("git")
    repo = good_ref[0]
    if git(repo, "rev-parse", "--git-dir") is None:
        raise LabError(f"{repo} is not a git repository: give git:PATH@REF of one")
    good, bad = (commit(repo, ref) for ref in (good_ref[1], bad_ref[1]))
    dirty = git(repo, "status", "--porcelain", "--untracked-files=no")
    if dirty:
        raise LabError(f"{repo} has uncommitted changes: commit or stash them first (the search builds commits, "
                       "never what is not committed)")
    if good.sha == bad.sha:
        return History(repo, good, bad, ())
    if not _is_ancestor(repo, good.sha, bad.sha):
        backwards = _is_ancestor(repo, bad.sha, good.sha)
        raise LabError(f"{good_ref[1]} and {bad_ref[1]} of {repo}: " +
                       (f"{good_ref[1]} comes after {bad_ref[1]}: give the older one first (A) and the newer (B)"
                        if backwards else "neither is an ancestor of the other: give two refs of one line of history"))
    shas = (git(repo, "rev-list", "--first-parent", "--reverse", f"{good.sha}..{bad.sha}") or "").split()
    line = set((git(repo, "rev-list", "--first-parent", bad.sha) or "").split())
    if good.sha not in line:
        raise LabError(f"{good_ref[1]} is not on the first-parent line of {bad_ref[1]} (it came in by a merge): "
                       f"give a commit of that line (`git -C {repo} log --first-parent --oneline {bad_ref[1]}`)")
    return History(repo, good, bad, tuple(commit(repo, sha) for sha in shas))


def commit(repo: Path, ref: str) -> Commit:
    if ref.startswith("-") or not ref:
        # git would read it as one of its own options
        raise LabError(f"{ref!r} is no branch, tag or commit: give a name that does not start with '-'")
    sha = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha is None:
        raise LabError(f"{ref!r} is no branch, tag or commit of {repo} (`git -C {repo} log --oneline` lists them)")
    info = git(repo, "log", "-1", "--format=%s%x00%an <%ae>", sha) or "\0"
    subject, _, author = info.partition("\0")
    return Commit(sha, subject, author)


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer],
                          capture_output=True).returncode == 0


def git(repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str | None:
    """git's stdout, stripped; None when git fails."""
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env,
                            input=stdin)
    return result.stdout.strip() if result.returncode == 0 else None


# The revert's author and committer: fixed, with BAD's commit date, so that the same revert
# is the same commit (and build) every time, found again in the store after an interruption.
REVERTER = {"GIT_AUTHOR_NAME": "kernellab", "GIT_AUTHOR_EMAIL": "kernellab@localhost",
            "GIT_COMMITTER_NAME": "kernellab", "GIT_COMMITTER_EMAIL": "kernellab@localhost"}
_CONFLICTS_SHOWN = 5


def revert(h: History, culprit: Commit) -> tuple[str | None, str]:
    """BAD with the culprit reverted, as a commit of the repository: (its id, how), or
    (None, why not) when `git revert` would not apply cleanly. Made with git's plumbing in
    an index of its own: no worktree, no checkout (BAD's tree is never written out), the
    commit `git revert --no-edit` makes with the same names and dates. A merge is reverted
    against its first parent (`git revert -m 1`), the line the search walks."""
    parent = git(h.repo, "rev-parse", "--verify", "--quiet", f"{culprit.sha}^1")
    if parent is None:
        return None, f"`git revert {culprit.short}`: it has no parent to go back to"
    merge = git(h.repo, "rev-parse", "--verify", "--quiet", f"{culprit.sha}^2") is not None
    command = f"`git revert{' -m 1' if merge else ''} {culprit.short}`"
    with tempfile.TemporaryDirectory(prefix="kernellab-revert-") as private:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(private) / "index")}
        tree = _reverted_tree(h.repo, culprit.sha, parent, h.bad.sha, Path(private), env)
    if isinstance(tree, list):
        conflicts = (f": conflicts in {', '.join(tree[:_CONFLICTS_SHOWN])}"
                     + (f" and {len(tree) - _CONFLICTS_SHOWN} more file(s)" if len(tree) > _CONFLICTS_SHOWN else "")
                     if tree else "")
        return None, f"{command} does not apply cleanly on {h.bad.short}{conflicts}"
    if tree == git(h.repo, "rev-parse", f"{h.bad.sha}^{{tree}}"):
        return None, f"{command} does not apply cleanly on {h.bad.short}: it changes nothing there"
    sha = _revert_commit(h, culprit, parent if merge else None, tree)
    if sha is None:
        return None, f"{command} on {h.bad.short}: git commit-tree failed"
    return sha, f"{command} on {h.bad.short}" + (" (against its first parent)" if merge else "")


def _reverted_tree(repo: Path, culprit: str, parent: str, bad: str, private: Path,
                   env: dict[str, str]) -> str | list[str]:
    """The tree of BAD less the culprit's change (culprit -> its parent, applied to BAD's
    index with git's three-way fallback, as `git revert` merges), or the files that
    conflict (an empty list: it failed without naming one)."""
    patch = private / "revert.patch"
    if (git(repo, "read-tree", bad, env=env) is None
            or git(repo, "diff-tree", "-p", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv",
                   "--no-color", f"--output={patch}", culprit, parent, env=env) is None):
        return []
    if patch.stat().st_size == 0:   # the culprit changes nothing: BAD's own tree
        return git(repo, "write-tree", env=env) or []
    if git(repo, "apply", "--cached", "--3way", str(patch), env=env) is None:
        unmerged = (git(repo, "ls-files", "--unmerged", "-z", env=env) or "").split("\0")
        return sorted({entry.partition("\t")[2] for entry in unmerged if "\t" in entry})
    return git(repo, "write-tree", env=env) or []


def _revert_commit(h: History, culprit: Commit, first_parent: str | None, tree: str) -> str | None:
    """The revert commit of `tree` on BAD, with git revert's message; reachable by id only
    (no branch, no ref). Its names and dates are fixed (REVERTER, BAD's commit date)."""
    date = git(h.repo, "log", "-1", "--format=%cI", h.bad.sha) or "2000-01-01T00:00:00Z"
    env = {**os.environ, **REVERTER, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    reverses = f", reversing\nchanges made to {first_parent}" if first_parent else ""
    message = f'Revert "{culprit.subject}"\n\nThis reverts commit {culprit.sha}{reverses}.\n'
    return git(h.repo, "-c", "i18n.commitEncoding=UTF-8", "commit-tree", "--no-gpg-sign", "-p", h.bad.sha,
               "-F", "-", tree, env=env, stdin=message)


def build_fields(build: Build | None) -> dict[str, Any]:
    """A probe's build as `why`'s and `track`'s rows show it (None: none, it was skipped):
    whether this command built it (else its record came from the store), its seconds, the
    objects its make compiled and the commit the repository's checkout for builds held
    before it, so that a reader sees a commit probe compile only what its commit touched."""
    return {"built": bool(build and not build.cached), "build_s": build.wall_s if build else 0.0,
            "compiled": build.compiled if build else None, "checkout_from": build.checkout_from if build else None}


# -- the search --------------------------------------------------------------------

P = TypeVar("P")


@dataclass
class Step:
    """One probe of the search: the commit's index, and what became of it."""
    index: int
    verdict: Verdict | None = None   # against the reference; None: skipped
    skipped: str = ""                # why it could not be measured


@dataclass
class Found(Generic[P]):
    index: int                        # the culprit (the first commit unlike the reference)
    before: int                       # the last commit like it (-1: GOOD)
    probe: P
    before_probe: P
    reference: P                      # what "like GOOD" meant: GOOD, or the last culprit found
    suspects: list[int] = field(default_factory=list)   # when skips hide it: every commit it may be


class Search(Generic[P]):
    """The bisection over commits 0..N-1 (N-1 is BAD), GOOD being -1. `probe_at(i)` measures
    commit i (None: skipped, `skip_reason` says why); `compare(ref, probe)` is the verdict
    of a probe against the reference."""

    def __init__(self, count: int, probe_at: Callable[[int], P | None], compare: Callable[[P, P], Verdict],
                 skip_reason: Callable[[int], str], log: Callable[[str], None]) -> None:
        self.count, self.probe_at, self.compare = count, probe_at, compare
        self.skip_reason, self.log = skip_reason, log
        self.steps: list[Step] = []
        self.skipped: set[int] = set()

    def find(self, low: int, low_probe: P, high: int, high_probe: P) -> Found[P]:
        """`low` is like the reference (`low_probe`), `high` unlike it: the first commit
        after `low` that is unlike it."""
        ref = low_probe
        while high - low > 1:
            pick = self._pick(low, high)
            if pick is None:
                suspects = list(range(low + 1, high + 1))
                self.log(f"only skipped commits are left between {low} and {high}: the culprit is one of "
                         f"{len(suspects)}")
                return Found(high, low, high_probe, low_probe, ref, suspects)
            probe = self.probe_at(pick)
            if probe is None:
                self.skipped.add(pick)
                self.steps.append(Step(pick, None, self.skip_reason(pick)))
                continue
            v = self.compare(ref, probe)
            self.steps.append(Step(pick, v))
            if v.kind == DIFFERENT:
                high, high_probe = pick, probe
            elif v.kind == SAME or self.compare(high_probe, probe).kind == DIFFERENT:
                low, low_probe = pick, probe
            else:
                # Like neither end for sure: the culprit lies in (low, high], not narrowed further.
                return Found(high, low, high_probe, low_probe, ref, list(range(low + 1, high + 1)))
        return Found(high, low, high_probe, low_probe, ref)

    def _pick(self, low: int, high: int) -> int | None:
        """The untried commit nearest the middle of (low, high), as git bisect skip does."""
        middle = (low + high) // 2
        left = [i for i in range(low + 1, high) if i not in self.skipped]
        return min(left, key=lambda i: (abs(i - middle), i)) if left else None
