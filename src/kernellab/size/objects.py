"""What each object linked into vmlinux contributes to its text, data and bss, recorded
when a variant is built (the shared build tree keeps only the last build's objects), and
summed by directory.

The objects are the members of kbuild's thin archives: vmlinux.a (every built-in object,
linked whole) and the lib.a libraries (linked member by member, only where vmlinux uses a
symbol the member defines). Their sizes are what `size` says of each object file; what
the link adds (alignment, linker-generated tables, merged strings) is the difference from
vmlinux's own size, reported as "(link)".
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from elftools.elf.sections import SymbolTableSection

from ..elfsize import berkeley_size, elf_file

RECORD = "objects.json"
LINK = "(link)"
# kbuild's archives, relative to the build tree; vmlinux.a since Linux 6.1.
_WHOLE = "vmlinux.a"
_LIBRARIES = ("lib/lib.a", "arch/*/lib/lib.a")


def members(tree: Path, archive: str) -> list[str]:
    """A thin archive's member paths, relative to the build tree (ar prints them relative
    to where it runs)."""
    done = subprocess.run(["ar", "t", archive], cwd=tree, capture_output=True, text=True, check=True)
    return done.stdout.split()


def _defined(path: Path) -> set[str]:
    """The global symbols an object defines."""
    with elf_file(path) as elf:
        table = elf.get_section_by_name(".symtab")
        if not isinstance(table, SymbolTableSection):
            return set()
        return {s.name for s in table.iter_symbols()
                if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK") and s.name}


def _linked_symbols(vmlinux: Path) -> set[str]:
    with elf_file(vmlinux) as elf:
        table = elf.get_section_by_name(".symtab")
        return {s.name for s in table.iter_symbols()} if isinstance(table, SymbolTableSection) else set()


def linked_objects(tree: Path, vmlinux: Path) -> list[str]:
    """The objects of the tree's last build that are in vmlinux."""
    if not (tree / _WHOLE).exists():
        return []
    objects = members(tree, _WHOLE)
    in_vmlinux = _linked_symbols(vmlinux)
    for pattern in _LIBRARIES:
        for library in sorted(tree.glob(pattern)):
            objects += [m for m in members(tree, str(library.relative_to(tree))) if _defined(tree / m) & in_vmlinux]
    return objects


def record(tree: Path, vmlinux: Path, out: Path) -> bool:
    """Writes the per-object sizes of the build in `tree` to `out`; False when the tree has
    no vmlinux.a (a kernel before 6.1), and nothing is written."""
    objects = linked_objects(tree, vmlinux)
    if not objects:
        return False
    sizes = {o: berkeley_size(tree / o) for o in objects}
    data = {"vmlinux": berkeley_size(vmlinux),
            "objects": {o: [s["text"], s["data"], s["bss"]] for o, s in sizes.items()}}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    tmp.replace(out)
    return True


def load(artifacts: Path) -> dict[str, Any] | None:
    path = artifacts / RECORD
    return json.loads(path.read_text()) if path.exists() else None


def directory(path: str, depth: int) -> str:
    """`kernel/sched/core.o` -> `kernel` (depth 1) or `kernel/sched` (depth 2); arch/ counts
    its arch as part of the top level (`arch/x86`, then `arch/x86/kernel`)."""
    parts = path.split("/")[:-1]
    if parts[:1] == ["arch"]:
        depth += 1
    return "/".join(parts[:depth]) or "."


def by_directory(recorded: dict[str, Any], depth: int) -> dict[str, list[int]]:
    """dir -> [text, data, bss], and what the link adds as LINK."""
    dirs: dict[str, list[int]] = {}
    for path, sizes in recorded["objects"].items():
        acc = dirs.setdefault(directory(path, depth), [0, 0, 0])
        for i, v in enumerate(sizes):
            acc[i] += v
    total = recorded["vmlinux"]
    summed = [sum(v[i] for v in dirs.values()) for i in range(3)]
    dirs[LINK] = [total["text"] - summed[0], total["data"] - summed[1], total["bss"] - summed[2]]
    return dirs


def changes(old: dict[str, list[int]], new: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Per directory: each side's [text, data, bss] and the change of their sum, largest first."""
    rows = []
    for d in dict.fromkeys([*old, *new]):
        a, b = old.get(d, [0, 0, 0]), new.get(d, [0, 0, 0])
        rows.append({"dir": d, "old": a, "new": b, "delta": sum(b) - sum(a)})
    return sorted(rows, key=lambda r: -abs(r["delta"]))
