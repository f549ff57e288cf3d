import math
import re
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernellab.guest.records import MAX_COUNT, InvalidRecord, RecordError, RecordStream, frame, parse
from kernellab.metrics.catalog import catalog

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


def test_valid_crc_over_bad_fields_is_refused_not_rejected():
    # Not line noise (the checksum fits): another agent or a forged console, refused whole.
    with pytest.raises(InvalidRecord, match="value=abc is not a number"):
        parse(frame("seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=1 value=abc"))
    with pytest.raises(InvalidRecord, match="value=inf is not a number"):
        parse(frame("seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=1 value=inf"))
    with pytest.raises(InvalidRecord, match="missing iters/value"):
        parse(frame("seq=1 t=sample metric=syscall.null unit=ns rep=0"))
    with pytest.raises(InvalidRecord, match="without seq or t"):
        parse(frame("t=hello"))


OUT_OF_BOUNDS = {
    # What crashed the store (SQLite integers are 64-bit) or the stream before.
    f"seq={2**63} t=hello v=1": "seq=9223372036854775808 is not a count",
    f"seq=1 t=sample metric=syscall.null unit=ns rep={2**63} iters=1 value=1.0": "rep=9223372036854775808",
    f"seq=1 t=sample metric=syscall.null unit=ns rep=0 iters={2**64} value=1.0": "iters=18446744073709551616",
    "seq=1 t=end records=abc": "records=abc is not a count",
    "seq=1 t=end": "records= is not a count",
    "seq=-1 t=hello v=1": "seq=-1",
    "seq=1_0 t=hello v=1": "seq=1_0",        # int() would take it
    "seq=+1 t=hello v=1": "seq=+1",
    "seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=1 value=1_0.5": "is not a number",
    "seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=1 value=1e999": "non-finite",
    "seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=1 value=nan": "is not a number",
    "seq=1 seq=2 t=hello": "a field given twice",
    "seq=1 t=Sample": "type t=Sample",
    "seq=1 t=na reason=x": "without a metric",
    "seq=1 t=meta value=x": "without a key",
    "seq=1 t=prof step=x buckets=3": "step=x",
    "seq=1 t=prof b=1:2,3": "INDEX:COUNT",
    "seq=1 t=prof b=1:2 hits=3": "fields other than",
    "seq=1 t=meta key=x value=" + "y" * 500: "characters long",
    # Unknown metrics and wrong units: stored as ok before.
    "seq=1 t=sample metric=syscall.nope unit=ns rep=0 iters=1 value=1.0": "metric syscall.nope is not one",
    "seq=1 t=sample metric=boot.linux_version.host unit=s rep=0 iters=1 value=1.0": "is not one the agent",
    "seq=1 t=sample metric=syscall.null unit=ms rep=0 iters=1 value=1.0": "in ms, the catalog's unit is ns",
    "seq=1 t=sample metric=meminfo.MemTotal unit=count rep=0 iters=1 value=1": "catalog's unit is KiB",
    "seq=1 t=sample metric=meminfo.Cached unit=MB rep=0 iters=1 value=1": "KiB or counts",
}


@pytest.mark.parametrize("payload", sorted(OUT_OF_BOUNDS))
def test_an_intact_record_out_of_bounds_is_refused_with_the_reason(payload):
    with pytest.raises(InvalidRecord, match=re.escape(OUT_OF_BOUNDS[payload])) as refused:
        parse(frame(payload))
    assert "\n" not in str(refused.value) and str(refused.value).startswith("agent record refused, ")
    stream = RecordStream()
    with pytest.raises(InvalidRecord):   # the stream does not swallow it as line noise
        stream.feed(frame(payload))


def test_what_the_agent_sends_is_within_bounds():
    for payload in ["seq=4294967295 t=end records=4294967295",
                    "seq=1 t=sample metric=meminfo.Active_anon_ unit=KiB rep=0 iters=1 value=123",
                    "seq=1 t=sample metric=meminfo.HugePages_Total unit=count rep=0 iters=1 value=0",
                    "seq=1 t=sample metric=bw.mem_copy unit=MB/s rep=10 iters=4294967295 value=-0.5",
                    "seq=1 t=sample metric=syscall.null unit=ns rep=0 iters=1 value=1e-05",
                    "seq=1 t=na metric=not.in.catalog reason=unknown_metric",
                    "seq=1 t=prof step=4 buckets=3", "seq=2 t=prof b=0:1,2:30", "seq=3 t=prof done=1 hits=31"]:
        assert parse(frame(payload)) is not None, payload


@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(st.one_of(
    st.text(max_size=600),
    # Intact frames around generated payloads: only the bounds stand between them and the store.
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=600).map(frame),
    st.lists(st.sampled_from(["seq=1", "seq=99999999999", "t=sample", "t=end", "t=prof", "t=na", "records=abc",
                              "records=3", "metric=syscall.null", "metric=meminfo.X", "metric=nope", "unit=ns",
                              "unit=KiB", "rep=0", f"rep={2**63}", "iters=1", "value=1.5", "value=nan",
                              "value=1e999", "value=-0", "b=1:2", "step=1", "buckets=1", "done=1", "hits=2",
                              "key=x", "=", "seq=", " "]), max_size=9).map(" ".join).map(frame)))
def test_any_line_is_a_record_in_bounds_or_refused(line):
    try:
        record = parse(line)
    except (RecordError, InvalidRecord) as exc:
        assert "\n" not in str(exc)
        return
    if record is None:
        return
    assert 0 <= record.seq <= MAX_COUNT and len(line) < 600 + 20
    if record.type == "sample":
        f = record.fields
        assert 0 <= int(f["rep"]) <= MAX_COUNT and 0 <= int(f["iters"]) <= MAX_COUNT
        assert math.isfinite(float(f["value"]))
        assert f["metric"] in catalog() or f["metric"].startswith("meminfo.")
    if record.type == "end":
        assert 0 <= int(record.fields["records"]) <= MAX_COUNT


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
