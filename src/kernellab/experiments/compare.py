"""Run an experiment's variants and put their numbers side by side.

The result is plain data (the JSON report); the table, Markdown and CSV views are
rendered from it by kernellab.report.
"""

from __future__ import annotations

import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .. import machine
from ..arches import BUILD_ONLY_NOTE
from ..config.dotconfig import parse_config
from ..errors import LabError
from ..measure.catalog import describe, sort_key
from ..stats import DETERMINISTIC_REASON, compare_all, imprecise_metrics, summarize
from ..store import Store
from ..targets.qemu import MODES
from . import lab
from .spec import Experiment

DEFAULT_RUNS = {"icount": 1, "wall": 5}
DEFAULT_MAX_RUNS = {"icount": 1, "wall": 12}
ALPHA = 0.05
MODE_NOTES = {
    "icount": "QEMU TCG with -icount shift=0,sleep=off: guest time counts instructions "
              "(1 ns = 1 instruction), reruns are identical; an emulated figure, not hardware",
    "wall": "QEMU TCG, guest clock = host clock: emulated and noisy; not a hardware figure",
}


@dataclass
class VariantRecord:
    prepared: lab.Prepared
    build: object = None
    runs: list[lab.RunOutcome] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    mode: str
    min_runs: int
    max_runs: int
    options: lab.RunOptions


def plan(exp: Experiment, mode: str | None, runs: int | None, max_runs: int | None,
         timeout_s: float, initcalls: bool = False) -> Plan:
    mode = mode or exp.mode
    if mode not in MODES:
        raise LabError(f"unknown timing mode {mode!r}: use one of {', '.join(MODES)}")
    min_runs = runs or exp.runs or DEFAULT_RUNS[mode]
    cap = max(min_runs, max_runs or (DEFAULT_MAX_RUNS[mode] if runs is None else min_runs))
    if min_runs < 1:
        raise LabError(f"--runs must be at least 1, got {min_runs}")
    return Plan(mode, min_runs, cap, lab.RunOptions(mode=mode, timeout_s=timeout_s, initcalls=initcalls))


def run_experiment(exp: Experiment, store: Store, how: Plan, log=print) -> tuple[dict, list[str]]:
    """Returns (report, failures). Builds everything first, so a build error stops the
    experiment before any guest time is spent. Runs interleave the variants (A B A B ...)
    so that a drift of the host affects them alike. In wall mode, runs continue past
    the minimum while some metric's median is known only to worse than +-3% (see stats)."""
    names = [v.name for v in exp.variants]
    if len(set(names)) != len(names):
        raise LabError(f"variant names must be unique, got {', '.join(names)}")
    records = []
    for spec in exp.variants:
        prepared = lab.prepare(spec, store)
        for d in prepared.config.dropped:
            log(f"{spec.name}: asked {d['option']}={d['asked']}, got {d['got']} ({d['origin']})")
        records.append(VariantRecord(prepared))
    for r in records:
        name = r.prepared.spec.name
        r.build = lab.ensure_built(r.prepared, store, log=lambda m, n=name: log(f"{n}: {m}"))
        how_built = "cached" if r.build.cached else f"built in {r.build.wall_s:.0f} s"
        log(f"{name}: {how_built} ({r.build.image.name} {r.build.image_bytes // 1024} KiB)")
    # Build-only variants (no QEMU machine for their arch) stop here: build and size rows.
    booted = [r for r in records if not r.prepared.profile.build_only]
    for r in records:
        if r.prepared.profile.build_only:
            log(f"{r.prepared.spec.name}: {BUILD_ONLY_NOTE}; not booted")
    initrds = {r.prepared.spec.name: lab.initramfs_for(r.prepared) for r in booted}
    failures = []
    for i in range(how.max_runs if booted else 0):
        # Counterbalanced order (A B, B A, ...): whoever boots first in a round has no
        # systematic advantage from the host's state.
        order = booted if i % 2 == 0 else booted[::-1]
        for r, outcome in zip(order, _one_round(order, store, how, initrds)):
            r.runs.append(outcome)
            log(f"{r.prepared.spec.name}: run {i + 1} ({how.mode}) {outcome.status}, "
                f"{outcome.samples} samples" + (f": {outcome.reason}" if outcome.reason else ""))
            if outcome.status != "ok":
                failures.append(f"{r.prepared.spec.name} run {outcome.run_id} {outcome.status}: "
                                f"{outcome.reason} (console log: kernellab log {outcome.run_id})")
        if i + 1 >= how.min_runs:
            loose = _imprecise(booted, store, how.mode)
            if not loose:
                break
            if i + 1 < how.max_runs:
                log(f"another run: {len(loose)} metric(s) not yet within +-3% ({', '.join(loose[:4])}...)")
    return report(exp, records, store, how.mode), failures


def _one_round(records, store: Store, how: Plan, initrds) -> list[lab.RunOutcome]:
    """One run of every variant. In icount mode guest time does not depend on what the
    host does, so the variants boot side by side, one per core; in wall mode they take
    turns, since each would slow the other down."""
    def run(r, on_store):
        return lab.run(r.prepared, r.build, on_store, how.options, initrds[r.prepared.spec.name])

    workers = min(len(records), os.cpu_count() or 1)
    if how.mode != "icount" or workers < 2:
        return [run(r, store) for r in records]

    def run_in_thread(r):
        own = Store(store.path)  # an SQLite connection belongs to the thread that opened it
        try:
            return run(r, own)
        finally:
            own.close()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_in_thread, records))


def _imprecise(records, store, mode) -> list[str]:
    if mode == "icount":
        return []  # reruns are identical: another one adds nothing
    by_metric: dict[str, dict[str, list[float]]] = {}
    for r in records:
        for metric, (unit, per_run) in _samples(r, store).items():
            info = describe(metric, unit)
            if info.clock == "guest" and info.valid_in(mode) and not metric.startswith("boot."):
                by_metric.setdefault(metric, {})[r.prepared.spec.name] = _run_medians(per_run)
    return imprecise_metrics(by_metric)


def _run_medians(per_run: list[list[float]]) -> list[float]:
    """One number per run: the boot is the independent unit (see stats)."""
    return [statistics.median(values) for values in per_run]


def report(exp: Experiment, records: list[VariantRecord], store: Store, mode: str) -> dict:
    names = [r.prepared.spec.name for r in records]
    samples = {r.prepared.spec.name: _samples(r, store) for r in records}
    missing = {r.prepared.spec.name: _not_available(r, store) for r in records}
    units: dict[str, str] = {}
    for per_metric in samples.values():
        for metric, (unit, _values) in per_metric.items():
            units.setdefault(metric, unit)
    for per_metric in missing.values():
        for metric in per_metric:
            units.setdefault(metric, describe(metric, "").unit)
    order = sorted(units, key=lambda m: sort_key(m, units[m]))
    metrics = []
    for name in order:
        info = describe(name, units[name])
        values = {}
        for variant in names:
            got = samples[variant].get(name)
            if got:
                pooled = [v for run in got[1] for v in run]
                s = summarize(pooled)
                values[variant] = {"median": s.median, "n": s.n, "runs": len(got[1]), "samples": pooled,
                                   "run_medians": _run_medians(got[1]), "q1": s.q1, "q3": s.q3,
                                   "min": s.low, "max": s.high}
            elif name in missing[variant]:
                values[variant] = {"not_available": missing[variant][name]}
        metrics.append({"name": name, "label": info.label, "unit": info.unit, "better": info.better,
                        "group": info.group, "clock": info.clock, "valid_in_mode": info.valid_in(mode),
                        "values": values, "delta_pct": {}, "comparison": {}})
    _compare(metrics, names, mode)
    return {
        "experiment": exp.name,
        "description": exp.description,
        "mode": mode,
        "mode_note": MODE_NOTES[mode],
        "runs_per_variant": {r.prepared.spec.name: len(r.runs) for r in records},
        "statistics": _statistics_note(mode),
        "machine": _machine(records),
        "variants": [_variant_json(r) for r in records],
        "metrics": metrics,
    }


def _machine(records: list[VariantRecord]) -> dict:
    """The host, and the QEMU that booted the variants (none when all are build-only)."""
    booted = [r.prepared.profile for r in records if not r.prepared.profile.build_only]
    if not booted:
        return machine.describe() | {"qemu": "none (build only)"}
    return machine.describe(booted[0].qemu.binary)


def _compare(metrics: list[dict], names: list[str], mode: str) -> None:
    """Fill each metric's delta_pct and comparison against the first variant. The
    correction for many metrics runs over the family of metrics valid in this mode."""
    ref = names[0]
    for other in names[1:]:
        pairs = {}
        for m in metrics:
            a, b = m["values"].get(ref, {}), m["values"].get(other, {})
            if "samples" in a and "samples" in b and m["valid_in_mode"]:
                pairs[m["name"]] = (a["run_medians"], b["run_medians"], m["better"])
        results = compare_all(pairs, alpha=ALPHA, deterministic=(mode == "icount"))
        for m in metrics:
            c = results.get(m["name"])
            if c is not None:
                m["delta_pct"][other] = c.delta_pct
                m["comparison"][other] = c.to_dict()


def _statistics_note(mode: str) -> str:
    if mode == "icount":
        return DETERMINISTIC_REASON
    return (f"cells: median of all samples; Δ: difference of the medians of per-run medians "
            f"with its 95% bootstrap interval; * marks a change significant by Welch's t-test on "
            f"the log of the per-run medians, Holm-adjusted p < {ALPHA} over the table's metrics")


def _variant_json(r: VariantRecord) -> dict:
    p = r.prepared
    return {"name": p.spec.name, "source": p.spec.source, "source_version": p.source.version,
            "arch": p.profile.name, "base": p.spec.base, "fragments": p.spec.fragments,
            "options": p.spec.options, "config_hash": p.config.hash,
            "dropped_options": p.config.dropped, "build": r.build.to_dict(),
            "build_only": p.profile.build_only,
            **({"build_only_note": BUILD_ONLY_NOTE} if p.profile.build_only else {}),
            "runs": [{"id": o.run_id, "status": o.status, "reason": o.reason} for o in r.runs]}


def _samples(r: VariantRecord, store: Store) -> dict[str, tuple[str, list[list[float]]]]:
    """metric -> (unit, samples of each run): build figures (one "run"), then the samples
    of every run (failed runs included: what they measured before failing still counts)."""
    out = {name: (unit, [[value]]) for name, (unit, value) in r.build.figures().items()}
    for outcome in r.runs:
        this_run: dict[str, list[float]] = {}
        for row in store.run_samples(outcome.run_id):
            this_run.setdefault(row["metric"], []).append(row["value"])
            out.setdefault(row["metric"], (row["unit"], []))
        for metric, values in this_run.items():
            out[metric][1].append(values)
    return out


def _not_available(r: VariantRecord, store: Store) -> dict[str, str]:
    """metric -> why the agent could not measure it, naming the options the variant lacks."""
    config = parse_config(r.prepared.config.text, "resolved .config")
    out = {}
    for outcome in r.runs:
        for text in store.run_logs(outcome.run_id, "not-available"):
            metric, _, reason = text.partition(": ")
            lacking = [o for o in describe(metric, "").needs if config.get(o, "n") not in ("y", "m")]
            out[metric] = f"needs {', '.join(lacking)}" if lacking else reason
    return out
