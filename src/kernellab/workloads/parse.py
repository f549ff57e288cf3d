"""A workload's output as {metric: value}: JSON paths for programs that print JSON, one
regular expression per metric otherwise.

The JSON path language is kept to what the starter set needs, so that a path reads the
same to everyone: keys joined by dots, `[N]` for a list's item, `["key"]` for a key with
dots or spaces in it (fio's percentiles: `clat_ns.percentile["99.000000"]`). An optional
leading `$.` is accepted, as in JSONPath. No wildcards, filters or arithmetic: a metric is
one number the program printed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import LabError

Step = str | int

_STEP = re.compile(r"""
    \.?(?P<key>[A-Za-z_][A-Za-z0-9_-]*)      # .key (the first one without its dot)
  | \[(?P<index>[0-9]+)\]                    # [0]
  | \["(?P<quoted>[^"\\]*)"\]                # ["99.000000"]
""", re.VERBOSE)


def compile_path(path: str) -> tuple[Step, ...]:
    """A JSON path's steps; a path that is not in the language is a ValueError naming where."""
    text = path.removeprefix("$.").removeprefix("$")
    steps: list[Step] = []
    at = 0
    while at < len(text):
        match = _STEP.match(text, at)
        if match is None or (at == 0 and text.startswith(".")) or (at > 0 and match.group("key")
                                                                  and text[at] != "."):
            raise ValueError(f"JSON path {path!r}: cannot read {text[at:at + 20]!r} (use a.b, [0] or [\"key\"])")
        key, index, quoted = match.group("key", "index", "quoted")
        steps.append(int(index) if index is not None else key if key is not None else quoted)
        at = match.end()
    if not steps:
        raise ValueError(f"JSON path {path!r} is empty")
    return tuple(steps)


def follow(data: Any, path: str) -> Any:
    """The value at `path` in `data`; a step that finds nothing is a LabError naming it."""
    here = data
    walked = ""
    for step in compile_path(path):
        if isinstance(step, int):
            if not isinstance(here, list) or step >= len(here):
                size = f"a list of {len(here)}" if isinstance(here, list) else _kind(here)
                raise LabError(f"{path}: no item [{step}] at {walked or 'the top'} ({size})")
            here = here[step]
            walked += f"[{step}]"
        else:
            if not isinstance(here, dict) or step not in here:
                raise LabError(f"{path}: no key {step!r} at {walked or 'the top'}"
                               f"{_keys(here)}")
            here = here[step]
            walked += f".{step}" if walked else step
    return here


def _kind(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _keys(value: Any) -> str:
    if not isinstance(value, dict):
        return f" ({_kind(value)})"
    keys = ", ".join(list(value)[:8])
    return f" (keys: {keys}{', ...' if len(value) > 8 else ''})"


class Rule(Protocol):
    """What the parser reads of a metric (workloads.Metric, resolved for one instance)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def regex(self) -> str: ...
    @property
    def scale(self) -> float: ...


@dataclass
class Parsed:
    """What one output gave: the values found, and for each metric that failed, why."""

    values: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def strict(self, who: str) -> dict[str, float]:
        """The values, or the first failure as a one-line LabError."""
        if self.failures:
            name, why = next(iter(self.failures.items()))
            raise LabError(f"{who}: metric {name}: {why}")
        return self.values


def parse(rules: Iterable[Rule], output_format: str, text: str, who: str) -> Parsed:
    """Every metric of `rules` read from `text` (the program's output). An output that is
    not JSON where JSON is expected fails every metric; each other failure is its metric's
    alone, so that a run keeps the metrics that were printed."""
    rules = list(rules)
    parsed = Parsed()
    if output_format == "json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            first = text.strip().splitlines()[0][:60] if text.strip() else "(empty)"
            raise LabError(f"{who}: the output is not JSON ({exc}); it begins {first!r}") from None
        for rule in rules:
            _keep(parsed, rule, lambda r=rule: follow(data, r.path))
    else:
        for rule in rules:
            _keep(parsed, rule, lambda r=rule: _search(r.regex, text))
    return parsed


def _keep(parsed: Parsed, rule: Rule, read: Any) -> None:
    try:
        parsed.values[rule.name] = _number(read()) * rule.scale
    except LabError as exc:
        parsed.failures[rule.name] = str(exc)


def _search(regex: str, text: str) -> str:
    match = re.search(regex, text, re.MULTILINE)
    if match is None:
        raise LabError(f"the regular expression {regex!r} matches nothing in the output")
    return match.group(1)


def _number(value: Any) -> float:
    """A finite number from a JSON number or a captured string; anything else is a LabError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise LabError(f"{_kind(value)} where a number was expected: {str(value)[:40]!r}")
    try:
        number = float(value)
    except ValueError:
        raise LabError(f"{str(value)[:40]!r} is not a number") from None
    if not math.isfinite(number):
        raise LabError(f"{value!r} is not a finite number")
    return number
