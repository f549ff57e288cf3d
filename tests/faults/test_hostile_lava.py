"""Hostile LAVA job logs, agent records and `lava-job` options (issue 29, defects 7 and 10):
a forged record is refused with its reason before anything is stored, a failed import
can be tried again, an alias bomb is refused before it expands, and no option of
`lava-job` becomes a second YAML key or a kernel argument."""

from __future__ import annotations

import math
import re
import sqlite3
import types
from itertools import pairwise
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

import labfakes
from kernellab.errors import LabError
from kernellab.experiments import lava
from kernellab.experiments.lab import RunOptions, run
from kernellab.experiments.spec import parse_short
from kernellab.guest.records import frame
from kernellab.guest.session import Session
from kernellab.store import Store
from kernellab.targets import lava as lava_target
from kernellab.targets.lava import read_log
from test_lava import URL, agent_console, board_console, lava_log, write_log

HYPOTHESIS = settings(deadline=None, derandomize=True, database=None)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: ") and err.count("\n") == 1, err
    return err


def initramfs_of_a_job(lab, capsys, device_type: str = "bbb") -> str:
    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", device_type,
                    "--artifact-url", URL) == 0
    return yaml.safe_load(capsys.readouterr().out)["metadata"]["kernellab.initramfs"]


def forge(lines: list[str], payload_of: str, payload: str) -> list[str]:
    """The console with the record whose payload contains `payload_of` replaced by an
    intact (checksummed) record of `payload`, as a forged console would send it."""
    i = next(i for i, line in enumerate(lines) if payload_of in line)
    return [*lines[:i], frame(payload), *lines[i + 1:]]


def runs(store: Path) -> list[tuple]:
    if not store.exists():
        return []
    db = sqlite3.connect(store)
    try:
        return db.execute("SELECT id, status FROM runs").fetchall()
    finally:
        db.close()


# -- defect 7: records that crashed the import or were stored as ok ----------------------

FORGED = {
    # seq, rep and iters past SQLite's 64-bit integers crashed the store; records=abc the stream.
    "seq": ("value=95.0", f"seq={2**63} t=sample metric=syscall.null unit=ns rep=0 iters=1000 value=95.0",
            "seq=9223372036854775808 is not a count"),
    "rep": ("value=95.0", f"seq=2 t=sample metric=syscall.null unit=ns rep={2**63} iters=1000 value=95.0",
            "rep=9223372036854775808 is not a count"),
    "iters": ("value=95.0", f"seq=2 t=sample metric=syscall.null unit=ns rep=0 iters={2**64} value=95.0",
              "iters=18446744073709551616 is not a count"),
    "records": ("t=end", "seq=7 t=end records=abc", "records=abc is not a count"),
    # Stored as ok before.
    "metric": ("value=95.0", "seq=2 t=sample metric=syscall.fake unit=ns rep=0 iters=1000 value=95.0",
               "metric syscall.fake is not one the agent measures"),
    "unit": ("value=95.0", "seq=2 t=sample metric=syscall.null unit=s rep=0 iters=1000 value=95.0",
             "metric syscall.null in s, the catalog's unit is ns"),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_record_refuses_the_import_and_a_good_log_imports_after(lab, capsys, case):
    initramfs = initramfs_of_a_job(lab, capsys)
    replaced, payload, says = FORGED[case]
    forged = write_log(lab.tmp / "forged.yaml",
                       lava_log(board_console(forge(agent_console(), replaced, payload)), initramfs=initramfs))
    args = ("--device-type", "bbb", "--source", str(lab.tree))

    assert lab.main("import-lava", str(forged), "tinyconfig", *args) == 2
    err = one_line_error(capsys)
    assert "agent record refused, " + says in err and str(forged) in err
    assert runs(lab.store) == []   # nothing half-stored

    # Refused again, not "already imported": and the right log of the job imports.
    assert lab.main("import-lava", str(forged), "tinyconfig", *args) == 2
    capsys.readouterr()
    good = write_log(lab.tmp / "good.yaml", lava_log(board_console(agent_console()), initramfs=initramfs))
    assert lab.main("import-lava", str(good), "tinyconfig", *args) == 0
    assert capsys.readouterr().out == f"job 4711: run 1, ok, {lab.runs()[0]['samples']} samples\n"
    assert runs(lab.store) == [(1, "ok")]


@pytest.mark.parametrize("status", lava.RETRYABLE)
def test_an_import_that_failed_midway_can_be_tried_again(lab, capsys, status):
    """A run left by an import that died (killed: marked interrupted when the store is next
    opened) or was refused stored no result of the job: it does not count as imported."""
    initramfs = initramfs_of_a_job(lab, capsys)
    log = write_log(lab.tmp / "log.yaml", lava_log(board_console(agent_console()), initramfs=initramfs))
    args = ("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree))
    assert lab.main(*args) == 0
    db = sqlite3.connect(lab.store)
    db.execute("UPDATE runs SET status = ?", (status,))
    db.commit()
    db.close()
    capsys.readouterr()

    assert lab.main(*args) == 0
    assert capsys.readouterr().out == f"job 4711: run 2, ok, {lab.runs()[1]['samples']} samples\n"
    assert lab.main(*args) == 0
    assert capsys.readouterr().out == "job 4711 already imported as run 2\n"


def test_importing_a_failed_job_again_says_it_failed_again(lab, capsys):
    """A job whose console ended before the agent's end record is stored as a failed run
    (exit 1); importing it again says so with the same exit, not 0 (a flaky verdict)."""
    initramfs = initramfs_of_a_job(lab, capsys)
    log = write_log(lab.tmp / "log.yaml", lava_log(board_console(agent_console()[:-4]), initramfs=initramfs))
    args = ("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree))
    assert lab.main(*args) == 1
    assert capsys.readouterr().out.startswith("job 4711: run 1, incomplete, ")
    assert lab.main(*args) == 1
    assert capsys.readouterr().out == "job 4711 already imported as run 1 (incomplete)\n"


def test_a_hostile_guest_console_cannot_store_an_unknown_metric(tmp_path):
    """The same bounds for every target: a live console (QEMU, ssh, a board) is read by the
    same session, and a forged record stops the run as another agent would."""
    lines = labfakes.BOOT + forge(labfakes.agent_lines({"syscall.null": [95.0, 96.0]}), "value=96.0",
                                  "seq=3 t=sample metric=../../etc unit=ns rep=1 iters=1000 value=1.0")
    store = Store(tmp_path / "s.sqlite")
    target = labfakes.FakeTarget(lambda cmdline: lines)
    with pytest.raises(LabError, match=r"agent record refused, metric \.\./\.\./etc is not one"):
        run(labfakes.prepared(parse_short("x=lab-minimal")), labfakes.build("k"), store,
            RunOptions(mode="wall"), tmp_path / "agent.cpio", target=target)
    [row] = store.runs()
    assert row["status"] == "agent-mismatch" and "../../etc" in row["reason"]
    assert "../../etc" not in store.run_metrics(row["id"])
    assert store.run_metrics(row["id"])["syscall.null"] == [95.0]   # what came before it stays


def test_console_numbers_past_the_stores_integers_are_not_read():
    from kernellab.guest.console import ConsoleLine, initcalls, memory_line
    from kernellab.guest.session import console_samples
    huge = "9" * 30
    assert memory_line(f"Memory: {huge}K/{huge}K available (1K kernel code)") is None
    assert memory_line(f"Memory: 5K/6K available ({huge}K kernel code, 2K bss)") == {"available": 5, "total": 6,
                                                                                      "bss": 2}
    assert initcalls([ConsoleLine(0, f"initcall f+0x0/0x1 returned 0 after {huge} usecs")]) == {}
    assert ConsoleLine(0, f"[{huge}.000000] x").printk_s is None
    assert ConsoleLine(0, "[" + "9" * 400 + ".0] x").printk_s is None   # float() of it is inf
    assert all(math.isfinite(s.value) and abs(s.value) < 2**63
               for s in console_samples([ConsoleLine(0, f"[{huge}.0] Linux version 6.1"),
                                         ConsoleLine(0, f"Memory: {huge}K/1K available (1K kernel code)")]))


def test_the_session_reads_any_console_without_a_traceback():
    """Generated consoles: lines around intact and damaged records; the session ends with a
    verdict or the one LabError of a forged record, and every sample it keeps is in bounds."""
    seqs = st.one_of(st.integers(0, 3).map(str), st.sampled_from([str(2**63), "-1", "x"]))
    kinds = st.sampled_from(["hello v=1", "sample", "end", "meta key=clocksource", "na", "prof"])
    words = ["records=2", "records=abc", "metric=syscall.null", "metric=nope", "unit=ns", "unit=s", "rep=0",
             f"rep={2**63}", "iters=1", f"iters={2**64}", "value=1.5", "value=nan", "value=jiffies", "metric=x",
             "step=1", "b=1:x", "hits=2"]
    payloads = st.builds(lambda seq, kind, rest: f"seq={seq} t={kind} {' '.join(rest)}".strip(),
                         seqs, kinds, st.lists(st.sampled_from(words), max_size=6))
    line = st.one_of(payloads.map(frame), payloads.map(lambda p: frame(p)[:-3]), st.text(max_size=80),
                     st.sampled_from(labfakes.BOOT + ["[    1.0] Kernel panic - not syncing: x",
                                                      "[    1.0] reboot: Power down"]))
    tried = 0

    @settings(HYPOTHESIS, max_examples=300)
    @given(st.lists(line, max_size=30))
    # What crashed the session or reached the store before, whatever the generator draws.
    @example([frame("seq=0 t=end records=abc")])
    @example([frame(f"seq=0 t=sample metric=syscall.null unit=ns rep={2**63} iters=1 value=1.0")])
    @example([frame("seq=0 t=sample metric=syscall.nope unit=ns rep=0 iters=1 value=1.0")])
    def attempt(lines):
        nonlocal tried
        tried += 1
        sink = labfakes.ListSink()
        try:
            result = Session(sink).read(labfakes.FakeConsole(lines))
        except LabError:
            return
        assert result.status in ("ok", "panic", "incomplete", "damaged", "coarse-clock", "agent-mismatch")
        for s in sink.samples:
            assert math.isfinite(s.value) and 0 <= s.rep < 2**32 and 0 <= s.iters < 2**32

    attempt()
    assert tried >= 300   # the explicit examples and the generated ones


# -- defect 7: YAML alias bombs and oversized logs ------------------------------------------

LOL = "[" + ",".join(["lol"] * 9) + "]"


def bomb_entries(levels: int = 9) -> str:
    """Billion laughs as a log's error entries, whose messages LAVA's errors would print:
    nine lines that are 9**9 copies of "lol" once expanded."""
    names = "abcdefghi"[:levels]
    msgs = [f"&a {LOL}"] + [f"&{c} [{','.join([f'*{p}'] * 9)}]" for p, c in pairwise(names)]
    return "".join(f'- {{dt: "2024-05-02T10:00:00", lvl: error, msg: {m}}}\n' for m in msgs)


def test_an_alias_bomb_is_refused_before_it_expands(lab, capsys):
    path = lab.tmp / "bomb.yaml"
    path.write_text(bomb_entries() + "".join("- " + yaml.safe_dump(e, default_flow_style=True, width=10**5)
                                             for e in lava_log(board_console(agent_console()))))
    assert lab.main("import-lava", str(path), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree)) == 2
    assert "has YAML aliases (*name), which LAVA never writes" in one_line_error(capsys)
    assert not lab.store.exists()   # refused before anything was built or stored


def test_an_alias_of_a_whole_entry_is_refused(tmp_path):
    """A copied console line is how an alias could forge a second measurement."""
    path = tmp_path / "log.yaml"
    path.write_text('- &e {"dt": "2024-05-02T10:00:00", "lvl": "target", "msg": "x"}\n- *e\n')
    with pytest.raises(LabError, match="has YAML aliases"):
        read_log(path)
    path.write_text('- &e {"dt": "2024-05-02T10:00:00", "lvl": "target", "msg": "x"}\n')   # an anchor alone
    assert read_log(path).console()[0].text == "x"


def test_an_oversized_log_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(lava_target, "MAX_LOG_BYTES", 1000)
    path = write_log(tmp_path / "log.yaml", lava_log(board_console(agent_console())))
    with pytest.raises(LabError, match=r"is larger than 0 MiB, far more than a LAVA job log"):
        read_log(path)


@pytest.mark.parametrize("text, says", [
    ('- {dt: 2024-13-45 10:00:00, lvl: target, msg: x}\n', "month must be in 1..12"),
    ('- {dt: !!int "0x", lvl: target, msg: x}\n', "a value YAML cannot represent"),
    ('- {dt: "2024-05-02T10:00:00", lvl: info, msg: x}\n- {dt: "2001-01-01T00:00:00", lvl: target, msg: x}\n',
     "entry 2 is dated 2001-01-01T00:00:00, before the log's first entry"),
])
def test_values_yaml_cannot_build_are_one_line(tmp_path, text, says):
    path = tmp_path / "log.yaml"
    path.write_text(text)
    with pytest.raises(LabError, match=re.escape(says)):
        read_log(path)


# -- defect 10: lava-job options -------------------------------------------------------------

@pytest.mark.parametrize("option, value, says", [
    ("--device-type", "bbb\nvisibility: personal\npriority: high", "a LAVA device type is a name"),
    ("--device-type", "bbb # x", "a LAVA device type is a name"),
    ("--device-type", "", "a LAVA device type is a name"),
    ("--console", "ttyS0 init=/bin/sh", "a serial console is a device name"),
    ("--console", "ttyS0,115200n8", "a serial console is a device name"),
    ("--console", "ttyS0\ninit=/bin/sh", "a serial console is a device name"),
    ("--artifact-url", "http://x/\nkernel: evil", "--artifact-url"),
    ("--timeout", "1e300", "more than 0 and at most 86400"),
])
def test_a_lava_job_option_that_would_not_stay_one_value_is_refused(lab, capsys, option, value, says):
    options = {"--device-type": "bbb", "--artifact-url": URL, option: value}
    argv = ["lava-job", "tinyconfig", "--source", str(lab.tree)] + [w for kv in options.items() for w in kv]
    assert lab.main(*argv) == 2
    assert says in one_line_error(capsys)
    assert not lab.store.exists()   # refused before the build


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_a_timeout_that_is_no_duration_is_refused(lab, capsys, value):
    argv = ["lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", "bbb", "--artifact-url", URL,
            "--timeout", value]
    try:
        code = lab.main(*argv)
    except SystemExit as exc:   # argparse's own refusal (its usage line and the reason)
        code = exc.code
    assert code == 2
    assert "error:" in capsys.readouterr().err


def test_import_refuses_a_device_type_that_is_no_name(lab, capsys):
    log = write_log(lab.tmp / "log.yaml", lava_log(board_console(agent_console())))
    assert lab.main("import-lava", str(log), "tinyconfig", "--device-type", "\x1b[2Jbbb", "--source",
                    str(lab.tree)) == 2
    assert "a LAVA device type is a name" in one_line_error(capsys)
    assert not lab.store.exists()


def fake_job_parts(variant_source: str, image: str):
    p = types.SimpleNamespace(spec=types.SimpleNamespace(source=variant_source, arch="x86_64"))
    build = types.SimpleNamespace(image=Path(image))
    return p, build


@HYPOTHESIS
@given(variant=st.text(max_size=40), source=st.text(max_size=40), image=st.text(min_size=1, max_size=40))
def test_the_jobs_header_stays_comments_whatever_it_quotes(variant, source, image):
    """The header quotes the variant, the source and the artifacts' paths: none of them,
    whatever characters it holds, adds a line to the job YAML reads."""
    job = {"device_type": "bbb", "job_name": "x", "actions": []}
    p, build = fake_job_parts(source, image.replace("\x00", ""))
    text = lava.job_yaml(job, p, build, Path("/cache/agent.cpio"), variant)
    assert yaml.safe_load(text) == job


@HYPOTHESIS
@given(st.text(max_size=60))
def test_a_device_type_or_console_is_a_plain_name_or_refused(word):
    for option, check in (("device type", lambda w: lava.check_device_type(w)),
                          ("console", lambda w: lava.check_job_options("bbb", URL, w, 60.0))):
        try:
            check(word)
        except LabError as exc:
            assert "\n" not in str(exc)
            continue
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", word), (option, word)
