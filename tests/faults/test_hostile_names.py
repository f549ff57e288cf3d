"""Names, paths and values from a hostile or careless user (issue 29: defects 4, 8 and the
smaller ones of names and values): a name never becomes a path unchecked, an empty option
never means the default, and a bad value is one line with exit 2, never a traceback.

Command-level tests run on the fake lab (tests/fakes) in process: an uncaught exception
there fails the test with its traceback, so "returns 2" also says "no traceback"."""

from __future__ import annotations

import ast
import errno
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from fakes import KERNEL_TREE, fake_lab, lab_fixture
from kernellab import arches, datafile, paths, reaper
from kernellab.config import dotconfig, kconfig
from kernellab.errors import LabError
from kernellab.experiments import spec, study

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "kernellab"
HOSTILE_NAMES = ["../x", "/abs", "a/b", "", ".", "..", "x\0y", "-rf", ".hidden", "a\nb", "a\u202eb", "x" * 300]


@lab_fixture
def lab(tmp_path, monkeypatch):
    # The kconfig cache's key goes to the test's own state directory, not the user's.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        yield fake_lab(tmp_path, monkeypatch)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


# -- one guard for every path made of a name ------------------------------------------------

@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_guard_refuses_every_name_that_is_not_one_plain_component(name):
    with pytest.raises(LabError, match="bad arch name"):
        paths.component("arch name", name)
    with pytest.raises(LabError):
        paths.cache_dir("resolve", name)
    with pytest.raises(LabError):
        paths.cache_file("studies", name)


@pytest.mark.parametrize("name", ["x86_64", "6.1.158-0123456789ab", "x86_64-linux-gnu-gcc-12.2.0", "hz100-nohz",
                                  "v6.12-cfg6.1", "a b", "débug"])
def test_the_guard_takes_the_names_kernellab_uses(name):
    assert paths.component("name", name) == name


# Where the package joins a non-constant to the cache, a package directory or any path: each
# is named here with why it is safe. A new join of a name must use paths.cache_file or
# paths.component (then it is not flagged), or be added here with its reason.
REVIEWED = {
    ("initramfs.py", 'f"{digest.hexdigest()[:20]}.cpio"'): "a hash",
    ("agent/compile.py", 'f"agent-{arch_id}-{cache_key(version, files)}"'): "a shipped arch's agent, a hash",
    ("targets/machine.py", 'f"{hashlib.sha256(text.encode()).hexdigest()[:20]}.config"'): "a hash",
    ("prebuilt.py", 'deb.name.removesuffix(".deb")'): "a file name apt wrote",
    ("sources.py", 'f"git-{commit[:12]}"'): "a commit id git resolved",
    ("experiments/audit_measure.py", 'f"reduced-{hashlib.sha256(text.encode()).hexdigest()[:16]}.config"'): "hash",
    ("experiments/floor.py", 'f"{key(p)}.json"'): "a hash (floor.key)",
    ("build.py", "key[:20]"): "a build key: a hash",
    ("sources.py", "_HASH_INDEX"): "a constant of the module",
}
_REVIEWED = {(rel, ast.unparse(ast.parse(text, mode="eval").body)) for rel, text in REVIEWED}


def _joins(tree: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
    """(left, right) of every `a / b`; (what, argument) of every joinpath and os.path.join."""
    out: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            out.append((node.left, node.right))
        elif isinstance(node, ast.Call) and (ast.unparse(node.func) == "os.path.join" or (
                isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath")):
            out += [(node.func, a) for a in node.args]
    return out


def _rooted_in_a_directory_of_kernellab(expr: ast.expr) -> bool:
    text = ast.unparse(expr)
    return any(root in text for root in ("cache_dir(", "cache_root(", "resources.files("))


def test_no_name_is_joined_to_the_cache_or_the_package_unchecked():
    """The class, not the instance: every join onto the cache or the package's data whose
    right side is not a constant goes through the guard, or is reviewed above."""
    unchecked = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        for left, right in _joins(ast.parse(path.read_text())):
            if isinstance(right, ast.Constant) or not _rooted_in_a_directory_of_kernellab(left):
                continue
            text = ast.unparse(right)
            if "component(" in text or rel == "paths.py" or (rel, text) in _REVIEWED:
                continue
            unchecked.append(f"{rel}: {ast.unparse(left)} / {text}")
    assert not unchecked, "names joined to a path without paths.component:\n" + "\n".join(unchecked)


# -- --arch: a name, never a path -----------------------------------------------------------

def _evil_arch(tmp_path: Path) -> Path:
    """An arch profile TOML whose QEMU binary leaves a mark: loading it is what must not happen."""
    mark = tmp_path / "evil-qemu-ran"
    qemu = tmp_path / "evil-qemu"
    qemu.write_text(f"#!/bin/sh\ntouch {mark}\n")
    qemu.chmod(0o755)
    text = (ROOT / "src/kernellab/arches/x86_64.toml").read_text()
    text = text.replace('binary = "qemu-system-x86_64"', f'binary = "{qemu}"')
    assert str(qemu) in text
    (tmp_path / "some" / "dir").mkdir(parents=True)
    (tmp_path / "some" / "dir" / "myarch.toml").write_text(text)
    return mark


@pytest.mark.parametrize("name", [*HOSTILE_NAMES, "../studies/debug-cost", "x86_64.toml", "X86_64"])
def test_an_arch_is_one_of_the_shipped_profiles(name):
    with pytest.raises(LabError, match=r"unknown arch .*: (did you mean .*\()?use one of arm64, i386"):
        arches.load(name)


def test_arch_given_as_a_path_is_refused_before_anything_runs(lab, monkeypatch, capsys):
    mark = _evil_arch(lab.tmp)
    monkeypatch.chdir(lab.tmp)
    for given in ("some/dir/myarch", str(lab.tmp / "some/dir/myarch"), "../studies/debug-cost"):
        # A LabError (one line, exit 2), as every unknown name is: arches.load knows only the shipped ones.
        assert lab.main("compare", "a=tinyconfig", "--arch", given) == 2
        assert f"unknown arch {given!r}: use one of" in capsys.readouterr().err
    assert not mark.exists()


def test_an_experiment_files_arch_is_a_name_too(lab, capsys):
    mark = _evil_arch(lab.tmp)
    experiment = lab.tmp / "e.toml"
    experiment.write_text(f'source = "{lab.tree}"\narch = "{lab.tmp}/some/dir/myarch"\n'
                          '[[variant]]\nname = "a"\nbase = "tinyconfig"\n')
    assert lab.main("compare", "--experiment", str(experiment)) == 2
    assert "unknown arch" in capsys.readouterr().err
    assert not mark.exists()


def test_a_profile_named_outside_the_cache_writes_nothing_outside(lab, monkeypatch, capsys):
    """A profile whose name climbs out (`../../..`) must not reach a path: the guard refuses
    it where the cache's directories are made of it."""
    import dataclasses
    real = arches.load
    monkeypatch.setattr(arches, "load", lambda name: dataclasses.replace(real(name), name="../../../escape"))
    assert lab.main("resolve", "a=tinyconfig") == 2
    assert "bad arch name '../../../escape'" in capsys.readouterr().err
    assert not [p for p in [*lab.tmp.parent.iterdir(), *lab.tmp.rglob("*")] if p.name.startswith("escape")]


@pytest.mark.parametrize("fragment", ["../studies/debug-cost", "../../arches/x86_64", "/etc/hostname/x",
                                      "../fragments/lab-minimal-x86_64", "{tmp}/elsewhere"])
def test_a_fragment_name_never_reads_another_file_of_the_package(fragment, tmp_path):
    (tmp_path / "elsewhere.config").write_text("CONFIG_PRINTK=y\n")   # not the path given: no .config
    with pytest.raises(LabError, match="not found: give a file path or one of"):
        spec.parse_short(f"a=tinyconfig+{fragment.format(tmp=tmp_path)}").settings()


def test_a_study_variant_name_never_becomes_a_path(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    exp = spec.Experiment("s", [spec.VariantSpec("../../escape", "tinyconfig"),
                                spec.VariantSpec("b", "config-of:../../escape")])
    monkeypatch.setattr(study.lab, "prepare", lambda v: type("P", (), {"config": type("C", (), {"text": "x"})})())
    with pytest.raises(LabError, match="bad variant name '../../escape'"):
        study._with_config_bases(exp, lambda m: None)
    assert not list(tmp_path.rglob("*escape*"))


# -- empty options never mean the default (defect 8) ----------------------------------------

@pytest.mark.parametrize("command", [
    ["compare", "a=tinyconfig", "--source", ""],
    ["compare", "a=tinyconfig", "--arch", ""],
    ["compare", "a=tinyconfig", "--cluster", ""],
    ["compare", "a=tinyconfig", "--source", "  "],
    ["build", "a=tinyconfig", "--store", ""],
    ["--store", "", "runs"],
    ["study", "run", "debug-cost", "--arch", ""],
    ["cache", "prune", "--source", "", "--dry-run"],
])
def test_an_empty_option_is_refused_not_taken_for_the_default(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    from kernellab import sources
    from kernellab.cli import main

    def reached(spec):   # what the default would cost: Debian's 1.5 GB source extracted and built
        raise AssertionError(f"an empty option went on to source {spec!r}")

    monkeypatch.setattr(sources, "resolve", reached)
    with pytest.raises(SystemExit) as exit:
        main(command)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "must not be empty" in err or "unknown arch ''" in err
    assert not (tmp_path / "cache" / "sources").exists()


# -- config values: a \r smuggles nothing ---------------------------------------------------

@pytest.mark.parametrize("text", ['CONFIG_A="x\rCONFIG_EVIL=y"', 'CONFIG_A="a"\rCONFIG_EVIL=y',
                                  'CONFIG_A="x\x00y"', 'CONFIG_A="x\x1b[31m"', 'CONFIG_A=y\x0bCONFIG_EVIL=y'])
def test_a_control_character_in_a_config_line_is_refused(text):
    with pytest.raises(LabError, match="control character"):
        dotconfig.parse_settings(text + "\n", "f")
    with pytest.raises(LabError, match="control character"):
        spec.parse_short(f"a=tinyconfig+{text}").settings()


def test_a_crlf_file_and_a_tab_in_a_string_still_read():
    got = dotconfig.parse_settings('CONFIG_A=y\r\nCONFIG_B="t\tx"\r\n# c\x01omment\n', "f")
    assert [(s.name, s.value) for s in got] == [("CONFIG_A", "y"), ("CONFIG_B", '"t\tx"')]


def test_a_second_option_inside_a_value_does_not_pass_the_unknown_option_check(lab, capsys):
    code = lab.main("resolve", 'a=tinyconfig+CONFIG_PRINTK="x\rCONFIG_NOT_IN_THE_TREE=y"')
    assert code == 2
    assert "control character" in capsys.readouterr().err


# -- the reaper kills only what kernellab started -------------------------------------------

def _group(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(["sleep", "60"], start_new_session=True, env=env)
    # Popen returns once the child has left the parent's memory (vfork), which is before
    # execve has set up the new program's arguments and environment: /proc/PID/environ
    # reads empty for a moment (measured: 126 of 300 reads right after Popen). The reaper
    # meets its groups long after they started; the test waits until sleep is sleep.
    cmdline = Path(f"/proc/{child.pid}/cmdline")
    deadline = time.monotonic() + 5
    while not cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.001)
    return child


def _forge(cache: Path, victim: subprocess.Popen[bytes], token: str = "f" * 32) -> Path:
    record = cache / "children" / f"{victim.pid}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"what": "make of x", "pgid": victim.pid, "started": reaper.start_time(victim.pid),
                                  "owner": 2 ** 22 + 7, "owner_started": 1, "token": token}))
    return record


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    time.sleep(0.1)
    return proc.poll() is None


@pytest.fixture
def groups():
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_a_forged_record_does_not_make_the_reaper_kill_a_group(tmp_path, monkeypatch, groups):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    foreign = {k: v for k, v in os.environ.items() if k != reaper.TOKEN_VARIABLE}
    victim = _group(foreign)   # a group that is not kernellab's: its start time and command line match
    groups.append(victim)
    record = _forge(tmp_path, victim)
    said: list[str] = []
    assert reaper.reap(said.append) == []
    assert _alive(victim)
    assert not record.exists() and "not reaping process group" in said[0]


def test_a_record_another_user_wrote_is_dropped(tmp_path, monkeypatch, groups):
    if os.geteuid() != 0:
        pytest.skip("needs root to write a file as another user")
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    victim = _group()   # even one of kernellab's own groups: the record is not this user's
    groups.append(victim)
    record = _forge(tmp_path, victim, os.environ[reaper.TOKEN_VARIABLE])
    os.chown(record, 65534, 65534)
    said: list[str] = []
    assert reaper.reap(said.append) == []
    assert _alive(victim) and not record.exists() and "written by another user" in said[0]


def test_a_group_kernellab_started_and_left_behind_is_still_reaped(tmp_path, monkeypatch, groups):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    child = _group()   # inherits this kernellab's token, as make and QEMU do
    groups.append(child)
    record = reaper.register(child.pid, "make of x")
    entry = json.loads(record.read_text())
    record.write_text(json.dumps({**entry, "owner": 2 ** 22 + 7, "owner_started": 1}))   # its kernellab died
    said: list[str] = []
    assert reaper.reap(said.append) == [f"make of x (process group {child.pid})"], said
    child.wait(timeout=5)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("entry", [{"pgid": 1}, {"pgid": "1"}, {"pgid": -1}, [], {"owner": None}])
def test_a_malformed_record_is_dropped_without_a_traceback(tmp_path, monkeypatch, entry):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    record = tmp_path / "children" / "1.json"
    record.parent.mkdir()
    base = {"what": "x", "pgid": 1, "started": 1, "owner": 2 ** 22 + 7, "owner_started": 1, "token": "t"}
    record.write_text(json.dumps({**base, **entry} if isinstance(entry, dict) else entry))
    assert reaper.reap(lambda m: None) == []
    assert not record.exists()


# -- the kconfig cache runs no code ---------------------------------------------------------

class _Planted:
    def __init__(self, mark: str) -> None:
        self.mark = mark

    def __reduce__(self):
        return (os.system, (f"touch {self.mark}",))


def _tree_args():
    from kernellab import sources, toolchain
    profile = arches.load("x86_64")
    return sources.resolve(str(KERNEL_TREE)), profile, toolchain.detect(profile)


def test_a_forged_kconfig_cache_is_not_unpickled_and_the_tree_is_parsed(lab):
    mark = lab.tmp / "pickle-ran"
    cache = kconfig.cache_path(*_tree_args())
    cache.write_bytes(pickle.dumps(_Planted(str(mark))))
    tree = kconfig.open_tree(*_tree_args())
    assert tree.symbol("PRINTK") is not None     # parsed from the Kconfig tree
    assert not mark.exists()
    # ... and cached again, sealed with this user's key: the next command loads it.
    assert cache.read_bytes().startswith(kconfig._SEALED)
    assert kconfig._load_cached(cache) is not None


def test_a_sealed_header_with_a_wrong_mac_is_not_unpickled(lab):
    mark = lab.tmp / "pickle-ran"
    cache = kconfig.cache_path(*_tree_args())
    data = pickle.dumps(_Planted(str(mark)))
    cache.write_bytes(kconfig._SEALED + os.urandom(32) + data)
    assert kconfig._load_cached(cache) is None
    assert not mark.exists()


def test_a_key_others_can_read_or_write_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    key = paths.private_key()
    assert key is not None and len(key) == paths.KEY_BYTES and paths.private_key() == key
    path = tmp_path / "kernellab" / "cache-key"
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o644)
    assert paths.private_key() is None
    path.chmod(0o600)
    (tmp_path / "kernellab").chmod(0o777)
    assert paths.private_key() is None


# -- values: checked before anything starts, one line, exit 2 -------------------------------

@pytest.mark.parametrize("metric", ["syscall.nul", "syscall.null KL_ONLY=x", "boot.total", "", "meminfo"])
def test_profile_metric_is_checked_against_the_catalog_before_anything_starts(lab, capsys, monkeypatch, metric):
    from kernellab.experiments import lab as stage

    def started(spec, *args):
        raise AssertionError(f"--metric {metric!r} went on to prepare {spec.name}")

    monkeypatch.setattr(stage, "prepare", started)
    with pytest.raises(SystemExit) as exit:
        lab.main("profile", "a=tinyconfig", "b=tinyconfig", "--metric", metric, "--source", str(lab.tree))
    assert exit.value.code == 2
    assert "is not a metric the agent runs" in capsys.readouterr().err


STUDY = """
name = "s"
title = "t"
seed = ""
question = "q"
arches = ["x86_64"]
baseline = "a"
subject = "b"
expected_minutes = 1
table = []
summary = []
[experiment]
source = "{tree}"
[[experiment.variant]]
name = "a"
base = "tinyconfig"
[[experiment.variant]]
name = "b"
base = "{base}"
[quick]
arches = ["x86_64"]
"""


@pytest.mark.parametrize("base", ["config-of:nobody", "config-of:b", "config-of:"])
def test_a_study_config_of_error_is_a_usage_error(lab, capsys, base):
    path = lab.tmp / "s.toml"
    path.write_text(STUDY.format(tree=lab.tree, base=base))
    assert lab.main("study", "run", str(path)) == 2
    assert f"base {base} names no variant of this study" in capsys.readouterr().err
    assert not lab.store.exists() or not lab.runs()


def test_a_study_whose_quick_form_drops_the_config_it_is_based_on_is_refused():
    text = STUDY.format(tree="x", base="tinyconfig") + textwrap.dedent("""
        variants = ["a", "b", "c"]
        [[experiment.variant]]
        name = "c"
        base = "config-of:d"
        [[experiment.variant]]
        name = "d"
        base = "tinyconfig"
    """)
    with pytest.raises(LabError, match=r"\[quick\] variants keep c and must keep d"):
        study.parse(datafile.parse_toml(text, "s"), "s")
    study.parse(datafile.parse_toml(text.replace('"c"]', '"c", "d"]'), "s"), "s")


def test_resolve_says_what_compare_says_of_a_base_file_olddefconfig_rewrote(lab, capsys):
    base = lab.tmp / "base.config"
    base.write_text("CONFIG_PRINTK=y\nCONFIG_NOT_IN_THIS_TREE=y\n")
    assert lab.main("resolve", f"a={base}") == 0
    out = capsys.readouterr().out
    assert "every request kept" not in out
    assert "warning:" in out and "CONFIG_NOT_IN_THIS_TREE" in out
    assert lab.main("resolve", f"a={base}", "--format", "json") == 0
    assert any("CONFIG_NOT_IN_THIS_TREE" in w for w in json.loads(capsys.readouterr().out)["base_warnings"])


@pytest.mark.parametrize("variant", ["a=tinyconfig+vcpus:²", "a=tinyconfig+devices:³", "a=tinyconfig+vcpus:٣",
                                     "a=tinyconfig+vcpus:" + "9" * 5000, "a=tinyconfig+devices:-1",
                                     "a=tinyconfig+vcpus:2\n"])
def test_a_count_that_is_not_ascii_digits_is_refused(lab, capsys, variant):
    assert lab.main("resolve", variant) == 2
    assert "needs a number" in capsys.readouterr().err


def test_a_5000_deep_toml_is_one_line(lab, capsys):
    for text in ("x = " + "[" * 5000 + "]" * 5000, "x = " + "{a=" * 5000 + "1" + "}" * 5000):
        path = lab.tmp / "deep.toml"
        path.write_text(text)
        assert lab.main("compare", "--experiment", str(path)) == 2
        assert "nested too deep" in capsys.readouterr().err


def test_an_unreadable_fragment_or_base_is_one_line(lab, capsys, monkeypatch):
    unreadable = lab.tmp / "unreadable.config"
    unreadable.write_text("CONFIG_PRINTK=y\n")
    real = Path.read_text

    def read_text(self, *args, **kwargs):   # root reads a chmod 000 file: refuse as the kernel would
        if self.name == "unreadable.config":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    assert lab.main("resolve", f"a=tinyconfig+{unreadable}") == 2
    assert f"cannot read fragment {unreadable}: Permission denied" in capsys.readouterr().err
    assert lab.main("resolve", f"a={unreadable}") == 2
    assert f"cannot read base config {unreadable}: Permission denied" in capsys.readouterr().err


def test_an_unreadable_fragment_as_another_user_is_one_line():
    """The same without a mock: a chmod 000 fragment read by an unprivileged user."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to read as another user")
    code = "from kernellab.experiments.spec import parse_short; parse_short(sys.argv[1]).settings()"
    folder = Path(tempfile.mkdtemp(dir="/tmp"))   # pytest's tmp_path is not reachable by other users
    folder.chmod(0o755)
    fragment = folder / "f.config"
    fragment.write_text("CONFIG_PRINTK=y\n")
    fragment.chmod(0)
    hidden = folder / "closed"
    hidden.mkdir(mode=0)
    for unreadable in (fragment, hidden / "f.config"):
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                               f"import sys\nfrom kernellab.errors import LabError\ntry:\n {code}\n"
                               "except LabError as e:\n print(e)", f"a=tinyconfig+{unreadable}"],
                              capture_output=True, text=True, cwd="/", env={**os.environ, "HOME": "/nonexistent"})
        assert "Traceback" not in done.stderr, done.stderr
        assert f"cannot read fragment {unreadable}: Permission denied" in done.stdout
    shutil.rmtree(folder)


@pytest.mark.parametrize("content", [b"", b"not an elf at all\n", b"\x7fELF\x02\x01\x01", "elf-header"])
def test_size_of_a_file_that_is_not_elf_is_one_line(lab, capsys, content):
    data = Path("/bin/true").read_bytes()[:64] if content == "elf-header" else content
    one, two = lab.tmp / "one", lab.tmp / "two"
    one.write_bytes(data)
    two.write_bytes(data)
    assert lab.main("size", str(one), str(two)) == 2
    err = capsys.readouterr().err
    assert "is not an ELF file kernellab can read" in err and err.count("\n") == 1


# -- the cache on a full file system --------------------------------------------------------

def test_a_cache_write_that_finds_no_space_is_one_line(lab, capsys, monkeypatch):
    from kernellab.config import resolve as resolve_module
    real = resolve_module.format_config

    def full(config):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(resolve_module, "format_config", full)
    assert lab.main("resolve", "a=tinyconfig") == 2
    err = capsys.readouterr().err
    assert err == (f"kernellab: error: no space left in {lab.cache}: free space (`kernellab cache prune`) or set "
                   "KERNELLAB_CACHE to a directory on another disk\n")
    monkeypatch.setattr(resolve_module, "format_config", real)


def test_no_space_names_a_file_outside_the_cache_by_its_own_name(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    said = paths.no_space(OSError(errno.ENOSPC, "No space left on device", "/elsewhere/report.html"))
    assert str(said) == "no space left on the device of /elsewhere/report.html: free some space there"
    assert paths.no_space(OSError(errno.EACCES, "Permission denied")) is None


FULL_CACHE = textwrap.dedent("""
    set -e
    mount -t tmpfs -o size=8m tmpfs "$KERNELLAB_CACHE"
    {python} -m kernellab.cli resolve a=tinyconfig --source {tree} --store {store} >/dev/null
    rm "$KERNELLAB_CACHE"/resolve/*/.config   # written anew, after the cache is full
    dd if=/dev/zero of="$KERNELLAB_CACHE/filler" bs=4k 2>/dev/null || true
    {python} -m kernellab.cli resolve a=tinyconfig+CONFIG_PRINTK=n --source {tree} --store {store}
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_a_real_full_cache_is_one_line_not_a_traceback(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    script = FULL_CACHE.format(python=sys.executable, tree=KERNEL_TREE, store=tmp_path / "lab.sqlite")
    env = {**os.environ, "KERNELLAB_CACHE": str(cache), "KERNELLAB_FAKE_PYTHON": sys.executable,
           "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=300, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert f"no space left in {cache}" in done.stderr
