"""Console streams as a serial line delivers them: kernel messages between and inside the
agent's records, line noise, records cut short, repeated, reordered, with wrong checksums.
Whatever arrives, the session must never produce a number the agent did not send, and
must store each record at most once."""

import random
import string
import time

import pytest

from faults.lanes import counts
from kernellab.guest.records import frame
from kernellab.guest.session import Session
from kernellab.store import Store
from labfakes import BOOT, FakeConsole, ListSink

STREAMS = 100_000   # the full command's; the fast lane tries the first FAST_LANE of them
FAST_LANE = 2_000
KERNEL_NOISE = ["[    1.234567] random: crng init done", "[    2.000001] clocksource: Switched to clocksource tsc",
                "[    0.500000] virtio_blk virtio1: [vda] 65536 512-byte logical blocks",
                "[    3.141592] audit: type=1400 audit(1.2:3): apparmor=\"STATUS\""]
PRINTABLE = string.printable.replace("\n", "").replace("\r", "")


def agent_records(rng: random.Random) -> tuple[list[str], set[tuple[int, str, int, float]]]:
    """What one agent run sends: its lines, and the samples in them (seq, metric, rep, value)."""
    payloads = ["t=hello v=1 agent=kernellab-agent mode=pid1", "t=meta key=clocksource value=tsc"]
    for metric in rng.sample(["syscall.null", "syscall.read", "ipc.pipe_rtt", "proc.fork_exit"], rng.randint(1, 3)):
        payloads += [f"t=sample metric={metric} unit=ns rep={rep} iters=1024 value={rng.uniform(50, 90000):.3f}"
                     for rep in range(rng.randint(1, 5))]
    sent = set()
    lines = []
    for seq, p in enumerate(payloads):
        lines.append(frame(f"seq={seq} {p}"))
        if "t=sample" in p:
            f = dict(t.split("=", 1) for t in p.split(" "))
            sent.add((seq, f["metric"], int(f["rep"]), float(f["value"])))
    lines.append(frame(f"seq={len(payloads)} t=end records={len(payloads)}"))
    return lines, sent


def garble(rng: random.Random, lines: list[str]) -> list[str]:
    """One of the ways a console mangles what the agent printed, or several."""
    out = list(lines)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        i = rng.randrange(len(out))
        kind = rng.randrange(8)
        if kind == 0:      # a kernel message between records
            out.insert(i, rng.choice(KERNEL_NOISE))
        elif kind == 1:    # a kernel message inside a record
            cut = rng.randrange(len(out[i]) + 1)
            out[i] = out[i][:cut] + rng.choice(KERNEL_NOISE) + out[i][cut:]
        elif kind == 2:    # cut short
            out[i] = out[i][:rng.randrange(len(out[i]) + 1)]
        elif kind == 3:    # repeated
            out.insert(i, out[i])
        elif kind == 4:    # reordered
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        elif kind == 5 and out[i]:    # one character changed: the checksum no longer holds
            pos = rng.randrange(len(out[i]))
            out[i] = out[i][:pos] + rng.choice(PRINTABLE) + out[i][pos + 1:]
        elif kind == 6:    # line noise, sometimes dressed as a record
            noise = "".join(rng.choice(PRINTABLE) for _ in range(rng.randint(1, 120)))
            out.insert(i, f"@KL {noise} #{rng.getrandbits(32):08x}" if rng.random() < 0.5 else noise)
        elif kind == 7:    # a record lost
            del out[i]
    return out


@pytest.mark.parametrize("streams", counts(FAST_LANE, STREAMS))
def test_no_stream_yields_a_number_the_agent_did_not_send_nor_a_record_twice(streams):
    rng = random.Random(20261125)
    start = time.monotonic()
    damaged = stored = 0
    for _ in range(streams):
        lines, sent = agent_records(rng)
        sink = ListSink()
        result = Session(sink).read(FakeConsole(BOOT + garble(rng, lines)))
        got = [(s.seq, s.metric, s.rep, s.value) for s in sink.samples if s.seq is not None]
        assert set(got) <= sent, (set(got) - sent, lines)
        assert len({s[0] for s in got}) == len(got)        # each record number once
        damaged += result.status != "ok"
        stored += len(got)
    # The figures of docs/store.md's "What kernellab survives".
    print(f"{streams} streams, {damaged} not ok, {stored} samples kept, {time.monotonic() - start:.0f} s")
    assert damaged > streams // 2    # the garbling did reach the session


def test_a_record_the_console_repeats_is_stored_once(tmp_path):
    lines, sent = agent_records(random.Random(1))
    sample_line = next(line for line in lines if "t=sample" in line)
    sink = ListSink()
    result = Session(sink).read(FakeConsole(BOOT + [*lines[:3], sample_line, *lines[3:]]))
    seqs = [s.seq for s in sink.samples if s.seq is not None]
    assert len(seqs) == len(set(seqs)) == len(sent)
    assert result.status == "damaged" and "arrived twice; the copy was dropped" in result.reason
    # And the store keeps one row per (run, record number), whoever asks it twice.
    store = Store(tmp_path / "s.sqlite")
    for _ in range(2):
        store.add_sample(7, "syscall.null", "ns", 0, 1024, 200.0, seq=3)
    assert store.db.execute("SELECT count(*) FROM samples WHERE run_id = 7").fetchone()[0] == 1
