"""The guest's userland from Debian's packages (kernellab.userland): the dependency closure,
what is kept of the packages, the cpio segment, its cache, the refusals. Fast tests go
through a fake apt whose packages are real .deb files made here (with the host's /bin/true
and the C library it loads); the integration test downloads Debian's fio."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile

from kernellab import apt, arches, userland, workloads
from kernellab.errors import LabError
from kernellab.guest.workloads import Packages, Provenance

# -- the closure, from apt-cache depends --recurse -----------------------------------------------

RECURSIVE = """\
prog
  PreDepends: init-system-helpers
  Depends: libc6
 |Depends: libfoo-new
  Depends: libfoo-old
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: <mail-transport-agent>
    tinymail
  Depends: python3
libc6
  PreDepends: libgcc-s1
libgcc-s1
  Depends: gcc-12-base
  Depends: libc6
gcc-12-base
libfoo-old
  Depends: libc6
tinymail
  Depends: libc6
init-system-helpers
  Depends: perl-base
perl-base
python3
  Depends: python3-minimal
python3-minimal
<debconf-2.0>
<mail-transport-agent>
<libfoo-new>
"""


def test_the_closure_follows_depends_and_pre_depends_and_leaves_out_the_unneeded():
    assert userland.closure(["prog"], RECURSIVE) == [
        "gcc-12-base", "libc6", "libfoo-old", "libgcc-s1", "prog", "tinymail"]


def test_a_package_apt_does_not_know_for_the_arch_is_one_line():
    with pytest.raises(LabError, match="apt knows no package nosuch for this architecture"):
        userland.closure(["prog", "nosuch"], RECURSIVE)


def test_a_package_name_that_reads_as_an_option_is_refused_before_apt_runs(monkeypatch):
    monkeypatch.setattr(apt, "run", lambda argv, cwd=None: pytest.fail(f"apt ran: {argv}"))
    with pytest.raises(LabError, match="not a Debian package name"):
        apt.recursive_depends(["-oDir::Etc=/tmp/x"])


# -- packages made here, served by a fake apt ------------------------------------------------------

def _ar(members: list[tuple[str, bytes]]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{0o100644:<8o}{len(data):<10}`\n".encode()
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return out


def make_deb(path: Path, files: dict[str, bytes | str], modes: dict[str, int] | None = None) -> Path:
    """A .deb whose data.tar holds `files`: path -> bytes, or a str: a symbolic link's target."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo("./" + name)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), (modes or {}).get(name, 0o644)
                tar.addfile(info, io.BytesIO(content))
    control = io.BytesIO()
    with tarfile.open(fileobj=control, mode="w:gz"):
        pass
    path.write_bytes(_ar([("debian-binary", b"2.0\n"), ("control.tar.gz", control.getvalue()),
                          ("data.tar.gz", data.getvalue())]))
    return path


def _needs(path: Path) -> tuple[str, list[str]]:
    with path.open("rb") as f:
        elf = ELFFile(f)
        interp = next((s.get_interp_name() for s in elf.iter_segments() if s["p_type"] == "PT_INTERP"), "")
        needed = [t.needed for s in elf.iter_segments() if isinstance(s, DynamicSegment)
                  for t in s.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return interp, needed


TRUE = Path("/bin/true")
TRIPLET = "x86_64-linux-gnu"


def host_programs() -> tuple[bytes, bytes, bytes]:
    """The host's /bin/true, its C library and its dynamic loader (Debian 12, amd64); the
    test is skipped on another host."""
    interp, needed = _needs(TRUE) if TRUE.exists() else ("", [])
    libc = Path(f"/lib/{TRIPLET}/libc.so.6")
    if interp != "/lib64/ld-linux-x86-64.so.2" or needed != ["libc.so.6"] or not libc.exists():
        pytest.skip("needs an amd64 Debian host's /bin/true")
    loader = Path(f"/lib/{TRIPLET}/ld-linux-x86-64.so.2")
    return TRUE.read_bytes(), libc.read_bytes(), loader.read_bytes()


@pytest.fixture
def host_libc():
    return host_programs()


class FakeApt:
    """apt-get update, apt-cache depends --recurse and apt-get download, with `packages`,
    each downloaded as apt-get names it: NAME_VERSION_amd64.deb, an epoch's colon as %3a."""

    def __init__(self, packages: dict[str, tuple[list[str], dict[str, bytes | str]]],
                 modes: dict[str, int] | None = None, versions: dict[str, str] | None = None):
        self.packages = packages            # name -> (its Depends, its files)
        self.modes = modes or {}
        self.versions = versions or {}      # name -> its version (default 1.0-1)
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        words = [a for a in argv if not a.startswith("-o") and "=" not in a]
        assert "-o" in argv and any(a.startswith("APT::Architecture=") for a in argv), "not the private view"
        if words[:2] == ["apt-get", "update"]:
            return subprocess.CompletedProcess(argv, 0, "", "")
        if words[:3] == ["apt-cache", "depends", "--recurse"]:
            roots = [w for w in words[3:] if not w.startswith("--")]
            unknown = [r for r in roots if r not in self.packages]
            if unknown:
                return subprocess.CompletedProcess(argv, 100, "", f"E: No packages found: {unknown[0]}")
            lines = []
            for name, (depends, _) in self.packages.items():
                lines += [name, *(f"  Depends: {d}" for d in depends)]
            return subprocess.CompletedProcess(argv, 0, "\n".join(lines) + "\n", "")
        if words[:2] == ["apt-get", "download"]:
            assert cwd is not None
            for name in words[2:]:
                version = self.versions.get(name, "1.0-1").replace(":", "%3a")
                make_deb(cwd / f"{name}_{version}_amd64.deb", self.packages[name][1], self.modes)
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(f"unexpected command {argv}")


def read_cpio(data: bytes) -> dict[str, tuple[int, bytes]]:
    """A newc archive's entries: name -> (mode, content)."""
    out, at = {}, 0
    while True:
        fields = [int(data[at + 6 + 8 * i: at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name = data[at + 110: at + 110 + namesize - 1].decode()
        at += 110 + namesize
        at += -at % 4
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, data[at: at + size])
        at += size + (-size % 4)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def tiny_workload(tmp_path: Path, packages: str = '["prog"]', extra: str = "") -> workloads.Instance:
    path = tmp_path / "tiny.toml"
    path.write_text(f"""
name = "tiny"
description = "a program of a package made by the test"
packages = {packages}
command = ["prog", "{{n}}"]
fixed_work = true
why = "fixed"
{extra}
[run]
iterations = "n"
timeout_s = 10
[output]
format = "text"
[params.n]
default = "1"
pattern = '[0-9]+'
help = "n"
[[metric]]
name = "t"
unit = "s"
better = "lower"
regex = '^t: (\\d+)$'
""")
    return workloads.resolve(str(path))


@pytest.fixture
def fake_apt(monkeypatch, host_libc):
    true, libc, loader = host_libc
    fake = FakeApt({
        "prog": (["libc6", "debconf"], {
            "usr/bin/prog": true, "usr/bin/other": true,          # `other` is run by no workload
            "usr/share/doc/prog/README": b"documentation\n",
            "usr/share/man/man1/prog.1.gz": b"manual\n",
            "usr/share/locale/de/LC_MESSAGES/prog.mo": b"locale\n"}),
        "libc6": ([], {
            f"lib/{TRIPLET}/libc.so.6": libc,
            f"lib/{TRIPLET}/ld-linux-x86-64.so.2": loader,
            f"lib/{TRIPLET}/libunused.so.1": b"\x7fELF not needed",
            "lib64/ld-linux-x86-64.so.2": f"/lib/{TRIPLET}/ld-linux-x86-64.so.2"}),
        "debconf": ([], {"usr/bin/debconf": b"#!/usr/bin/perl\n"}),
    }, modes={"usr/bin/prog": 0o755, "usr/bin/other": 0o755, f"lib/{TRIPLET}/libc.so.6": 0o755,
              f"lib/{TRIPLET}/ld-linux-x86-64.so.2": 0o755})
    monkeypatch.setattr(apt, "run", fake)
    return fake


def test_the_segment_keeps_the_program_its_libraries_and_loader_and_drops_the_rest(cache, fake_apt, tmp_path):
    built = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    entries = read_cpio(gzip.decompress(built.segment.read_bytes()))
    assert built.programs == {"prog": "/usr/bin/prog"}
    assert sorted(built.packages) == ["libc6", "prog"]            # debconf: unneeded, never downloaded
    assert sorted(n for n, (mode, _) in entries.items() if mode & 0o170000 != 0o040000) == [
        "etc/group", "etc/passwd", f"lib/{TRIPLET}/ld-linux-x86-64.so.2", f"lib/{TRIPLET}/libc.so.6",
        "lib64/ld-linux-x86-64.so.2", "usr/bin/prog"]
    assert entries["usr/bin/prog"] == (0o100755, TRUE.read_bytes())
    assert entries["lib64/ld-linux-x86-64.so.2"] == (0o120777, b"../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    assert entries["usr/bin"][0] == entries["lib64"][0] == 0o040755   # every directory above an entry
    assert not any("doc" in n or "man" in n or "locale" in n or "other" in n for n in entries)
    assert list(built.files) == sorted(entries)


def test_a_server_finds_root_and_nobody_in_the_generated_passwd_and_group(cache, fake_apt, tmp_path):
    """nginx looks its `user` up by name (getpwnam, getgrnam) even when it never switches to
    it: the segment carries kernellab's own minimal /etc/passwd and /etc/group; the
    server's program is kept like the client's."""
    server = '[server]\ncommand = ["other", "--serve"]\nready_port = 8080\n'
    built = userland.assemble([tiny_workload(tmp_path, extra=server)], arches.load("x86_64"))
    entries = read_cpio(gzip.decompress(built.segment.read_bytes()))
    assert built.programs == {"prog": "/usr/bin/prog", "other": "/usr/bin/other"}
    passwd = entries["etc/passwd"][1].decode().splitlines()
    assert entries["etc/passwd"][0] == entries["etc/group"][0] == 0o100644
    assert [line.split(":")[:4] for line in passwd] == [["root", "x", "0", "0"], ["nobody", "x", "65534", "65534"]]
    assert [line.split(":")[:3] for line in entries["etc/group"][1].decode().splitlines()] == [
        ["root", "x", "0"], ["nogroup", "x", "65534"]]


def test_each_packages_version_and_each_programs_package_are_remembered_with_the_segment(cache, fake_apt, tmp_path):
    """What a run's workloads say they ran (guest.workloads.Provenance): the version of the
    package each program came from, as apt-get download named its file, the epoch too."""
    fake_apt.versions.update({"prog": "2:1.4-3+deb12u1", "libc6": "2.36-9"})
    fake_apt.packages["libc6"][1]["usr/bin/helper"] = TRUE.read_bytes()
    fake_apt.modes["usr/bin/helper"] = 0o755
    inst = tiny_workload(tmp_path, extra='[server]\ncommand = ["helper"]\nready_port = 8080\n')
    built = userland.assemble([inst], arches.load("x86_64"))
    assert built.packages == {"libc6": "2.36-9", "prog": "2:1.4-3+deb12u1"}
    assert built.origins == {"prog": "prog", "helper": "libc6"}
    calls = len(fake_apt.calls)
    guest = userland.installed([inst], arches.load("x86_64"))   # what a run is given: a lookup, no apt
    assert len(fake_apt.calls) == calls and guest == Packages(built.packages, {"prog": "prog", "helper": "libc6"})
    provenance = Provenance.of(inst, "qemu", guest)
    assert (provenance.version, provenance.package, dict(provenance.package_versions)) == (
        "2:1.4-3+deb12u1", "prog", {"prog": "2:1.4-3+deb12u1"})
    assert provenance.line() == "workload tiny: prog 2:1.4-3+deb12u1 from Debian's prog on qemu: prog 1"


def test_a_userland_remembered_before_it_named_the_programs_packages_is_assembled_again(cache, fake_apt,
                                                                                       tmp_path):
    first = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    [remembered] = (cache / "userland").glob("amd64-*.json")
    old = json.loads(remembered.read_text())
    del old["origins"]
    remembered.write_text(json.dumps(old))
    assert userland.installed([tiny_workload(tmp_path)], arches.load("x86_64")) == Packages()
    again = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    assert again == first and again.origins == {"prog": "prog"}


def test_no_assembled_userland_gives_no_package_versions(cache, monkeypatch, tmp_path):
    monkeypatch.setattr(apt, "run", lambda argv, cwd=None: pytest.fail(f"apt ran: {argv}"))
    for arch in ("x86_64", "ppc32"):   # not assembled yet; no Debian userland at all
        assert userland.installed([tiny_workload(tmp_path)], arches.load(arch)) == Packages()


def test_a_second_assembly_is_a_lookup_without_apt(cache, fake_apt, tmp_path):
    first = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    calls = len(fake_apt.calls)
    start = time.monotonic()
    again = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    assert again == first and len(fake_apt.calls) == calls
    assert time.monotonic() - start < 2


def test_the_same_files_make_the_same_segment(cache, fake_apt, tmp_path):
    first = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"), compression="none")
    data = first.segment.read_bytes()
    first.segment.unlink()
    again = userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"), compression="none")
    assert again.segment == first.segment and again.segment.read_bytes() == data


def test_what_a_workload_uses_is_kept(cache, fake_apt, tmp_path):
    inst = tiny_workload(tmp_path, extra='uses = ["other", "/usr/share/doc/prog"]')
    built = userland.assemble([inst], arches.load("x86_64"))
    assert {"usr/bin/other", "usr/share/doc/prog/README"} <= set(built.files)


@pytest.mark.parametrize("used", ["../etc/passwd", "bin/x", "/usr/../../x", ""])
def test_uses_names_a_program_or_an_absolute_path(tmp_path, used):
    with pytest.raises(LabError, match="uses"):
        tiny_workload(tmp_path, extra=f'uses = ["{used}"]')


def test_a_library_no_package_has_is_one_line(cache, fake_apt, tmp_path):
    del fake_apt.packages["libc6"][1][f"lib/{TRIPLET}/libc.so.6"]
    with pytest.raises(LabError, match=r"^libc.so.6, needed by /usr/bin/prog, is in no package") as exc:
        userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    assert "\n" not in str(exc.value)


def test_a_program_no_package_has_is_one_line(cache, fake_apt, tmp_path):
    del fake_apt.packages["prog"][1]["usr/bin/prog"]
    with pytest.raises(LabError, match="no package of the workloads' closure has the program prog"):
        userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))


def test_an_unknown_package_is_one_line(cache, fake_apt, tmp_path):
    with pytest.raises(LabError, match="nosuch"):
        userland.assemble([tiny_workload(tmp_path, packages='["prog", "nosuch"]')], arches.load("x86_64"))


@pytest.mark.parametrize("arch", ["ppc32", "ppc44x", "ppc460", "mpc885"])
def test_powerpc_has_no_debian_userland(monkeypatch, tmp_path, arch):
    monkeypatch.setattr(apt, "run", lambda argv, cwd=None: pytest.fail(f"apt ran: {argv}"))
    with pytest.raises(LabError) as exc:
        userland.assemble([workloads.resolve("fio")], arches.load(arch))
    message = str(exc.value)
    assert "no Debian 12 userland" in message and "binaries = [...]" in message and "\n" not in message


def test_a_hostile_package_writes_nothing_outside_the_cache(cache, fake_apt, tmp_path):
    fake_apt.packages["libc6"][1]["../../../../escaped"] = b"owned\n"
    with pytest.raises(LabError, match="'..'"):
        userland.assemble([tiny_workload(tmp_path)], arches.load("x86_64"))
    assert not any(p.name == "escaped" for p in tmp_path.rglob("*"))


def test_the_command_prints_what_it_kept_and_refuses_powerpc_in_one_line(cache, fake_apt, tmp_path, lab, capsys):
    inst = tiny_workload(tmp_path)
    assert lab.main("workload", "userland", str(inst.loaded.origin)) == 0
    out = capsys.readouterr().out
    assert "/usr/bin/prog" in out and "libc6" in out and "MiB (gzip)" in out
    assert lab.main("workload", "userland", "--arch", "ppc32", "fio") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Debian 12 userland" in err


# -- Debian's real packages ---------------------------------------------------------------------------

MACHINE = {"x86_64": "EM_X86_64", "s390x": "EM_S390"}


@pytest.mark.integration
@pytest.mark.parametrize("arch", ["x86_64", "s390x"])
def test_debian_fio_is_assembled_for_the_guest_arch(tmp_path, arch):
    built = userland.assemble([workloads.resolve("fio")], arches.load(arch))
    entries = read_cpio(gzip.decompress(built.segment.read_bytes()))
    fio = tmp_path / "fio"
    fio.write_bytes(entries[built.programs["fio"].lstrip("/")][1])
    with fio.open("rb") as f:
        assert ELFFile(f)["e_machine"] == MACHINE[arch]
    interp, needed = _needs(fio)
    names = {Path(n).name for n in entries}
    assert interp.lstrip("/") in entries and set(needed) <= names
