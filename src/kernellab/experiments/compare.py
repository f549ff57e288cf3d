"""Run an experiment's variants and put their numbers side by side.

The result is plain data (the JSON report); the table, Markdown and CSV views are
rendered from it by kernellab.report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import machine
from ..errors import LabError
from ..measure.catalog import catalog, describe
from ..stats import delta_pct, summarize
from ..store import Store
from ..targets.qemu import MODES
from . import lab
from .spec import Experiment

DEFAULT_RUNS = {"icount": 1, "wall": 5}
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


def run_experiment(exp: Experiment, store: Store, mode: str | None = None,
                   runs: int | None = None, timeout_s: float = lab.DEFAULT_TIMEOUT_S,
                   log=print) -> tuple[dict, list[str]]:
    """Returns (report, failures). Builds everything first, so a build error stops the
    experiment before any guest time is spent."""
    mode = mode or exp.mode
    if mode not in MODES:
        raise LabError(f"unknown timing mode {mode!r}: use one of {', '.join(MODES)}")
    runs = runs or exp.runs or DEFAULT_RUNS[mode]
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
        r.build = lab.ensure_built(r.prepared, store, log=lambda m, n=r.prepared.spec.name: log(f"{n}: {m}"))
        how = "cached" if r.build.cached else f"built in {r.build.wall_s:.0f} s"
        log(f"{r.prepared.spec.name}: {how} ({r.build.image.name} {r.build.image_bytes // 1024} KiB)")
    failures = []
    for i in range(runs):
        for r in records:
            outcome = lab.run(r.prepared, r.build, store, mode, timeout_s)
            r.runs.append(outcome)
            log(f"{r.prepared.spec.name}: run {i + 1}/{runs} ({mode}) {outcome.status}, "
                f"{outcome.samples} samples" + (f": {outcome.reason}" if outcome.reason else ""))
            if outcome.status != "ok":
                failures.append(f"{r.prepared.spec.name} run {outcome.run_id} {outcome.status}: "
                                f"{outcome.reason} (console log: kernellab log {outcome.run_id})")
    return report(exp, records, store, mode, runs), failures


def report(exp: Experiment, records: list[VariantRecord], store: Store, mode: str, runs: int) -> dict:
    per_variant = {r.prepared.spec.name: _samples(r, store) for r in records}
    names = [r.prepared.spec.name for r in records]
    units = {}
    for samples in per_variant.values():
        for metric, (unit, _values) in samples.items():
            units.setdefault(metric, unit)
    order = [m for m in catalog() if m in units] + sorted(m for m in units if m not in catalog())
    metrics = []
    for name in order:
        info = describe(name, units[name])
        values = {}
        for variant in names:
            got = per_variant[variant].get(name)
            if got:
                s = summarize(got[1])
                values[variant] = {"median": s.median, "n": s.n, "samples": got[1], "q1": s.q1,
                                   "q3": s.q3, "min": s.low, "max": s.high}
        ref = values.get(names[0])
        deltas = {v: (delta_pct(values[v]["median"], ref["median"]) if ref else None)
                  for v in names[1:] if v in values}
        metrics.append({"name": name, "label": info.label, "unit": info.unit, "better": info.better,
                        "group": info.group, "clock": info.clock, "values": values,
                        "delta_pct": deltas})
    first = records[0].prepared
    return {
        "experiment": exp.name,
        "description": exp.description,
        "mode": mode,
        "mode_note": MODE_NOTES[mode],
        "runs_per_variant": runs,
        "machine": machine.describe(first.profile.qemu.binary),
        "variants": [_variant_json(r) for r in records],
        "metrics": metrics,
    }


def _variant_json(r: VariantRecord) -> dict:
    p = r.prepared
    return {"name": p.spec.name, "source": p.spec.source, "source_version": p.source.version,
            "arch": p.profile.name, "base": p.spec.base, "fragments": p.spec.fragments,
            "options": p.spec.options, "config_hash": p.config.hash,
            "dropped_options": p.config.dropped, "build": r.build.to_dict(),
            "runs": [{"id": o.run_id, "status": o.status, "reason": o.reason} for o in r.runs]}


def _samples(r: VariantRecord, store: Store) -> dict[str, tuple[str, list[float]]]:
    """metric -> (unit, samples): build figures, then every sample of every run (failed
    runs included: what they measured before failing is still a measurement)."""
    b = r.build
    out: dict[str, tuple[str, list[float]]] = {
        "build.wall": ("s", [b.wall_s]), "build.user": ("s", [b.user_s]),
        "build.sys": ("s", [b.sys_s]),
        "size.image": ("KiB", [b.image_bytes / 1024]), "size.vmlinux": ("KiB", [b.vmlinux_bytes / 1024]),
        "size.text": ("KiB", [b.text / 1024]), "size.data": ("KiB", [b.data / 1024]),
        "size.bss": ("KiB", [b.bss / 1024]),
    }
    for outcome in r.runs:
        for row in store.run_samples(outcome.run_id):
            out.setdefault(row["metric"], (row["unit"], []))[1].append(row["value"])
    return out
