"""The audit rule base: which option values suit which workload profile, and why.

The rules are data: one TOML file per category in this package (``<category>.toml``), each
holding ``[[rule]]`` tables. This module loads them, validates them against the schema the
audit engine relies on, and hands them out as frozen :class:`Rule` objects.

Schema of one rule (see any shipped file for examples)::

    [[rule]]
    id = "lockdep"                  # unique across all files, [a-z0-9-]+
    title = "..."
    category = "debugging"          # must equal the file stem
    expect.all = { CONFIG_X = "n" } # every profile without its own entry
    expect.latency = "skip"         # this profile is not audited
    rationale = "..."
    metric = "syscall.null"         # a name from metrics/metrics.toml, or ""
    expected_change = "..."
    [[rule.evidence]]
    source = "..."                  # seed:<file>, a URL, kconfig:<path>, kernellab:results/<file>
                                    # (a results file committed in results/, from
                                    # `kernellab study run NAME --format results`)
    figure = "..."                  # the figure as published
    verified = true                 # false needs a note saying why
    note = "..."
    # optional:
    satisfied_by = ["CONFIG_PREEMPT_RT=y"]        # stronger choices that satisfy it too
    switch = { when = ["CONFIG_PREEMPT_DYNAMIC=y"], boot = "preempt=none" }
                                    # when every condition holds, the change is a boot
                                    # parameter, not a rebuild (verdict "boot")
    flaws = ["meltdown"]            # the CPU flaws (names of the files in
                                    # /sys/devices/system/cpu/vulnerabilities) the options
                                    # mitigate: on a CPU not affected they never run
    outranks = ["thp-madvise"]      # ids of rules this one wins over, in every profile
                                    # that audits both: the audit never recommends to them
                                    # a change whose way undoes what this one holds

A value is ``"y"``, ``"n"``, ``"m"``, a number as written in .config (``"1000"``,
``"0x10"``), a double-quoted string (``"\\"deadline\\""``), or a list of such values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from .. import datafile
from ..errors import LabError

PROFILES = ("throughput-server", "latency", "embedded-small", "virtual-guest", "storage")
CATEGORIES = ("debugging", "preemption-timers", "compiler", "mitigations-hardening", "memory",
              "block-io", "tracing", "accounting", "size")
SKIP = "skip"

_ID = re.compile(r"[a-z0-9-]+")
_OPTION = re.compile(r"CONFIG_[A-Z0-9_]+")
# y/n/m, a decimal or hex number, or a string with its double quotes, as .config writes them.
_VALUE = re.compile(r'[ynm]|-?[0-9]+|0x[0-9a-fA-F]+|"([^"\\]|\\.)*"')
_FLAW = re.compile(r"[a-z0-9_]+")
_BOOT_WORD = re.compile(r"[a-z0-9_.\-]+=[A-Za-z0-9_,.\-]+")
_TEXT_FIELDS = ("id", "title", "category", "rationale", "metric", "expected_change")


# The schema of a rule file, for the strict loader (kernellab.datafile): which keys a
# [[rule]] and a [[rule.evidence]] may have, and their types. What the values must say
# (ids, profiles, option names and values, metrics) is checked below.
@dataclass(frozen=True)
class Evidence:
    source: str
    figure: str
    verified: bool | None = None
    note: str = ""


@dataclass(frozen=True)
class _RuleTable:
    id: str
    title: str
    category: str
    rationale: str
    metric: str
    expected_change: str
    expect: dict[str, Any]
    evidence: list[Evidence] = field(default_factory=list)
    # Stronger choices of the same kind that satisfy the rule as well ("CONFIG_PREEMPT_RT=y"
    # for a rule asking for PREEMPT): any one holding makes the rule ok, as the OR checks of
    # kernel-hardening-checker do, and the audit never recommends undoing it.
    satisfied_by: list[str] = field(default_factory=list)
    # The change needs no rebuild when the config lets the kernel choose at boot: the
    # conditions (CONFIG_NAME=VALUE, all holding) and the boot parameter that makes it.
    switch: _SwitchTable | None = None
    # The CPU flaws the options mitigate, as /sys/devices/system/cpu/vulnerabilities names
    # them: a measured cost where every run's kernel said "Not affected" is no cost at all.
    flaws: list[str] = field(default_factory=list)
    # Rules this one wins over: where a profile audits both and this one holds a value (an
    # acceptable one of its options, or a stronger choice), the other is not applicable if
    # its only way gives that value up (THP needs !PREEMPT_RT: a latency kernel keeps RT).
    outranks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _SwitchTable:
    when: list[str]
    boot: str


@dataclass(frozen=True)
class Switch:
    when: tuple[tuple[str, str], ...]   # (option, value), every one must hold
    boot: str                           # the kernel parameter that makes the change

    def text(self) -> str:
        return " and ".join(f"{o}={v}" for o, v in self.when)


@dataclass(frozen=True)
class _RuleFile:
    rule: list[dict[str, Any]]


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    category: str
    rationale: str
    metric: str
    expected_change: str
    # Resolved for every profile in PROFILES: {option: acceptable values}, or None = not audited.
    expect: dict[str, dict[str, tuple[str, ...]] | None]
    evidence: tuple[Evidence, ...]
    satisfied_by: tuple[tuple[str, str], ...] = ()   # (option, value)
    switch: Switch | None = None
    flaws: tuple[str, ...] = ()
    outranks: tuple[str, ...] = ()    # ids of the rules this one wins over

    def expected_for(self, profile: str) -> dict[str, tuple[str, ...]] | None:
        """The options this rule checks for `profile` and their acceptable values; None = skip."""
        if profile not in PROFILES:
            raise LabError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        return self.expect[profile]

    def options(self) -> set[str]:
        """Every option name the rule mentions, over all profiles."""
        return {opt for table in self.expect.values() if table for opt in table}


def flaws_by_option() -> dict[str, tuple[str, ...]]:
    """CONFIG_ name -> the CPU flaws the shipped rules say it mitigates."""
    out: dict[str, tuple[str, ...]] = {}
    for rule in _shipped():
        for option in rule.options() if rule.flaws else ():
            out[option] = tuple(dict.fromkeys((*out.get(option, ()), *rule.flaws)))
    return out


def default_dir() -> Path:
    """The directory holding the shipped rule files."""
    return Path(str(resources.files(__package__)))


def load_rules(directory: str | Path | None = None) -> list[Rule]:
    """All rules of all category files in `directory` (default: the shipped ones), validated.

    The shipped rule base is read once and cached; an explicit directory is read each time.
    Raises LabError naming the file, the rule and what is wrong.
    """
    if directory is None:
        return list(_shipped())
    return _load_dir(Path(directory))


def rules_for(profile: str, directory: str | Path | None = None) -> list[Rule]:
    """The rules that audit `profile` (those not skipping it)."""
    if profile not in PROFILES:
        raise LabError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    return [r for r in load_rules(directory) if r.expect[profile] is not None]


@cache
def _shipped() -> tuple[Rule, ...]:
    return tuple(_load_dir(default_dir()))


def _load_dir(directory: Path) -> list[Rule]:
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise LabError(f"{directory}: no rule files (*.toml) found")
    metrics = _metric_names()
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for path in files:
        for rule in _load_file(path, metrics):
            if rule.id in seen:
                raise LabError(f"{path.name}: {rule.id}: duplicate rule id (also in {seen[rule.id]})")
            seen[rule.id] = path.name
            rules.append(rule)
    _check_outranks(rules, seen)
    return rules


def _check_outranks(rules: list[Rule], files: dict[str, str]) -> None:
    """Every rule an `outranks` names exists and shares a profile with it, and no rule
    outranks itself through others: which rule wins must never depend on the order."""
    by_id = {r.id: r for r in rules}
    for rule in rules:
        where = f"{files[rule.id]}: {rule.id}"
        for other in rule.outranks:
            if other not in by_id:
                raise LabError(f"{where}: outranks {other!r}, which is no rule id")
            if not any(rule.expect[p] is not None and by_id[other].expect[p] is not None for p in PROFILES):
                raise LabError(f"{where}: outranks {other!r}, but no profile audits both")
    for rule in rules:
        if cycle := _outranking_cycle(rule.id, by_id):
            raise LabError(f"{files[rule.id]}: {rule.id}: outranks itself: {' outranks '.join(cycle)}")


def _outranking_cycle(start: str, by_id: dict[str, Rule]) -> list[str]:
    """The chain start outranks ... outranks start, if there is one ([] when none)."""
    came_from: dict[str, str] = {}
    ahead = [start]
    while ahead:
        current = ahead.pop()
        for beaten in by_id[current].outranks:
            if beaten == start:
                chain = [current]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                return [*reversed(chain), start]
            if beaten not in came_from:
                came_from[beaten] = current
                ahead.append(beaten)
    return []


def _metric_names() -> set[str]:
    from ..metrics.catalog import catalog
    return set(catalog())


def _load_file(path: Path, metrics: set[str]) -> list[Rule]:
    name = path.name
    if path.stem not in CATEGORIES:
        raise LabError(f"{name}: unknown category {path.stem!r} (file name must be one of: "
                       f"{', '.join(CATEGORIES)})")
    raw_rules = datafile.load(_RuleFile, datafile.read_toml(path, name), name).rule
    if not raw_rules:
        raise LabError(f"{name}: no [[rule]] tables")
    return [_parse_rule(name, path.stem, i, raw, metrics) for i, raw in enumerate(raw_rules, 1)]


def _parse_rule(name: str, category: str, index: int, raw: dict[str, Any], metrics: set[str]) -> Rule:
    rid = raw.get("id")
    label = rid if isinstance(rid, str) and rid else f"rule #{index}"

    def fail(what: str) -> LabError:
        return LabError(f"{name}: {label}: {what}")

    table = datafile.load(_RuleTable, raw, f"{name}: {label}")
    for key in _TEXT_FIELDS:
        if key != "metric" and not getattr(table, key).strip():
            raise fail(f"{key!r} is empty")
    if not _ID.fullmatch(table.id):
        raise fail("id must match [a-z0-9-]+")
    if table.category != category:
        raise fail(f"unknown category {table.category!r}: a rule in {name} must have "
                   f"category {category!r}")
    if table.metric and table.metric not in metrics:
        raise fail(f"metric {table.metric!r} is not in the metric catalog (metrics/metrics.toml)")
    expect = _parse_expect(table.expect, fail)
    evidence = _parse_evidence(table.evidence, fail)
    stronger = tuple(_assignment(text, "satisfied_by", fail) for text in table.satisfied_by)
    switch = None
    if table.switch is not None:
        if not table.switch.when:
            raise fail("switch.when names no CONFIG_NAME=VALUE condition")
        if not _BOOT_WORD.fullmatch(table.switch.boot):
            raise fail(f"switch.boot {table.switch.boot!r} is not one kernel parameter (name=value)")
        switch = Switch(tuple(_assignment(t, "switch.when", fail) for t in table.switch.when), table.switch.boot)
    for flaw in table.flaws:
        if not _FLAW.fullmatch(flaw):
            raise fail(f"flaws: {flaw!r} is not a file name of /sys/devices/system/cpu/vulnerabilities "
                       "(e.g. meltdown, spectre_v2)")
    for other in table.outranks:
        if not _ID.fullmatch(other) or other == table.id:
            raise fail(f"outranks {other!r}: name the id of another rule")
    if len(set(table.outranks)) != len(table.outranks):
        raise fail("outranks names a rule twice")
    return Rule(id=table.id, title=table.title, category=category, rationale=table.rationale,
                metric=table.metric, expected_change=table.expected_change,
                expect=expect, evidence=evidence, satisfied_by=stronger, switch=switch,
                flaws=tuple(table.flaws), outranks=tuple(table.outranks))


def _assignment(text: str, key: str, fail: Callable[[str], LabError]) -> tuple[str, str]:
    option, eq, value = text.partition("=")
    if not eq or not _OPTION.fullmatch(option) or not _VALUE.fullmatch(value):
        raise fail(f"{key} {text!r} is not CONFIG_NAME=VALUE")
    return option, value


def _parse_expect(raw: object, fail: Callable[[str], LabError]) -> dict[str, dict[str, tuple[str, ...]] | None]:
    if raw is None:
        raise fail("missing 'expect'")
    if not isinstance(raw, dict) or not raw:
        raise fail("empty expect: give expect.all or at least one profile")
    unknown = set(raw) - set(PROFILES) - {"all"}
    if unknown:
        raise fail(f"unknown profile {sorted(unknown)[0]!r} in expect (known: all, "
                   f"{', '.join(PROFILES)})")
    tables = {key: _parse_table(key, value, fail) for key, value in raw.items()}
    default = tables.get("all")
    resolved = {p: tables[p] if p in tables else default for p in PROFILES}
    if all(v is None for v in resolved.values()):
        raise fail("empty expect: every profile is skipped")
    return resolved


def _parse_table(key: str, value: object, fail: Callable[[str], LabError]) -> dict[str, tuple[str, ...]] | None:
    if value == SKIP:
        return None
    if not isinstance(value, dict):
        raise fail(f"expect.{key} must be a table of options or \"skip\"")
    if not value:
        raise fail(f"empty expect: expect.{key} names no option")
    table: dict[str, tuple[str, ...]] = {}
    for option, accepted in value.items():
        if not _OPTION.fullmatch(option):
            raise fail(f"option name {option!r} in expect.{key} does not match CONFIG_[A-Z0-9_]+")
        values = tuple(accepted) if isinstance(accepted, list) else (accepted,)
        if not values:
            raise fail(f"{option} in expect.{key} has an empty list of values")
        for v in values:
            if not isinstance(v, str) or not _VALUE.fullmatch(v):
                raise fail(f"{option} in expect.{key}: value {v!r} is not as written in .config "
                           "(y, n, m, a number, or a double-quoted string, given as a TOML string)")
        table[option] = values
    return table


def _parse_evidence(raw: list[Evidence], fail: Callable[[str], LabError]) -> tuple[Evidence, ...]:
    if not raw:
        raise fail("missing evidence: at least one [[rule.evidence]] is required")
    for i, ev in enumerate(raw, 1):
        for key in ("source", "figure"):
            if not getattr(ev, key).strip():
                raise fail(f"evidence #{i}: missing or empty {key!r}")
        if ev.verified is False and not ev.note.strip():
            raise fail(f"evidence #{i}: verified = false needs a note saying what could not be checked")
    return tuple(raw)
