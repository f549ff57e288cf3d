"""The regression gate a CI job uses: rules on a comparison report, and which of them the
measured changes break.

A change counts by the rule the written summaries use (report.conclusion.metric_delta):
in wall mode only what the statistics call significant, in a deterministic mode the exact
difference beyond the metric's noise floor and the spread of its repeats. A gated metric
that was not measured, or cannot be measured on a variant, breaks its rule: a gate that
cannot see what it guards must not pass; nor does a rule that found nothing to check (a
report of one variant, a mode in which none of its metrics means anything), nor a figure
that is not a finite number (a damaged report: NaN compares false with everything, and
a gate built on comparisons would pass it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import LabError
from .metrics.catalog import catalog
from .report.conclusion import NoiseFloor, metric_delta

# METRIC:+PCT (rises by more than PCT %), METRIC:-PCT (falls by more), METRIC:PCT (worse,
# by the catalog's direction, by more). Nothing else: a rule travels through CI YAML and
# shells, and characters a shell would read are refused rather than guessed at.
_RULE = re.compile(r"(?P<metric>[a-z0-9_.]+):(?P<sign>[+-]?)(?P<pct>[0-9]+(\.[0-9]+)?)")


@dataclass(frozen=True)
class Rule:
    text: str
    metric: str | None       # None: every metric the report compares (--fail-on-regression)
    sign: str                # "+" rise, "-" fall, "" worse by the catalog's direction
    pct: float

    def breaks(self, pct: float, direction: str) -> bool:
        if self.sign == "+":
            return pct > self.pct
        if self.sign == "-":
            return pct < -self.pct
        return direction == "worse" and abs(pct) > self.pct


def parse_rule(text: str) -> Rule:
    """A --fail-on value; ValueError with what to write instead."""
    m = _RULE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not METRIC:+PCT, METRIC:-PCT or METRIC:PCT (e.g. proc.fork_exit:+5)")
    if m["metric"] not in catalog():
        raise ValueError(f"unknown metric {m['metric']!r} (see src/kernellab/metrics/metrics.toml)")
    return Rule(text, m["metric"], m["sign"], float(m["pct"]))


def regression_rule(pct: float) -> Rule:
    return Rule(f"any metric worse by more than {pct:g}%", None, "", pct)


@dataclass(frozen=True)
class Check:
    """One rule on one metric of one variant against the baseline."""
    rule: Rule
    metric: str
    variant: str
    broken: bool
    detail: str              # what was measured and how, or why nothing could be

    def line(self) -> str:
        verdict = "broken" if self.broken else "ok"
        return f"{verdict}: {self.metric} {self.variant}: {self.detail} (rule {self.rule.text})"


def need_a_comparison(variants: int) -> None:
    """A LabError unless there is a variant to set against the first: a gate of one
    variant checks nothing, and must not say it passed."""
    if variants < 2:
        raise LabError(f"the gate compares each variant with the first, and there {'is' if variants == 1 else 'are'} "
                       f"{variants}: give at least two variants (or drop --fail-on/--fail-on-regression)")


def check(report: dict[str, Any], rules: Sequence[Rule], floor: NoiseFloor) -> list[Check]:
    """Every (rule, metric, variant) the rules gate, each variant against the report's first."""
    names = [v["name"] for v in report["variants"]]
    need_a_comparison(len(names))
    checks: list[Check] = []
    for rule in rules:
        found = _check_rule(report, rule, floor, names[0], names[1:])
        if not found:
            found = [Check(rule, rule.metric or "every metric", ", ".join(names[1:]), True,
                           f"nothing to check: no metric it covers was measured meaningfully in {report['mode']} "
                           "mode on both sides")]
        checks += found
    return checks


def _check_rule(report: dict[str, Any], rule: Rule, floor: NoiseFloor, baseline: str,
                subjects: Sequence[str]) -> list[Check]:
    metrics = {m["name"]: m for m in report["metrics"]}
    arch = report["variants"][0]["arch"]
    checks: list[Check] = []
    gated = [rule.metric] if rule.metric else [n for n, m in metrics.items() if m["valid_in_mode"]]
    for name in gated:
        for subject in subjects:
            why = _unmeasured(metrics.get(name), report["mode"], (baseline, subject))
            if why:
                if rule.metric:   # asked for by name: a gate that cannot see it fails
                    checks.append(Check(rule, name, subject, True, why))
                continue
            # Whatever the rule: a damaged figure is no figure, and NaN passes every comparison.
            odd = _not_finite(metrics[name], (baseline, subject), floor.of(name))
            if odd:
                checks.append(Check(rule, name, subject, True, f"cannot be compared: {odd}"))
                continue
            d = metric_delta(report, arch, name, baseline, subject, floor)
            if d is None:
                if rule.metric:
                    checks.append(Check(rule, name, subject, True, "no baseline value to compare with"))
                continue
            if d.not_compared:
                if rule.metric:
                    checks.append(Check(rule, name, subject, True, f"cannot be compared: {d.not_compared}"))
                continue
            if not math.isfinite(d.pct):
                checks.append(Check(rule, name, subject, True, f"cannot be compared: a change of {d.pct}%"))
                continue
            broken = d.counts and rule.breaks(d.pct, d.direction)
            said = f"{d.pct:+.1f}% ({d.direction})" if d.counts else f"{d.pct:+.1f}%, no difference"
            checks.append(Check(rule, name, subject, broken, f"{said} against {baseline}; {d.how}"))
    return checks


def _not_finite(m: dict[str, Any], names: Sequence[str], floor_pct: float) -> str:
    """What, of the figures a check compares, is not a finite number ("" when all are)."""
    figures: list[tuple[str, Any]] = [("the noise floor", floor_pct)]
    for n in names:
        cell = m["values"][n]
        figures += [(f"{key} on {n}", cell.get(key)) for key in ("median", "q1", "q3")]
        figures += [(f"a run median on {n}", x) for x in cell.get("run_medians", [])]
    comparison = m["comparison"].get(names[-1]) or {}
    figures += [(key, comparison.get(key)) for key in ("delta_pct", "ci_low_pct", "ci_high_pct")]
    for what, value in figures:
        if isinstance(value, (int, float)) and not math.isfinite(value):
            return f"{what} is {value}"
    return ""


def _unmeasured(m: dict[str, Any] | None, mode: str, names: Sequence[str]) -> str:
    if m is None:
        return "not in the report (not measured)"
    if not m["valid_in_mode"]:
        return f"not measured meaningfully in {mode} mode"
    for n in names:
        cell = m["values"].get(n)
        if not cell:
            return f"not measured on {n}"
        if "not_available" in cell:
            return f"not available on {n}: {cell['not_available']}"
    return ""
