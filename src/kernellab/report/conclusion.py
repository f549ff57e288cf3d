"""The written summary of a study, from its measured deltas, in the manner of the
management summary of the seed 001_1761d257574c0e1b.txt ("2.6 takes 30...40% longer to
compile"): one line per headline, the range across arches, "better" or "worse" from the
catalog's direction, and how each figure was obtained.

What counts as a difference: in a deterministic mode (icount) the delta is exact, and it
counts when it is larger than the metric's noise floor (the change that code which never
runs on the metric's path causes through memory layout; zero until measured) and than
the spread of the repeats within the run (a path that takes two lengths at random is
reproducible but unsettled); in wall mode only a change the statistics call significant
counts. Anything else is said to be no difference, never given a direction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import datafile, modes
from ..errors import LabError
from ..metrics.catalog import catalog
from ..stats import compare_all


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
class _FloorFile:
    floor: dict[str, float]
    measured: str = ""     # how and when the floor was measured


def load_floor(path: Path) -> NoiseFloor:
    origin = f"noise floor {path}"
    f = datafile.load(_FloorFile, datafile.read_toml(path, origin), origin)
    for metric, pct in f.floor.items():
        if metric not in catalog():
            raise LabError(f"{origin}: unknown metric {metric!r} (see src/kernellab/metrics/metrics.toml)")
        if pct < 0:
            raise LabError(f"{origin}: {metric}: a floor is a size, not {pct:g}")
    # NoiseFloor refuses a floor that is not a finite number (TOML has nan and inf).
    return NoiseFloor(f.floor, f"{path}" + (f" ({f.measured})" if f.measured else ""))


@dataclass(frozen=True)
class Delta:
    """One metric, one arch: the subject against the baseline."""
    arch: str
    metric: str
    label: str
    pct: float
    direction: str         # better / worse / same (from the catalog's direction)
    counts: bool           # a difference, by the rule of the module docstring
    how: str               # mode, runs, spread
    not_compared: str = ""  # why a difference of it is not to be believed (ccache hits)


def metric_delta(report: dict[str, Any], arch: str, metric: str, baseline: str, subject: str,
                 floor: NoiseFloor, others: Mapping[str, dict[str, Any]] | None = None) -> Delta | None:
    """The subject's change against the baseline in one arch's compare report; None when
    either side did not measure it. Against the report's first variant the report's own
    comparison judges it; against another, `others` (metric -> comparison, from
    `comparisons`)."""
    m = next((x for x in report["metrics"] if x["name"] == metric), None)
    if m is None or not m["valid_in_mode"]:
        return None   # not measured, or meaningless in this mode (memory bandwidth under icount)
    a, b = m["values"].get(baseline, {}), m["values"].get(subject, {})
    if "median" not in a or "median" not in b or not a["median"]:
        return None
    first = report["variants"][0]["name"] == baseline
    c = m["comparison"].get(subject) if first else (others or {}).get(metric)
    if c is not None and c["testable"]:
        counts = bool(c["significant"])
        how = (f"{report['mode']}, {len(a['run_medians'])}+{len(b['run_medians'])} runs, "
               f"95% CI [{c['ci_low_pct']:+.1f}, {c['ci_high_pct']:+.1f}]%")
        pct, direction = c["delta_pct"], c["direction"]
    else:
        pct = 100 * (b["median"] - a["median"]) / a["median"]
        direction = "same" if pct == 0 else ("worse" if (pct > 0) == (m["better"] == "lower") else "better")
        spread = max(_spread(a), _spread(b))
        why = _unbelieved(m, report, (baseline, subject))
        counts = abs(pct) > max(floor.of(metric), spread) and not why
        how = _exact_how(m, report["mode"], len(b["run_medians"]))
        if spread >= 1:
            # The repeats of one run disagree (a bimodal path: two layouts, a timer that
            # sometimes fires): the median is reproducible, yet a change smaller than that
            # spread is not an effect.
            how += f", repeats spread ±{spread:.0f}%"
        if why:
            return Delta(arch, metric, m["label"], pct, "same", False, how, why)
    return Delta(arch, metric, m["label"], pct, direction if counts else "same", counts, how)


def comparisons(report: dict[str, Any], metrics: Sequence[str], baseline: str,
                subject: str) -> dict[str, dict[str, Any]]:
    """Two variants of a report compared on some metrics as the report compares each variant
    with its first one (the same test, the correction for many metrics over these)."""
    pairs = {}
    for m in report["metrics"]:
        a, b = m["values"].get(baseline, {}), m["values"].get(subject, {})
        if m["name"] in metrics and m["valid_in_mode"] and "run_medians" in a and "run_medians" in b:
            pairs[m["name"]] = (a["run_medians"], b["run_medians"], m["better"])
    results = compare_all(pairs, deterministic=modes.get(report["mode"]).deterministic)
    return {name: c.to_dict() for name, c in results.items()}


def _spread(cell: dict[str, Any]) -> float:
    """Half the interquartile range of a cell's samples, in % of its median."""
    if cell.get("q1") is None or not cell.get("median"):
        return 0.0
    return float(50 * (cell["q3"] - cell["q1"]) / abs(cell["median"]))


def _unbelieved(m: dict[str, Any], report: dict[str, Any], names: Sequence[str]) -> str:
    """Why a single difference of this metric is not to be believed ("" when it is).
    Sizes and the kernel's counts are exact, and so is a guest-clock figure in a
    deterministic mode. A build time is one build: believed only when every build compiled
    from scratch, in a tree of its own and without ccache hits (which would time the cache,
    not the compiler): an experiment with cold_builds makes them so. Host-clock figures of
    one run never are."""
    if m["clock"] == "count" or m["name"].startswith("size."):
        return ""
    if m["clock"] == "build":
        built = [v for v in report["variants"] if v["name"] in names]
        if all((v.get("build") or {}).get("cold") for v in built):
            return ""
        # Variants of one source and compiler share a build tree: the later build is incremental.
        trees = {(v["source"], v["arch"], (v.get("build") or {}).get("compiler")) for v in built}
        if len(trees) < len(built):
            return "incremental builds in one build tree"
        return "" if all(_cold(v) for v in built) else "ccache hits"
    if m["clock"] == "guest" and modes.get(report["mode"]).deterministic:
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


def pct_range(values: Sequence[float]) -> str:
    """30...40% as the seed writes it; one value alone as itself."""
    lo, hi = min(values), max(values)
    if f"{lo:.0f}" == f"{hi:.0f}":
        return f"{hi:.0f}%" if hi >= 1 else f"{hi:.1f}%"
    return f"{lo:.0f}...{hi:.0f}%"


def _times(pcts: Sequence[float]) -> str:
    """A change past +100% read as a factor too: +830% is 9.3 times the baseline."""
    big = [1 + p / 100 for p in pcts if p >= 100]
    if len(big) != len(pcts):
        return ""
    lo, hi = min(big), max(big)
    return f" ({lo:.1f}x)" if f"{lo:.1f}" == f"{hi:.1f}" else f" ({lo:.1f}...{hi:.1f}x)"


def _where(items: Sequence[Delta]) -> str:
    """Each arch's exact figure and how it was obtained, said once when all agree."""
    hows = {d.how for d in items}
    if len(items) == 1:
        d = items[0]
        return f"{d.arch} {d.pct:+.1f}%, {d.how}"
    figures = ", ".join(f"{d.arch} {d.pct:+.1f}%" for d in items)
    if len(hows) == 1:
        return f"{figures}; {hows.pop()}"
    return ", ".join(f"{d.arch} {d.pct:+.1f}% ({d.how})" for d in items)


def line(says: str, deltas: Sequence[Delta], subject: str, baseline: str) -> str:
    """One summary line: the metrics that changed, as ranges across arches, then those
    that did not."""
    by_metric: dict[str, list[Delta]] = {}
    for d in deltas:
        by_metric.setdefault(d.metric, []).append(d)
    head = f"{says} ({subject} against {baseline})"
    if not by_metric:
        return f"{head}: not measured (neither has any of its metrics in this mode)"
    parts, same, unsure = [], [], []
    for items in by_metric.values():
        changed = [d for d in items if d.counts]
        label = items[0].label
        why = sorted({d.not_compared for d in items if d.not_compared})
        if why and not changed:
            unsure.append(f"{label} ({', '.join(why)})")
            continue
        if not changed:
            same.append(label)
            continue
        directions = {d.direction for d in changed}
        if len(directions) == 1:
            size = [d.pct for d in changed]
            # A range of the arches that changed alone would read as if every arch had.
            only = (f" on {', '.join(d.arch for d in changed)}, no difference on "
                    f"{', '.join(d.arch for d in items if not d.counts)}" if len(changed) < len(items) else "")
            parts.append(f"{label} {pct_range([abs(p) for p in size])}{_times(size)} {directions.pop()}{only} "
                         f"({_where(items)})")
        else:
            parts.append(f"{label} better on some arches, worse on others ({_where(items)})")
    words = parts + ([f"no difference in {', '.join(same)}"] if same else [])
    words += [f"not compared: {', '.join(unsure)}"] if unsure else []
    return f"{head}: " + "; ".join(words)


def write(items: Sequence[Any], reports: Mapping[str, dict[str, Any]], baseline: str, subject: str,
          floor: NoiseFloor) -> list[str]:
    """The summary lines of a study: one per item (`says`, `metrics`, and optionally its
    own `subject` and `against`, the variant it is compared with)."""
    out = []
    for item in items:
        who, base = item.subject or subject, item.against or baseline
        ran = {v["name"] for report in reports.values() for v in report["variants"]}
        if ran and not {who, base} <= ran:
            out.append(f"{item.says} ({who} against {base}): not in this run (left out: see its header)")
            continue
        deltas = []
        for arch, report in reports.items():
            others = None if report["variants"][0]["name"] == base else comparisons(report, item.metrics, base, who)
            deltas += [d for m in item.metrics
                       if (d := metric_delta(report, arch, m, base, who, floor, others)) is not None]
        out.append(line(item.says, deltas, who, base))
    return out


def split(report: dict[str, Any], metric: str, from_: str, via: str, to: str) -> dict[str, Any] | None:
    """How `to` against `from_` splits into code (`via` against `from_`: the new code with
    the old configuration) and configuration (`to` against `via`), in % of `from_`, so
    that code + configuration = total."""
    m = next((x for x in report["metrics"] if x["name"] == metric), None)
    if m is None or not m["valid_in_mode"]:
        return None
    values = [m["values"].get(n, {}) for n in (from_, via, to)]
    if any("median" not in v for v in values) or not values[0]["median"]:
        return None
    f, v, t = (x["median"] for x in values)
    return {"metric": metric, "label": m["label"], "unit": m["unit"], "better": m["better"],
            "from": f, "via": v, "to": t, "total_pct": 100 * (t - f) / f, "code_pct": 100 * (v - f) / f,
            "config_pct": 100 * (t - v) / f}
