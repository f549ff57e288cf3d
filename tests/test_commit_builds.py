"""Builds of the commits of one git repository are incremental, in one tree (issue 32):
the repository's one checkout for builds is moved to each commit and built into one build
tree, so a commit compiles what it changed; and a build of commit X is X's, whatever the
checkout held before and whichever build ran beside it (sources.build_checkout)."""

import contextlib
import json
import shutil
import threading
from pathlib import Path

import pytest

from fakes import each_in_a_thread
from githistory import commit, edit, git
from kernellab import cache, sources
from kernellab.experiments import lab as lab_stage
from kernellab.experiments.spec import parse_short
from kernellab.store import Store

FORK_MARKER = 'const char fork_marker[] = "marker-B";\n'
EXTRA = 'const char extra_marker[] = "marker-C";\n'


@pytest.fixture
def history(lab):
    """The fake tree as a repository: A as shipped; B changes kernel/fork.c alone; C (after
    B) adds kernel/extra.c and deletes mm/memory.c, with the Makefile's objects to match."""
    repo = lab.tmp / "linux"
    shutil.copytree(lab.tree, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "master")
    git(repo, "add", "-A")
    shas = {"A": commit(repo, "as shipped")}
    edit(repo, "kernel/fork.c", None, FORK_MARKER)
    shas["B"] = commit(repo, "fork: a marker")
    (repo / "kernel" / "extra.c").write_text(EXTRA)
    (repo / "mm" / "memory.c").unlink()
    edit(repo, "Makefile", " mm/memory.o\n", " kernel/extra.o\n")
    git(repo, "add", "-A")
    shas["C"] = commit(repo, "kernel: extra.c for mm/memory.c")
    return repo, shas


def build_at(lab, repo: Path, sha: str, where=None):
    prepared = lab_stage.prepare(parse_short("v=tinyconfig", f"git:{repo}@{sha}"))
    return lab_stage.ensure_built(prepared, Store(lab.tmp / f"store-{sha[:8]}.sqlite"), where=where)


def symbols(build) -> set[str]:
    return {line.split()[-1] for line in (build.artifacts / "System.map").read_text().splitlines()}


def compiled(build) -> list[str]:
    """The objects its make compiled, from its log."""
    return [line.split()[-1] for line in (build.artifacts / "build.log").read_text().splitlines()
            if line.startswith("  CC ")]


def test_the_next_commit_compiles_only_what_it_changed(lab, history):
    repo, shas = history
    a = build_at(lab, repo, shas["A"])
    b = build_at(lab, repo, shas["B"])
    assert a.compiled == len(compiled(a)) >= 5 and a.checkout_from is None
    assert compiled(b) == ["kernel/fork.o"] and b.compiled == 1
    # The record says where and from what: the repository's one checkout, at A before.
    assert (b.repository, b.checkout_from) == (str(repo), shas["A"])
    assert "fork_marker" in symbols(b) and "fork_marker" not in symbols(a)
    record = json.loads((b.artifacts / "build.json").read_text())
    assert (record["compiled"], record["checkout_from"]) == (1, shas["A"])


def test_a_commit_built_again_after_another_is_its_own(lab, history):
    repo, shas = history
    first_a = build_at(lab, repo, shas["A"])
    a_vmlinux = (first_a.artifacts / "vmlinux").read_bytes()
    build_at(lab, repo, shas["B"])
    shutil.rmtree(first_a.artifacts)   # built again (as after `cache prune`), not taken from the cache
    again = build_at(lab, repo, shas["A"])
    assert not again.cached and compiled(again) == ["kernel/fork.o"]
    assert (again.artifacts / "vmlinux").read_bytes() == a_vmlinux

    # A commit that adds a file and deletes one, then back: each build holds its own objects.
    c = build_at(lab, repo, shas["C"])
    assert compiled(c) == ["kernel/fork.o", "kernel/extra.o"] or sorted(compiled(c)) == [
        "kernel/extra.o", "kernel/fork.o"]
    assert {"extra_marker", "fork_marker"} <= symbols(c) and "page_tables" not in symbols(c)
    shutil.rmtree(again.artifacts)
    last = build_at(lab, repo, shas["A"])
    assert "page_tables" in symbols(last) and not {"extra_marker", "fork_marker"} & symbols(last)
    assert (last.artifacts / "vmlinux").read_bytes() == a_vmlinux


def test_builds_of_two_commits_at_once_take_turns_in_the_checkout(lab, history, monkeypatch):
    """Each in a build tree of its own (as tests/prefetch.py builds ahead), so that only the
    checkout's lock keeps one build from moving the checkout under the other's make: a
    make starts only once both builds have asked for the checkout."""
    from kernellab import build as builder
    repo, shas = history
    build_at(lab, repo, shas["A"])   # the checkout is there: the two builds move it
    asked, ready = [], threading.Condition()
    real_checkout, real_make = sources.build_checkout, builder._timed_make

    @contextlib.contextmanager
    def checkout(source):
        with ready:
            asked.append(source.content_hash)
            ready.notify_all()
        with real_checkout(source) as held:
            yield held

    def make(*args):
        with ready:
            assert ready.wait_for(lambda: len(asked) == 2, timeout=120)
        return real_make(*args)

    monkeypatch.setattr(sources, "build_checkout", checkout)
    monkeypatch.setattr(builder, "_timed_make", make)
    results, errors = each_in_a_thread(
        lambda name: build_at(lab, repo, shas[name], where=lambda: lab.tmp / f"tree-{name}"), ("B", "C"))
    assert errors == [] and sorted(asked) == sorted([shas["B"], shas["C"]])
    assert {"fork_marker", "page_tables"} <= symbols(results["B"]) and "extra_marker" not in symbols(results["B"])
    assert {"fork_marker", "extra_marker"} <= symbols(results["C"]) and "page_tables" not in symbols(results["C"])


def test_the_repository_s_checkout_and_build_tree_are_cache_entries(lab, history, capsys):
    from kernellab.cli import main
    repo, shas = history
    assert main(["compare", "a=tinyconfig", "--source", f"git:{repo}@{shas['A']}", "--store", str(lab.store)]) == 0
    capsys.readouterr()
    name = sources.repository_name(repo)
    found = {(e.kind, e.path.name): e for e in cache.entries(Store(lab.store))}
    checkout = found[("sources", name)]
    [tree] = [e for (kind, n), e in found.items() if kind == "build" and n.startswith(f"{name}-x86_64-")]
    assert checkout.used_by and tree.used_by == checkout.used_by   # the run of A used both
    # Pruning any commit of the repository by source takes them (its builds were there).
    picked = cache.select(list(found.values()), source_hashes=sources.identify(f"git:{repo}@{shas['B']}"))
    assert {checkout.path, tree.path} <= {e.path for e in picked}
