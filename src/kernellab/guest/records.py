"""The agent's framed, checksummed result lines.

    @KL seq=3 t=sample metric=syscall.null unit=ns rep=0 iters=4096 value=123.456 #1a2b3c4d

The CRC-32 covers the payload exactly as printed. A line whose checksum or framing does
not check out is damaged (RecordError): on a serial console, kernel messages and line
noise can land in the middle of a record, and it is rejected, never turned into a number.

A record whose checksum fits but whose content no kernellab agent sends (a count past
what the agent can print, a metric the catalog does not list, a unit other than the
catalog's) is not line noise: it comes from another agent or a forged console, and is
refused as a whole (InvalidRecord, a LabError): such a run or LAVA log is not stored.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

from ..errors import LabError
from ..metrics.catalog import catalog

FRAME = re.compile(r"@KL (?P<payload>[ -~]*?) #(?P<crc>[0-9a-f]{8})\s*$")
_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*=[!-~]*$")
# The agent formats a record into 512 bytes (agent/record.c), its NUL included.
MAX_PAYLOAD = 511
# seq, rep, iters, records: the agent's unsigned long, 32 bits on its 32-bit targets.
MAX_COUNT = 2**32 - 1
_COUNT = re.compile(r"[0-9]{1,10}")
# What the agent's %.3f and %llu print, and Python's repr in the host's fixtures.
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?")
_TYPE = re.compile(r"[a-z]+(?:_[a-z]+)*")   # wl_begin: agent/workload.c
# /proc/meminfo's fields, as the agent sends them whole (agent/main.c: report_meminfo):
# named by the kernel, so the catalog lists only those the reports show.
_MEMINFO = re.compile(r"meminfo\.[A-Za-z0-9_.+/,-]+")
_MEMINFO_UNITS = ("KiB", "count")
# The profiler's records (agent/profile.c), field sets as it prints them.
_PROF_FIELDS = ({"step", "buckets"}, {"b"}, {"done", "hits"})
_PROF_PAIRS = re.compile(r"[0-9]{1,10}:[0-9]{1,10}(?:,[0-9]{1,10}:[0-9]{1,10})*")


@dataclass(frozen=True)
class Record:
    seq: int
    type: str
    fields: dict[str, str]


class RecordError(ValueError):
    """A line that looked like a record but arrived damaged (framing, checksum)."""


class InvalidRecord(LabError):
    """An intact record (its checksum fits) that no kernellab agent sends."""

    def __init__(self, problem: str, payload: str) -> None:
        super().__init__(f"agent record refused, {problem}: {payload[:100]!r}; a kernellab agent never sends "
                         "it: the console is not this kernellab's agent's (or was forged)")


def frame(payload: str) -> str:
    """The line the agent prints for a payload (the host uses it for tests and fixtures)."""
    return f"@KL {payload} #{zlib.crc32(payload.encode()):08x}"


def parse(line: str) -> Record | None:
    """None for ordinary console lines; RecordError for a damaged record, InvalidRecord for
    an intact one whose content is out of bounds."""
    start = line.find("@KL ")
    if start < 0:
        return None
    m = FRAME.match(line[start:])
    if not m:
        raise RecordError(f"truncated or malformed record: {line.strip()[:80]!r}")
    payload = m.group("payload")
    if zlib.crc32(payload.encode()) != int(m.group("crc"), 16):
        raise RecordError(f"checksum mismatch: {line.strip()[:80]!r}")
    if len(payload) > MAX_PAYLOAD:
        raise InvalidRecord(f"{len(payload)} characters long (the agent's are at most {MAX_PAYLOAD})", payload)
    fields = _fields(payload)
    if "seq" not in fields or "t" not in fields:
        raise InvalidRecord("without seq or t", payload)
    seq = count(fields.pop("seq"), "seq", payload)
    kind = fields.pop("t")
    if not _TYPE.fullmatch(kind):
        raise InvalidRecord(f"type t={kind}", payload)
    _check(kind, fields, payload)
    return Record(seq, kind, fields)


def _fields(payload: str) -> dict[str, str]:
    tokens = payload.split(" ")
    if not all(_TOKEN.match(t) for t in tokens):
        raise InvalidRecord("malformed field", payload)
    pairs = [t.split("=", 1) for t in tokens]
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise InvalidRecord("a field given twice", payload)
    return fields


def count(text: str, name: str, payload: str) -> int:
    """A record's count (seq, rep, iters, records): digits only, within the agent's range."""
    if not _COUNT.fullmatch(text) or int(text) > MAX_COUNT:
        raise InvalidRecord(f"{name}={text[:30]} is not a count from 0 to {MAX_COUNT}", payload)
    return int(text)


def _check(kind: str, fields: dict[str, str], payload: str) -> None:
    """Each record type's fields, as the agent prints them: what the session and the
    profiler read from a record is then known to be there and in range."""
    if kind == "sample":
        _check_sample(fields, payload)
    elif kind == "end":
        count(fields.get("records", ""), "records", payload)
    elif kind == "na" and "metric" not in fields:
        raise InvalidRecord("not-available record without a metric", payload)
    elif kind == "meta" and "key" not in fields:
        raise InvalidRecord("meta record without a key", payload)
    elif kind == "prof":
        _check_prof(fields, payload)
    elif kind in _WORKLOAD_FIELDS:
        _check_workload(kind, fields, payload)


def _check_sample(fields: dict[str, str], payload: str) -> None:
    missing = [k for k in ("metric", "unit", "rep", "iters", "value") if k not in fields]
    if missing:
        raise InvalidRecord(f"sample record missing {'/'.join(missing)}", payload)
    count(fields["rep"], "rep", payload)
    count(fields["iters"], "iters", payload)
    text = fields["value"]
    if not _NUMBER.fullmatch(text):
        raise InvalidRecord(f"value={text[:30]} is not a number", payload)
    if not math.isfinite(float(text)):
        raise InvalidRecord(f"non-finite sample value {text[:30]}", payload)
    _check_metric(fields["metric"], fields["unit"], payload)


def _check_metric(metric: str, unit: str, payload: str) -> None:
    """The catalog's metrics in the catalog's units; /proc/meminfo's fields in KiB or as counts."""
    known = catalog().get(metric)
    if known is not None and known.source == "agent":
        if unit != known.unit:
            raise InvalidRecord(f"metric {metric} in {unit}, the catalog's unit is {known.unit}", payload)
    elif _MEMINFO.fullmatch(metric):
        if unit not in _MEMINFO_UNITS:
            raise InvalidRecord(f"metric {metric} in {unit}, /proc/meminfo's are in KiB or counts", payload)
    else:
        raise InvalidRecord(f"metric {metric} is not one the agent measures (see the metric catalog, "
                            "kernellab/metrics/metrics.toml)", payload)


# The workloads' records (agent/workload.c), field sets as it prints them.
_WORKLOAD_FIELDS = {"wl_begin": {"w", "name"}, "wl_out": {"w", "data"}, "wl_srv": {"w", "data"},
                    "wl_ready": {"w"}, "wl_end": {"w", "status", "code", "elapsed_ns"}}
_WORKLOAD_STATUS = re.compile(r"ok|exit|signal|timeout|exec_failed|setup_failed|no_disk|no_link|too_small"
                              r"|server_(?:exec_failed|port_busy|failed|not_ready|died)")
# The statuses of a workload the agent did not run, which say why (agent/workload.c: not_run).
_NOT_RUN = ("no_disk", "no_link", "too_small")
_REASON = re.compile(r"[A-Za-z0-9._+,/-]{1,95}")   # the agent's sanitize(), in its 96 bytes
_ESCAPED = re.compile(r"(?:[!-$&-~]|%[0-9A-F]{2})+")    # a piece of output, %XX outside '!'..'~'


def _check_workload(kind: str, fields: dict[str, str], payload: str) -> None:
    # A workload not run for want of a disk, a network device, CPUs or memory says why (agent/workload.c: not_run).
    expected = _WORKLOAD_FIELDS[kind] | ({"reason"} if kind == "wl_end" and fields.get("status") in _NOT_RUN
                                         else set())
    if set(fields) != expected:
        raise InvalidRecord(f"{kind} record with fields other than {'/'.join(sorted(expected))}", payload)
    count(fields["w"], "w", payload)
    if kind in ("wl_out", "wl_srv") and not _ESCAPED.fullmatch(fields["data"]):
        raise InvalidRecord(f"{kind} record whose data is not escaped output", payload)
    if kind == "wl_end":
        if not _WORKLOAD_STATUS.fullmatch(fields["status"]):
            raise InvalidRecord(f"wl_end record with status {fields['status'][:30]}", payload)
        count(fields["code"], "code", payload)
        if not re.fullmatch(r"[0-9]{1,20}", fields["elapsed_ns"]):
            raise InvalidRecord("wl_end record whose elapsed_ns is not a count", payload)
        if "reason" in expected and not _REASON.fullmatch(fields["reason"]):
            raise InvalidRecord("wl_end record whose reason is not a word of the agent's", payload)


def _check_prof(fields: dict[str, str], payload: str) -> None:
    if set(fields) not in _PROF_FIELDS:
        raise InvalidRecord("profile record with fields other than step/buckets, b or done/hits", payload)
    if "b" in fields and not _PROF_PAIRS.fullmatch(fields["b"]):
        raise InvalidRecord("profile record whose b= is not INDEX:COUNT pairs", payload)
    for name in ("step", "buckets", "hits"):
        if name in fields:
            count(fields[name], name, payload)


class RecordStream:
    """Feeds console lines in order; checks sequence numbers so a lost record is noticed.
    A damaged record is rejected and noted; an invalid one (InvalidRecord) is raised."""

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
            announced = int(record.fields["records"])
            if announced != len(self.records) - 1:
                self.rejected.append(f"agent sent {announced} records, {len(self.records) - 1} arrived intact")
        return record

    @property
    def complete(self) -> bool:
        return self.ended and not self.rejected
