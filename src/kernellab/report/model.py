"""The comparison report as data: what the variants measured, side by side, with the
statistics of each difference. Every view (table, Markdown, CSV, JSON) renders this.

The report is versioned (FORMAT_VERSION, and the JSON Schema in report/schema.json):
`kernellab show` refuses one it cannot read rather than misread it.
"""

from __future__ import annotations

import datetime
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import host, modes
from ..arches import BUILD_ONLY_NOTE
from ..errors import LabError
from ..metrics.catalog import describe, sort_key
from ..size import view as size_view
from ..stats import ALPHA, DETERMINISTIC_REASON, compare_all, summarize
from ..store import Store
from . import reading

# 2: format_version itself, boot parameters and sysctls, the target of each run.
# 3: "size", where the image's bytes go (symbols and directories), when variants were built.
FORMAT_VERSION = 3
# The versions `show` reads: each later one only adds keys the views treat as optional.
READABLE_VERSIONS = (2, 3)


@dataclass
class VariantRecord:
    """One variant of an experiment: prepared, built, and the runs it had."""
    prepared: Any                 # experiments.lab.Prepared
    build: Any = None             # build.Build
    runs: list[Any] = field(default_factory=list)   # experiments.lab.RunOutcome


def run_medians(per_run: Sequence[Sequence[float]]) -> list[float]:
    """One number per run: the boot is the independent unit (see stats)."""
    return [statistics.median(values) for values in per_run]


def samples(r: VariantRecord, store: Store) -> dict[str, tuple[str, list[list[float]]]]:
    """metric -> (unit, samples of each run): build figures (one "run"), then the samples
    of every run (failed runs included: what they measured before failing still counts).
    Runs whose agent or run options differ are never pooled: that is an error."""
    _check_poolable(r, store)
    figures = r.build.figures() if r.build is not None else {}   # the running kernel has no build
    out = {name: (unit, [[value]]) for name, (unit, value) in figures.items()}
    for outcome in r.runs:
        this_run: dict[str, list[float]] = {}
        for row in store.run_samples(outcome.run_id):
            this_run.setdefault(row["metric"], []).append(row["value"])
            out.setdefault(row["metric"], (row["unit"], []))
        for metric, values in this_run.items():
            out[metric][1].append(values)
    return out


def _check_poolable(r: VariantRecord, store: Store) -> None:
    """One cell pools runs of one agent, one set of run options and one target (a QEMU
    figure and a hardware one are never averaged)."""
    kinds: dict[tuple[int, str | None, str], list[int]] = {}
    for outcome in r.runs:
        row = store.run(outcome.run_id)
        if row is not None and row["agent_version"] is not None:
            label = json.loads(row["target_info"])["label"] if row["target_info"] else row["target"]
            kinds.setdefault((row["agent_version"], row["options_key"], label), []).append(outcome.run_id)
    if len(kinds) > 1:
        described = "; ".join(f"runs {', '.join(map(str, ids))}: agent record version {v}, options {o!r}, "
                              f"target {t}" for (v, o, t), ids in kinds.items())
        raise LabError(f"variant {r.prepared.spec.name}: its runs were measured differently and cannot "
                       f"be pooled into one cell ({described}); compare them as separate variants")


def not_available(r: VariantRecord, store: Store) -> dict[str, str]:
    """metric -> why the variant could not measure it (the reason was derived when stored)."""
    out: dict[str, str] = {}
    for outcome in r.runs:
        out.update(store.run_unavailable(outcome.run_id))
    return out


def most_vcpus(counts: Iterable[int | None]) -> int:
    """The most vCPUs any variant booted with (None: the machine's one)."""
    return max((c or 1 for c in counts), default=1)


def build_report(name: str, description: str, records: list[VariantRecord], store: Store,
                 mode: str) -> dict[str, Any]:
    names = [r.prepared.spec.name for r in records]
    measured = {r.prepared.spec.name: samples(r, store) for r in records}
    missing = {r.prepared.spec.name: not_available(r, store) for r in records}
    units: dict[str, str] = {}
    for per_metric in measured.values():
        for metric, (unit, _values) in per_metric.items():
            units.setdefault(metric, unit)
    for reasons in missing.values():
        for metric in reasons:
            units.setdefault(metric, describe(metric, "").unit)
    metrics = []
    vcpus = most_vcpus(r.prepared.spec.vcpus for r in records)
    for metric in sorted(units, key=lambda m: sort_key(m, units[m])):
        info = describe(metric, units[metric])
        values: dict[str, dict[str, Any]] = {}
        for variant in names:
            got = measured[variant].get(metric)
            if got:
                pooled = [v for run in got[1] for v in run]
                s = summarize(pooled)
                values[variant] = {"median": s.median, "n": s.n, "runs": len(got[1]), "samples": pooled,
                                   "run_medians": run_medians(got[1]), "q1": s.q1, "q3": s.q3,
                                   "min": s.low, "max": s.high}
            elif metric in missing[variant]:
                values[variant] = {"not_available": missing[variant][metric]}
        metrics.append({"name": metric, "label": info.label, "unit": info.unit, "better": info.better,
                        "group": info.group, "clock": info.clock, "source": info.source,
                        "valid_in_mode": info.valid_in(mode, vcpus), "values": values, "delta_pct": {},
                        "comparison": {}})
    _compare(metrics, names, mode)
    return {
        "format_version": FORMAT_VERSION,
        "experiment": name,
        "description": description,
        "mode": mode,
        "mode_note": timing_note(records, store, mode),
        "runs_per_variant": {r.prepared.spec.name: len(r.runs) for r in records},
        "statistics": statistics_note(mode),
        "machine": host.describe(),
        "variants": [_variant_json(r, store) for r in records],
        "metrics": metrics,
        **({"size": size} if (size := _size(records)) else {}),
    }


def _size(records: list[VariantRecord]) -> dict[str, Any] | None:
    """Where the image's bytes go, the first variant against the others that kernellab built."""
    built = [r for r in records if r.build is not None and (Path(r.build.artifacts) / "vmlinux").is_file()]
    if len(built) < 2 or built[0] is not records[0]:
        return None
    return size_view.compare([size_view.kernel(r.prepared.spec.name, Path(r.build.artifacts)) for r in built])


def _compare(metrics: list[dict[str, Any]], names: list[str], mode: str) -> None:
    """Fill each metric's delta_pct and comparison against the first variant. The
    correction for many metrics runs over the family of metrics valid in this mode."""
    ref = names[0]
    for other in names[1:]:
        pairs = {}
        for m in metrics:
            a, b = m["values"].get(ref, {}), m["values"].get(other, {})
            if "samples" in a and "samples" in b and m["valid_in_mode"]:
                pairs[m["name"]] = (a["run_medians"], b["run_medians"], m["better"])
        results = compare_all(pairs, alpha=ALPHA, deterministic=modes.get(mode).deterministic)
        for m in metrics:
            c = results.get(m["name"])
            if c is not None:
                m["delta_pct"][other] = c.delta_pct
                m["comparison"][other] = c.to_dict()


def timing_note(records: list[VariantRecord], store: Store, mode: str) -> str:
    """How the numbers were obtained: each target's own words (QEMU's are the mode's note);
    a table whose runs come from different kinds of target says so."""
    notes: dict[str, None] = {}
    for r in records:
        for outcome in r.runs:
            row = store.run(outcome.run_id)
            info = json.loads(row["target_info"]) if row is not None and row["target_info"] else {}
            notes.setdefault(info.get("timing") or modes.get(mode).note, None)
    if len(notes) > 1:
        return "MIXED TARGETS, figures of different kinds side by side: " + "; ".join(notes)
    return next(iter(notes), modes.get(mode).note)


def statistics_note(mode: str) -> str:
    if modes.get(mode).deterministic:
        return DETERMINISTIC_REASON
    return (f"cells: median of all samples; Δ: difference of the medians of per-run medians "
            f"with its 95% bootstrap interval; * marks a change significant by Welch's t-test on "
            f"the log of the per-run medians, Holm-adjusted p < {ALPHA} over the table's metrics")


def _utc(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def measured_when(reports: Sequence[dict[str, Any]]) -> str | None:
    """When the runs behind these reports started (UTC); None for reports written before
    runs carried their start."""
    started = sorted(run["started"] for report in reports for v in report["variants"]
                     for run in v["runs"] if run.get("started"))
    if not started:
        return None
    first, last = started[0], started[-1]
    if first[:10] != last[:10]:
        return f"{first[:10]} to {last[:10]} (UTC)"
    return f"{first[:10]}, runs started {first[11:16]} to {last[11:16]} UTC"


def _variant_json(r: VariantRecord, store: Store) -> dict[str, Any]:
    p = r.prepared
    runs = []
    for o in r.runs:
        row = store.run(o.run_id)
        target = json.loads(row["target_info"]) if row is not None and row["target_info"] else None
        runs.append({"id": o.run_id, "status": o.status, "reason": o.reason, "target": target,
                     "agent_version": row["agent_version"] if row is not None else None,
                     "clocksource": row["clocksource"] if row is not None else None,
                     **({"started": _utc(row["started"])} if row is not None and row["started"] else {}),
                     **({"vulnerabilities": flaws} if (flaws := store.run_vulnerabilities(o.run_id)) else {})})
    return {"name": p.spec.name, "source": p.source.spec if p.running else p.spec.source,
            "source_version": p.source.version,
            "arch": p.profile.name, "base": p.spec.base, "fragments": p.spec.fragments,
            "options": p.spec.options, "boot_args": p.spec.boot_args, "sysctls": p.spec.sysctls,
            **({"vcpus": p.spec.vcpus} if p.spec.vcpus is not None else {}),
            **({"fs": p.spec.fs} if p.spec.fs else {}),
            **({"devices": p.spec.devices} if p.spec.devices is not None else {}),
            **({"prebuilt": p.image.identity} if p.image is not None else {}),
            "config_hash": p.config.hash, "dropped_options": p.config.dropped,
            "build": r.build.to_dict() if r.build is not None else None, "build_only": p.profile.build_only,
            **({"note": p.note} if p.note else {}),
            **({"build_only_note": BUILD_ONLY_NOTE} if p.profile.build_only else {}),
            "runs": runs}


def check_readable(report: Any, origin: str) -> dict[str, Any]:
    """A report this kernellab can render, or a one-line LabError saying why not."""
    if not isinstance(report, dict) or "metrics" not in report:
        raise LabError(f"{origin} is not a kernellab report: write one with "
                       "`kernellab compare --format json -o FILE`")
    version = report.get("format_version")
    if version not in READABLE_VERSIONS:
        said = "has no format_version (kernellab before 0.2)" if version is None else f"is format {version}"
        raise LabError(f"{origin} {said}; this kernellab reads formats "
                       f"{', '.join(map(str, READABLE_VERSIONS))}: "
                       "rerun the experiment (its builds and samples are in the store) or use the "
                       "kernellab that wrote it")
    reading.check_schema(report, "schema.json", origin, "write it again with `kernellab compare --format json -o FILE` "
                         "(its builds and samples are in the store)")
    return report
