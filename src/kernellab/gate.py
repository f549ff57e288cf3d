"""The regression gate a CI job uses: rules on a comparison report, and which of them the
measured changes break.

A change counts as the report's verdict of its cell says (report.model.judge, the one
place that decides, for every view and this gate alike): a rule is broken only by a
difference. A gated metric whose cell is not compared (not measured, not available on a
variant, or not to be believed from what was measured) breaks its rule when the rule
names it: a gate that cannot see what it guards must not pass; nor does a rule that found
nothing to check (a report of one variant, a mode in which none of its metrics means
anything), nor a figure that is not a finite number (a damaged report: NaN compares false
with everything, and a gate built on comparisons would pass it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import LabError
from .metrics.catalog import catalog, unknown_metric
from .report.conclusion import pct_text, verdict_of
from .report.model import DIFFERENCE, NOT_COMPARED

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


def parse_rule(text: str, nor: str = "") -> Rule:
    """A --fail-on value; ValueError with what to write instead (`nor`: where else an
    unknown metric was looked for, as catalog.unknown_metric says it)."""
    m = _RULE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not METRIC:+PCT, METRIC:-PCT or METRIC:PCT (e.g. proc.fork_exit:+5)")
    if m["metric"] not in catalog():
        raise ValueError(unknown_metric(m["metric"], nor))
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


def check(report: dict[str, Any], rules: Sequence[Rule]) -> list[Check]:
    """Every (rule, metric, variant) the rules gate, each variant against the report's first."""
    names = [v["name"] for v in report["variants"]]
    need_a_comparison(len(names))
    checks: list[Check] = []
    for rule in rules:
        found = _check_rule(report, rule, names[0], names[1:])
        if not found:
            found = [Check(rule, rule.metric or "every metric", ", ".join(names[1:]), True,
                           f"nothing to check: no metric it covers was measured meaningfully in {report['mode']} "
                           "mode on both sides")]
        checks += found
    return checks


def _check_rule(report: dict[str, Any], rule: Rule, baseline: str, subjects: Sequence[str]) -> list[Check]:
    metrics = {m["name"]: m for m in report["metrics"]}
    checks: list[Check] = []
    gated = [rule.metric] if rule.metric else [n for n, m in metrics.items() if m["valid_in_mode"]]
    for name in gated:
        for subject in subjects:
            found = _check_cell(rule, metrics.get(name), name, baseline, subject)
            if found is not None:
                checks.append(found)
    return checks


def _check_cell(rule: Rule, m: dict[str, Any] | None, name: str, baseline: str, subject: str) -> Check | None:
    """The rule on one cell, as its verdict says; None when the rule does not name the metric
    and the cell has nothing to check."""
    named = rule.metric is not None   # asked for by name: a gate that cannot see it fails
    if m is None:
        return Check(rule, name, subject, True, "not in the report (not measured)") if named else None
    # Whatever the rule: a damaged figure is no figure, and NaN passes every comparison.
    odd = _not_finite(m, (baseline, subject))
    if odd:
        return Check(rule, name, subject, True, f"cannot be compared: {odd}")
    v = verdict_of(m, subject)
    if v is None:
        why = "not compared: the report holds no verdict for it (write it again with kernellab compare)"
        return Check(rule, name, subject, True, why) if named else None
    if v["kind"] == NOT_COMPARED or v["delta_pct"] is None:
        return Check(rule, name, subject, True, f"not compared: {v['reason']}") if named else None
    pct = v["delta_pct"]
    counts = v["kind"] in DIFFERENCE
    said = f"{pct_text(pct)} ({v['kind']})" if counts else f"{pct_text(pct)}, no difference"
    return Check(rule, name, subject, counts and rule.breaks(pct, v["kind"]), f"{said} against {baseline}; {v['how']}")


def _not_finite(m: dict[str, Any], names: Sequence[str]) -> str:
    """What, of the figures a check compares, is not a finite number ("" when all are)."""
    figures: list[tuple[str, Any]] = []
    for n in names:
        cell = m["values"].get(n) or {}
        figures += [(f"{key} on {n}", cell.get(key)) for key in ("median", "q1", "q3")]
        figures += [(f"a run median on {n}", x) for x in cell.get("run_medians", [])]
    comparison = m["comparison"].get(names[-1]) or {}
    figures += [(key, comparison.get(key)) for key in ("delta_pct", "ci_low_pct", "ci_high_pct")]
    v = verdict_of(m, names[-1]) or {}
    figures += [("the change", v.get("delta_pct")), ("the noise floor", v.get("floor_pct"))]
    for what, value in figures:
        if isinstance(value, (int, float)) and not math.isfinite(value):
            return f"{what} is {value}"
    return ""
