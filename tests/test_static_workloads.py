"""Workloads' programs built statically from Debian's source packages (kernellab.staticbuild)
for 32-bit PowerPC, which Debian 12 has no userland for. The fast tests build a tiny real
source package made here (dpkg-source -b), served by a fake apt, with the real cross
compiler; the integration test downloads and builds Debian's fio."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from fakes import lab_fixture
from kernellab import apt, arches, staticbuild, userland, workloads
from kernellab.agent.compile import cross_targets
from kernellab.errors import LabError
from kernellab.experiments import lab, placement
from kernellab.guest.workloads import INITRAMFS_DIR, Provenance
from test_userland import read_cpio

CC = cross_targets()["ppc32"].cc
QEMU_PPC = cross_targets()["ppc32"].qemu_user
GREETING = "hello from a static program"

HELLO_C = f"""#include <stdio.h>
int main(void) {{ puts("{GREETING}"); return 0; }}
"""
# Writes the compiler --cc names into config.mk, as fio's configure does into config-host.mak.
CONFIGURE = """#!/bin/sh
for a in "$@"; do
  case "$a" in --cc=*) echo "CC = ${a#--cc=}" > config.mk ;; esac
done
"""
MAKEFILE = """include config.mk
hello: hello.c
\t$(CC) -static -O2 -o hello hello.c
hello-dynamic: hello.c
\t$(CC) -O2 -o hello-dynamic hello.c
"""
RECIPE = '''
[static]
source = "hello-static"
build = [["./configure", "--cc={cc}"], ["make", "{target}"]]
programs = ["{program}"]
'''


def source_package(where: Path) -> tuple[Path, Path]:
    """A native Debian source package (.dsc and tarball) of one C program, made by dpkg-source -b."""
    tree = where / "hello-static-1.0"
    (tree / "debian" / "source").mkdir(parents=True)
    (tree / "hello.c").write_text(HELLO_C)
    (tree / "configure").write_text(CONFIGURE)
    (tree / "configure").chmod(0o755)
    (tree / "Makefile").write_text(MAKEFILE)
    (tree / "debian" / "source" / "format").write_text("3.0 (native)\n")
    (tree / "debian" / "control").write_text(
        "Source: hello-static\nMaintainer: Test <test@example.org>\n\n"
        "Package: hello-static\nArchitecture: any\nDescription: a test's program\n one line\n")
    (tree / "debian" / "changelog").write_text(
        "hello-static (1.0) unstable; urgency=low\n\n  * A test's package.\n\n"
        " -- Test <test@example.org>  Thu, 01 Jan 2026 00:00:00 +0000\n")
    subprocess.run(["dpkg-source", "-b", tree.name], cwd=where, check=True, capture_output=True)
    return where / "hello-static_1.0.dsc", where / "hello-static_1.0.tar.xz"


class FakeSourceApt:
    """apt-get update and apt-get source --download-only of the package made here."""

    def __init__(self, files: tuple[Path, ...]):
        self.files = files
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        assert any(a.startswith("Dir::Etc::SourceList=") for a in argv), "not the private view of sources"
        words = [a for a in argv if not a.startswith("-o") and "=" not in a]
        if words[:2] == ["apt-get", "update"]:
            return subprocess.CompletedProcess(argv, 0, "", "")
        if words[:3] == ["apt-get", "source", "--download-only"]:
            assert cwd is not None
            if words[3] != "hello-static":
                return subprocess.CompletedProcess(argv, 100, "", f"E: Unable to find a source package for {words[3]}")
            for f in self.files:
                shutil.copy(f, cwd / f.name)
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def host_sources(tmp_path, monkeypatch):
    """The host's apt sources, as the test writes them: a deb822 file and a one-line one."""
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nArchitectures: amd64\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n")
    (parts / "old.list.disabled").write_text("deb http://ignored.example/debian bookworm main\n")
    listed = tmp_path / "sources.list"
    listed.write_text("# deb http://commented.example/debian bookworm main\n"
                      "deb [arch=amd64 signed-by=/k.gpg] http://other.example/debian bookworm main contrib\n")
    monkeypatch.setattr(apt, "HOST_SOURCE_LIST", listed)
    monkeypatch.setattr(apt, "HOST_SOURCE_PARTS", parts)


@pytest.fixture(scope="module")
def made_package(tmp_path_factory):
    if shutil.which(CC) is None or shutil.which("dpkg-source") is None:
        pytest.skip(f"needs {CC} (with the static C library) and dpkg-source")
    return source_package(tmp_path_factory.mktemp("made"))


# A build runs the real cross compiler (and a test qemu-ppc): seconds, the lab lane's.
@lab_fixture
def fake_apt(made_package, monkeypatch, host_sources, cache):
    fake = FakeSourceApt(made_package)
    monkeypatch.setattr(apt, "run", fake)
    return fake


def hello_workload(tmp_path: Path, target: str = "hello", program: str = "hello", extra: str = "",
                   recipe: str = RECIPE, command: str = "hello") -> workloads.Instance:
    path = tmp_path / "hello.toml"
    path.write_text(f'''
name = "hello"
description = "a static program built from a test's source package"
packages = ["hello-static"]
command = ["{command}", "{{n}}"]
fixed_work = true
why = "prints one line"
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
{recipe.replace("{target}", target).replace("{program}", program)}''')
    return workloads.resolve(str(path))


PPC460 = arches.load("ppc460")


def recipe_of(inst: workloads.Instance) -> workloads.Static:
    assert inst.workload.static is not None
    return inst.workload.static


# -- the build --------------------------------------------------------------------------------------

def test_the_program_is_a_static_powerpc_elf_that_runs_and_says_what_it_came_from(fake_apt, tmp_path, cache):
    inst = hello_workload(tmp_path)
    built = staticbuild.build(recipe_of(inst), PPC460)
    program = built.programs["hello"]
    with program.open("rb") as f:
        elf = ELFFile(f)
        assert (elf["e_machine"], elf.elfclass, elf.little_endian) == ("EM_PPC", 32, False)
        assert not any(s["p_type"] == "PT_INTERP" for s in elf.iter_segments())
    assert (built.source, built.version) == ("hello-static", "1.0")
    assert re.fullmatch(rf"{re.escape(CC)} \d+\.\d+\.\d+", built.compiler), built.compiler
    line = Provenance.of(inst, "qemu", lab.guest_packages((inst,), PPC460)).line()
    assert line == (f"workload hello: hello 1.0, built statically by kernellab from Debian's source package "
                    f"hello-static with {built.compiler} on qemu: hello 1")
    if shutil.which(QEMU_PPC) is None:
        pytest.skip(f"needs {QEMU_PPC} to run the program")
    ran = subprocess.run([QEMU_PPC, str(program)], capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout) == (0, GREETING + "\n")


def test_the_sources_are_the_hosts_archives_as_deb_src(fake_apt, tmp_path, cache):
    staticbuild.build(recipe_of(hello_workload(tmp_path)), PPC460)
    [update, _] = fake_apt.calls
    view = Path(next(a for a in update if a.startswith("Dir::Etc::SourceList=")).split("=", 1)[1])
    assert view.read_text() == (
        "Types: deb-src\nURIs: http://other.example/debian\nSuites: bookworm\nComponents: main contrib\n"
        "Signed-By: /k.gpg\n\n"
        "Types: deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")


def test_a_second_build_is_a_lookup_without_apt_or_a_build(fake_apt, tmp_path, cache, monkeypatch):
    inst = hello_workload(tmp_path)
    first = staticbuild.build(recipe_of(inst), PPC460)
    calls = len(fake_apt.calls)
    monkeypatch.setattr(staticbuild, "_unpack", lambda *a: pytest.fail("unpacked again"))
    monkeypatch.setattr(staticbuild, "_step", lambda *a: pytest.fail("built again"))
    assert staticbuild.build(recipe_of(inst), PPC460) == first
    assert staticbuild.programs([inst, hello_workload(tmp_path)], PPC460) == {"hello": first.programs["hello"]}
    assert len(fake_apt.calls) == calls


def test_nothing_built_says_nothing_of_where_it_came_from(fake_apt, tmp_path, cache):
    assert staticbuild.installed([hello_workload(tmp_path)], PPC460).programs == {}
    assert fake_apt.calls == []


def test_a_failed_build_is_one_line_naming_its_log(fake_apt, tmp_path, cache):
    with pytest.raises(LabError) as exc:
        staticbuild.build(recipe_of(hello_workload(tmp_path, target="nosuch")), PPC460)
    message = str(exc.value)
    found = re.fullmatch(r"building hello-static 1\.0 for ppc460 failed: `make nosuch` exited with 2: its output "
                         r"is in (\S+\.log)", message)
    assert found, message
    assert "No rule to make target 'nosuch'" in Path(found.group(1)).read_text()


def test_a_dynamic_program_is_refused(fake_apt, tmp_path, cache):
    with pytest.raises(LabError, match=r"hello-static's hello-dynamic is linked dynamically \(its loader: /lib/ld"):
        staticbuild.build(recipe_of(hello_workload(tmp_path, target="hello-dynamic", program="hello-dynamic")),
                          PPC460)


def test_a_program_for_another_machine_is_refused(fake_apt, tmp_path, cache):
    host = tmp_path / "host-program"
    shutil.copy("/bin/true", host)
    with pytest.raises(LabError, match=r"is an ELF for EM_X86_64, 64-bit little-endian, not for ppc460 "
                                       r"\(EM_PPC, 32-bit big-endian\)"):
        staticbuild.check_program(host, cross_targets()["ppc32"], "ppc460", "the program")


def test_a_source_package_apt_does_not_find_is_one_line(fake_apt, tmp_path, cache):
    inst = hello_workload(tmp_path, recipe=RECIPE.replace('source = "hello-static"', 'source = "nosuch"'))
    with pytest.raises(LabError, match=r"^`apt-get source --download-only nosuch` failed: E: Unable to find a "
                                       r"source package for nosuch; check the source package's name"):
        staticbuild.build(recipe_of(inst), PPC460)


# -- the recipe, as the loader reads it ---------------------------------------------------------------

@pytest.mark.parametrize(("recipe", "said"), [
    (RECIPE.replace("{program}", "../escaped"), "must be a path relative to the source tree, without '..'"),
    (RECIPE.replace("{program}", "/bin/sh"), "must be a path relative to the source tree"),
    (RECIPE + 'install = ["make", "install"]\n', "unknown key 'install'"),
    (RECIPE.replace("{cc}", "{workdir}"), "{workdir} is not a placeholder of a build (cc, cross_prefix, jobs)"),
    (RECIPE.replace('build = [["./configure", "--cc={cc}"], ["make", "{target}"]]', 'build = "make"'),
     "expected a list"),
    (RECIPE.replace('source = "hello-static"', 'source = "-oDir=/x"'), "is not a Debian source package's name"),
])
def test_a_bad_recipe_is_refused_when_the_file_is_read(tmp_path, recipe, said):
    with pytest.raises(LabError, match=re.escape(said)):
        hello_workload(tmp_path, recipe=recipe)


def test_the_shipped_fio_has_a_recipe_that_builds_fio_statically():
    recipe = recipe_of(workloads.resolve("fio"))
    assert (recipe.source, recipe.programs) == ("fio", ("fio",))
    assert ("--build-static" in recipe.build[0] and "--cc={cc}" in recipe.build[0]
            and recipe.build[-1] == ("{cross_prefix}strip", "fio"))


# -- the lab: a ppc460 guest's initramfs ---------------------------------------------------------------

@pytest.fixture
def no_agent(tmp_path, monkeypatch):
    """The agent's binary, a stand-in: what the initramfs holds of the workloads is tested here."""
    agent = tmp_path / "agent"
    agent.write_bytes(b"the agent\n")
    monkeypatch.setattr(lab, "agent_binary", lambda cc, arch: agent)


def ppc460_variant() -> types.SimpleNamespace:
    return types.SimpleNamespace(profile=PPC460, modules=())


def test_a_ppc460_guest_gets_the_built_program_in_bin_and_no_debian_userland(fake_apt, no_agent, tmp_path, cache,
                                                                              monkeypatch):
    monkeypatch.setattr(userland, "segment", lambda *a: pytest.fail("a Debian userland was assembled"))
    inst = hello_workload(tmp_path)
    entries = read_cpio(lab.initramfs_for(ppc460_variant(), (inst,)).read_bytes())
    built = staticbuild.build(recipe_of(inst), PPC460)
    assert entries[f"{INITRAMFS_DIR}/bin/hello"] == (0o100755, built.programs["hello"].read_bytes())
    assert lab.guest_programs((inst,), PPC460) == ((), (inst,))
    assert lab.guest_programs((inst,), arches.load("x86_64")) == ((inst,), ())   # Debian has its packages


def test_a_workload_without_a_recipe_on_ppc460_is_still_refused_in_one_line(no_agent, tmp_path, cache, monkeypatch):
    monkeypatch.setattr(apt, "run", lambda argv, cwd=None: pytest.fail(f"apt ran: {argv}"))
    inst = hello_workload(tmp_path, recipe="")
    for attempt in (lambda: lab.initramfs_for(ppc460_variant(), (inst,)),
                    lambda: placement.check_workloads(None, (inst,), "icount", ["ppc460"])):
        with pytest.raises(LabError) as exc:
            attempt()
        message = str(exc.value)
        assert message.startswith("ppc460 has no Debian 12 userland") and "\n" not in message
        assert "binaries = [...]" in message and "[static]" in message


def test_a_workload_that_runs_a_program_its_build_does_not_make_is_refused_before_a_build(tmp_path, cache,
                                                                                         monkeypatch):
    monkeypatch.setattr(apt, "run", lambda argv, cwd=None: pytest.fail(f"apt ran: {argv}"))
    inst = hello_workload(tmp_path, command="sh")
    with pytest.raises(LabError, match=r"^workload hello runs sh, which its \[static\] build does not make"):
        placement.check_workloads(None, (inst,), "icount", ["ppc460"])
    placement.check_workloads(None, (inst,), "icount", ["x86_64"])   # Debian's packages give sh there


# -- Debian's fio -------------------------------------------------------------------------------------

@pytest.mark.integration
def test_debians_fio_built_for_ppc460_runs_and_its_parser_reads_it(tmp_path):
    """Debian's fio source package downloaded and built statically with the cross compiler;
    under qemu-ppc it says its version, and a small job's JSON output gives every metric
    the workload declares for it (fio's own parser, as tests/test_workloads.py reads samples)."""
    if shutil.which(QEMU_PPC) is None:
        pytest.skip(f"needs {QEMU_PPC}")
    inst = workloads.resolve("fio:rw=randread,bs=4k,size=1M")
    fio = staticbuild.build(recipe_of(inst), PPC460).programs["fio"]
    version = subprocess.run([QEMU_PPC, str(fio), "--version"], capture_output=True, text=True, timeout=120)
    assert version.stdout.strip() == "fio-3.33"
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = inst.argv(str(workdir))
    ran = subprocess.run([QEMU_PPC, str(fio), *argv[1:]], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["fio version"] == "fio-3.33"
    values = inst.read(ran.stdout).strict("fio under qemu-ppc")
    assert set(values) == {"randread_iops", "randread_bw", "randread_clat_p99"} and values["randread_iops"] > 0
