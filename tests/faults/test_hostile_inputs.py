"""The hostile-input suite: generated hostile values through every command's parser and
every file format kernellab reads, end to end on the fake lab (the real command line,
in process).

Every input must end in exit 0, 2 or 3 (never 1, which means a run failed, and never a
traceback), write nothing outside the cache, the store and the output the user named, and
run no command the user did not ask for: every injection attempt in the vocabulary runs
`touch MARK`, and MARK must never exist. Hypothesis generates the inputs (derandomized, so
that a CI run is repeatable); each test prints how many inputs it tried and how long
they took (`pytest -s tests/faults/test_hostile_inputs.py`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labfakes
from fakes import fake_lab, lab_fixture, module_lab, shared_dir
from faults.lanes import counts
from kernellab.guest.records import frame

ROOT = Path(__file__).resolve().parents[2]
ACCEPTED = {0, 2, 3}
SETTINGS = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


def vocabulary(mark: Path) -> list[str]:
    """What a hostile or careless user types: injections (each touching `mark`), paths out
    of where they belong, control characters, numbers no parser expects."""
    touch = f"touch {mark}"
    return ["", " ", ".", "..", "../outside/x", "../../outside", "/etc/passwd", "/dev/full", "a/b",
            f"$(touch${{IFS}}{mark})", f"$({touch})", f"`{touch}`", f";{touch}", f"&& {touch}", f"|{touch}",
            f"x\n{touch}", f"'; {touch}; '", f"\"; {touch}; \"", "\n-oProxyCommand=" + touch, "-oX", "--help",
            "a\rCONFIG_FAKE_SLOW=y", "x\nkey: value", "\x1b[2J\x1b[31m", "\x00", "\x7f", "\u202e", "\ufeff",
            "²", "³", "٣", "9" * 30, "-" + "9" * 30, "nan", "inf", "-inf", "-1", "0", "1e999", "0x10",
            "é", "a" * 300, "%s%n", "{0}", "'", '"', "\\", "CONFIG_X=y", "KL_METRICS=x", "+", "=", ":", ",",
            "lab-minimal", "tinyconfig", "syscall.null", "x86_64"]


def values(mark: Path) -> st.SearchStrategy[str]:
    words = st.sampled_from(vocabulary(mark))
    return st.one_of(words, st.tuples(words, words).map("".join),
                     st.text(st.characters(blacklist_categories=("Cs",)), max_size=30))


# -- the harness -------------------------------------------------------------------------

class Harness:
    """One fake lab for many generated inputs, and the checks every input must pass."""

    def __init__(self, tmp: Path, lab):
        self.lab, self.tmp = lab, tmp
        self.work = tmp / "work"          # the current directory: relative paths land here
        self.outside = tmp / "outside"    # what no input may touch
        self.work.mkdir()
        self.outside.mkdir()
        (self.outside / "sentinel").write_text("untouched\n")
        os.chmod(self.outside / "sentinel", 0o600)
        self.mark = tmp / "outside" / "pwned"
        self.codes: Counter[int] = Counter()
        self.started = time.monotonic()

    def outside_state(self) -> list[tuple[str, int, bytes]]:
        return sorted((str(p.relative_to(self.tmp)), p.stat().st_mode, p.read_bytes() if p.is_file() else b"")
                      for p in self.outside.rglob("*"))

    def run(self, *argv: str, source: bool = True, accepted: frozenset[int] = frozenset(ACCEPTED)) -> int:
        """The command line in process; the exit code after every check."""
        from kernellab.cli import main
        before = self.outside_state()
        args = list(argv)
        if source and argv[0] in ("compare", "build", "resolve", "sweep", "bisect", "size", "noise-floor",
                                  "audit", "lava-job", "import-lava", "profile"):
            args[1:1] = ["--source", str(self.lab.tree)]
        elif source and argv[:2] in (("config", "explain"), ("config", "diff")):
            args[2:2] = ["--source", str(self.lab.tree)]
        with contextlib.chdir(self.work):
            try:
                code = main([*args, "--store", str(self.lab.store)])
            except SystemExit as exc:  # argparse refusing a value: its usage line, exit 2
                code = exc.code if isinstance(exc.code, int) else 2
        assert code in accepted, f"exit {code} for {argv!r}"
        assert not self.mark.exists(), f"{argv!r} ran a command nobody asked for"
        assert self.outside_state() == before, f"{argv!r} wrote outside the cache, store and output"
        self.codes[code] += 1
        return code

    def report(self, what: str) -> None:
        n = sum(self.codes.values())
        print(f"\n{what}: {n} inputs, exit codes {dict(sorted(self.codes.items()))}, "
              f"{time.monotonic() - self.started:.1f} s")


@lab_fixture
def harness(tmp_path, monkeypatch, request):
    import signal
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    h = Harness(tmp_path, fake_lab(tmp_path, monkeypatch, shared_dir(request)))
    # Nothing may reach apt-get or dpkg: the fake lab asks for no Debian package.
    bin_dir = tmp_path / "bin"
    for tool in ("apt-get", "dpkg", "apt"):
        stub = bin_dir / tool
        stub.write_text(f"#!/bin/sh\ntouch {h.mark}\nexit 1\n")
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    try:
        yield h
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


@lab_fixture(scope="module")
def seeds(tmp_path_factory, request):
    """Real files to mutate: a comparison report and its store, from the fake lab."""
    with module_lab(tmp_path_factory, request, "hostile-seeds") as lab:
        report = lab.tmp / "report.json"
        assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json",
                        "-o", str(report)) == 0
    return {"report": json.loads(report.read_text()), "store": lab.store,
            "results": json.loads((ROOT / "results/debug-cost.json").read_text())}


# -- mutating structured data --------------------------------------------------------------

def hostile_leaf(mark: Path) -> st.SearchStrategy[object]:
    return st.one_of(values(mark), st.sampled_from([None, True, [], {}, math.nan, math.inf, -math.inf, 2**70,
                                                    -(2**63) - 1, 0, -1, 1e308, [[[[[]]]]], {"": {"": None}}]),
                     st.integers(), st.floats())


def paths_in(data: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths_in(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data[:3]):   # the first few of a list stand for the rest
            out += paths_in(v, (*prefix, i))
    return out


@st.composite
def mutated(draw, seed: object, mark: Path) -> object:
    data = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths_in(data)))
        if not where:
            return draw(hostile_leaf(mark))
        parent = data
        for key in where[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = draw(hostile_leaf(mark))
    return data


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, allow_nan=True))
    return path


# -- every command's parser ------------------------------------------------------------------

# (the command line, with {} where the hostile value goes). Commands that would build a real
# variant for an accepted value use the fake tree, where a build takes a second.
OPTIONS = [
    ("resolve", "{}"),
    ("resolve", "a=tinyconfig+{}"),
    ("resolve", "a=tinyconfig+boot:{}"),
    ("resolve", "a=tinyconfig+sysctl:vm.swappiness={}"),
    ("resolve", "a=tinyconfig+vcpus:{}"),
    ("resolve", "a=tinyconfig+devices:{}"),
    ("resolve", "a=tinyconfig+fs:{}"),
    ("resolve", "a=tinyconfig+cc:{}"),
    ("resolve", "{}=tinyconfig"),
    ("resolve", "a=tinyconfig", "--arch", "{}"),
    ("compare", "a=tinyconfig", "--fail-on", "{}"),
    ("compare", "a=tinyconfig", "--fail-on-regression", "{}"),
    ("compare", "a=tinyconfig", "--timeout", "{}"),
    ("compare", "a=tinyconfig", "--runs", "{}"),
    ("compare", "a=tinyconfig", "--target", "{}"),
    ("compare", "a=tinyconfig", "--cluster", "{}"),
    ("compare", "a=tinyconfig", "--with", "{}"),
    ("runs", "--limit", "{}"),
    ("log", "{}"),
    ("config", "explain", "{}"),
    ("sweep", "a=tinyconfig", "--toggle", "{}", "--metric", "syscall.null"),
    ("sweep", "a=tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "{}"),
    ("bisect", "a=tinyconfig", "b=tinyconfig", "--metric", "{}"),
    ("profile", "a=tinyconfig", "b=tinyconfig", "--metric", "{}"),
    ("study", "run", "{}"),
    ("cite", "{}"),
    ("show", "{}"),
    ("size", "{}", "{}"),
    ("cache", "prune", "--dry-run", "--source", "{}"),
    ("lava-job", "a=tinyconfig", "--device-type", "{}", "--artifact-url", "http://files.example/kl"),
    ("lava-job", "a=tinyconfig", "--device-type", "qemu", "--artifact-url", "{}"),
    ("lava-job", "a=tinyconfig", "--device-type", "qemu", "--artifact-url", "http://f/kl", "--console", "{}"),
    ("lava-job", "a=tinyconfig", "--device-type", "qemu", "--artifact-url", "http://f/kl", "--timeout", "{}"),
]


@pytest.mark.parametrize("examples", counts(5, 25))
@pytest.mark.parametrize("template", OPTIONS, ids=[" ".join(t) for t in OPTIONS])
def test_every_commands_parser_takes_hostile_values(harness, template, examples):
    @settings(SETTINGS, max_examples=examples)
    @given(value=values(harness.mark))
    def attempt(value):
        argv = [part.replace("{}", value) for part in template]
        if template[0] == "lava-job":
            argv += ["-o", str(harness.work / "job.yaml")]
        harness.run(*argv)

    attempt()
    harness.report(" ".join(template))


@pytest.mark.parametrize("option", ["--source", "--store", "--arch", "--cluster"])
def test_an_empty_or_hostile_source_store_arch_or_cluster_is_refused_before_anything_starts(harness, option):
    # A store is any path the user names (odd names included: the other tests show that
    # nothing runs them); an empty one is refused, not taken for the default.
    hostile = ["", " ", "\x00"] + ([f"$(touch {harness.mark})", "a\nb", "../outside"] if option != "--store" else [])

    @settings(SETTINGS, max_examples=15)
    @given(value=st.sampled_from(hostile))
    def attempt(value):
        from kernellab.cli import main
        argv = ["resolve", "a=tinyconfig", option, value]
        if option != "--source":
            argv += ["--source", str(harness.lab.tree)]
        if option != "--store":
            argv += ["--store", str(harness.lab.store)]
        with contextlib.chdir(harness.work):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        assert code == 2, (option, value)
        assert not harness.mark.exists()

    attempt()


# -- every file format ------------------------------------------------------------------------

@pytest.mark.parametrize("examples", counts(16, 80))
def test_hostile_reports_through_show_and_the_gate(harness, seeds, examples):
    @settings(SETTINGS, max_examples=examples)
    @given(report=mutated(seeds["report"], harness.mark),
           extra=st.sampled_from([(), ("--format", "html"), ("--format", "junit", "--fail-on", "syscall.null:+5"),
                                  ("--fail-on-regression", "5"), ("--format", "markdown")]))
    def attempt(report, extra):
        path = write_json(harness.work / "report.json", report)
        harness.run("show", str(path), *extra, "-o", str(harness.work / "out"))

    attempt()
    harness.report("report files")


def test_hostile_results_files_through_show_and_cite(harness, seeds):
    @settings(SETTINGS, max_examples=60)
    @given(results=mutated(seeds["results"], harness.mark), command=st.sampled_from(["show", "cite"]))
    def attempt(results, command):
        path = write_json(harness.work / "results.json", results)
        extra = ("--format", "results", "-o", str(harness.work / "out")) if command == "show" else ()
        harness.run(command, str(path), *extra)

    attempt()
    harness.report("results files")


def test_hostile_noise_floors(harness, seeds):
    report = write_json(harness.work / "seed.json", seeds["report"])

    @settings(SETTINGS, max_examples=40)
    @given(key=values(harness.mark), value=values(harness.mark))
    def attempt(key, value):
        floor = harness.work / "floor.toml"
        floor.write_text(f"[floor]\n{json.dumps(key)} = {value}\n")
        code = harness.run("show", str(report), "--fail-on", "syscall.null:+5", "--noise-floor", str(floor))
        # The seed's b is 25% slower on syscall.null: whatever the floor says, the gate never
        # passes it unless the floor is a finite number that covers the change.
        if code == 0:
            assert math.isfinite(float(value)) and float(value) >= 25, value

    attempt()
    harness.report("noise floors")


def toml_value(value: str) -> str:
    return json.dumps(value)


@st.composite
def experiment_files(draw, mark: Path) -> str:
    v = values(mark)
    variants = draw(st.lists(st.tuples(v, v, v), min_size=0, max_size=3))
    lines = [f"name = {toml_value(draw(v))}", f"mode = {toml_value(draw(v))}", f"runs = {draw(v) or 0}"
             if draw(st.booleans()) else ""]
    for name, base, word in variants:
        lines += ["[[variant]]", f"name = {toml_value(name)}", f"base = {toml_value(base)}",
                  f"options = [{toml_value(word)}]", f"boot_args = {toml_value(word)}"]
    text = "\n".join(lines)
    return draw(st.sampled_from([text, "[" * 5000, "a = " + "[" * 5000 + "]" * 5000, text.replace("=", "", 1)]))


def test_hostile_experiment_files(harness):
    @settings(SETTINGS, max_examples=60)
    @given(text=experiment_files(harness.mark))
    def attempt(text):
        path = harness.work / "experiment.toml"
        path.write_text(text)
        harness.run("compare", "-e", str(path))

    attempt()
    harness.report("experiment files")


@st.composite
def study_files(draw, mark: Path) -> str:
    v = values(mark)
    seed = (ROOT / "src/kernellab/studies/debug-cost.toml").read_text()
    lines = seed.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        line = lines[i] if lines else ""
        if "=" in line:
            key = line.split("=", 1)[0]
            lines[i] = f"{key}= {toml_value(draw(v))}"
        else:
            lines.insert(i, f"{draw(st.sampled_from(['name', 'arches', 'config-of', 'base']))} = {toml_value(draw(v))}")
    return "\n".join(lines)


def test_hostile_study_files(harness, monkeypatch):
    # Only the study's parse and checks run: a study that parses is not run here (it builds).
    from kernellab.experiments import study as study_module
    monkeypatch.setattr(study_module, "run", lambda *a, **k: (_ for _ in ()).throw(SystemExit(0)))

    @settings(SETTINGS, max_examples=60)
    @given(text=study_files(harness.mark))
    def attempt(text):
        path = harness.work / "study.toml"
        path.write_text(text)
        harness.run("study", "run", str(path), "--quick")

    attempt()
    harness.report("study files")


def config_text(draw, v) -> str:
    lines = ["CONFIG_UNIX=y", "# CONFIG_FAKE_SLOW is not set", 'CONFIG_CMDLINE="quiet"', "CONFIG_HZ=100"]
    for _ in range(draw(st.integers(1, 4))):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(
            [f"CONFIG_{draw(v)}=y", f"CONFIG_X={draw(v)}", f'CONFIG_X="{draw(v)}"', draw(v)])))
    return "\n".join(lines) + "\n"


def test_hostile_configs_through_diff_audit_and_fragments(harness):
    @settings(SETTINGS, max_examples=60)
    @given(data=st.data(), command=st.sampled_from(["diff", "audit", "fragment"]))
    def attempt(data, command):
        v = values(harness.mark)
        path = harness.work / "hostile.config"
        path.write_text(config_text(data.draw, v))
        if command == "diff":
            good = harness.work / "good.config"
            good.write_text("CONFIG_UNIX=y\n")
            harness.run("config", "diff", str(good), str(path))
        elif command == "audit":
            harness.run("audit", str(path), "--profile", "embedded-size")
        else:
            harness.run("resolve", f"a=tinyconfig+{path}")

    attempt()
    harness.report("configs and fragments")


def lava_entry(t: float, lvl: str, msg: object) -> dict:
    return {"dt": f"2024-05-02T10:00:{t:06.3f}+00:00", "lvl": lvl, "msg": msg}


@st.composite
def lava_logs(draw, mark: Path) -> str:
    v = values(mark)
    payloads = ["t=hello v=1 agent=kernellab-agent mode=pid1", "t=meta key=clocksource value=tsc"]
    for _ in range(draw(st.integers(0, 4))):
        payloads.append(draw(st.sampled_from([
            f"t=sample metric={draw(v).replace(' ', '_')} unit=ns rep=0 iters=1 value=1.0",
            f"t=sample metric=syscall.null unit={draw(v).replace(' ', '_')} rep=0 iters=1 value=1.0",
            f"t=sample metric=syscall.null unit=ns rep={2**63} iters={2**64} value=1.0",
            f"t=sample metric=syscall.null unit=ns rep=0 iters=1 value={draw(v).replace(' ', '_')}",
            f"t=na metric=syscall.null reason={draw(v).replace(' ', '_')}",
            f"t=end records={draw(v).replace(' ', '_')}"])))
    records = [frame(f"seq={draw(st.sampled_from([str(i), str(2**63 + i), '-1']))} {p}")
               for i, p in enumerate(payloads)]
    if draw(st.booleans()):
        records.append(frame(f"seq={len(records)} t=end records={len(records)}"))
    console = [*labfakes.BOOT, *records, "[    1.000000] reboot: Power down"]
    entries = [lava_entry(0, "info", "lava-dispatcher, installed at version: 2024.09"),
               lava_entry(0.3, "debug", "saving as /srv/tftp/4711/tftp-deploy-x1y2/ramdisk/agent.cpio"),
               *(lava_entry(1 + 0.01 * i, "target", line) for i, line in enumerate(console))]
    text = "".join("- " + yaml.safe_dump(e, default_flow_style=True, width=10**5) for e in entries)
    levels = zip("abcdefgh", "bcdefghi", strict=True)
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in levels)
    return draw(st.sampled_from([text, text[: draw(st.integers(0, len(text)))], bomb, "- " + draw(v), draw(v)]))


def test_hostile_lava_logs_and_agent_records(harness):
    @settings(SETTINGS, max_examples=40)
    @given(text=lava_logs(harness.mark))
    def attempt(text):
        path = harness.work / "log.yaml"
        path.write_text(text)
        # A job whose records all check out but whose agent never said it was done is a run
        # that failed (stored as incomplete): exit 1 is its answer, as for any run.
        harness.run("import-lava", str(path), "a=tinyconfig", "--device-type", "qemu",
                    accepted=frozenset({*ACCEPTED, 1}))

    attempt()
    harness.report("LAVA logs and agent records")


STORE_DAMAGE = [
    "UPDATE runs SET started = 'yesterday'",
    "UPDATE runs SET started = NULL",
    "UPDATE runs SET status = '\x1b[2Jpwned'",
    "UPDATE runs SET reason = '\x1b]0;title\x07'",
    "UPDATE runs SET target_info = 'not json'",
    "UPDATE samples SET value = 'x'",
    "UPDATE samples SET metric = '../../etc'",
    "UPDATE runs SET id = 9223372036854775807 WHERE id = 1",
    "PRAGMA user_version = -1",
    "PRAGMA user_version = 999",
    "DELETE FROM variants",
    "DROP TABLE samples",
    "UPDATE variants SET name = '\x1b[31mred'",
]


def test_hostile_stores_through_runs_log_and_cache(harness, seeds):
    @settings(SETTINGS, max_examples=40)
    @given(damage=st.lists(st.sampled_from(STORE_DAMAGE), min_size=1, max_size=3),
           command=st.sampled_from([("runs",), ("runs", "--format", "json"), ("log", "1"), ("cache", "show")]))
    def attempt(damage, command):
        shutil.copy(seeds["store"], harness.lab.store)
        db = sqlite3.connect(harness.lab.store)
        for statement in damage:
            with contextlib.suppress(sqlite3.Error):
                db.execute(statement)
        db.commit()
        db.close()
        harness.run(*command)

    attempt()
    harness.report("stores")


# -- what reaches a terminal and a pipe ----------------------------------------------------------

def test_no_escape_sequence_from_a_report_reaches_the_terminal(harness, seeds):
    report = copy.deepcopy(seeds["report"])
    report["variants"][1]["name"] = "b\x1b[2J\x1b]0;owned\x07"
    path = write_json(harness.work / "escape.json", report)
    out = subprocess.run([sys.executable, "-m", "kernellab.cli", "show", str(path), "--store",
                          str(harness.lab.store)], capture_output=True, text=True, timeout=120)
    assert "\x1b[2J" not in out.stdout + out.stderr and "\x1b]0;" not in out.stdout + out.stderr
