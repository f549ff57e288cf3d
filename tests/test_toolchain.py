"""The toolchain as an axis of a variant: gcc (the default) or clang (make LLVM=1), part of
the variant, of the resolved config (Kconfig sees the compiler) and of the build key.

On the fake tree, with a fake clang (gcc behind clang's --version line) and stand-ins for
the LLVM binutils, so the tests do not depend on Debian's clang packages; the fake tree's
Makefile records LLVM= in the image header (tests/fakes/kernel/scripts/mkimage).
"""

import json
import shutil
from pathlib import Path

import pytest

from kernellab import arches, toolchain
from kernellab.errors import LabError
from kernellab.experiments.spec import load_experiment, parse_short

FAKE_CLANG_VERSION = "Debian clang version 14.0.6 (kernellab fake)"


@pytest.fixture
def fake_llvm(tmp_path, monkeypatch):
    """A PATH whose clang is gcc with clang's version line, and whose LLVM tools exist."""
    bin_dir = tmp_path / "llvm-bin"
    bin_dir.mkdir()
    clang = bin_dir / "clang"
    # ccache adds clang's own -f(no-)color-diagnostics for a compiler named clang: gcc has neither.
    clang.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "{FAKE_CLANG_VERSION}"; exit 0; }}\n'
                     'for a; do shift; case "$a" in -f*color-diagnostics) ;; *) set -- "$@" "$a";; esac; done\n'
                     f'exec {shutil.which("gcc")} "$@"\n')
    clang.chmod(0o755)
    for tool in toolchain.LLVM_TOOLS[1:]:
        (bin_dir / tool).symlink_to("/bin/true")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(shutil.which('gcc')).parent}:/usr/bin:/bin")
    return bin_dir


def header(image: Path) -> dict[str, str]:
    head = image.read_bytes().partition(b"\n\n")[0].decode().splitlines()[1:]
    return dict(line.partition("=")[::2] for line in head)


# -- the variant ---------------------------------------------------------------------

def test_short_syntax_and_experiment_files_name_the_toolchain(tmp_path):
    assert parse_short("a=lab-minimal").toolchain == "gcc"
    v = parse_short("b=lab-minimal+CONFIG_HZ_1000=y+cc:clang")
    assert (v.toolchain, v.options, v.fragments) == ("clang", ["CONFIG_HZ_1000=y"], [])
    assert v.to_dict()["toolchain"] == "clang"
    with pytest.raises(LabError, match=r"variant 'c': unknown toolchain 'icc': use one of gcc, clang$"):
        parse_short("c=lab-minimal+cc:icc")

    path = tmp_path / "e.toml"
    path.write_text('toolchain = "clang"\n[[variant]]\nname = "a"\nbase = "lab-minimal"\n'
                    '[[variant]]\nname = "b"\nbase = "lab-minimal"\ntoolchain = "gcc"\n')
    assert [v.toolchain for v in load_experiment(path).variants] == ["clang", "gcc"]
    path.write_text('[[variant]]\nname = "a"\nbase = "lab-minimal"\ntoolchain = "msvc"\n')
    with pytest.raises(LabError, match="unknown toolchain 'msvc'"):
        load_experiment(path)


def test_profiles_say_where_clang_builds():
    llvm = {name for name in arches.available() if arches.load(name).llvm}
    assert llvm == {"x86_64", "i386", "arm64"}


def test_clang_make_variables(fake_llvm):
    for name, cross in (("x86_64", ""), ("arm64", "aarch64-linux-gnu-")):
        profile = arches.load(name)
        tc = toolchain.detect(profile, "clang")
        assert (tc.cc, tc.kind, tc.version_text, tc.id) == ("clang", "clang", FAKE_CLANG_VERSION, "clang-14.0.6")
        # CROSS_COMPILE stays: the kernel takes clang's --target from it.
        assert toolchain.make_vars(profile, tc) == [f"ARCH={profile.kernel_arch}", "LLVM=1",
                                                    f"CROSS_COMPILE={cross}", "CC=clang"]
    gcc = toolchain.detect(arches.load("x86_64"))
    assert "LLVM=1" not in toolchain.make_vars(arches.load("x86_64"), gcc) and gcc.id.startswith("gcc-")


def test_clang_where_it_cannot_build_or_is_missing_is_one_line(fake_llvm, monkeypatch):
    with pytest.raises(LabError) as err:
        toolchain.detect(arches.load("s390x"), "clang")
    assert str(err.value) == ("kernellab builds s390x with gcc only (Linux supports LLVM=1 on arm64, i386, "
                              "x86_64): drop cc:clang / toolchain = \"clang\" for s390x")
    # Only the fake's tools on PATH: a missing one is named with its Debian package.
    monkeypatch.setenv("PATH", str(fake_llvm))
    (fake_llvm / "ld.lld").unlink()
    with pytest.raises(LabError, match=r"^ld.lld not found: run `apt-get install -y lld`"):
        toolchain.detect(arches.load("x86_64"), "clang")
    (fake_llvm / "clang").unlink()
    with pytest.raises(LabError, match=r"^clang not found: run `apt-get install -y clang`"):
        toolchain.detect(arches.load("x86_64"), "clang")


# -- on the fake lab -----------------------------------------------------------------

def test_a_clang_variant_resolves_and_builds_apart_from_gcc(lab, capsys, fake_llvm):
    def resolved(variant):
        assert lab.main("resolve", variant, "--format", "json") == 0
        return json.loads(capsys.readouterr().out)["config_hash"]

    def built(variant):
        assert lab.main("build", variant, "--format", "json") == 0, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)

    # Kconfig sees the compiler: another config, another build key.
    assert resolved("a=tinyconfig") != resolved("b=tinyconfig+cc:clang")
    gcc, clang = built("a=tinyconfig"), built("b=tinyconfig+cc:clang")
    assert gcc["key"] != clang["key"] and not clang["cached"]
    assert clang["compiler"] == FAKE_CLANG_VERSION and gcc["compiler"].startswith("gcc")
    image = header(Path(clang["image"]))
    assert (image["llvm"], image["compiler"]) == ("1", FAKE_CLANG_VERSION)
    assert image["CONFIG_CC_IS_CLANG"] == "y" and "CONFIG_CC_IS_GCC" not in image
    assert header(Path(gcc["image"]))["llvm"] == ""
    # Its own build tree and resolve directory: the gcc tree is never rebuilt for clang.
    assert {p.name.rsplit("-", 1)[0].split("-x86_64-")[1] for p in (lab.cache / "build").iterdir()} \
        == {"gcc", "clang"}
    assert built("again=tinyconfig+cc:clang")["cached"] is True


def test_the_report_names_each_variants_compiler(lab, capsys, fake_llvm):
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+cc:clang") == 0
    out = capsys.readouterr().out
    compilers = {line.split(":")[0]: line.split(" with ")[1] for line in out.splitlines()
                 if line.startswith("variant ") and " with " in line}
    assert compilers["variant a"].startswith("gcc")
    assert compilers["variant b"].startswith(FAKE_CLANG_VERSION)
