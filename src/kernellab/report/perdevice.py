"""What each device costs (seed 004: sysfs's memory per device on zSeries): for variants
of one kernel, booted the same way, that differ only in `devices:N`, the figure at N
devices less the figure at none, divided by N. Computed from a compare report's medians;
a study report carries the rows (studyreport) and renders them as "cost per device".
"""

from __future__ import annotations

from typing import Any

from . import fmt_value

METRICS = ("meminfo.MemAvailable", "meminfo.Slab", "sysfs.entries", "sysfs.bus_devices")
TITLE = "cost per device: (figure at N devices - figure at 0) / N"
HEAD = ["metric", "arch", "unit", "variant", "devices", "at 0", "at N", "per device"]

# What a variant's identity is apart from its extra devices (and its name and runs).
_NOT_IDENTITY = frozenset({"name", "devices", "runs", "build", "dropped_options", "note"})


def rows(reports: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (arch, variant with devices, metric) whose variant has a twin without
    devices (devices:0 or none) in the same report and both have the metric's median."""
    out = []
    for arch, report in reports.items():
        zero: dict[str, str] = {}   # identity -> the variant without devices
        for v in report["variants"]:
            if not v.get("devices"):
                zero.setdefault(_identity(v), v["name"])
        metrics = {m["name"]: m for m in report["metrics"]}
        for v in report["variants"]:
            n, base = v.get("devices") or 0, zero.get(_identity(v))
            if not n or base is None:
                continue
            for name in METRICS:
                m = metrics.get(name)
                if m is None:
                    continue
                at0, atn = _median(m, base), _median(m, v["name"])
                if at0 is None or atn is None:
                    continue
                out.append({"arch": arch, "metric": name, "label": m["label"], "unit": m["unit"],
                            "variant": v["name"], "baseline": base, "devices": n, "at_0": at0, "at_n": atn,
                            "per_device": (atn - at0) / n})
    return out


def table_rows(per_device: list[dict[str, Any]]) -> list[list[str]]:
    return [[r["label"], r["arch"], r["unit"], f"{r['variant']} (against {r['baseline']})", str(r["devices"]),
             fmt_value(r["at_0"], r["unit"]), fmt_value(r["at_n"], r["unit"]), f"{r['per_device']:+.2f}"]
            for r in per_device]


def _identity(v: dict[str, Any]) -> str:
    return repr(sorted((k, repr(x)) for k, x in v.items() if k not in _NOT_IDENTITY))


def _median(m: dict[str, Any], variant: str) -> float | None:
    v = m["values"].get(variant)
    if not v or "median" not in v:
        return None
    return float(v["median"])
