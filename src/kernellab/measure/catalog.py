"""The metric catalog (metrics.toml) as data the reports and statistics read."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

GROUPS = ("build", "size", "boot", "memory", "runtime")


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    better: str   # "lower" | "higher"
    group: str
    clock: str    # build | host | guest | count


@cache
def catalog() -> dict[str, Metric]:
    data = tomllib.loads((resources.files(__package__) / "metrics.toml").read_text())
    return {m["name"]: Metric(**m) for m in data["metric"]}


def describe(name: str, unit: str) -> Metric:
    """The catalog entry, or a plain one for a metric the catalog does not list."""
    known = catalog().get(name)
    if known:
        return known
    group = "memory" if name.startswith("meminfo.") else "other"
    return Metric(name, name, unit, "lower", group, "count" if group == "memory" else "guest")
