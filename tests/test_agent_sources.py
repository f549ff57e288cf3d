"""The agent's sources as the host sees them: the record version both sides speak, what the
binary's cache key covers, what the package ships, and how a failed compile is reported."""

from __future__ import annotations

import fnmatch
import re
import shutil
import tomllib
from pathlib import Path

import pytest

import kernellab.agent.compile as agent_compile
from kernellab.agent import RECORD_VERSION
from kernellab.agent.version import check_hello
from kernellab.errors import LabError

AGENT = Path(agent_compile.__file__).parent
PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_the_host_reads_the_record_version_the_agent_speaks():
    (version,) = re.findall(r"^#define RECORD_VERSION (\d+)\b", (AGENT / "record.h").read_text(), re.M)
    assert int(version) == RECORD_VERSION


def test_check_hello_accepts_the_version_it_reads():
    check_hello({"v": str(RECORD_VERSION), "agent": "kernellab-agent", "mode": "pid1"})


@pytest.mark.parametrize("fields, speaks", [({"v": str(RECORD_VERSION + 1)}, f"record version {RECORD_VERSION + 1}"),
                                            ({"v": "0"}, "record version 0"),
                                            ({"agent": "kernellab-agent"}, "no record version"),
                                            ({"v": ""}, "no record version")])
def test_check_hello_refuses_another_or_no_version(fields, speaks):
    with pytest.raises(LabError) as exc:
        check_hello(fields)
    message = str(exc.value)
    assert message.startswith(f"the agent speaks {speaks}, this kernellab reads version {RECORD_VERSION}: ")
    assert "rebuild the agent" in message and "\n" not in message


def test_sources_are_every_c_file_and_header_by_name():
    names = [p.name for p in agent_compile.sources()]
    assert names == sorted(p.name for p in AGENT.iterdir() if p.suffix in (".c", ".h"))
    assert {"main.c", "record.h", "harness.h"} <= set(names)


@pytest.fixture
def agent_copy(tmp_path):
    copy = tmp_path / "agent"
    copy.mkdir()
    for source in agent_compile.sources():
        shutil.copy(source, copy / source.name)
    return copy


def test_cache_key_covers_every_source_and_header(agent_copy):
    def key():
        return agent_compile.cache_key("gcc (Debian 12.2.0-14) 12.2.0", agent_compile.sources(agent_copy))

    keys = [key()]
    for name in ("record.h", "util.h", "main.c", "blk.c"):
        path = agent_copy / name
        path.write_text(path.read_text() + "\n")
        keys.append(key())
    (agent_copy / "extra.h").write_text("/* a new header */\n")
    keys.append(key())
    (agent_copy / "extra.h").rename(agent_copy / "other.h")  # same bytes, another name
    keys.append(key())
    assert len(set(keys)) == len(keys)
    assert agent_compile.cache_key("gcc 13", agent_compile.sources(agent_copy)) != key()


def test_package_data_ships_every_agent_source(agent_copy):
    patterns = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["kernellab"]
    for source in agent_compile.sources():
        assert any(fnmatch.fnmatch(f"agent/{source.name}", p) for p in patterns), source.name


def test_every_source_asks_for_64_bit_offsets_before_any_include():
    # 32-bit targets: the files must agree on off_t and on the system calls it implies.
    for source in AGENT.glob("*.c"):
        text = source.read_text()
        first_include = text.index("#include")
        for define in ("#define _GNU_SOURCE\n", "#define _FILE_OFFSET_BITS 64"):
            assert -1 < text.find(define) < first_include, (source.name, define)


def test_the_groups_keep_their_own_state():
    for source in agent_compile.sources():
        assert "struct ctx" not in source.read_text(), source.name


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_a_failed_compile_is_one_line_naming_the_first_error(agent_copy, tmp_path, monkeypatch):
    header = agent_copy / "util.h"
    header.write_text(header.read_text().replace("#endif", "int broken(void) {\n#endif", 1))
    monkeypatch.setattr(agent_compile, "AGENT_DIR", agent_copy)
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LabError) as exc:
        agent_compile.agent_binary()
    message = str(exc.value)
    assert message.startswith("compiling the agent with gcc failed: ") and "\n" not in message
    assert "error:" in message


@pytest.mark.lab   # two compiles of the agent
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_a_command_measures_with_the_agent_it_started_with_when_the_sources_change(agent_copy, tmp_path,
                                                                                   monkeypatch):
    """A long command (a study's sweep) whose package sources change under it (an upgrade, an
    edit in a working tree) keeps its first agent: under icount the binary itself moves
    figures. The next command takes the new one; a pinned binary pruned meanwhile is one line."""
    monkeypatch.setattr(agent_compile, "AGENT_DIR", agent_copy)
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    header = agent_copy / "util.h"
    with agent_compile.one_agent():
        first = agent_compile.agent_binary()
        header.write_text(header.read_text() + "\n/* changed while the command ran */\n")
        assert agent_compile.agent_binary() == first
    second = agent_compile.agent_binary()
    assert second != first and second.is_file()
    with agent_compile.one_agent():
        assert agent_compile.agent_binary() == second
        second.unlink()
        with pytest.raises(LabError, match="the agent this command started with .* is gone from the cache"):
            agent_compile.agent_binary()
