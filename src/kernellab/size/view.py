"""Two kernels' sizes side by side: the bloat-o-meter tables of their symbols and what each
directory's objects weigh, as data (a compare report's "size" section, `kernellab size`'s
JSON) and as text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..elfsize import berkeley_size
from . import objects, symbols

TOP = 15


@dataclass(frozen=True)
class Kernel:
    name: str
    vmlinux: Path
    recorded: dict[str, Any] | None    # objects.json, when the build recorded it


def kernel(name: str, artifacts: Path) -> Kernel:
    return Kernel(name, artifacts / "vmlinux", objects.load(artifacts))


def _dirs(k: Kernel, depth: int) -> dict[str, list[int]]:
    return objects.by_directory(k.recorded, depth) if k.recorded else {}


def _rows(dirs: dict[str, list[int]]) -> list[dict[str, Any]]:
    return [{"dir": d, "text": v[0], "data": v[1], "bss": v[2]}
            for d, v in sorted(dirs.items(), key=lambda kv: -sum(kv[1]))]


def compare(kernels: Sequence[Kernel], top: int = TOP) -> dict[str, Any]:
    """The first kernel against each other one."""
    base, others = kernels[0], kernels[1:]
    out: dict[str, Any] = {
        "baseline": base.name,
        "how": "symbols: vmlinux symbol tables as scripts/bloat-o-meter -c reads them (nm --size-sort); "
               "directories: each object's text/data/bss as size(1) counts it, recorded at build time; "
               f"{objects.LINK} is what the link adds (alignment, e.g. x86_64's 2 MiB text alignment, "
               "and linker-generated tables)",
        "variants": {}, "changes": {}}
    for k in kernels:
        out["variants"][k.name] = {"vmlinux": berkeley_size(k.vmlinux), "objects_recorded": k.recorded is not None,
                                   "by_dir": _rows(_dirs(k, 1)), "by_subdir": _rows(_dirs(k, 2))[:top * 2]}
    for k in others:
        tables = {s: symbols.bloat(base.vmlinux, k.vmlinux, s) for s in symbols.SECTIONS}
        moved = [dict(row, section=s) for s, t in tables.items() for row in t.to_dict()["symbols"]]
        # Directories compare only where both builds recorded their objects: a side without
        # them is unknown, not empty.
        both = base.recorded is not None and k.recorded is not None
        out["changes"][k.name] = {
            "sections": {s: {key: v for key, v in t.to_dict().items() if key != "symbols"} for s, t in tables.items()},
            "symbols": sorted(moved, key=lambda r: -abs(r["delta"]))[:top],
            "dirs": objects.changes(_dirs(base, 1), _dirs(k, 1))[:top] if both else [],
            "subdirs": objects.changes(_dirs(base, 2), _dirs(k, 2))[:top] if both else [],
        }
    return out


def text(size: dict[str, Any]) -> str:
    base = size["baseline"]
    lines = [f"size: {', '.join(size['changes'])} against {base}", f"how: {size['how']}"]
    for name, v in size["variants"].items():
        b = v["vmlinux"]
        lines.append(f"{name}: vmlinux text {b['text']:,} data {b['data']:,} bss {b['bss']:,} bytes"
                     + ("" if v["objects_recorded"] else " (objects not recorded: built before kernellab "
                                                         "recorded them; rebuild to see directories)"))
    for name, c in size["changes"].items():
        lines.append(f"\n{name} against {base}, symbols (bytes):")
        lines.append(f"  {'section':<8} {'added':>6} {'removed':>7} {'grown':>6} {'shrunk':>6} "
                     f"{'before':>11} {'after':>11} {'change':>10}")
        for s, t in c["sections"].items():
            lines.append(f"  {s:<8} {t['added']:>6} {t['removed']:>7} {t['grown']:>6} {t['shrunk']:>6} "
                         f"{t['before']:>11,} {t['after']:>11,} {t['after'] - t['before']:>+10,}")
        if c["dirs"]:
            lines.append(f"{name} against {base}, by directory (text+data+bss, bytes):")
            for rows in (c["dirs"], c["subdirs"]):
                for r in rows:
                    if r["delta"]:
                        lines.append(f"  {r['dir']:<28} {sum(r['old']):>11,} {sum(r['new']):>11,} {r['delta']:>+10,}")
                lines.append("")
        lines.append(f"{name} against {base}, the symbols that changed most (bytes):")
        for r in c["symbols"]:
            old = "-" if r["old"] is None else f"{r['old']:,}"
            new = "-" if r["new"] is None else f"{r['new']:,}"
            lines.append(f"  {r['name']:<40} {r['section']:<7} {old:>9} {new:>9} {r['delta']:>+9,} {r['change']}")
    return "\n".join(lines) + "\n"
