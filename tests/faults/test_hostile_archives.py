"""Hostile archives (issue 29, defects 3, 9 and 10): a kernel tarball or a Debian package
can add files to the directory kernellab unpacks it into, and nothing else.

Every archive kernellab unpacks goes through kernellab.archive; these tests build hostile
ones with tarfile in tmp and check, for each, that a file outside the cache (a sentinel,
root-owned, mode 0600) is byte for byte and mode for mode what it was, that nothing new
appeared beside it, that the error is one line naming the archive and the member, and
that no staging directory is left. Then: a tarball is identified by its bytes, whatever
its size and mtime say; `cache prune --dry-run` changes nothing and starts nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import sqlite3
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from fakes import KERNEL_TREE
from kernellab import apt, archive, sources
from kernellab.errors import LabError

TOP = "linux-6.1"
SENTINEL_BYTES = b"root's secret\n"


# -- building archives ----------------------------------------------------------------

def _info(name: str, kind: bytes = tarfile.REGTYPE, **fields) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = fields.pop("mode", 0o644)
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def _file(name: str, data: bytes = b"pwned\n", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    return _info(name, size=len(data), mode=mode), data


def _member(name: str, kind: bytes, **fields) -> tuple[tarfile.TarInfo, None]:
    return _info(name, kind, **fields), None


def kernel_tarball(path: Path, extra: list, mode: str = "w:xz") -> Path:
    """The fake kernel tree as linux-6.1/, then the `extra` members (TarInfo, bytes or None)."""
    with tarfile.open(path, mode) as tar:
        tar.add(KERNEL_TREE, arcname=TOP)
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


class Outside:
    """A directory outside the cache with a root-owned 0600 file in it: what no archive may touch."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "outside"
        self.dir.mkdir()
        self.sentinel = self.dir / "sentinel.txt"
        self.sentinel.write_bytes(SENTINEL_BYTES)
        self.sentinel.chmod(0o600)
        self.before = self._state()

    def _state(self) -> dict[str, tuple[int, int, int, int, bytes]]:
        found = {}
        for p in sorted(self.dir.rglob("*")):
            st = p.lstat()
            found[p.name] = (st.st_mode, st.st_uid, st.st_gid, st.st_nlink, p.read_bytes() if p.is_file() else b"")
        return found

    def untouched(self) -> bool:
        return self._state() == self.before and self.sentinel.read_bytes() == SENTINEL_BYTES \
            and stat.S_IMODE(self.sentinel.stat().st_mode) == 0o600 and self.sentinel.stat().st_nlink == 1


@pytest.fixture
def outside(tmp_path):
    return Outside(tmp_path)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELLAB_CACHE", str(cache))
    return cache


def _up_to(outside: Outside, depth: int) -> str:
    """The sentinel, from `depth` directories below tmp: a hard link's target is relative to
    the archive's root, cache/sources/NAME.partial, three below."""
    return "../" * depth + f"{outside.dir.name}/{outside.sentinel.name}"


# Each case: the extra members of a hostile kernel tarball, and what the error must say.
HOSTILE: dict[str, tuple[Callable[[Outside], list], str]] = {
    # The reported attack: a hard link to an outside file, then a regular member of its name.
    "hard link out (absolute), then a file of its name": (lambda o: [
        _member(f"{TOP}/hl", tarfile.LNKTYPE, linkname=str(o.sentinel)),
        _file(f"{TOP}/hl", b"pwned\n", mode=0o4755)], "absolute path"),
    "hard link out (relative), then a file of its name": (lambda o: [
        _member(f"{TOP}/hl", tarfile.LNKTYPE, linkname=_up_to(o, 3)),
        _file(f"{TOP}/hl")], "'..'"),
    "symlink out (absolute), then a file through it": (lambda o: [
        _member(f"{TOP}/esc", tarfile.SYMTYPE, linkname=str(o.dir)),
        _file(f"{TOP}/esc/sentinel.txt")], "not a directory"),
    "symlink out (relative), then a file through it": (lambda o: [
        _member(f"{TOP}/esc", tarfile.SYMTYPE, linkname="../../../../outside"),
        _file(f"{TOP}/esc/sentinel.txt")], "outside the tree"),
    "symlink out through an in-tree symlink": (lambda o: [
        _member(f"{TOP}/here", tarfile.SYMTYPE, linkname="."),
        _member(f"{TOP}/esc", tarfile.SYMTYPE, linkname="here/../../../../../outside"),
        _file(f"{TOP}/esc/sentinel.txt")], "'..' after a name"),
    "symlink to the sentinel, then a file of its name": (lambda o: [
        _member(f"{TOP}/s", tarfile.SYMTYPE, linkname=str(o.sentinel)),
        _file(f"{TOP}/s")], "second entry"),
    "absolute path": (lambda o: [_file(str(o.dir / "new.txt"))], "absolute path"),
    "../ path": (lambda o: [_file(f"{TOP}/../../../../outside/new.txt")], "'..'"),
    "character device": (lambda o: [
        _member(f"{TOP}/mem", tarfile.CHRTYPE, devmajor=1, devminor=1, mode=0o666)], "device node"),
    "block device": (lambda o: [
        _member(f"{TOP}/sda", tarfile.BLKTYPE, devmajor=8, devminor=0, mode=0o660)], "device node"),
    "FIFO": (lambda o: [_member(f"{TOP}/fifo", tarfile.FIFOTYPE, mode=0o666)], "FIFO"),
    "setuid file": (lambda o: [_file(f"{TOP}/su", b"#!/bin/sh\n", mode=0o4755)], "setuid"),
    "setgid file": (lambda o: [_file(f"{TOP}/sg", b"#!/bin/sh\n", mode=0o2755)], "setgid"),
    "a second member of one name": (lambda o: [
        _file(f"{TOP}/twice", b"one\n"), _file(f"{TOP}/twice", b"two\n")], "second entry"),
    "hard link to a later member": (lambda o: [
        _member(f"{TOP}/hl", tarfile.LNKTYPE, linkname=f"{TOP}/later")], "no file the archive wrote"),
}


def _no_staging_left(cache: Path) -> bool:
    where = cache / "sources"
    return not where.exists() or not [p.name for p in where.iterdir() if not p.name.startswith(".")]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_kernel_tarball_is_refused_and_writes_nothing_outside(case, cache, outside, tmp_path):
    members, says = HOSTILE[case]
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.xz", members(outside))
    with pytest.raises(LabError) as err:
        sources.resolve(str(tarball))
    message = str(err.value)
    assert "\n" not in message and str(tarball) in message and says in message, message
    assert message.startswith((f"refusing {tarball}: member '{TOP}/", f"refusing {tarball}: member '/"))
    assert outside.untouched()
    assert _no_staging_left(cache)


def test_a_truncated_tarball_is_one_line_and_leaves_no_partial(cache, tmp_path):
    whole = kernel_tarball(tmp_path / "whole.tar.xz", [])
    for cut in (len(whole.read_bytes()) // 2, len(whole.read_bytes()) - 100):
        truncated = tmp_path / f"linux-cut{cut}.tar.xz"
        truncated.write_bytes(whole.read_bytes()[:cut])
        with pytest.raises(LabError) as err:
            sources.resolve(str(truncated))
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"could not extract {truncated}: it ends early")
        assert "at member 'linux-6.1/" in message
        assert _no_staging_left(cache)


def test_a_tar_cut_at_a_member_boundary_is_refused_not_taken_short(tmp_path):
    """Without compression an archive cut between members just ends: the missing
    end-of-archive block says it was cut."""
    whole = tmp_path / "whole.tar"
    with tarfile.open(whole, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name in ("a", "b"):
            info, data = _file(f"t/{name}", b"x" * 512)
            tar.addfile(info, io.BytesIO(data))
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole.read_bytes()[:2048])        # two headers and two data blocks, no end
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(LabError, match="ends early or is damaged"):
        archive.extract_tarball(cut, dest, "get it again")
    (tmp_path / "dest2").mkdir()
    archive.extract_tarball(whole, tmp_path / "dest2", "get it again")
    assert (tmp_path / "dest2" / "t" / "b").read_bytes() == b"x" * 512


def test_the_kernel_trees_own_symlinks_and_hard_links_still_extract(cache, tmp_path):
    """Linux's tarballs hold relative symlinks that climb (scripts/dtc/include-prefixes/arm
    -> ../../../arch/arm/boot/dts), some with `./` in them; Debian's packages hold absolute
    ones, which mean their own root."""
    members = [
        _member(f"{TOP}/scripts/dtc", tarfile.DIRTYPE, mode=0o755),
        _member(f"{TOP}/scripts/dtc/include-prefixes", tarfile.DIRTYPE, mode=0o755),
        _member(f"{TOP}/scripts/dtc/include-prefixes/arm", tarfile.SYMTYPE, linkname="../../../arch"),
        _member(f"{TOP}/asm-compat.h", tarfile.SYMTYPE, linkname="./Makefile"),
        _member(f"{TOP}/deep.h", tarfile.SYMTYPE, linkname=f".././{TOP}/./Kconfig"),
        _member(f"{TOP}/root-rel", tarfile.SYMTYPE, linkname=f"/{TOP}/Kconfig"),
        _member(f"{TOP}/Makefile.hard", tarfile.LNKTYPE, linkname=f"{TOP}/Makefile"),
        _file(f"{TOP}/scripts/tool.sh", b"#!/bin/sh\n", mode=0o777),
        _member(f"{TOP}/locked", tarfile.DIRTYPE, mode=0o500),
        _file(f"{TOP}/locked/inside", b"x\n", mode=0o000),
    ]
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.xz", members)
    s = sources.resolve(str(tarball))
    tree = s.tree
    assert (s.kind, s.version, s.content_hash) == ("tarball", "6.1.0-fake",
                                                   hashlib.sha256(tarball.read_bytes()).hexdigest())
    assert os.readlink(tree / "scripts/dtc/include-prefixes/arm") == "../../../arch"
    assert (tree / "scripts/dtc/include-prefixes/arm" / "x86").is_dir()
    assert os.readlink(tree / "asm-compat.h") == "Makefile"
    assert (tree / "deep.h").read_bytes() == (tree / "Kconfig").read_bytes()
    assert os.readlink(tree / "root-rel") == f"../{TOP}/Kconfig"            # the archive's root
    assert (tree / "Makefile.hard").stat().st_ino == (tree / "Makefile").stat().st_ino
    assert stat.S_IMODE((tree / "scripts/tool.sh").stat().st_mode) == 0o755  # never writable by others
    assert stat.S_IMODE((tree / "locked").stat().st_mode) == 0o700
    assert stat.S_IMODE((tree / "locked/inside").stat().st_mode) == 0o600
    assert (tree / "Makefile").stat().st_uid == os.getuid()
    assert (tree / "Makefile").read_bytes() == (KERNEL_TREE / "Makefile").read_bytes()


def test_archive_owners_are_not_kept(tmp_path):
    """Root extracting an archive that says a file is nobody's with mode 0777 gets its
    own file, 0755 (the variant that changed a root-owned 0600 file to nobody 0755)."""
    tarball = tmp_path / "t.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        info, data = _file("t/f", b"x", mode=0o777)
        info.uid, info.gid, info.uname, info.gname = 65534, 65534, "nobody", "nogroup"
        tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "dest"
    dest.mkdir()
    archive.extract_tarball(tarball, dest, "")
    st = (dest / "t/f").stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (os.getuid(), os.getgid(), 0o755)


# -- Debian packages --------------------------------------------------------------------

def _ar(members: list[tuple[str, bytes]]) -> bytes:
    out = [b"!<arch>\n"]
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        assert len(header) == 60
        out += [header, data, b"\n" if len(data) % 2 else b""]
    return b"".join(out)


def _tar_bytes(members: list, mode: str = "w:xz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def make_deb(path: Path, members: list) -> Path:
    control = _tar_bytes([_file("./control", b"Package: kl-test\nVersion: 1\nArchitecture: all\n"
                                               b"Maintainer: t <t@example.org>\nDescription: t\n")])
    path.write_bytes(_ar([("debian-binary", b"2.0\n"), ("control.tar.xz", control),
                          ("data.tar.xz", _tar_bytes(members))]))
    return path


PACKAGE_FILES = [
    _member("./", tarfile.DIRTYPE, mode=0o755),
    _member("./usr", tarfile.DIRTYPE, mode=0o755),
    _member("./usr/bin", tarfile.DIRTYPE, mode=0o755),
    _file("./usr/bin/tool", b"\x7fELF tool\n", mode=0o755),
    _member("./usr/bin/tool-alias", tarfile.LNKTYPE, linkname="./usr/bin/tool"),
    _member("./lib64", tarfile.DIRTYPE, mode=0o755),
    _member("./lib64/ld.so", tarfile.SYMTYPE, linkname="/usr/bin/tool"),
]


def test_a_debian_package_unpacks_as_dpkg_deb_would(tmp_path):
    deb = make_deb(tmp_path / "kl-test_1_all.deb", PACKAGE_FILES)
    root = apt.unpack([deb], tmp_path / "root")
    assert (root / "usr/bin/tool").read_bytes() == b"\x7fELF tool\n"
    assert (root / "usr/bin/tool-alias").stat().st_ino == (root / "usr/bin/tool").stat().st_ino
    assert os.readlink(root / "lib64/ld.so") == "../usr/bin/tool"         # the package's root, not the host's
    assert (root / "lib64/ld.so").read_bytes() == b"\x7fELF tool\n"
    if shutil.which("dpkg-deb"):                                          # the same files as dpkg-deb -x
        theirs = tmp_path / "theirs"
        assert not os.system(f"dpkg-deb -x {deb} {theirs}")
        def listing(r): return sorted(str(p.relative_to(r)) for p in r.rglob("*"))  # noqa: E704
        assert listing(root) == listing(theirs)


@pytest.mark.parametrize("case", ["hard link out, then a file of its name", "device node", "absolute path",
                                  "truncated", "not a package"])
def test_a_hostile_debian_package_is_refused_and_leaves_nothing(case, tmp_path, outside):
    deb = tmp_path / "kl-test_1_all.deb"
    if case == "hard link out, then a file of its name":
        make_deb(deb, [*PACKAGE_FILES, _member("./usr/bin/hl", tarfile.LNKTYPE, linkname="../../outside/sentinel.txt"),
                       _file("./usr/bin/hl")])
        says = "'..'"
    elif case == "device node":
        make_deb(deb, [*PACKAGE_FILES, _member("./dev-null", tarfile.CHRTYPE, devmajor=1, devminor=3)])
        says = "device node"
    elif case == "absolute path":
        make_deb(deb, [*PACKAGE_FILES, _file(str(outside.dir / "new"))])
        says = "absolute path"
    elif case == "truncated":
        whole = make_deb(tmp_path / "whole.deb", PACKAGE_FILES).read_bytes()
        deb.write_bytes(whole[:-40])
        says = "ends after the file"
    else:
        deb.write_bytes(b"<html>404</html>\n")
        says = "not a Debian package"
    with pytest.raises(LabError) as err:
        apt.unpack([deb], tmp_path / "cache" / "root")
    message = str(err.value)
    assert "\n" not in message and str(deb) in message and says in message, message
    assert outside.untouched()
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())   # no temporary left


# -- a tarball is its bytes (defect 10) -----------------------------------------------

def _gzip_header_time(tarball: Path, seconds: int) -> None:
    """Other bytes, same size, still a valid .tar.gz: the gzip header's own timestamp."""
    with tarball.open("r+b") as f:
        f.seek(4)
        f.write(seconds.to_bytes(4, "little"))


@pytest.mark.parametrize("how", ["rewritten in place", "renamed over"])
def test_a_same_size_same_mtime_replacement_is_a_new_source(how, cache, tmp_path, monkeypatch):
    # Remember hashes at once: the guard against changes within one clock tick would
    # otherwise keep a file made a moment ago out of the index, and hide what is tested.
    monkeypatch.setattr(sources, "_SETTLED_S", -1.0, raising=False)
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.gz", [], mode="w:gz")
    first = sources.resolve(str(tarball))
    index = json.loads((cache / "source-hashes.json").read_text())
    assert first.content_hash in index.values()                     # the accelerator is in use
    st = tarball.stat()

    if how == "rewritten in place":
        _gzip_header_time(tarball, 12345)
    else:
        other = tmp_path / "other.tar.gz"
        shutil.copy(tarball, other)
        _gzip_header_time(other, 12345)
        other.replace(tarball)
    os.utime(tarball, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (tarball.stat().st_size, tarball.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)

    second = sources.resolve(str(tarball))
    assert second.content_hash == hashlib.sha256(tarball.read_bytes()).hexdigest() != first.content_hash
    assert second.tree != first.tree and (second.tree / "Makefile").is_file()


def test_a_damaged_hash_index_is_read_as_empty(cache, tmp_path):
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.gz", [], mode="w:gz")
    cache.mkdir()
    (cache / "source-hashes.json").write_text("[not json")
    assert sources.resolve(str(tarball)).content_hash == hashlib.sha256(tarball.read_bytes()).hexdigest()


def test_an_extraction_is_only_reused_for_its_own_bytes(cache, tmp_path):
    """Two tarballs whose hashes share their first 12 digits (the extraction's name) are
    told apart by the full hash in the marker."""
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.gz", [], mode="w:gz")
    s = sources.resolve(str(tarball))
    forged = "0" * 52
    marker = s.tree.parent / sources.MARKER
    info = json.loads(marker.read_text())
    marker.write_text(json.dumps({**info, "sha256": s.content_hash[:12] + forged}))
    again = sources.resolve(str(tarball))
    assert json.loads((again.tree.parent / sources.MARKER).read_text())["sha256"] == s.content_hash


# -- cache prune --dry-run changes nothing (defect 9) -----------------------------------

def _rows(store: Path) -> list[str]:
    """The store's contents (opening a store is a transaction: its file's header changes)."""
    db = sqlite3.connect(store)
    try:
        return list(db.iterdump())
    finally:
        db.close()


def _snapshot(root: Path) -> dict[str, tuple]:
    found = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        data = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else os.readlink(p) \
            if stat.S_ISLNK(st.st_mode) else ""
        found[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, data)
    return found


def test_prune_dry_run_changes_nothing_and_starts_nothing(lab, capsys, tmp_path, monkeypatch):
    assert lab.main("compare", "a=tinyconfig") == 0                     # a cache with a build in it
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.xz", [])
    # A Debian source whose package is not installed, with a tree of it extracted earlier.
    monkeypatch.setitem(sources.DEBIAN_SOURCES, "6.1", "linux-source-kl-absent")
    earlier = lab.cache / "sources" / "linux-source-kl-absent-0123456789ab"
    (earlier / "linux-source-kl-absent").mkdir(parents=True)
    (earlier / sources.MARKER).write_text(json.dumps({"version": "6.1.0", "tree": "linux-source-kl-absent"}))
    capsys.readouterr()
    # A hash kernellab would remember (the file is settled) is still not written by a dry run.
    monkeypatch.setattr(sources, "_SETTLED_S", -1.0, raising=False)
    calls_file = tmp_path / "tool-calls.txt"

    def dry_run(source: str) -> str:
        before = _snapshot(lab.cache)
        store_before = _rows(lab.store)
        assert lab.main("cache", "prune", "--dry-run", "--source", source) == 0, capsys.readouterr().err
        out = capsys.readouterr()
        assert _snapshot(lab.cache) == before
        assert _rows(lab.store) == store_before
        assert not calls_file.exists(), calls_file.read_text()
        return out.err + out.out

    _record_tools(tmp_path, monkeypatch, calls_file)
    said = dry_run(str(tarball))
    assert "would free 0 B in 0 entries" in said                       # it was never extracted
    said = dry_run("debian:6.1")
    assert "would remove sources/linux-source-kl-absent-0123456789ab" in said
    said = dry_run(str(lab.tree))
    assert "would remove build/6.1.0-fake-" in said


def _record_tools(tmp_path: Path, monkeypatch, calls: Path) -> None:
    bin_dir = tmp_path / "recording-bin"
    bin_dir.mkdir()
    for tool in ("make", "apt-get", "dpkg", "dpkg-deb", "tar", "xz", "git"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\nexit 1\n')
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)    # as on a lab machine: apt-get install would run


def test_prune_by_source_still_prunes(lab, capsys, tmp_path):
    """What the dry run says is what pruning removes: the tarball's extraction and builds."""
    tarball = kernel_tarball(tmp_path / "linux-6.1.tar.xz", [])
    assert lab.main("build", "--source", str(tarball), "tinyconfig") == 0
    capsys.readouterr()
    assert lab.main("cache", "prune", "--source", str(tarball)) == 0
    err = capsys.readouterr().err
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:12]
    assert f"removing sources/linux-6.1-{digest}" in err and "removing build/" in err
    assert not list((lab.cache / "sources").glob(f"*{digest}*"))


def test_gzip_member_helper_is_valid(tmp_path):
    """_gzip_header_time keeps a .tar.gz readable (else the replacement test proves nothing)."""
    tarball = kernel_tarball(tmp_path / "t.tar.gz", [], mode="w:gz")
    _gzip_header_time(tarball, 12345)
    with gzip.open(tarball) as f:
        assert f.read(1)
    with tarfile.open(tarball) as tar:
        assert f"{TOP}/Makefile" in tar.getnames()
