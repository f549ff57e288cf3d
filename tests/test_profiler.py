"""The tick profiler's counters, from the agent's records to functions and their change
of share, on a small ELF the test assembles."""

import re
import subprocess
from collections import Counter

import pytest

from kernellab import profiler
from kernellab.errors import LabError
from kernellab.guest.records import frame

# _stext, then three functions of 16, 32 and 16 bytes: buckets of 4 bytes are 0-3 in
# fast_path, 4-11 in slow_path, 12-15 in helper.
ASM = """
    .text
    .globl _stext
_stext:
    .globl fast_path
    .type fast_path, @function
fast_path:
    .fill 16, 1, 0x90
    .globl slow_path
    .type slow_path, @function
slow_path:
    .fill 32, 1, 0x90
helper:
    .fill 16, 1, 0x90
"""


@pytest.fixture(scope="module")
def symbols(tmp_path_factory):
    d = tmp_path_factory.mktemp("elf")
    (d / "k.S").write_text(ASM)
    subprocess.run(["gcc", "-c", str(d / "k.S"), "-o", str(d / "k.o")], check=True)
    return profiler.TextSymbols(d / "k.o")


def console(step, buckets, per_record=3, hits=None, noise=True):
    """What the agent prints, kernel messages between its records."""
    lines, seq = [], 0

    def emit(payload):
        nonlocal seq
        lines.append(frame(f"seq={seq} {payload}"))
        seq += 1
        if noise:
            lines.append("[    1.234567] random: crng init done")
    emit("t=hello v=1")
    emit(f"t=prof step={step} buckets=16")
    pairs = [f"{i}:{n}" for i, n in sorted(buckets.items())]
    for k in range(0, len(pairs), per_record):
        emit("t=prof b=" + ",".join(pairs[k:k + per_record]))
    emit(f"t=prof done=1 hits={sum(buckets.values()) if hits is None else hits}")
    emit(f"t=end records={seq}")
    return "\n".join(lines) + "\n"


def test_buckets_become_functions(symbols):
    prof = profiler.Profile.from_console(console(4, {0: 5, 3: 1, 4: 2, 11: 7, 12: 3}), "run 1")
    assert (prof.step, prof.hits) == (4, 18)
    assert profiler.functions(prof, symbols) == {"fast_path": 6, "slow_path": 9, "helper": 3}


def test_changes_rank_functions_by_change_of_share():
    a = Counter({"fast_path": 90, "slow_path": 10})
    b = Counter({"fast_path": 60, "slow_path": 30, "helper": 10})
    rows = profiler.changes(a, b, top=2)
    assert [(c.function, round(c.delta, 1)) for c in rows] == [("fast_path", -30.0), ("slow_path", 20.0)]
    assert (rows[1].a_hits, rows[1].b_hits, rows[1].a_share, rows[1].b_share) == (10, 30, 10.0, 30.0)
    table = profiler.text(("a", "b"), (100, 100), rows, "icount mode")
    assert "fast_path" in table and "-30.00" in table and "ticks: a 100, b 100" in table


@pytest.mark.parametrize("text, message", [
    (console(4, {0: 5}, hits=6), "arrived damaged"),
    ("\n".join(console(4, {0: 5}).splitlines()[:-4]), "no complete profile"),
    (frame("seq=0 t=hello v=1") + "\n" + frame("seq=1 t=na metric=profile reason=open_errno_2") + "\n",
     "could not read the profiler (open_errno_2)"),
])
def test_an_incomplete_or_damaged_profile_is_refused(text, message):
    with pytest.raises(LabError, match=re.escape(message)):
        profiler.Profile.from_console(text, "run 7")


def test_a_vmlinux_without_stext_is_refused(tmp_path):
    (tmp_path / "x.S").write_text(".text\nfoo:\n nop\n")
    subprocess.run(["gcc", "-c", str(tmp_path / "x.S"), "-o", str(tmp_path / "x.o")], check=True)
    with pytest.raises(LabError, match="no _stext symbol"):
        profiler.TextSymbols(tmp_path / "x.o")
