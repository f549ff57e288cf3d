"""Hostile reports, console logs and stores through `show`, `log`, `runs` and the CI gate:
each is read, refused with one line (exit 2) or gated (exit 3), never a traceback; a gate
that cannot check fails; nothing from a file reaches the terminal as an escape sequence;
output that cannot be written ends the command with one line (or quietly, for `| head`).

The report is a real one, from the fake lab, mutated."""

from __future__ import annotations

import copy
import errno
import json
import math
import os
import random
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junitparser import JUnitXml

from fakes import lab_fixture, module_lab
from faults.lanes import counts
from kernellab.cli import main
from kernellab.errors import LabError
from kernellab.report.terminal import printable
from kernellab.store import Store

ROOT = Path(__file__).resolve().parents[2]
SLOW = "b=tinyconfig+CONFIG_FAKE_SLOW=y"   # every timed metric x1.25
ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"    # retitle the window, clear the screen, red
MUTATIONS = 200   # per kind of document; about 0.1 s each (0.3 s for a study's report)


@lab_fixture(scope="module")
def made(tmp_path_factory, request):
    """A real compare report and the store behind it, made once by the fake lab."""
    with module_lab(tmp_path_factory, request, "made") as lab:
        assert lab.main("compare", "a=tinyconfig", SLOW, "--format", "json", "-o", str(lab.tmp / "r.json")) == 0
    return lab.tmp / "r.json", lab.store, lab.cache


@lab_fixture(scope="module")
def study_made(tmp_path_factory, request):
    """A study's report with a sweep and a code/config split, made once by the fake lab."""
    import test_study
    with module_lab(tmp_path_factory, request, "study") as lab:
        tmp = lab.tmp
        path = test_study.study_file(lab, text=test_study.SWEPT)
        assert lab.main("study", "run", str(path), "--format", "json", "-o", str(tmp / "study.json")) == 0
    return tmp / "study.json"


@pytest.fixture
def report(made):
    return json.loads(made[0].read_text())


@pytest.fixture
def env(made, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(made[2]))


def show(tmp_path, capsys, report, *args: str, text: str | None = None) -> tuple[int, str, str]:
    path = tmp_path / "hostile.json"
    path.write_text(text if text is not None else json.dumps(report))
    code = main(["show", str(path), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("kernellab: error:")]
    assert len(lines) == 1, err
    return lines[0]


# -- defect 5: the gate ------------------------------------------------------------------

def test_a_nan_noise_floor_file_is_refused_not_a_pass(env, made, tmp_path, capsys, report):
    floor = tmp_path / "floor.toml"
    floor.write_text('[floor]\n"syscall.null" = nan\n')
    code, _, err = show(tmp_path, capsys, report, "--fail-on", "syscall.null:+5", "--noise-floor", str(floor))
    assert code == 2
    assert "syscall.null = nan: a floor is a finite percentage" in one_line_error(err)
    floor.write_text('[floor]\n"syscall.null" = inf\n')
    assert show(tmp_path, capsys, report, "--fail-on", "syscall.null:+5", "--noise-floor", str(floor))[0] == 2


def test_a_report_whose_recorded_floor_is_nan_is_refused(env, tmp_path, capsys, report):
    report["noise_floor"] = {"origin": "forged", "pct": {"syscall.null": math.nan}}
    code, _, err = show(tmp_path, capsys, report, "--fail-on", "syscall.null:+5")
    assert code == 2
    assert "at $.noise_floor.pct.syscall.null: nan is not a number" in one_line_error(err)


def test_the_gate_fails_closed_on_a_figure_that_is_not_finite(report):
    from kernellab import gate
    null = next(m for m in report["metrics"] if m["name"] == "syscall.null")
    null["values"]["b"]["median"] = math.nan    # as no reader lets through, but a caller might
    [c] = gate.check(report, [gate.parse_rule("syscall.null:+5")])
    assert c.broken and "median on b is nan" in c.detail
    # and the regression rule, which skips what was not measured, does not skip it
    checks = gate.check(report, [gate.regression_rule(50)])
    assert any(c.broken and c.metric == "syscall.null" for c in checks)


def test_a_floor_that_is_not_finite_cannot_be_made():
    from kernellab.report.model import NoiseFloor
    for bad in (math.nan, math.inf, -1.0, "5"):
        with pytest.raises(LabError, match="a floor is a finite percentage"):
            NoiseFloor({"syscall.null": bad}, "test")


def test_a_gate_on_one_variant_is_refused_before_anything_runs(lab, capsys):
    code = lab.main("compare", "a=tinyconfig", "--fail-on", "syscall.null:+5")
    assert code == 2
    assert "compares each variant with the first, and there is 1" in one_line_error(capsys.readouterr().err)
    assert not lab.store.exists()   # nothing was built or booted


def test_a_saved_report_of_one_variant_cannot_pass_a_gate(env, tmp_path, capsys, report):
    report["variants"] = report["variants"][:1]
    report["runs_per_variant"] = {"a": 1}
    for m in report["metrics"]:
        m["values"].pop("b", None)
        m["delta_pct"], m["comparison"] = {}, {}
    report.pop("size")
    assert show(tmp_path, capsys, report)[0] == 0   # it renders
    code, _, err = show(tmp_path, capsys, report, "--fail-on-regression", "5")
    assert code == 2 and "give at least two variants" in one_line_error(err)


def test_a_rule_that_finds_nothing_to_check_breaks(env, tmp_path, capsys, report):
    for m in report["metrics"]:
        m["valid_in_mode"] = False   # meaningless in the mode, all of them
    code, _, err = show(tmp_path, capsys, report, "--fail-on-regression", "5")
    assert code == 3
    assert "kernellab: regression: every metric b: nothing to check" in err
    assert "0 of 1 checks passed" in err


@pytest.mark.parametrize("name", ["b\x01", "b\x1b[2J", "b\x00", "b\ufffe", "b\ud800", "b]]>&<\"'"])
def test_junit_is_well_formed_whatever_a_variant_is_called(env, tmp_path, capsys, report, name):
    text = json.dumps(report).replace('"b"', json.dumps(name))
    out = tmp_path / "gate.xml"
    code, _, _ = show(tmp_path, capsys, report, "--format", "junit", "--fail-on", "syscall.null:+5", "-o", str(out),
                      text=text)
    assert code == 3
    ET.parse(out)                      # well-formed XML 1.0
    [suite] = list(JUnitXml.fromfile(str(out)))
    [case] = list(suite)
    assert case.name == f"syscall.null [{printable(name)}]" and not case.is_passed


def test_junit_of_a_fresh_compare_with_a_control_character_in_a_name(lab, capsys, tmp_path):
    out = tmp_path / "gate.xml"
    code = lab.main("compare", "a=tinyconfig", "b\x01=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "junit",
                    "--fail-on", "syscall.null:+5", "-o", str(out))
    capsys.readouterr()
    if code == 2:
        pytest.skip("variant names with control characters are refused by the variant parser")
    assert code == 3
    ET.parse(out)


# -- defect 6: show validates what it reads --------------------------------------------

# What a hand-edited, truncated or forged report holds in place of what kernellab wrote.
HOSTILE = [None, True, 0, -1, 2**62, 1.5, -0.0, 1e300, "", "x", "[/]", "[bold red]x", ESC, "\r\x00\x9b",
           "\ud800", [], [None], {}, {"median": 1}, {"not_available": ""}, "{{ 7*7 }}", "<script>", "A" * 5000]


def walk(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, (*path, i))


def mutate(rng: random.Random, report: dict) -> dict:
    doc = copy.deepcopy(report)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p, _ in walk(doc) if p]
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key, kind = path[-1], rng.randrange(4)
        if kind == 0 and isinstance(parent, dict):
            del parent[key]
        elif kind == 1 and isinstance(parent[key], str):
            parent[key] = rng.choice([ESC, "[/]", "\x00", parent[key] + "\x1b[2J", "b" if rng.random() < .5 else "a"])
        elif kind == 2 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
            parent[key] = rng.choice([0, -1, 10**18, -1e300, 0.5, parent[key] * 1000])
        elif kind == 2 and isinstance(parent, dict):
            parent[rng.choice([ESC, "b", "zzz", "[/]"])] = parent.pop(key)
        else:
            parent[key] = rng.choice(HOSTILE)
    return doc


def fuzz(tmp_path, capsys, document: dict, formats: list[str], gated: bool, count: int, seed: int) -> dict:
    """`count` mutations of `document` through `show`, round the formats: each shown, refused
    with one line or gated, nothing from the file reaching the terminal raw."""
    rng = random.Random(seed)
    codes: dict[int, int] = {}
    start = time.monotonic()
    for i in range(count):
        doc = mutate(rng, document)
        fmt = formats[i % len(formats)]
        gate = ["--fail-on", "syscall.null:+5"] if gated and (fmt == "junit" or i % 3 == 0) else []
        try:
            code, out, err = show(tmp_path, capsys, doc, "--format", fmt, *gate)
        except Exception as exc:   # the defect: anything but a clean exit
            raise AssertionError(f"mutation {i} ({fmt}): {exc!r}\n{json.dumps(doc)[:3000]}") from exc
        codes[code] = codes.get(code, 0) + 1
        assert code in (0, 2, 3), (i, code, err)
        if code == 2:
            one_line_error(err)
        assert "\x1b" not in out and "\x1b" not in err, (i, fmt)
    print(f"{count} mutated documents in {time.monotonic() - start:.1f} s: exit codes {codes}")
    # Both kinds happen: the mutations reach the views, not only the schema.
    assert codes.get(2, 0) > count // 10 and codes.get(0, 0) + codes.get(3, 0) > count // 10
    return codes


@pytest.mark.parametrize("count", counts(40, MUTATIONS))
def test_mutated_reports_are_shown_refused_or_gated_never_a_traceback(env, tmp_path, capsys, report, count):
    fuzz(tmp_path, capsys, report, ["table", "markdown", "csv", "json", "junit"], True, count, 29)


@pytest.mark.parametrize("count", counts(20, MUTATIONS // 4))
def test_mutated_study_reports_are_shown_or_refused(env, tmp_path, capsys, study_made, count):
    study = json.loads(study_made.read_text())
    fuzz(tmp_path, capsys, study, ["table", "markdown", "json", "results"], False, count, 5)


@pytest.mark.parametrize("count", counts(40, MUTATIONS // 2))
def test_mutated_results_files_are_shown_or_refused(env, tmp_path, capsys, count):
    results = json.loads((ROOT / "results/debug-cost.json").read_text())
    fuzz(tmp_path, capsys, results, ["table", "markdown", "json"], False, count, 7)


@pytest.mark.parametrize("count", counts(5, 15))   # a chart takes vl-convert about a second
def test_mutated_reports_as_html(env, tmp_path, capsys, report, count):
    rng = random.Random(6)
    for i in range(count):
        doc = mutate(rng, report)
        code, _, err = show(tmp_path, capsys, doc, "--format", "html", "-o", str(tmp_path / "r.html"))
        assert code in (0, 2), (i, err)


@pytest.mark.parametrize("count", counts(60, 1000))   # ~30 ms each, most of it jsonschema
def test_the_compiled_schema_takes_exactly_what_jsonschema_takes(report, study_made, count):
    """reading.check_schema lets a document pass on fastjsonschema's word alone (jsonschema
    takes ~50 ms): both must draw the same line, on the shipped schemas' references across
    files too (a study's sweeps, an audit's verdicts), for valid and mutated documents."""
    from kernellab.report import kinds, reading
    results = json.loads((ROOT / "results/debug-cost.json").read_text())
    documents = {"compare": report, "study": json.loads(study_made.read_text()), "results": results}
    rng = random.Random(11)
    said: dict[bool, int] = {True: 0, False: 0}
    for i in range(count):
        name = sorted(documents)[i % len(documents)]
        kind = kinds.get(name)
        doc = kinds._as_schema_sees(kind, documents[name] if i < len(documents) else mutate(rng, documents[name]))
        try:
            reading._compiled(kind.schema)(doc)
            compiled = True
        except Exception:   # noqa: BLE001  (fastjsonschema's refusal, or what else it raises)
            compiled = False
        assert compiled == reading._validator(kind.schema).is_valid(doc), (i, name, json.dumps(doc)[:2000])
        said[compiled] += 1
    assert said[True] > count // 10 and said[False] > count // 10, said   # both sides of the line were tried


def test_every_shipped_schema_compiles_and_refuses_what_it_should():
    from kernellab.report import reading
    for path in sorted(Path(reading.__file__).parent.glob("*.json")):
        check = reading._compiled(path.name)
        with pytest.raises(Exception, match="must"):   # fastjsonschema: "data.x must be ..."
            check([])


@pytest.mark.parametrize("text, said", [
    ("", "is not a JSON file"), ("[" * 100_000, "nested too deeply"), ('{"a": 1e999}', "inf is not a number"),
    ('{"a": NaN}', "nan is not a number"), ('{"a": ' + "9" * 30 + "}", "out of range"),
    ('"\\ud800"', "not a kernellab report"), ("\xff\xfe", "is not a JSON file")])
def test_a_file_that_is_no_report_is_one_line(env, tmp_path, capsys, text, said):
    code, _, err = show(tmp_path, capsys, {}, text=text)
    assert code == 2 and said in one_line_error(err)


def test_a_wrong_field_is_named_by_its_json_path(env, tmp_path, capsys, report):
    report["variants"][1]["runs"][0]["id"] = "seven"
    code, _, err = show(tmp_path, capsys, report)
    assert code == 2
    line = one_line_error(err)
    assert "hostile.json: at $.variants[1].runs[0].id: 'seven' is not of type 'integer'" in line


def test_every_report_kernellab_writes_still_reads(env, made, tmp_path, capsys):
    assert main(["show", str(made[0])]) == 0
    for results in sorted((ROOT / "results").glob("*.json")):
        assert main(["show", str(results)]) == 0, results
    capsys.readouterr()


# -- terminal safety --------------------------------------------------------------------

def test_show_prints_no_escape_sequence_from_a_report(env, tmp_path, capsys, report):
    report["experiment"] = f"exp{ESC}"
    report["variants"][1]["runs"][0]["status"] = "panic"
    report["variants"][1]["runs"][0]["reason"] = f"Kernel panic{ESC}\r\n"
    for fmt in ("table", "markdown", "csv"):
        code, out, err = show(tmp_path, capsys, report, "--format", fmt, "--fail-on", "syscall.null:+5")
        assert code == 3 and "\x1b" not in out + err and "\x07" not in out
        assert fmt == "csv" or "exp\\x1b]0;owned\\x07" in out


def test_printable_keeps_text_and_line_ends_and_escapes_the_rest():
    assert printable("ok ±Δ é\tx\ny\r\n") == "ok ±Δ é\tx\ny\n"
    assert printable("\x1b[31m\x9b\x00\u202e\ud800") == "\\x1b[31m\\x9b\\x00\\u202e\\ud800"


def test_log_and_runs_print_no_escape_sequence_from_the_store(env, made, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    store.write_bytes(made[1].read_bytes())
    db = sqlite3.connect(store)
    db.execute("UPDATE logs SET text = ? WHERE kind = 'console' AND run_id = 1", (f"boot{ESC}\r\nok\n",))
    db.execute("UPDATE runs SET reason = ? WHERE id = 1", (f"why{ESC}",))
    db.execute("UPDATE variants SET name = ? WHERE id = 1", (f"a{ESC}",))
    db.commit()
    db.close()
    assert main(["log", "1", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "boot\\x1b]0;owned\\x07" in out and out.endswith("\nok\n")
    for fmt in ("table", "csv", "json"):
        assert main(["runs", "--format", fmt, "--store", str(store)]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\\x1b" in out or "\\u001b" in out


# -- numbers ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["runs", "--limit", "99999999999999999999"], ["log", "99999999999999999999"],
                                  ["log", "-1"], ["log", "x"]])
def test_numbers_sqlite_cannot_hold_are_usage_errors(env, made, capsys, args):
    with pytest.raises(SystemExit) as exit:
        main([*args, "--store", str(made[1])])
    assert exit.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_the_store_clamps_what_it_is_asked_for(made):
    store = Store(made[1])
    assert len(store.runs(2**70)) == 2 and store.run(2**70) is None and store.run_log(2**70) is None


# -- output that cannot be written ------------------------------------------------------

def kernellab(made, *args: str, stdout) -> subprocess.CompletedProcess:
    """The real command line in a process of its own, its output where the test says."""
    env = {**os.environ, "KERNELLAB_CACHE": str(made[2])}
    return subprocess.run([sys.executable, "-m", "kernellab.cli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=env)


def test_a_reader_that_goes_away_ends_the_command_quietly(made):
    read, write = os.pipe()
    os.close(read)    # `| head -0`: the reader is gone before the first write
    try:
        done = kernellab(made, "runs", "--store", str(made[1]), stdout=write)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")   # as a shell reports a tool that SIGPIPE ended


class FullDisk:
    """sys.stdout on a full file system."""
    def write(self, text):
        if text:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return 0

    def flush(self):
        pass


def test_a_full_output_loses_no_measured_run(lab, capsys):
    with pytest.MonkeyPatch.context() as mp:   # undone before capsys puts its own stdout back
        mp.setattr(sys, "stdout", FullDisk())
        code = lab.main("compare", "a=tinyconfig", SLOW, "--fail-on", "syscall.null:+5")
    assert code == 2
    assert "cannot write the output: No space left on device" in one_line_error(capsys.readouterr().err)
    assert [(r["name"], r["status"]) for r in lab.runs()] == [("a", "ok"), ("b", "ok")]
    assert all(r["samples"] > 0 for r in lab.runs())


def test_a_full_output_is_one_line_and_the_runs_stay_in_the_store(made, tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        done = kernellab(made, "show", str(made[0]), stdout=full)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"kernellab: error: cannot write the output: {os.strerror(errno.ENOSPC)}"]


# -- a store kernellab cannot read ------------------------------------------------------

def copy_of(made, tmp_path) -> Path:
    store = tmp_path / "s.sqlite"
    store.write_bytes(made[1].read_bytes())
    return store


def edit(store: Path, *statements: str) -> None:
    db = sqlite3.connect(store)
    for sql in statements:
        db.execute(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize("version", [-1, -(2**31)])
def test_a_store_of_a_schema_no_kernellab_wrote_is_refused(env, made, tmp_path, capsys, version):
    store = copy_of(made, tmp_path)
    edit(store, f"PRAGMA user_version = {version}")
    before = store.read_bytes()
    assert main(["runs", "--store", str(store)]) == 2
    assert f"has schema version {version}, which no kernellab wrote" in one_line_error(capsys.readouterr().err)
    assert store.read_bytes() == before


@pytest.mark.parametrize("value", ["'yesterday'", "X'00'", "-5", "1e300"])
def test_a_run_whose_start_is_not_a_time_is_named(env, made, tmp_path, capsys, value):
    store = copy_of(made, tmp_path)
    edit(store, f"UPDATE runs SET started = {value} WHERE id = 2")
    assert main(["runs", "--store", str(store)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert f"{store}: run 2 has started = " in line and "correct or delete that row" in line


def test_a_run_owner_that_is_not_kernellabs_is_named(env, made, tmp_path, capsys):
    store = copy_of(made, tmp_path)
    import socket
    edit(store, f"UPDATE runs SET status = 'running', owner = 'me', host = '{socket.gethostname()}' WHERE id = 1")
    assert main(["runs", "--store", str(store)]) == 2
    assert "run 1 has owner = 'me'" in one_line_error(capsys.readouterr().err)


def test_odd_values_in_text_columns_are_shown_not_a_traceback(env, made, tmp_path, capsys):
    store = copy_of(made, tmp_path)
    edit(store, "UPDATE variants SET name = NULL, arch = 7 WHERE id = 1",
         "UPDATE runs SET target_info = '{' WHERE id = 1",
         "UPDATE logs SET text = X'ff1b5b324a0a' WHERE kind = 'console' AND run_id = 1")
    for fmt in ("table", "csv", "json"):
        assert main(["runs", "--format", fmt, "--store", str(store)]) == 0
    assert main(["log", "1", "--store", str(store)]) == 0
    assert capsys.readouterr().out.endswith("\ufffd\\x1b[2J\n")


@pytest.mark.parametrize("command", [["show"], ["cite"], ["show", "--fail-on", "syscall.null:+5"]])
def test_a_device_that_never_ends_is_refused_not_read_to_the_end(capsys, command):
    """/dev/full reads as zeros forever: `cite /dev/full` read it until the kernel killed the
    process (found by the hostile-input tests); a result is read up to a bound."""
    from kernellab.cli import main
    argv = [command[0], "/dev/full", *command[1:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "/dev/full is larger than any result kernellab writes (64 MiB)" in err and err.count("\n") == 1
