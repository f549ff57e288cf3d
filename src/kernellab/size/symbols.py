"""The symbol view of two kernels, as the kernel's own scripts/bloat-o-meter (Linux 6.12)
computes it from `nm --size-sort`, read here with pyelftools: the same symbols, the same
type letters, the same filtering and the same totals (a test checks it against the script).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.constants import SH_FLAGS
from elftools.elf.sections import SymbolTableSection

from ..elfsize import elf_file

# bloat-o-meter -c: its three tables, by nm's type letters (weak ones counted since 6.12).
SECTIONS = {"code": "tTwW", "data": "dDbBvV", "rodata": "rR"}
ALL = "".join(SECTIONS.values())

# Generated symbols whose size says nothing of the code (bloat-o-meter's list), and the
# .NUMBER suffixes GCC gives statics and clones.
_SKIP_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
_SKIP_NAMES = ("linux_banner", "vermagic")
_NUMBER = re.compile(r"\.[0-9]+")


def nm_letter(sym: Any, sections: list[Any]) -> str | None:
    """nm's type letter for an ELF symbol (None: nm does not list it)."""
    entry = sym.entry
    kind, bind, shndx = entry["st_info"]["type"], entry["st_info"]["bind"], entry["st_shndx"]
    if kind in ("STT_SECTION", "STT_FILE") or not sym.name:
        return None
    if shndx == "SHN_UNDEF":
        return None            # no size, and --size-sort leaves it out
    if shndx == "SHN_ABS":
        letter = "a"
    elif shndx == "SHN_COMMON":
        return "C"
    elif kind == "STT_GNU_IFUNC":
        return "i"
    elif bind == "STB_WEAK":
        return "V" if kind == "STT_OBJECT" else "W"
    elif bind == "STB_GNU_UNIQUE":
        return "u"
    else:
        section = sections[shndx]
        flags = section["sh_flags"]
        if flags & SH_FLAGS.SHF_EXECINSTR:
            letter = "t"
        elif section["sh_type"] == "SHT_NOBITS":
            letter = "b"
        elif not flags & SH_FLAGS.SHF_ALLOC:
            letter = "n"
        elif flags & SH_FLAGS.SHF_WRITE:
            letter = "d"
        else:
            letter = "r"
    return letter.upper() if bind == "STB_GLOBAL" else letter


@functools.lru_cache(maxsize=8)
def _table(path: Path, stamp: tuple[int, int]) -> tuple[tuple[str, str, int], ...]:
    """(name, nm letter, size) of every symbol nm --size-sort lists: one read per file."""
    rows = []
    with elf_file(path) as elf:
        sections = list(elf.iter_sections())
        for table in sections:
            if not isinstance(table, SymbolTableSection) or table.name != ".symtab":
                continue
            for sym in table.iter_symbols():
                size = sym["st_size"]
                letter = nm_letter(sym, sections) if size else None
                if letter is not None:
                    rows.append((sym.name, letter, size))
    return tuple(rows)


def sizes(path: Path, letters: str = ALL) -> dict[str, int]:
    """name -> bytes, summed over the symbols of that name, as bloat-o-meter's getsizes()."""
    st = path.stat()
    out: dict[str, int] = {}
    for name, letter, size in _table(path, (st.st_size, st.st_mtime_ns)):
        if letter not in letters or name.startswith(_SKIP_PREFIXES) or name in _SKIP_NAMES:
            continue
        name = _NUMBER.sub("", name)
        out[name] = out.get(name, 0) + size
    return out


@dataclass(frozen=True)
class Change:
    name: str
    old: int | None        # None: not in the old kernel (added)
    new: int | None        # None: not in the new kernel (removed)

    @property
    def delta(self) -> int:
        return (self.new or 0) - (self.old or 0)

    @property
    def kind(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        return "grown" if self.delta > 0 else "shrunk" if self.delta < 0 else "same"


@dataclass(frozen=True)
class Bloat:
    """One of bloat-o-meter's tables: its counts, up/down, totals and rows (largest delta first)."""
    section: str
    added: int
    removed: int
    grown: int
    shrunk: int
    up: int
    down: int
    before: int
    after: int
    changes: list[Change]

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        rows = [c for c in self.changes if c.delta]
        return {"section": self.section, "added": self.added, "removed": self.removed, "grown": self.grown,
                "shrunk": self.shrunk, "up": self.up, "down": self.down, "before": self.before,
                "after": self.after,
                "symbols": [{"name": c.name, "old": c.old, "new": c.new, "delta": c.delta, "change": c.kind}
                            for c in (rows if top is None else _largest(rows, top))]}


def _largest(rows: list[Change], top: int) -> list[Change]:
    return sorted(rows, key=lambda c: -abs(c.delta))[:top]


def bloat(old_path: Path, new_path: Path, section: str = "all") -> Bloat:
    letters = ALL if section == "all" else SECTIONS[section]
    old, new = sizes(old_path, letters), sizes(new_path, letters)
    changes = [Change(n, old[n], new.get(n)) for n in old] + [Change(n, None, new[n]) for n in new if n not in old]
    up = sum(c.delta for c in changes if c.delta > 0)
    down = -sum(c.delta for c in changes if c.delta < 0)
    # bloat-o-meter's order: by delta, then by name, both descending.
    changes.sort(key=lambda c: (c.delta, c.name), reverse=True)
    kinds = [c.kind for c in changes]
    return Bloat(section, added=kinds.count("added"), removed=kinds.count("removed"), grown=kinds.count("grown"),
                 shrunk=kinds.count("shrunk"), up=up, down=down, before=sum(old.values()), after=sum(new.values()),
                 changes=changes)


def as_bloat_o_meter(b: Bloat, title: str) -> str:
    """The table as scripts/bloat-o-meter prints it, line for line."""
    lines = [f"add/remove: {b.added}/{b.removed} grow/shrink: {b.grown}/{b.shrunk} up/down: {b.up}/{-b.down} "
             f"({b.up - b.down})",
             f"{title:<40} {'old':>7} {'new':>7} {'delta':>7}"]
    for c in b.changes:
        if c.delta:
            old, new = ("-" if v is None else str(v) for v in (c.old, c.new))
            lines.append(f"{c.name:<40} {old:>7} {new:>7} {c.delta:+7d}")
    percent = (b.after - b.before) * 100.0 / b.before if b.before else 0
    lines.append(f"Total: Before={b.before}, After={b.after}, chg {percent:+.2f}%")
    return "\n".join(lines) + "\n"


# bloat-o-meter -c: its titles for the three tables.
TITLES = {"code": "Function", "data": "Data", "rodata": "RO Data", "all": "Function"}
