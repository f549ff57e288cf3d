"""A commit's own tree in the cache holds only what is read at the commit without building
it (issue 32): the Kconfig files, scripts/, the Makefiles kconfig and `make kernelversion`
read, the defconfigs and config fragments; never the sources only a build reads, which
the repository's one checkout for builds holds (tests/test_commit_builds.py). Everything
read from it answers as the whole commit does; the repository gains no worktree for it."""

import os

import pytest

from githistory import commit, git, make_history
from kernellab import arches, cache, sources, toolchain
from kernellab.config import resolve as resolve_module
from kernellab.config.kconfig import open_tree
from kernellab.config.resolve import kconfig_symbols, resolve

READ = ["Makefile", "Kconfig", "scripts/kconfig/conf.py", "scripts/basic/fixdep", "kernel/configs/tiny.config",
        "arch/x86/configs/x86_64_defconfig"]
BUILT_ONLY = ["kernel/fork.c", "kernel/sched.c", "init/main.c", "include/linux/list.h", "drivers/tty/serial8250.c"]


@pytest.fixture
def history(lab, monkeypatch):
    """The fake history (tests/githistory.py), with a symlink under scripts/ at its tip."""
    monkeypatch.setattr(resolve_module, "_RESOLVED", {})   # no other test's resolutions
    repo, shas = make_history(lab.tmp)
    (repo / "scripts" / "dtc").mkdir()
    os.symlink("../../arch/x86/boot/dts", repo / "scripts" / "dtc" / "include-prefix")
    git(repo, "add", "-A")
    return repo, [*shas, commit(repo, "scripts: a symlink")]


def worktrees(repo) -> list[str]:
    return [line.removeprefix("worktree ") for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def test_a_commit_s_tree_holds_what_is_read_without_building_and_answers_as_the_whole_commit(lab, history):
    repo, shas = history
    at = sources.resolve(f"git:{repo}@{shas[-1]}")
    assert all((at.tree / path).is_file() for path in READ)
    assert not any((at.tree / path).exists() for path in BUILT_ONLY)
    for path in ("scripts/kconfig/conf.py", "kernel/configs/tiny.config"):   # modes as committed
        assert os.access(at.tree / path, os.X_OK) == os.access(repo / path, os.X_OK)
    assert os.readlink(at.tree / "scripts" / "dtc" / "include-prefix") == "../../arch/x86/boot/dts"

    # The whole commit, checked out as git does: every answer read from the trees is the same.
    git(repo, "worktree", "add", "--detach", str(lab.tmp / "whole"), shas[-1])
    whole = sources.resolve(str(lab.tmp / "whole"))
    assert (whole.tree / "kernel" / "fork.c").is_file()
    assert at.version == whole.version == "6.1.0-fake"
    profile = arches.load("x86_64")
    chain = toolchain.detect(profile)
    for base in ("tinyconfig", "defconfig", "lab-minimal"):
        assert resolve(at, profile, chain, base, []).values == resolve(whole, profile, chain, base, []).values
    # FAKE_SLOW's new default reaches both (the Kconfig of the tip, not of the tree shipped).
    assert resolve(at, profile, chain, "defconfig", []).values.get("CONFIG_FAKE_SLOW") == "y"
    trees = [open_tree(source, profile, chain) for source in (at, whole)]
    for tree in trees:
        tree.load_defconfig()
    assert trees[0].resolved() == trees[1].resolved()
    assert kconfig_symbols(at) == kconfig_symbols(whole) != set()


def test_the_repository_gains_no_worktree_and_pruning_a_commit_leaves_nothing_in_it(lab, history):
    repo, shas = history
    spec = f"git:{repo}@{shas[3]}"
    at = sources.resolve(spec)
    sources.resolve(f"git:{repo}@{shas[4]}")
    assert worktrees(repo) == [str(repo)]

    [entry] = [e for e in cache.select(cache.entries(None), source_hashes=sources.identify(spec))
               if e.kind == "sources" and e.path.name == f"git-{shas[3][:12]}"]
    assert entry.path == at.tree.parent and entry.bytes > 0
    cache.remove([entry])
    assert worktrees(repo) == [str(repo)] and git(repo, "worktree", "prune", "--dry-run", "-v") == ""
    assert (sources.resolve(spec).tree / "Kconfig").is_file()   # made again when asked again


def test_a_whole_worktree_an_earlier_kernellab_made_is_made_small(lab, history):
    """Before, each commit had a `git worktree` of the whole commit here (1.5 GB on Linux)."""
    repo, shas = history
    entry = lab.cache / "sources" / f"git-{shas[2][:12]}"
    tree = entry / f"linux-{shas[2][:12]}"
    entry.mkdir(parents=True)
    git(repo, "worktree", "add", "--detach", str(tree), shas[2])
    (entry / sources.MARKER).write_text(
        f'{{"version": "6.1.0-fake", "commit": "{shas[2]}", "repo": "{repo}"}}')
    assert (tree / "kernel" / "fork.c").is_file()

    at = sources.resolve(f"git:{repo}@{shas[2]}")
    assert at.tree == tree and (tree / "Kconfig").is_file() and not (tree / "kernel" / "fork.c").exists()
    assert at.version == "6.1.0-fake" and sources.repository_of(tree) == repo
    assert worktrees(repo) == [str(repo)]   # and the repository forgot the worktree



def test_a_hand_made_tree_cannot_write_through_a_link_it_holds(tmp_path):
    """A tree object git would not check out (`scripts/evil` a symbolic link to a directory
    outside, and `scripts/evil/planted` a file) is refused in one line, and nothing is
    written outside the commit's tree."""
    import subprocess

    from kernellab.errors import LabError
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    git_env = {**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x", "GIT_COMMITTER_NAME": "x",
               "GIT_COMMITTER_EMAIL": "x@x"}

    def run(*args: str, stdin: str = "") -> str:
        return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True,
                              check=True, env=git_env).stdout.strip()
    repo.mkdir()
    run("init", "-q")
    blob = run("hash-object", "-w", "--stdin", stdin="x\n")
    link = run("hash-object", "-w", "--stdin", stdin=str(outside))
    evil = run("mktree", stdin=f"100644 blob {blob}\tplanted\n")
    scripts = run("mktree", stdin=f"120000 blob {link}\tevil\n040000 tree {evil}\tevil\n")
    top = run("mktree", stdin=f"100644 blob {blob}\tKconfig\n100644 blob {blob}\tMakefile\n"
                              f"040000 tree {scripts}\tscripts\n")
    commit_id = run("commit-tree", top, "-m", "hostile")
    with pytest.raises(LabError, match="a tree git would not check out"):
        sources._write_files_read_without_building(repo, commit_id, tmp_path / "tree")
    assert list(outside.iterdir()) == []


# -- the revert that confirms a culprit: git's plumbing, no worktree, no checkout ------

def culprit_of(h, subject: str):
    [culprit] = [c for c in h.commits if c.subject == subject]
    return culprit


def git_revert_in_a_clone(tmp, repo, bad: str, *revert_args: str) -> str:
    """The commit `git revert --no-edit` makes of BAD in a clone (as kernellab made it before,
    on a worktree): the same names and dates."""
    import subprocess

    from kernellab.experiments import commits
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-q", "--detach", bad)
    date = git(repo, "log", "-1", "--format=%cI", bad)
    env = {**commits.REVERTER, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "PATH": os.environ["PATH"]}
    subprocess.run(["git", "-C", str(clone), "revert", "--no-edit", *revert_args], check=True, env=env,
                   capture_output=True)
    return git(clone, "rev-parse", "HEAD")


@pytest.fixture
def git_calls(monkeypatch):
    """The words of every git command kernellab.experiments.commits runs (after `git -C REPO`)."""
    import subprocess

    from kernellab.experiments import commits
    calls: list[list[str]] = []
    run = subprocess.run

    def spy(args, *rest, **kwargs):
        calls.append(list(args[3:]))
        return run(args, *rest, **kwargs)
    monkeypatch.setattr(commits.subprocess, "run", spy)
    return calls


def test_a_revert_is_the_commit_git_revert_makes_without_a_worktree_or_a_checkout(lab, history, git_calls,
                                                                                 tmp_path, monkeypatch):
    """Before, each revert made a `git worktree` of BAD in the cache (1.5 GB on Linux)."""
    from githistory import PLANTED
    from kernellab.experiments import commits
    repo, shas = history
    h = commits.history(f"git:{repo}@{shas[0]}", f"git:{repo}@{shas[-1]}")
    culprit = culprit_of(h, PLANTED)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private))
    git_calls.clear()

    sha, how = commits.revert(h, culprit)
    assert how == f"`git revert {culprit.short}` on {h.bad.short}"
    assert commits.revert(h, culprit) == (sha, how)    # the same revert, the same commit
    # BAD's tree less the culprit's change: the file it touched as before it, every other as BAD's.
    assert git(repo, "rev-parse", f"{sha}^") == h.bad.sha
    assert git(repo, "diff", "--name-only", h.bad.sha, sha) == "kernel/sched.c"
    assert git(repo, "show", f"{sha}:kernel/sched.c") == git(repo, "show", f"{culprit.sha}^:kernel/sched.c")
    assert git(repo, "show", f"{sha}:kernel/sched.c") != git(repo, "show", f"{h.bad.sha}:kernel/sched.c")
    assert git(repo, "log", "-1", "--format=%B", sha) == (f'Revert "{PLANTED}"\n\n'
                                                         f"This reverts commit {culprit.sha}.")
    # Nothing checked out: no worktree, no checkout, nothing left in the cache or the temporary directory.
    assert git_calls and not any({"worktree", "checkout", "revert", "reset", "switch", "restore"} & set(words)
                                 for words in git_calls)
    assert worktrees(repo) == [str(repo)]
    assert not (lab.cache / "why").exists() and list(private.iterdir()) == []
    assert git(repo, "status", "--porcelain") == "" and git(repo, "rev-parse", "HEAD") == shas[-1]
    # The commit `git revert` made (kernellab's earlier revert): its build in the store is still found.
    assert git_revert_in_a_clone(tmp_path, repo, h.bad.sha, culprit.sha) == sha


def test_a_merge_is_reverted_against_its_first_parent(lab, history, tmp_path):
    from kernellab.experiments import commits
    repo, shas = history
    git(repo, "checkout", "-q", "-b", "side", shas[3])
    (repo / "mm" / "side.c").write_text("int side;\n")
    git(repo, "add", "-A")
    commit(repo, "mm: a side branch")
    git(repo, "checkout", "-q", "master")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'side'", "side")
    merge = git(repo, "rev-parse", "HEAD")
    bad = commit_file(repo, "net/socket.c", "int after_the_merge;\n", "net: after the merge")
    h = commits.history(f"git:{repo}@{shas[0]}", f"git:{repo}@{bad}")
    [culprit] = [c for c in h.commits if c.sha == merge]

    sha, how = commits.revert(h, culprit)
    assert how == f"`git revert -m 1 {culprit.short}` on {h.bad.short} (against its first parent)"
    assert git(repo, "diff", "--name-only", bad, sha) == "mm/side.c"
    assert git(repo, "ls-tree", "--name-only", sha, "mm/") == git(repo, "ls-tree", "--name-only", shas[-1], "mm/")
    assert git_revert_in_a_clone(tmp_path, repo, bad, "-m", "1", merge) == sha


def commit_file(repo, path: str, text: str, subject: str) -> str:
    (repo / path).write_text((repo / path).read_text() + text)
    return commit(repo, subject)


def test_a_revert_that_does_not_apply_says_which_files_conflict(lab, history):
    from githistory import PLANTED, edit
    from kernellab.experiments import commits
    repo, shas = history
    edit(repo, "kernel/sched.c", 'FAKE_COST(getppid_walk, "syscall.null=1.10");\n',
         'FAKE_COST(getppid_walk, "syscall.null=1.20");\n')
    bad = commit(repo, "sched: walk it twice")
    h = commits.history(f"git:{repo}@{shas[0]}", f"git:{repo}@{bad}")
    culprit = culprit_of(h, PLANTED)
    assert commits.revert(h, culprit) == (
        None, f"`git revert {culprit.short}` does not apply cleanly on {h.bad.short}: conflicts in kernel/sched.c")
    assert worktrees(repo) == [str(repo)] and git(repo, "status", "--porcelain") == ""
