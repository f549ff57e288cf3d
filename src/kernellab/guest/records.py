"""The agent's framed, checksummed result lines.

    @KL seq=3 t=sample metric=syscall.null unit=ns rep=0 iters=4096 value=123.456 #1a2b3c4d

The CRC-32 covers the payload exactly as printed. A line whose checksum, framing or
fields do not check out is rejected, never turned into a number: on a serial console,
kernel messages and line noise can land in the middle of a record.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

FRAME = re.compile(r"@KL (?P<payload>[ -~]*?) #(?P<crc>[0-9a-f]{8})\s*$")
_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*=[!-~]*$")


@dataclass(frozen=True)
class Record:
    seq: int
    type: str
    fields: dict[str, str]


class RecordError(ValueError):
    """A line that looked like a record but could not be trusted."""


def frame(payload: str) -> str:
    """The line the agent prints for a payload (the host uses it for tests and fixtures)."""
    return f"@KL {payload} #{zlib.crc32(payload.encode()):08x}"


def parse(line: str) -> Record | None:
    """None for ordinary console lines; RecordError for a damaged record."""
    start = line.find("@KL ")
    if start < 0:
        return None
    m = FRAME.match(line[start:])
    if not m:
        raise RecordError(f"truncated or malformed record: {line.strip()[:80]!r}")
    payload = m.group("payload")
    if zlib.crc32(payload.encode()) != int(m.group("crc"), 16):
        raise RecordError(f"checksum mismatch: {line.strip()[:80]!r}")
    tokens = payload.split(" ")
    if not all(_TOKEN.match(t) for t in tokens):
        raise RecordError(f"malformed field in record: {payload[:80]!r}")
    fields = dict(t.split("=", 1) for t in tokens)
    try:
        seq = int(fields.pop("seq"))
        kind = fields.pop("t")
    except (KeyError, ValueError):
        raise RecordError(f"record without seq/t: {payload[:80]!r}") from None
    if kind == "sample":
        _check_sample(fields, payload)
    return Record(seq, kind, fields)


def _check_sample(fields: dict[str, str], payload: str) -> None:
    try:
        value = float(fields["value"])
        int(fields["rep"]), int(fields["iters"])
        fields["metric"], fields["unit"]
    except (KeyError, ValueError):
        raise RecordError(f"sample record missing metric/unit/rep/iters/value: {payload[:80]!r}") from None
    if not math.isfinite(value):
        raise RecordError(f"non-finite sample value: {payload[:80]!r}")


class RecordStream:
    """Feeds console lines in order; checks sequence numbers so a lost record is noticed."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.rejected: list[str] = []
        self.ended = False
        self.expected_seq = 0
        self._seen: set[int] = set()

    def feed(self, line: str) -> Record | None:
        try:
            record = parse(line)
        except RecordError as exc:
            self.rejected.append(str(exc))
            return None
        if record is None:
            return None
        if record.seq in self._seen:
            # A console that repeats a line (a replayed log, a retransmission) must not
            # count a measurement twice: the copy is dropped, and the run says so.
            self.rejected.append(f"record seq {record.seq} arrived twice; the copy was dropped")
            return None
        self._seen.add(record.seq)
        if record.seq != self.expected_seq:
            self.rejected.append(f"record seq {record.seq} arrived, expected {self.expected_seq}")
        self.expected_seq = max(self.expected_seq, record.seq + 1)
        self.records.append(record)
        if record.type == "end":
            self.ended = True
            announced = int(record.fields.get("records", -1))
            if announced != len(self.records) - 1:
                self.rejected.append(f"agent sent {announced} records, {len(self.records) - 1} arrived intact")
        return record

    @property
    def complete(self) -> bool:
        return self.ended and not self.rejected
