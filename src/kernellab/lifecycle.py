"""Each kernel series' support status (lifecycle.toml): what a study says beside the
figures of a version, since which kernel to run is also a question of who maintains it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from . import datafile


@dataclass(frozen=True)
class Series:
    version: str
    kind: Literal["longterm", "stable", "eol"]
    released: str
    projected_eol: str = ""
    note: str = ""


@dataclass(frozen=True)
class _File:
    read: str
    source: str
    series: list[Series]


@cache
def _load() -> _File:
    path = resources.files(__package__) / "lifecycle.toml"
    return datafile.load(_File, datafile.read_toml(path, "lifecycle.toml"), "lifecycle.toml")


def status(version: str) -> str:
    """One line on the series of a kernel version ("6.1.192" -> the 6.1 series)."""
    series = ".".join(version.split("-")[0].split(".")[:2])
    f = _load()
    known = next((s for s in f.series if s.version == series), None)
    if known is None:
        return f"Linux {series}: not in kernellab's lifecycle table (read {f.read} from {f.source})"
    text = f"Linux {series}: {known.kind}, released {known.released}"
    if known.projected_eol:
        text += f", projected end of life {known.projected_eol}"
    text += f" (kernel.org, read {f.read})"
    return text + (f"; {known.note}" if known.note else "")
