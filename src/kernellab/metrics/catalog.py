"""The metric catalog (metrics.toml) as data the reports and statistics read, and the
metrics of the workloads a command runs (registered by it: `add_workload_metrics`).

A workload's metrics are described by its file (kernellab.workloads), which this module,
beside it in the layers, does not read: the command that resolves the workloads (compare)
registers their metrics here before anything reads the catalog, so that the tables, the
gate, JSON and HTML treat `fio.read_iops` as they treat `syscall.null`. They are the
command's own: registered within `command_scope`, which the command line opens around
each command, they are gone when it ends (a later command in the same process, a test's
or a library user's, knows only its own workloads' metrics)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from .. import datafile, modes
from ..errors import LabError, did_you_mean

# The groups describe() gives a metric the catalog does not list: the catalog must have them.
_FALLBACK_GROUPS = ("initcalls", "memory", "other")

Source = Literal["agent", "console", "build", "workload"]
# The section a report shows workload metrics in, after the catalog's own.
WORKLOAD_GROUP = "workload"


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    better: Literal["lower", "higher"]
    group: str
    clock: Literal["build", "host", "guest", "count"]
    source: Source
    modes: tuple[str, ...] = modes.NAMES
    needs: tuple[str, ...] = ()
    opt_in: str = ""     # the agent runs it only when asked for this group (KL_WITH): "net"
    icount_max_vcpus: int = 0   # under icount, meaningful with at most this many vCPUs (0: any)

    def __post_init__(self) -> None:
        unknown = [m for m in self.modes if m not in modes.NAMES]
        if unknown:
            raise ValueError(f"metric {self.name}: unknown mode {unknown[0]!r} (modes: {', '.join(modes.NAMES)})")

    def valid_in(self, mode: str, vcpus: int = 1) -> bool:
        """Whether the metric means something in this mode, on a guest with this many vCPUs."""
        too_many = bool(self.icount_max_vcpus) and modes.get(mode).deterministic and vcpus > self.icount_max_vcpus
        return mode in self.modes and not too_many


@dataclass(frozen=True)
class _File:
    groups: list[str]      # table sections, in the order a report shows them
    metric: list[Metric]

    def __post_init__(self) -> None:
        missing = [g for g in _FALLBACK_GROUPS if g not in self.groups]
        if missing:
            raise ValueError(f"groups: {missing[0]!r} is missing (describe() gives it to uncatalogued metrics)")
        for m in self.metric:
            if m.group not in self.groups:
                raise ValueError(f"metric {m.name}: group {m.group!r} is not one of {', '.join(self.groups)}")


@cache
def _file() -> _File:
    path = resources.files(__package__) / "metrics.toml"
    return datafile.load(_File, datafile.read_toml(path, "metrics.toml"), "metrics.toml")


# The workloads' metrics, as the command that runs them registered them.
_workload_metrics: dict[str, Metric] = {}


@cache
def _catalogued() -> dict[str, Metric]:
    return {m.name: m for m in _file().metric}


def catalog() -> dict[str, Metric]:
    """metrics.toml's metrics, and the workloads' the running command registered."""
    if not _workload_metrics:
        return _catalogued()
    return {**_catalogued(), **_workload_metrics}


@contextlib.contextmanager
def command_scope() -> Iterator[None]:
    """One command's workload metrics: it starts with none registered, and what it
    registers is forgotten when it ends (what was registered around it comes back)."""
    around = dict(_workload_metrics)
    _workload_metrics.clear()
    try:
        yield
    finally:
        _workload_metrics.clear()
        _workload_metrics.update(around)


def add_workload_metrics(metrics: Iterable[Metric]) -> None:
    """Registers the metrics of the workloads a command runs (source "workload", named
    WORKLOAD.METRIC). A name the catalog has already, for another metric, is a ValueError:
    one name, one meaning."""
    for m in metrics:
        if m.source != "workload" or m.group != WORKLOAD_GROUP:
            raise ValueError(f"metric {m.name}: a workload's metric has source and group 'workload'")
        known = catalog().get(m.name)
        if known is not None and known != m:
            raise ValueError(f"metric {m.name} is already the catalog's ({known.label}, {known.unit})")
        _workload_metrics[m.name] = m


def groups() -> tuple[str, ...]:
    """The groups (table sections), in the order a report shows them."""
    listed = tuple(_file().groups)
    return listed if WORKLOAD_GROUP in listed else (*listed, WORKLOAD_GROUP)


def check_known(metrics: list[str], nor: str = "") -> list[str]:
    """The metrics, or a one-line LabError on the first the catalog does not list (`nor`:
    where else it was looked for, as for unknown_metric)."""
    unknown = [m for m in metrics if describe(m, "").group == "other"]
    if unknown:
        raise LabError(unknown_metric(unknown[0], nor))
    return metrics


def unknown_metric(name: str, nor: str = "") -> str:
    """What every place a user names a metric says of a name the catalog does not have
    (`nor`: where else it was looked for, "a metric of a --workload given")."""
    return f"unknown metric {name!r}{', nor ' + nor if nor else ''}: {metric_hint(name)}"


def metric_hint(name: str) -> str:
    """The closest names the catalog has, and the command that lists them all: never a
    file of kernellab's source, which a user of the package does not have at hand."""
    hint = did_you_mean(name, catalog())
    return f"{hint} (`kernellab metrics` lists every metric)" if hint else "`kernellab metrics` lists every metric"


def describe(name: str, unit: str) -> Metric:
    """The catalog entry, or a plain one for a metric the catalog does not list."""
    known = catalog().get(name)
    if known:
        return known
    if name.startswith("boot.initcall."):
        return Metric(name, f"initcall {name.removeprefix('boot.initcall.')}", unit, "lower",
                      "initcalls", "guest", "console")
    if name.startswith("mem.kernel."):   # a field of the "Memory:" line, as the kernel prints it
        return Metric(name, f"Memory: {name.removeprefix('mem.kernel.').replace('_', ' ')}", unit, "lower",
                      "memory", "count", "console")
    group = "memory" if name.startswith("meminfo.") else "other"
    return Metric(name, name, unit, "lower", group, "count" if group == "memory" else "guest", "agent")


def agent_selector(name: str) -> str:
    """The word KL_ONLY picks a metric by: the agent reads /proc/meminfo whole."""
    return "meminfo" if name.startswith("meminfo.") else name


# The groups whose figures a shortened boot would change: asked for, the boot is not shortened.
_BOOT_TIMED_GROUPS = ("timer", "boot", "initcalls")


def only_words(metrics: Iterable[str], fast_boot_args: str = "") -> str:
    """The command line's words that boot the agent for `metrics` only (sweep and bisect
    probes, compare --metric): KL_ONLY with their agent selectors (`meminfo`, the cheapest,
    when none is the agent's: a workload's metrics come after the agent's tables), and the
    arch's `fast_boot_args` unless a figure of the boot, its timer or initcalls is asked."""
    asked = list(metrics)
    agent = list(dict.fromkeys(agent_selector(m) for m in asked if describe(m, "").source == "agent"))
    words = [f"KL_ONLY={','.join(agent) or 'meminfo'}"]
    if not any(describe(m, "").group in _BOOT_TIMED_GROUPS for m in asked):
        words.append(fast_boot_args)
    return " ".join(w for w in words if w)


def measured_with_only(name: str, only: Iterable[str]) -> bool:
    """Whether a compare of the metrics `only` (--metric) has the row `name`: asked, or one
    that KL_ONLY and the workloads asked do not choose: what the build and the console
    give whatever the agent runs (sizes, build and boot times, the kernel's "Memory:"
    line), and a name the catalog does not know, kept as a compare of all keeps it."""
    info = describe(name, "")
    chosen = info.source == "workload" or (info.source == "agent" and info.group != "other")
    return name in only or not chosen


def opt_in_groups() -> frozenset[str]:
    """The groups of metrics the agent runs only when asked (`with = [...]`, --with)."""
    return frozenset(m.opt_in for m in catalog().values() if m.opt_in)


def from_source(source: Source) -> frozenset[str]:
    """The catalog's metrics that `source` measures."""
    return frozenset(m.name for m in catalog().values() if m.source == source)


def sort_key(name: str, unit: str = "") -> tuple[int, int, str]:
    """Group order first, then catalog order, then name."""
    order = list(catalog())
    m = describe(name, unit)
    position = order.index(name) if name in order else len(order)
    sections = groups()
    return sections.index(m.group) if m.group in sections else len(sections), position, name
