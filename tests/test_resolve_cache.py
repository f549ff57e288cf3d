"""The olddefconfig cache of kernellab.config.resolve: a hit costs no `make`, and a change
of anything the result depends on resolves again; on the fake kernel tree."""

import dataclasses
import shutil

import pytest

from kernellab import arches, sources, toolchain
from kernellab.config import resolve as resolve_module
from kernellab.config.dotconfig import Setting
from kernellab.config.resolve import resolve

ASKED = [Setting("CONFIG_PRINTK", "n", "command line")]


@pytest.fixture
def makes(lab, monkeypatch):
    """The make targets resolve runs from here on, in order."""
    ran: list[str] = []
    real = resolve_module._make

    def counted(source, profile, chain, workdir, target):
        ran.append(target)
        real(source, profile, chain, workdir, target)

    monkeypatch.setattr(resolve_module, "_make", counted)
    monkeypatch.setattr(resolve_module, "_RESOLVED", {})   # no other test's resolutions
    return ran


def _inputs(lab):
    profile = arches.load("x86_64")
    return sources.resolve(str(lab.tree)), profile, toolchain.detect(profile)


def test_a_second_resolution_runs_no_make_and_gives_the_same_config(lab, makes):
    first = resolve(*_inputs(lab), "tinyconfig", ASKED)
    assert makes == ["tinyconfig", "olddefconfig"]
    again = resolve(*_inputs(lab), "tinyconfig", ASKED)
    assert makes == ["tinyconfig", "olddefconfig"]
    assert again == first and "# CONFIG_PRINTK is not set" in again.text


def test_the_same_config_asked_by_another_variant_runs_no_make_and_names_its_origin(lab, makes):
    resolve(*_inputs(lab), "tinyconfig", [Setting("CONFIG_PRINTK_TIME", "y", "variant 'a' option 1")])
    makes.clear()
    other = resolve(*_inputs(lab), "tinyconfig", [Setting("CONFIG_PRINTK_TIME", "y", "variant 'b' option 1")])
    assert makes == []
    assert [d["origin"] for d in other.dropped] == ["variant 'b' option 1"]   # PRINTK_TIME needs PRINTK


def test_the_cache_directory_keeps_a_resolution_for_the_next_process(lab, makes, monkeypatch):
    first = resolve(*_inputs(lab), "tinyconfig", ASKED)
    monkeypatch.setattr(resolve_module, "_RESOLVED", {})   # a new process
    makes.clear()
    assert resolve(*_inputs(lab), "tinyconfig", ASKED) == first
    assert makes == []


@pytest.mark.parametrize("damage", ["", "{", '{"text": 1}', '{"txt": ""}', "[]", "\x00"])
def test_a_damaged_cache_entry_is_resolved_over(lab, makes, monkeypatch, damage):
    first = resolve(*_inputs(lab), "tinyconfig", ASKED)
    [entry] = (lab.cache / "resolve").glob("*/olddefconfig-*.json")
    entry.write_text(damage)
    monkeypatch.setattr(resolve_module, "_RESOLVED", {})
    makes.clear()
    assert resolve(*_inputs(lab), "tinyconfig", ASKED) == first
    assert makes == ["olddefconfig"]


def test_another_cache_directory_resolves_again(lab, makes, monkeypatch, tmp_path):
    resolve(*_inputs(lab), "tinyconfig", ASKED)
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "other-cache"))
    makes.clear()
    resolve(*_inputs(lab), "tinyconfig", ASKED)
    assert "olddefconfig" in makes


def _other_settings(lab, monkeypatch, inputs):
    return inputs, "tinyconfig", [Setting("CONFIG_PRINTK", "y", "command line")]


def _other_order(lab, monkeypatch, inputs):
    return inputs, "tinyconfig", [*ASKED, Setting("CONFIG_PRINTK", "y", "command line")]


def _other_base(lab, monkeypatch, inputs):
    return inputs, "defconfig", ASKED


def _other_source(lab, monkeypatch, inputs):
    tree = lab.tmp / "tree"
    shutil.copytree(lab.tree, tree)
    with open(tree / "init" / "Kconfig.extra", "w") as extra:   # any file of the tree
        extra.write("# edited\n")
    return (sources.resolve(str(tree)), *inputs[1:]), "tinyconfig", ASKED


def _other_make_variables(lab, monkeypatch, inputs):
    source, profile, chain = inputs
    return (source, dataclasses.replace(profile, kernel_arch="i386"), chain), "tinyconfig", ASKED


def _other_compiler(lab, monkeypatch, inputs):
    source, profile, chain = inputs
    return (source, profile, dataclasses.replace(chain, version_text=chain.version_text + " (patched)")), \
        "tinyconfig", ASKED


def _other_tool(lab, monkeypatch, inputs):
    tools = lab.tmp / "tools"
    tools.mkdir()
    (tools / "pahole").write_text("#!/bin/sh\necho v1.99\n")
    (tools / "pahole").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{lab.tmp / 'bin'}:/usr/bin:/bin")
    return inputs, "tinyconfig", ASKED


def _other_environment(lab, monkeypatch, inputs):
    monkeypatch.setenv("KCONFIG_WARN_UNKNOWN_SYMBOLS", "1")
    return inputs, "tinyconfig", ASKED


def _other_code(lab, monkeypatch, inputs):
    monkeypatch.setattr(resolve_module, "_code_identity", lambda: "a kernellab that resolves otherwise")
    return inputs, "tinyconfig", ASKED


CHANGES = [_other_settings, _other_order, _other_base, _other_source, _other_make_variables,
           _other_compiler, _other_tool, _other_environment, _other_code]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.removeprefix("_") for c in CHANGES])
def test_a_change_of_any_part_of_the_key_resolves_again(lab, makes, monkeypatch, change):
    resolve(*_inputs(lab), "tinyconfig", ASKED)
    inputs, base, settings = change(lab, monkeypatch, _inputs(lab))
    makes.clear()
    resolve(*inputs, base, settings)
    assert makes and makes[-1] == "olddefconfig"


def test_an_edited_base_file_resolves_again(lab, makes):
    base = lab.tmp / "base.config"
    base.write_text("CONFIG_PRINTK=y\n")
    assert "CONFIG_PRINTK=y" in resolve(*_inputs(lab), str(base), []).text
    base.write_text("# CONFIG_PRINTK is not set\n")
    makes.clear()
    assert "# CONFIG_PRINTK is not set" in resolve(*_inputs(lab), str(base), []).text
    assert makes == ["olddefconfig"]
