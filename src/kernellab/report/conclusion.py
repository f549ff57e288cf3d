"""The written summaries, from the verdicts the report holds (report.model.judge): a
compare report's (one headline per variant, its differences by metric group, and what
was not compared) and a study's, in the manner of the management summary of the seed
001_1761d257574c0e1b.txt ("2.6 takes 30...40% longer to compile"): one line per
headline, the range across arches, "better" or "worse" from the verdict, and how each
figure was obtained. What counts as a difference is the verdict's, never decided here:
see report.model for the rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import datafile
from ..errors import LabError
from ..metrics.catalog import catalog, unknown_metric
from . import clip, fit_items, shown_metrics
from .model import DIFFERENCE, NOT_COMPARED, NoiseFloor, compare_variants, verdict


@dataclass(frozen=True)
class _FloorFile:
    floor: dict[str, float]
    measured: str = ""     # how and when the floor was measured


def load_floor(path: Path) -> NoiseFloor:
    origin = f"noise floor {path}"
    f = datafile.load(_FloorFile, datafile.read_toml(path, origin), origin)
    for metric, pct in f.floor.items():
        if metric not in catalog():
            raise LabError(f"{origin}: {unknown_metric(metric)}")
        if pct < 0:
            raise LabError(f"{origin}: {metric}: a floor is a size, not {pct:g}")
    # NoiseFloor refuses a floor that is not a finite number (TOML has nan and inf).
    return NoiseFloor(f.floor, f"{path}" + (f" ({f.measured})" if f.measured else ""))


@dataclass(frozen=True)
class Delta:
    """One metric, one arch: the subject against the baseline, as its verdict says."""
    arch: str
    metric: str
    label: str
    pct: float
    direction: str         # better / worse, or same when it is no difference
    counts: bool           # a difference (the verdict's kind is better or worse)
    how: str               # mode, runs, spread
    not_compared: str = ""  # why a difference of it is not to be believed (ccache hits)


def metric_delta(report: dict[str, Any], arch: str, metric: str, baseline: str, subject: str,
                 floor: NoiseFloor, others: Mapping[str, dict[str, Any]] | None = None) -> Delta | None:
    """The subject's change against the baseline in one arch's compare report, as its
    verdict says; None when either side did not measure it. Against the report's first
    variant the verdict is the report's own; against another, the same rule (model.verdict)
    judges `others` (metric -> comparison, from `comparisons`) by `floor`."""
    m = next((x for x in report["metrics"] if x["name"] == metric), None)
    if m is None or not m["valid_in_mode"]:
        return None   # not measured, or meaningless in this mode (memory bandwidth under icount)
    a, b = m["values"].get(baseline, {}), m["values"].get(subject, {})
    if "median" not in a or "median" not in b or not a["median"]:
        return None
    if report["variants"][0]["name"] == baseline:
        v = m.get("verdict", {}).get(subject)
    else:
        v = verdict(m, baseline, subject, (others or {}).get(metric), report["mode"], floor.of(metric),
                    report["variants"])
    if v is None or v["delta_pct"] is None:
        return None
    counts = v["kind"] in DIFFERENCE
    return Delta(arch, metric, m["label"], v["delta_pct"], v["kind"] if counts else "same", counts, v["how"],
                 v["reason"] if v["kind"] == NOT_COMPARED else "")


def comparisons(report: dict[str, Any], metrics: Sequence[str], baseline: str,
                subject: str) -> dict[str, dict[str, Any]]:
    """Two variants of a report compared on some metrics as the report compares each variant
    with its first one (the same tests, the correction for many metrics over these)."""
    results = compare_variants(report["metrics"], baseline, subject, report["mode"], only=metrics)
    return {name: c.to_dict() for name, c in results.items()}


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
    own `subject` and `against`, the variant it is compared with), from each arch's report
    as judged by the study's floor (studyreport.build: model.judge); `floor` judges only
    the comparisons against a variant other than the first, which the reports do not hold."""
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


# -- a compare report's written summary and its cells' words ----------------------------

# The width of a summary line where no screen sets one (a file, the HTML page): the
# differences of a group that do not fit are counted ("and N more").
SUMMARY_WIDTH = 160
BULLET = "- "


def verdict_of(m: dict[str, Any], variant: str) -> dict[str, Any] | None:
    """The cell's verdict as the report holds it (None: the report has none for it)."""
    v: dict[str, Any] | None = m.get("verdict", {}).get(variant)
    return v


def pct_text(pct: float, digits: int = 1) -> str:
    """A change in %, signed; one too small for `digits` that is not zero keeps its first
    significant digits, so that a difference never reads as +0.0%."""
    text = f"{pct:+.{digits}f}%"
    if pct and float(text[:-1]) == 0:
        places = -math.floor(math.log10(abs(pct))) + 1
        text = f"{pct:+.{places}f}%"
    return text


def delta_text(m: dict[str, Any], variant: str, interval: bool = True) -> str:
    """A cell's Δ as the tables show it, its verdict in plain text (verdict_text)."""
    return verdict_text(verdict_of(m, variant), m["comparison"].get(variant) or {}, interval)


def verdict_text(v: Mapping[str, Any] | None, c: Mapping[str, Any], interval: bool = True) -> str:
    """A change and its verdict `v` (report.model) in plain text: * a difference (better or
    worse by the metric's direction), (Δ) not compared, no mark no difference; a change
    within the noise floor said so; where the statistics tested it and `interval` asks,
    the 95% interval (`c`, its comparison)."""
    if v is None or v["delta_pct"] is None:
        return "-"
    d = v["delta_pct"]
    if "floor_pct" in v:
        return f"within floor ({d:+.1f}%, floor {v['floor_pct']:.1f}%)"
    text = pct_text(d)
    if interval and c.get("testable") and c.get("ci_low_pct") is not None and c.get("ci_high_pct") is not None:
        text += f" [{c['ci_low_pct']:+.1f},{c['ci_high_pct']:+.1f}]"
    if v["kind"] in DIFFERENCE:
        return text + "*"
    return f"({text})" if v["kind"] == NOT_COMPARED else text


DELTA_LEGEND = ("Δ: * marks a difference (its verdict: better or worse by the metric's direction), (Δ) a change "
                "not compared (why: in the written summary and the JSON), no mark no difference")
# The legend on a screen, where the verdicts have their colours.
SHORT_LEGEND = "Δ: * a difference (red worse, green better), (Δ) not compared, unmarked: none"


def summary(report: dict[str, Any], width: int | None = None) -> str:
    """A compare report's written summary, in the manner of the seed studies: per variant a
    headline, then a line per metric group, the group of the largest change first, each
    naming its largest changes first, as many as fit `width` (default SUMMARY_WIDTH), and
    counting the rest; then what was not compared and why."""
    width = width or SUMMARY_WIDTH
    lines = []
    for headline, groups in summary_parts(report, width - len(BULLET)):
        lines.append(clip(f"{headline}:" if groups else f"{headline}.", width))
        lines += [BULLET + g for g in groups]
    return "\n".join(lines)


def summary_parts(report: dict[str, Any], width: int = SUMMARY_WIDTH) -> list[tuple[str, list[str]]]:
    """The summary's structure: per variant, a headline and one phrase per metric group
    ("syscalls: fstat +2289% (worse), ... and 3 more"), each at most `width` characters,
    then "not compared: ..." per reason when some were."""
    names = [v["name"] for v in report["variants"]]
    parts: list[tuple[str, list[str]]] = []
    for other in names[1:]:
        changed: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        unsure: dict[str, list[str]] = {}
        for m in shown_metrics(report, show_all=False):
            v = verdict_of(m, other)
            if v is None:
                continue
            if v["kind"] in DIFFERENCE:
                changed.setdefault(m["group"], []).append((m, v))
            elif v["kind"] == NOT_COMPARED and v["delta_pct"] is not None:   # measured on both sides
                unsure.setdefault(v["reason"], []).append(m["label"])
        groups = [_group_phrase(group, cells, width) for group, cells in
                  sorted(changed.items(), key=lambda gc: -max(abs(v["delta_pct"]) for _, v in gc[1]))]
        groups += [fit_items("not compared: ", labels, width, f" ({why})") for why, labels in unsure.items()]
        headline = (f"{other} vs {names[0]} ({report['mode']} mode)" if changed
                    else f"{other}: no change of note against {names[0]}")
        parts.append((headline, groups))
    return parts


def _group_phrase(group: str, cells: list[tuple[dict[str, Any], dict[str, Any]]], width: int) -> str:
    """A group's differences, the largest (in magnitude) first, as many as fit `width`."""
    ordered = sorted(cells, key=lambda mv: -abs(mv[1]["delta_pct"]))
    return fit_items(f"{group}: ", [f"{m['label']} {pct_text(v['delta_pct'], 0)} ({v['kind']})" for m, v in ordered],
                     width)


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
