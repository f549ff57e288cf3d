"""Hostile values never become shell syntax (issue 29, defects 1, 2 and 10's ssh URL).

kernellab runs POSIX sh scripts on the machines it measures, as root for kexec. Every
value in them (boot: and sysctl: words, --block-dir, KL_* settings, paths, what the remote
said) reaches the shell as a positional parameter set by `targets.shell.script()`. These
tests run the scripts for real on this machine (LocalShell: no ssh needed) with values
that would run a command if pasted into the text, and `kexec` and the agent replaced by
stubs that record their argv; and they walk the package's source for shell text built
with f-strings, so that the next script cannot regress.
"""

from __future__ import annotations

import ast
import dataclasses
import stat
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernellab.errors import LabError
from kernellab.experiments.spec import parse_short
from kernellab.targets.kexec import DETACHED_SCRIPT, INITRD_SCRIPT, KexecTarget
from kernellab.targets.running import AGENT_SCRIPT, PID_LINE, RunningTarget, agent_options
from kernellab.targets.shell import LocalShell, Result, parse_ssh_url, script

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "kernellab"


def hostile(pwned: Path) -> list[str]:
    """Words a shell would run `touch` for, were they pasted into its text."""
    return [f"x=$(touch${{IFS}}{pwned}-1)", f"y=`touch {pwned}-2`", f"z=';touch {pwned}-3;'",
            f'q="$(touch {pwned}-4)"', f"w=\\$(touch {pwned}-5)", f"n=a\ntouch {pwned}-6", "v=$HOME*"]


def touched(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.glob("pwned*"))


def stub(path: Path, record: Path) -> Path:
    """An executable that writes its argv and its KL_* environment, NUL-separated, to `record`."""
    path.write_text("#!/bin/sh\n{\n"
                    "  for a in \"$@\"; do printf '%s\\0' \"$a\"; done; printf '\\n\\0'\n"
                    "  env | grep '^KL_' | tr '\\n' '\\0'\n"
                    f"}} > '{record}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def recorded(record: Path) -> tuple[list[str], list[str]]:
    """(argv, KL_* environment) a stub recorded."""
    argv, _, env = record.read_bytes().partition(b"\n\0")
    return argv.decode().split("\0")[:-1], sorted(env.decode().split("\0")[:-1])


# -- the helper ------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=["Cs"])),
                max_size=5))
def test_script_passes_any_values_as_data(values):
    result = LocalShell().run(script('for v in "$@"; do printf "%s\\0" "$v"; done', *values))
    assert result.code == 0, result.stderr
    assert result.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1] == values


def test_script_refuses_a_nul_in_one_line():
    with pytest.raises(LabError, match="holds a NUL character") as err:
        script('echo "$1"', "a\0b")
    assert "\n" not in str(err.value)


# -- defect 1: boot: and sysctl: words in kexec's command line --------------------------------

class KexecShell(LocalShell):
    """This machine's shell as the kexec target's: `kexec -l` really runs (a stub on PATH);
    what must not run here (the copy, the detached `kexec -e`) is answered or stopped."""

    class Stop(Exception):
        pass

    def __init__(self, initrd: str):
        self.where = "ssh://hostile"
        self.initrd = initrd
        self.scripts: list[str] = []

    def run(self, script, stdin=None, timeout_s=60.0):
        self.scripts.append(script)
        last = script.splitlines()[-1]  # the body's: the values come first, on `set --`'s line
        if "setsid" in last:
            raise self.Stop  # kexec -e (or a reboot) next: the load is what is tested
        if "test -e" in last:
            return Result(0, b"", "")  # the kernel is there already: nothing copied
        if script.endswith(INITRD_SCRIPT):
            return Result(0, self.initrd.encode() + b"\n", "")
        return super().run(script, stdin, timeout_s)


def kexec_target(shell: KexecShell) -> KexecTarget:
    machine = RunningTarget(shell, "ssh")
    machine.facts = dataclasses.replace(RunningTarget(LocalShell(), "local").facts)
    machine.facts.values.update({"kexec": "/sbin/kexec", "kexec_load_disabled": "0", "lockdown": "", "uid": "0",
                                 "systemd": "no"})
    return KexecTarget(machine)


def kexec_stub(tmp_path, monkeypatch):
    """A `kexec` first on PATH that records its argv; the file it records to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "kexec.argv"
    stub(bin_dir / "kexec", record)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return record


def test_boot_and_sysctl_words_reach_kexec_as_data(tmp_path, monkeypatch):
    record = kexec_stub(tmp_path, monkeypatch)
    pwned = tmp_path / "pwned"
    spec = parse_short(f"a=running+boot:x=$(touch${{IFS}}{pwned}-boot)+sysctl:kernel.y=`touch${{IFS}}{pwned}-sysctl`")
    words = [*spec.boot_words(), *hostile(pwned)]
    initrd = f"/boot/initrd.img-$(touch {pwned}-initrd)"  # what the remote said is data too
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(b"kernel")
    shell = KexecShell(initrd)
    with pytest.raises(KexecShell.Stop):
        kexec_target(shell).boot(kernel, words)
    assert touched(tmp_path) == []
    argv, _ = recorded(record)
    assert argv[0] == "-l" and argv[1].startswith("/tmp/kernellab/kernel-")
    assert argv[2] == f"--initrd={initrd}"
    running_cmdline = Path("/proc/cmdline").read_text().rstrip("\n")
    command_line = argv[3].removeprefix("--command-line=")
    marker = command_line.rsplit(" ", 1)[1]
    assert command_line == " ".join([running_cmdline, *words, marker]) and marker.startswith("kernellab.boot=")
    assert len(argv) == 4


def test_words_through_the_kexec_targets_start_are_data(tmp_path, monkeypatch):
    """The path a run takes: the run's command line, split into KL_* settings and kernel words."""
    record = kexec_stub(tmp_path, monkeypatch)
    pwned = tmp_path / "pwned"
    words = [w for w in hostile(pwned) if "\n" not in w]
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(b"kernel")
    with pytest.raises(KexecShell.Stop):
        with kexec_target(KexecShell("")).start(kernel, None, " ".join(["KL_ONLY=syscall.null", *words]), "wall", 60):
            pass
    assert touched(tmp_path) == []
    argv, _ = recorded(record)
    assert len(argv) == 3 and " ".join(words) in argv[2]  # no initrd here: no --initrd


def test_the_detached_command_runs_its_argv_after_a_second(tmp_path, monkeypatch):
    """What `kexec -e` and the reboot go through: the argv as given, once ssh has let go."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "done $(touch pwned) `x`"
    started = time.monotonic()
    result = LocalShell().run(script(DETACHED_SCRIPT, "touch", str(target)))
    assert result.code == 0 and time.monotonic() - started < 1.0 and not target.exists()
    deadline = time.monotonic() + 10
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert target.exists() and touched(tmp_path) == []


# -- defect 2: --block-dir, and the agent's settings --------------------------------------------

def agent_run(tmp_path: Path, block_dir: str | None, cmdline: str) -> tuple[Result, Path]:
    record = tmp_path / "agent.argv"
    agent = stub(tmp_path / "agent `touch pwned-agent` $(touch pwned-agent)", record)
    target = RunningTarget(LocalShell(), "local", block_dir=block_dir)
    result = LocalShell().run(target.agent_script(str(agent), agent_options(cmdline, kernel_booted=False)))
    return result, record


def test_a_block_dir_that_cannot_hold_the_file_is_named_verbatim(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pwned = tmp_path / "pwned"
    block_dir = f"/nonexistent/$(touch {pwned}-dir)/`touch {pwned}-dir2`/a\\nb\\c-%s"  # echo's escapes too
    result, record = agent_run(tmp_path, block_dir, "KL_ONLY=blk.seq_write_cached")
    assert result.code == 4
    assert result.stderr.strip() == f"cannot create a scratch file in {block_dir}"
    assert touched(tmp_path) == [] and not record.exists()


def test_block_dir_agent_path_and_settings_reach_the_agent_as_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    block_dir = tmp_path / "scratch $(touch pwned-dir) `touch pwned-dir2` 'q\""
    block_dir.mkdir()
    only = "$(touch${IFS}pwned-env)`touch${IFS}pwned-env2`;touch${IFS}pwned-env3"
    result, record = agent_run(tmp_path, str(block_dir), f"KL_ONLY={only} KL_BLOCK_MB=1")
    assert result.code == 0, result.stderr
    assert touched(tmp_path) == []
    argv, env = recorded(record)
    assert argv[0] == "--block-dev" and Path(argv[1]).parent == block_dir and len(argv) == 2
    assert env == ["KL_BLOCK_MB=1", f"KL_ONLY={only}"]
    assert list(block_dir.iterdir()) == []  # the scratch file is removed
    assert result.text.startswith(PID_LINE) and PID_LINE in AGENT_SCRIPT


def test_an_agent_without_settings_or_block_dir_runs_bare(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result, record = agent_run(tmp_path, None, "")
    assert result.code == 0, result.stderr
    assert recorded(record) == ([], [])


@pytest.mark.parametrize("cmdline,says", [
    ("KL_$(touch${IFS}x)=1", "bad agent option"), ("KL_A-B=1", "bad agent option"),
    ("KL_BLOCK_MB=abc", "bad KL_BLOCK_MB"), ("KL_BLOCK_MB=0", "bad KL_BLOCK_MB"),
    ("KL_BLOCK_MB=99999999999999999999", "bad KL_BLOCK_MB")])
def test_bad_agent_settings_are_one_line(cmdline, says):
    with pytest.raises(LabError, match=says) as err:
        agent_options(cmdline, kernel_booted=False)
    assert "\n" not in str(err.value)


# -- defect 10: an ssh URL is one host, never an option ----------------------------------------

@pytest.mark.parametrize("text", [
    "ssh://127.0.0.1\n-oX", "ssh://127.0.0.1\r", "ssh://h\t", "ssh://h o", "ssh:// h", "ssh://h\x00",
    "ssh://h\x1b[31m", "ssh://h\u2028", "ssh://h\x85", "ssh://-oProxyCommand=touch", "ssh://-oX@h",
    "ssh://root@-h:22"])
def test_an_ssh_url_with_a_control_character_or_an_option_is_refused(text):
    with pytest.raises(LabError, match="bad target") as err:
        parse_ssh_url(text)
    assert "\n" not in str(err.value)


def test_the_cli_refuses_a_newline_in_the_target_before_connecting(lab, capsys):
    assert lab.main("compare", "running", "--target", "ssh://127.0.0.1\n-oProxyCommand=touch") == 2
    err = capsys.readouterr().err.strip()
    assert "bad target" in err and "\n" not in err


# -- the class: no shell text built from values, anywhere in the package ----------------------

SHELLS = {"sh", "/bin/sh", "bash", "/bin/bash", "dash", "busybox"}
SUBPROCESS = ("run", "Popen", "call", "check_call", "check_output")


def _false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def built_text(node: ast.AST) -> bool:
    """Text formatted from values: an f-string, `+` or `%` on text, `.format()`, `.join()`."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return any(built_text(side) or (isinstance(side, ast.Constant) and isinstance(side.value, str))
                   for side in (node.left, node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join"):
        return isinstance(node.func.value, ast.Constant) or node.func.attr == "format"
    return False


def literal_names(tree: ast.Module) -> set[str]:
    """Module-level names bound once to a string literal."""
    bound: dict[str, int] = {}
    literal = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            bound[name] = bound.get(name, 0) + 1
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                literal.add(name)
    return {name for name in literal if bound[name] == 1}


def shell_text_problems(code: str, where: str) -> list[str]:
    """file:line and what is wrong, for each piece of shell text built from values in `code`."""
    tree = ast.parse(code, where)
    literals = literal_names(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in SUBPROCESS and any(k.arg == "shell" and not _false(k.value) for k in node.keywords):
                problems.append(f"{where}:{node.lineno}: shell= (pass an argument vector)")
            if name in (*SUBPROCESS, "poll", "popen", "system") and node.args and built_text(node.args[0]):
                problems.append(f"{where}:{node.lineno}: {name}() of shell text built from values")
            if name == "script" and node.args:
                body = node.args[0]
                is_literal = (isinstance(body, ast.Constant) and isinstance(body.value, str)) or (
                    isinstance(body, ast.Name) and body.id in literals)
                if not is_literal:
                    problems.append(f"{where}:{node.lineno}: script() of a body that is not a literal "
                                    "(values go in its arguments)")
            if name == "Script" and where != "kernellab/targets/shell.py":
                problems.append(f"{where}:{node.lineno}: Script() outside targets/shell.py (use script())")
        if isinstance(node, ast.List | ast.Tuple) and len(node.elts) >= 3:
            first, flag, text = node.elts[:3]
            if (isinstance(first, ast.Constant) and first.value in SHELLS and isinstance(flag, ast.Constant)
                    and flag.value == "-c" and built_text(text)):
                problems.append(f"{where}:{node.lineno}: [{first.value!r}, '-c', ...] of text built from values")
    return problems


def test_no_shell_text_is_built_from_values_in_the_package():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50
    problems = [p for f in files for p in shell_text_problems(f.read_text(), str(f.relative_to(PACKAGE.parent)))]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("code", [
    'shell.run(f"kexec -l {path}")', 'shell.poll("cat " + path)', 'shell.popen("kill %s" % pid)',
    'shell.run("test -e {}".format(path))', 'subprocess.run("true", shell=True)',
    'subprocess.run(["sh", "-c", f"echo {x}"])', 'shell.run(script(f"echo {x}"))',
    'shell.run(script(BODY + x))', 'Script("true")'])
def test_the_walk_catches_each_way_of_building_shell_text(code):
    problems = shell_text_problems(code, "kernellab/targets/probe.py")
    assert len(problems) == 1 and problems[0].startswith("kernellab/targets/probe.py:1: "), problems


def test_the_walk_accepts_literal_bodies_with_values_as_arguments():
    code = 'BODY = "echo \\"$1\\""\nshell.run(script(BODY, f"{x}"))\nshell.run(script("dmesg"))\n' \
           'subprocess.run(["sh", "-c", user_command])'
    assert shell_text_problems(code, "kernellab/targets/probe.py") == []
