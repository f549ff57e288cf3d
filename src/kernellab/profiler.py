"""Where the kernel's time goes while a metric runs: the kernel's own tick profiler.

A kernel built with CONFIG_PROFILING and booted with `profile=2` counts, at every timer
tick, the 4-byte bucket of kernel text it interrupted; the agent (KL_PROFILE=1) clears
the counters before the suite and sends the nonzero ones after it (agent/profile.c).
Here the buckets become functions, by the vmlinux symbol table, and two kernels' shares
of each function are set side by side. Options name the cause; functions show the
mechanism. In icount mode the ticks fall at the same instructions on every rerun, so a
profile is as repeatable as the metric; it is a sample of where ticks landed, so a
function's share is known to about 1/sqrt(its hits).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.sections import SymbolTableSection

from .elfsize import elf_file
from .errors import LabError
from .guest.records import RecordStream

SHIFT = 2                # profile=2: one counter per 4 bytes of text
TEXT_START = "_stext"    # the profiler counts from here (kernel/profile.c)


@dataclass(frozen=True)
class Profile:
    step: int                 # bytes of text per counter
    buckets: dict[int, int]   # counter index -> ticks
    hits: int

    @classmethod
    def from_console(cls, console: str, origin: str) -> Profile:
        """The t=prof records of a run's console log (checked as every record is)."""
        stream = RecordStream()
        for line in console.splitlines():
            stream.feed(line)
        records = [r for r in stream.records if r.type == "prof"]
        na = [r for r in stream.records if r.type == "na" and r.fields.get("metric") == "profile"]
        if na:
            raise LabError(f"{origin}: the agent could not read the profiler ({na[0].fields.get('reason')}): "
                           "is the kernel built with CONFIG_PROFILING and booted with profile=?")
        if not records or "done" not in records[-1].fields:
            raise LabError(f"{origin}: no complete profile in the console log (see `kernellab log`)")
        step = int(records[0].fields["step"])
        buckets: dict[int, int] = {}
        for r in records[1:-1]:
            for pair in r.fields["b"].split(","):
                index, count = pair.split(":")
                buckets[int(index)] = int(count)
        hits = int(records[-1].fields["hits"])
        if sum(buckets.values()) != hits or stream.rejected:
            raise LabError(f"{origin}: the profile arrived damaged ({stream.rejected[:1] or 'hits do not add up'})")
        return cls(step, buckets, hits)


class TextSymbols:
    """The vmlinux symbols in executable sections, by address."""

    def __init__(self, vmlinux: Path) -> None:
        rows: list[tuple[int, str]] = []
        start = None
        with elf_file(vmlinux) as elf:
            executable = {i for i, s in enumerate(elf.iter_sections()) if s["sh_flags"] & 0x4}   # SHF_EXECINSTR
            for section in elf.iter_sections():
                if not isinstance(section, SymbolTableSection):
                    continue
                for sym in section.iter_symbols():
                    if sym.name == TEXT_START:
                        start = sym["st_value"]
                    shndx = sym["st_shndx"]
                    if (isinstance(shndx, int) and shndx in executable and sym.name
                            and not sym.name.startswith((".L", "$")) and sym["st_info"]["type"] != "STT_SECTION"):
                        rows.append((sym["st_value"], sym.name))
        if start is None:
            raise LabError(f"{vmlinux}: no {TEXT_START} symbol: not a kernel image with its symbol table")
        rows.sort()
        self.start = start
        self.addresses = [a for a, _ in rows]
        self.names = [n for _, n in rows]

    def function(self, address: int) -> str:
        i = bisect.bisect_right(self.addresses, address) - 1
        return self.names[i] if i >= 0 else "(before the first symbol)"


def functions(profile: Profile, symbols: TextSymbols) -> Counter[str]:
    """Ticks per function."""
    out: Counter[str] = Counter()
    for index, count in profile.buckets.items():
        out[symbols.function(symbols.start + index * profile.step)] += count
    return out


@dataclass(frozen=True)
class Change:
    function: str
    a_hits: int
    b_hits: int
    a_share: float    # of all ticks, percent
    b_share: float

    @property
    def delta(self) -> float:
        return self.b_share - self.a_share


def changes(a: Counter[str], b: Counter[str], top: int = 20) -> list[Change]:
    """The functions whose share of the ticks changed most from A to B."""
    ta, tb = sum(a.values()) or 1, sum(b.values()) or 1
    rows = [Change(f, a[f], b[f], 100 * a[f] / ta, 100 * b[f] / tb) for f in set(a) | set(b)]
    rows.sort(key=lambda c: (-abs(c.delta), c.function))
    return rows[:top]


def text(names: tuple[str, str], totals: tuple[int, int], rows: list[Change], how: str) -> str:
    a, b = names
    lines = [f"where the kernel's time went, {a} against {b}: {how}",
             f"ticks: {a} {totals[0]}, {b} {totals[1]}; a share is known to about +-100/sqrt(hits) % of itself",
             f"{'function':<40} {a + ' %':>10} {b + ' %':>10} {'change':>8}  hits ({a}/{b})"]
    for c in rows:
        lines.append(f"{c.function[:40]:<40} {c.a_share:>10.2f} {c.b_share:>10.2f} {c.delta:>+8.2f}  "
                     f"{c.a_hits}/{c.b_hits}")
    return "\n".join(lines) + "\n"

