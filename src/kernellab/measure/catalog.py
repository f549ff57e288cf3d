"""The metric catalog (metrics.toml) as data the reports and statistics read."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

# Table sections, in the order a report shows them.
GROUPS = ("build", "size", "boot", "initcalls", "memory", "syscalls", "processes", "ipc",
          "filesystem", "memory-runtime", "crypto", "timer", "block", "other")
MODES = ("icount", "wall")


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    better: str   # "lower" | "higher"
    group: str
    clock: str    # build | host | guest | count
    modes: tuple[str, ...] = MODES
    needs: tuple[str, ...] = field(default_factory=tuple)

    def valid_in(self, mode: str) -> bool:
        return mode in self.modes


@cache
def catalog() -> dict[str, Metric]:
    data = tomllib.loads((resources.files(__package__) / "metrics.toml").read_text())
    metrics = {}
    for m in data["metric"]:
        m["modes"] = tuple(m.get("modes", MODES))
        m["needs"] = tuple(m.get("needs", ()))
        metrics[m["name"]] = Metric(**m)
    return metrics


def describe(name: str, unit: str) -> Metric:
    """The catalog entry, or a plain one for a metric the catalog does not list."""
    known = catalog().get(name)
    if known:
        return known
    if name.startswith("boot.initcall."):
        return Metric(name, f"initcall {name.removeprefix('boot.initcall.')}", unit, "lower",
                      "initcalls", "guest")
    group = "memory" if name.startswith("meminfo.") else "other"
    return Metric(name, name, unit, "lower", group, "count" if group == "memory" else "guest")


def sort_key(name: str, unit: str = "") -> tuple[int, int, str]:
    """Group order first, then catalog order, then name."""
    order = list(catalog())
    m = describe(name, unit)
    position = order.index(name) if name in order else len(order)
    return GROUPS.index(m.group) if m.group in GROUPS else len(GROUPS), position, name
