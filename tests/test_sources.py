"""Sources from a kernel tarball and from a git commit: identified by content (the
tarball's sha256, the commit id), extracted or checked out once into kernellab's cache,
and bad input is one line saying what to do.

The fake tree (tests/fakes/kernel) stands in for Linux; the last test checks Debian's own
/usr/src/linux-source-6.1.tar.xz against `debian:6.1` on the real file.
"""

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from fakes import KERNEL_TREE
from kernellab import sources
from kernellab.errors import LabError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELLAB_CACHE", str(cache))
    return cache


def make_tarball(path: Path, top: str = "linux-6.1-fake", mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        tar.add(KERNEL_TREE, arcname=top)
    return path


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# -- tarballs ------------------------------------------------------------------------

def test_a_tarball_is_identified_by_its_bytes_and_extracted_once(cache, tmp_path):
    tarball = make_tarball(tmp_path / "linux-6.1-fake.tar.gz")
    s = sources.resolve(str(tarball))
    assert (s.kind, s.version) == ("tarball", "6.1.0-fake")
    assert s.content_hash == hashlib.sha256(tarball.read_bytes()).hexdigest()
    assert s.tree == cache / "sources" / f"linux-6.1-fake-{s.content_hash[:12]}" / "linux-6.1-fake"
    assert (s.tree / "Makefile").is_file()

    # The same bytes under another name are the same source, in the same extraction.
    stamp = s.tree.stat().st_mtime_ns
    copy = tmp_path / "elsewhere" / "renamed.tar.gz"
    copy.parent.mkdir()
    shutil.copy(tarball, copy)
    again = sources.resolve(str(copy))
    assert (again.id, again.tree) == (s.id, s.tree)
    assert s.tree.stat().st_mtime_ns == stamp
    assert [p.name for p in (cache / "sources").iterdir() if not p.name.startswith(".")] == [s.tree.parent.name]


def test_other_compressions_and_other_bytes(cache, tmp_path):
    gz = sources.resolve(str(make_tarball(tmp_path / "a.tar.gz")))
    bz2 = sources.resolve(str(make_tarball(tmp_path / "linux-x.tar.bz2", mode="w:bz2")))
    xz = sources.resolve(str(make_tarball(tmp_path / "linux-y.tar.xz", mode="w:xz")))
    # Other bytes, other sources (the same files inside do not make the same tarball).
    assert len({gz.id, bz2.id, xz.id}) == 3
    assert bz2.version == xz.version == "6.1.0-fake" and (xz.tree / "Kconfig").is_file()


def test_bad_tarballs_are_one_line(cache, tmp_path):
    with pytest.raises(LabError) as err:
        sources.resolve(str(tmp_path / "linux-9.9.tar.xz"))
    assert "no such file" in one_line(err)

    not_a_tree = tmp_path / "docs.tar.gz"
    with tarfile.open(not_a_tree, "w:gz") as tar:
        tar.add(KERNEL_TREE / "init", arcname="init")
    with pytest.raises(LabError) as err:
        sources.resolve(str(not_a_tree))
    assert "does not hold one kernel tree" in one_line(err)
    assert not list((cache / "sources").glob("docs*"))  # nothing half-extracted is kept

    broken = tmp_path / "broken.tar.xz"
    broken.write_bytes(b"not xz at all")
    with pytest.raises(LabError) as err:
        sources.resolve(str(broken))
    assert one_line(err).startswith(f"could not extract {broken}")

    with pytest.raises(LabError) as err:
        sources.resolve("linux-6.1.zip")
    assert "git:PATH@REF" in one_line(err) and "linux-X.Y.tar.xz" in str(err.value)


# -- git -----------------------------------------------------------------------------

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV, HOME=str(repo.parent))
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """The fake tree as a git repository: v1 (6.1.0-fake), then main one commit later (6.1.1-fake)."""
    repo = tmp_path / "linux"
    shutil.copytree(KERNEL_TREE, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    git(repo, "tag", "v1")
    makefile = repo / "Makefile"
    makefile.write_text(makefile.read_text().replace("SUBLEVEL = 0", "SUBLEVEL = 1"))
    git(repo, "commit", "-q", "-am", "v2")
    return repo


def test_git_sources_are_one_tree_per_commit(cache, repo):
    v1 = sources.resolve(f"git:{repo}@v1")
    head = sources.resolve(f"git:{repo}@main")
    assert (v1.kind, v1.version, head.version) == ("git", "6.1.0-fake", "6.1.1-fake")
    assert v1.content_hash == git(repo, "rev-parse", "v1") and head.content_hash == git(repo, "rev-parse", "main")
    assert v1.tree.parent.parent == cache / "sources" and v1.tree != head.tree
    assert "SUBLEVEL = 0" in (v1.tree / "Makefile").read_text()

    # The same commit by another name (its id, HEAD~1): the same source, the same tree.
    again = sources.resolve(f"git:{repo}@{v1.content_hash[:10]}")
    assert (again.id, again.tree) == (v1.id, v1.tree)
    assert sources.resolve(f"git:{repo}@HEAD~1").tree == v1.tree


def test_git_errors_are_one_line(cache, repo, tmp_path):
    with pytest.raises(LabError) as err:
        sources.resolve(f"git:{repo}@v9")
    assert "'v9' is no branch, tag or commit of" in one_line(err)
    with pytest.raises(LabError) as err:
        sources.resolve(f"git:{repo}")
    assert "give git:PATH@REF" in one_line(err)
    with pytest.raises(LabError) as err:
        sources.resolve(f"git:{tmp_path / 'nowhere'}@main")
    assert "is not a git repository" in one_line(err)

    # Uncommitted changes: the checkout's own refs would not build what the user sees...
    (repo / "init" / "main.c").write_text("/* edited */\n")
    for ref in ("HEAD", "main"):
        with pytest.raises(LabError) as err:
            sources.resolve(f"git:{repo}@{ref}")
        assert "has uncommitted changes" in one_line(err)
    # ... while a tag or another commit is what it names, whatever the checkout holds.
    assert sources.resolve(f"git:{repo}@v1").version == "6.1.0-fake"


def test_a_git_source_builds_on_the_fake_lab(lab, repo, capsys):
    from kernellab.cli import main
    rc = main(["build", "--source", f"git:{repo}@v1", "tinyconfig", "--format", "json", "--store", str(lab.store)])
    assert rc == 0, capsys.readouterr().err
    assert '"cached": false' in capsys.readouterr().out
    rc = main(["build", "--source", f"git:{repo}@{git(repo, 'rev-parse', 'v1')}", "tinyconfig",
               "--format", "json", "--store", str(lab.store)])
    assert rc == 0 and '"cached": true' in capsys.readouterr().out


# -- Debian's own tarball -----------------------------------------------------------

DEBIAN_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


@pytest.mark.integration
@pytest.mark.skipif(not DEBIAN_TARBALL.exists(), reason="linux-source-6.1 is not installed")
def test_debian_tarball_as_a_path_is_debian_61_and_nothing_rebuilds(minimal):
    """The path of Debian's tarball is the source `debian:6.1`: same hash, id, tree (no
    second extraction) and, for lab-minimal, the build the shared fixture made."""
    from kernellab import build
    from kernellab.experiments import lab
    from kernellab.experiments.spec import parse_short
    debian, built = minimal
    prepared = lab.prepare(parse_short("lab-minimal=lab-minimal", source=str(DEBIAN_TARBALL)))
    source = prepared.source
    assert source.kind == "tarball"
    assert (source.content_hash, source.id, source.tree) == \
        (debian.source.content_hash, debian.source.id, debian.source.tree)
    key = build.build_key(source, prepared.profile, prepared.toolchain, prepared.config)
    assert key == built.key and build.cached_build(key) is not None
