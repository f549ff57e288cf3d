"""The comparison report as data: what the variants measured, side by side, with the
statistics of each difference and its verdict. Every view (table, written summary,
Markdown, CSV, JSON, HTML), the gate and JUnit render this.

Whether a difference counts is decided here, once per cell (a metric, a variant against
the first), by `judge`, and stored in the report as the cell's verdict: a difference
("better" or "worse"), "no difference", or "not compared", each with its reason. The views
and the gate read the verdict and never decide again. The rule, from the metric catalog
(its clock), the mode, the noise floor and the spread of the samples:

- a figure not measured meaningfully in the mode, or on one side, is not compared;
- a figure the statistics tested (wall mode; host-clock figures in any mode, with two runs
  or more on each side) is a difference when the test calls it significant after the
  correction for many metrics, else no difference;
- an exact figure (a size, one of the kernel's counts, a guest-clock figure in a
  deterministic mode) is a difference when it is larger than the metric's noise floor and
  than the spread of the repeats within the run;
- anything else cannot be believed from what was measured, and is not compared: one run
  of a host-clock figure (boot times on the host, or any figure in wall mode), a build
  time with ccache hits or from a build tree another variant used.

The report is versioned (FORMAT_VERSION, and the JSON Schema in report/schema.json):
`kernellab show` refuses one it cannot read rather than misread it.
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import host, modes
from ..arches import BUILD_ONLY_NOTE
from ..errors import LabError
from ..metrics.catalog import describe, measured_with_only, sort_key
from ..size import view as size_view
from ..stats import ALPHA, DETERMINISTIC_REASON, Comparison, compare_all, summarize
from ..store import Store

# 2: format_version itself, boot parameters and sysctls, the target of each run.
# 3: "size", where the image's bytes go (symbols and directories), when variants were built.
# 4: each metric's "verdict" per variant, the one every view and the gate read; host-clock
#    figures compared as wall statistics in every mode; the noise floor always recorded.
FORMAT_VERSION = 4
# The versions `show` reads: an earlier one is judged on reading (upgrade), as kernellab
# judges a report it writes.
READABLE_VERSIONS = (2, 3, 4)

# A verdict's kinds: the first two are a difference.
BETTER, WORSE, NO_DIFFERENCE, NOT_COMPARED = "better", "worse", "no difference", "not compared"
DIFFERENCE = (BETTER, WORSE)
VERDICTS = (BETTER, WORSE, NO_DIFFERENCE, NOT_COMPARED)
# Figures timed by the host's clock, whatever the mode: a deterministic mode makes the
# guest's time exact, not the host's (boot times seen from outside, build times).
HOST_TIMED = ("host", "build")


@dataclass(frozen=True)
class NoiseFloor:
    """metric -> the largest change, in %, that counts as no difference."""
    pct: Mapping[str, float] = field(default_factory=dict)
    origin: str = "none given: every exact difference counts"

    def __post_init__(self) -> None:
        # Wherever a floor comes from (a TOML file, a report's own record): NaN would
        # make every change "within the floor", and a gate pass what it must not.
        for metric, pct in self.pct.items():
            if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 <= pct < math.inf:
                raise LabError(f"noise floor {self.origin}: {metric} = {pct!r}: a floor is a finite percentage, "
                               "0 or more: fix or remeasure it (kernellab noise-floor)")

    def of(self, metric: str) -> float:
        return self.pct.get(metric, 0.0)


@dataclass(frozen=True)
class Only:
    """A compare of some metrics only (--metric): the metrics asked, and the command-line
    words the agent was booted with for them (metrics.catalog.only_words)."""
    metrics: tuple[str, ...]
    words: str


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
                 mode: str, only: Only | None = None) -> dict[str, Any]:
    """The comparison of the records' runs; with `only`, of those metrics (and the rows the
    build and the console give), which the report then says it holds."""
    names = [r.prepared.spec.name for r in records]
    measured = {r.prepared.spec.name: _asked(samples(r, store), only) for r in records}
    missing = {r.prepared.spec.name: _asked(not_available(r, store), only) for r in records}
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
                        "comparison": {}, "verdict": {}})
    _compare(metrics, names, mode)
    report = {
        "format_version": FORMAT_VERSION,
        "experiment": name,
        "description": description,
        "mode": mode,
        "mode_note": timing_note(records, store, mode),
        **({"only_metrics": list(only.metrics), "only_words": only.words} if only is not None else {}),
        "runs_per_variant": {r.prepared.spec.name: len(r.runs) for r in records},
        "statistics": statistics_note(mode),
        "machine": host.describe(),
        "variants": [_variant_json(r, store) for r in records],
        "metrics": metrics,
        **({"size": size} if (size := _size(records)) else {}),
    }
    judge(report, NoiseFloor())
    return report


def _asked(by_metric: dict[str, Any], only: Only | None) -> dict[str, Any]:
    """`by_metric` without what `only` left out: the agent (its /proc/meminfo read whole)
    and the workloads can report more than was asked, and a table and its correction for
    many metrics hold what was asked."""
    if only is None:
        return by_metric
    return {metric: v for metric, v in by_metric.items() if measured_with_only(metric, only.metrics)}


def _size(records: list[VariantRecord]) -> dict[str, Any] | None:
    """Where the image's bytes go, the first variant against the others that kernellab built."""
    built = [r for r in records if r.build is not None and (Path(r.build.artifacts) / "vmlinux").is_file()]
    if len(built) < 2 or built[0] is not records[0]:
        return None
    return size_view.compare([size_view.kernel(r.prepared.spec.name, Path(r.build.artifacts)) for r in built])


def _compare(metrics: list[dict[str, Any]], names: list[str], mode: str) -> None:
    """Fill each metric's delta_pct and comparison against the first variant."""
    ref = names[0]
    for other in names[1:]:
        results = compare_variants(metrics, ref, other, mode)
        for m in metrics:
            c = results.get(m["name"])
            if c is not None:
                m["delta_pct"][other] = c.delta_pct
                m["comparison"][other] = c.to_dict()


def compare_variants(metrics: Sequence[dict[str, Any]], ref: str, other: str, mode: str,
                     only: Iterable[str] | None = None) -> dict[str, Comparison]:
    """The statistics of `other` against `ref` on every metric valid in the mode (or those
    in `only`). The correction for many metrics runs over the family of metrics tested
    together: all of them in wall mode; in a deterministic mode the guest-clock figures
    and counts are exact (no test) and the host-timed ones (HOST_TIMED) are tested as
    wall figures, for the host's clock is no more exact under icount than without it."""
    exact = modes.get(mode).deterministic
    wanted = set(only) if only is not None else None
    families: dict[bool, dict[str, tuple[list[float], list[float], str]]] = {True: {}, False: {}}
    for m in metrics:
        a, b = m["values"].get(ref, {}), m["values"].get(other, {})
        if (wanted is None or m["name"] in wanted) and m["valid_in_mode"] and "run_medians" in a \
                and "run_medians" in b:
            deterministic = exact and m["clock"] not in HOST_TIMED
            families[deterministic][m["name"]] = (a["run_medians"], b["run_medians"], m["better"])
    results: dict[str, Comparison] = {}
    for deterministic, pairs in families.items():
        if pairs:
            results |= compare_all(pairs, alpha=ALPHA, deterministic=deterministic)
    return results


# -- the verdict -----------------------------------------------------------------------

def judge(report: dict[str, Any], floor: NoiseFloor) -> dict[str, Any]:
    """Decide every cell of the report (each metric, each variant against the first) by
    this noise floor, and record the floor: the one place a difference is decided."""
    names = [v["name"] for v in report["variants"]]
    report["noise_floor"] = {"origin": floor.origin,
                             "pct": {m["name"]: floor.of(m["name"]) for m in report["metrics"]
                                     if floor.of(m["name"])}}
    for m in report["metrics"]:
        m["verdict"] = {other: verdict(m, names[0], other, m.get("comparison", {}).get(other), report["mode"],
                                       floor.of(m["name"]), report["variants"])
                        for other in names[1:]}
    return report


def judge_probes(ref_runs: Mapping[str, list[float]], other_runs: Mapping[str, list[float]], mode: str,
                 floor: NoiseFloor = NoiseFloor()) -> dict[str, dict[str, Any]]:
    """Two probes of one build tree (a sweep's baseline and a flip, an audit's baseline and
    a group), each metric's per-run medians: metric -> its comparison, with under "verdict"
    whether the change counts, by the rule every compare cell follows. A metric measured on
    one side only, or not meaningfully in the mode, has no comparison: its delta is None."""
    names = ("baseline", "probe")
    metrics: list[dict[str, Any]] = []
    for metric in ref_runs:
        info = describe(metric, "")
        values = {name: {"median": statistics.median(runs), "run_medians": list(runs), "runs": len(runs)}
                  for name, runs in zip(names, (ref_runs[metric], other_runs.get(metric, [])), strict=True) if runs}
        metrics.append({"name": metric, "clock": info.clock, "better": info.better,
                        "valid_in_mode": info.valid_in(mode), "values": values})
    comparisons = compare_variants(metrics, *names, mode)
    # Probes build one after another in one tree: a build time of either is incremental.
    variants = [{"name": name, "source": "", "arch": "", "build": {}} for name in names]
    effects = {}
    for m in metrics:
        c = comparisons[m["name"]].to_dict() if m["name"] in comparisons else {"delta_pct": None, "direction": "same"}
        effects[m["name"]] = {**c, "verdict": verdict(m, *names, c if m["name"] in comparisons else None, mode,
                                                      floor.of(m["name"]), variants)}
    return effects


def verdict(m: dict[str, Any], ref: str, other: str, c: Mapping[str, Any] | None, mode: str, floor_pct: float,
            variants: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One cell's verdict: `other` against `ref` on metric `m`, given their comparison `c`
    (None: judged from the cells' medians, as an exact figure); the rule is the module's.
    kind, reason (why this kind), delta_pct, how (how the figure was obtained), and
    floor_pct when the noise floor made it no difference."""
    a, b = m["values"].get(ref), m["values"].get(other)
    unmeasured = _unmeasured(m, mode, {ref: a, other: b})
    if unmeasured:
        return _cell(NOT_COMPARED, unmeasured, None, "")
    assert a is not None and b is not None   # _unmeasured said so
    pct = c.get("delta_pct") if c is not None else _pct_change(a["median"], b["median"])
    if pct is None:
        return _cell(NOT_COMPARED, f"no baseline value to compare with (a median of 0 on {ref})", None, "")
    runs = (len(a.get("run_medians", [])), len(b.get("run_medians", [])))
    if c is not None and c.get("testable"):
        return _tested(m, c, mode, runs)
    why = _unbelieved(m, mode, [v for v in variants if v.get("name") in (ref, other)])
    how = _exact_how(m, mode, runs[1])
    if why:
        return _cell(NOT_COMPARED, why, pct, how)
    spread = max(_spread(a), _spread(b))
    if spread >= 1:
        # The repeats of one run disagree (a bimodal path: two layouts, a timer that
        # sometimes fires): the median is reproducible, yet a change smaller than that
        # spread is not an effect.
        how += f", repeats spread ±{spread:.0f}%"
    if pct == 0:
        return _cell(NO_DIFFERENCE, "identical", pct, how)
    if abs(pct) <= floor_pct:
        return _cell(NO_DIFFERENCE, f"within the metric's noise floor ({floor_pct:.1f}%)", pct, how) | {
            "floor_pct": floor_pct}
    if abs(pct) <= spread:
        return _cell(NO_DIFFERENCE, f"within the spread of the repeats (±{spread:.0f}%)", pct, how)
    return _cell(_direction(pct, m["better"]), "exact, beyond the noise floor "
                 f"({floor_pct:.1f}%) and the spread of the repeats (±{spread:.0f}%)", pct, how)


def _cell(kind: str, reason: str, pct: float | None, how: str) -> dict[str, Any]:
    return {"kind": kind, "reason": reason, "delta_pct": pct, "how": how}


def _pct_change(ref: float, other: float) -> float | None:
    return None if not ref else 100 * (other - ref) / abs(ref)


def _direction(pct: float, better: str) -> str:
    return WORSE if (pct > 0) == (better == "lower") else BETTER


def _unmeasured(m: dict[str, Any], mode: str, cells: Mapping[str, dict[str, Any] | None]) -> str:
    """Why the metric was not measured on both sides in a way that means something ("" when it was)."""
    if not m["valid_in_mode"]:
        return f"not measured meaningfully in {mode} mode"
    for name, cell in cells.items():
        if not cell:
            return f"not measured on {name}"
        if "not_available" in cell:
            return f"not available on {name}: {cell['not_available']}"
        if "median" not in cell:
            return f"not measured on {name}"
    return ""


def _tested(m: dict[str, Any], c: Mapping[str, Any], mode: str, runs: tuple[int, int]) -> dict[str, Any]:
    """A figure the statistics tested: a difference when the test calls it significant."""
    clock = "host clock" if modes.get(mode).deterministic and m["clock"] in HOST_TIMED else mode
    how = f"{clock}, {runs[0]}+{runs[1]} runs"
    if c.get("ci_low_pct") is not None and c.get("ci_high_pct") is not None:
        how += f", 95% CI [{c['ci_low_pct']:+.1f}, {c['ci_high_pct']:+.1f}]%"
    p = c.get("adjusted_p")
    said = f"Holm-adjusted p = {p:.2g}" if isinstance(p, (int, float)) else "no p-value"
    if c.get("significant") and c.get("direction") in DIFFERENCE:
        return _cell(c["direction"], f"significant ({said} < {ALPHA})", c["delta_pct"], how)
    return _cell(NO_DIFFERENCE, f"not significant ({said})", c["delta_pct"], how)


def _spread(cell: dict[str, Any]) -> float:
    """Half the interquartile range of a cell's samples, in % of its median."""
    if cell.get("q1") is None or cell.get("q3") is None or not cell.get("median"):
        return 0.0
    return float(50 * (cell["q3"] - cell["q1"]) / abs(cell["median"]))


def _unbelieved(m: dict[str, Any], mode: str, variants: Sequence[dict[str, Any]]) -> str:
    """Why a single difference of this metric is not to be believed ("" when it is).
    Sizes and the kernel's counts are exact, and so is a guest-clock figure in a
    deterministic mode. A build time is one build: believed only when every build compiled
    from scratch, in a tree of its own and without ccache hits (which would time the cache,
    not the compiler): an experiment with cold_builds makes them so. Host-clock figures of
    one run never are (nor, in wall mode, guest-clock ones: the guest's clock is the host's)."""
    if m["clock"] == "count" or m["name"].startswith("size."):
        return ""
    if m["clock"] == "build":
        if all((v.get("build") or {}).get("cold") for v in variants):
            return ""
        # Variants of one source and compiler share a build tree: the later build is incremental.
        trees = {(v.get("source"), v.get("arch"), (v.get("build") or {}).get("compiler")) for v in variants}
        if len(trees) < len(variants):
            return "incremental builds in one build tree"
        return "" if all(_cold(v) for v in variants) else "ccache hits"
    if m["clock"] == "guest" and modes.get(mode).deterministic:
        return ""
    return "one run of a host-clock figure"


def _cold(variant: dict[str, Any]) -> bool:
    """Compiled from scratch: few ccache hits. (A build reused from the cache keeps the
    times of the build that made it.)"""
    b = variant.get("build")
    return b is not None and (b.get("ccache_hit_pct") or 0) < 5


def _exact_how(m: dict[str, Any], mode: str, runs: int) -> str:
    if m["clock"] == "build":
        return "one cold build each" if m["name"].startswith("build.") else "from the build"
    if m["clock"] == "count":
        return f"the kernel's count, {runs} run{'s' if runs != 1 else ''}"
    if m["clock"] == "host":
        return f"host clock, {runs} run{'s' if runs != 1 else ''}"
    return f"{mode}, {runs} run{'s' if runs != 1 else ''}, exact"


def upgrade(report: dict[str, Any], origin: str = "") -> dict[str, Any]:
    """A report of an earlier format (READABLE_VERSIONS) as this kernellab writes one:
    compared and judged by the floor it records, in place. (`origin`: for a reader that
    names the file; an upgrade cannot fail on a report its schema accepted.)"""
    if report.get("format_version") == FORMAT_VERSION:
        return report
    names = [v["name"] for v in report["variants"]]
    for m in report["metrics"]:
        m["delta_pct"], m["comparison"] = {}, {}
    _compare(report["metrics"], names, report["mode"])
    recorded = report.get("noise_floor") or {}
    floor = NoiseFloor(recorded["pct"], recorded["origin"]) if recorded else NoiseFloor()
    report["statistics"] = statistics_note(report["mode"])
    judge(report, floor)
    report["format_version"] = FORMAT_VERSION
    return report


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
        return (f"{DETERMINISTIC_REASON}; host-clock rows (boot seen from the host, build times) are tested "
                f"as wall figures, and one run of them is not compared")
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
                     **({"vulnerabilities": flaws} if (flaws := store.run_vulnerabilities(o.run_id)) else {}),
                     # each workload's program, version and argv, how it ended: its figures' provenance
                     **({"workloads": wl} if (wl := store.run_workloads(o.run_id)) else {})})
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

