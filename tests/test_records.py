import subprocess

import pytest

from kernellab.guest.records import RecordError, RecordStream, frame, parse

SAMPLE = "seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=4096 value=206.065"


def test_frame_is_what_the_agent_prints():
    """The host's framing (used by every fake) is the agent's, line for line."""
    from kernellab.agent.compile import agent_binary
    out = subprocess.run([str(agent_binary()), "--only", "syscall.null", "--repeats", "2", "--target-us", "100"],
                         capture_output=True, text=True, timeout=60).stdout
    lines = [line for line in out.splitlines() if line.startswith("@KL ")]
    assert len(lines) > 4
    for line in lines:
        assert frame(line[len("@KL "):line.rindex(" #")]) == line
    rec = parse(frame(SAMPLE) + "\r")
    assert rec.seq == 1 and rec.type == "sample"
    assert rec.fields == {"metric": "syscall.null", "unit": "ns", "rep": "0", "iters": "4096", "value": "206.065"}


def test_ordinary_console_lines_are_not_records():
    assert parse("[    0.123] Linux version 6.1") is None


def test_corrupt_digit_is_rejected():
    line = frame(SAMPLE).replace("206.065", "906.065")
    with pytest.raises(RecordError, match="checksum"):
        parse(line)


def test_truncated_line_is_rejected():
    line = frame(SAMPLE)
    for cut in (10, len(line) // 2, len(line) - 3):
        with pytest.raises(RecordError):
            parse(line[:cut])


def test_kernel_message_inside_record_is_rejected():
    line = frame(SAMPLE)
    torn = line[:30] + "[    1.0] random: crng init done" + line[30:]
    with pytest.raises(RecordError):
        parse(torn)


def test_valid_crc_over_bad_fields_is_still_rejected():
    with pytest.raises(RecordError, match="missing"):
        parse(frame("seq=1 t=sample metric=x unit=ns rep=0 iters=1 value=abc"))
    with pytest.raises(RecordError, match="non-finite"):
        parse(frame("seq=1 t=sample metric=x unit=ns rep=0 iters=1 value=inf"))
    with pytest.raises(RecordError, match="seq/t"):
        parse(frame("t=hello"))


def test_stream_notices_lost_records():
    s = RecordStream()
    s.feed(frame("seq=0 t=hello v=1"))
    s.feed(frame(SAMPLE).replace("206", "207"))       # damaged: rejected
    s.feed(frame("seq=2 t=end records=2"))
    assert s.ended and not s.complete
    assert any("checksum" in r for r in s.rejected)
    assert any("expected 1" in r for r in s.rejected)


def test_clean_stream_is_complete():
    s = RecordStream()
    for line in [frame("seq=0 t=hello v=1"), "noise", frame(SAMPLE), frame("seq=2 t=end records=2")]:
        s.feed(line)
    assert s.complete and [r.seq for r in s.records] == [0, 1, 2]
