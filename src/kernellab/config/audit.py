"""Audit a config against the rule base (kernellab.knowledge) for one workload profile.

Each option a rule names for the profile gets a verdict:
- ok      its value is one of the acceptable ones;
- change  it is not, and kconfig lets it be changed here (what else must change with it is
          part of the recommendation);
- boot    it is not, and the config lets the kernel make the change at boot: the rule's
          switch (a boot parameter such as preempt=none under PREEMPT_DYNAMIC) does it
          without a rebuild;
- n/a     it cannot be set in this tree and arch: the option does not exist, exists only
          for other arches, or depends on something that can never hold here; or its only
          way gives up a value that a rule outranking this one holds (`outranks` in the
          rule files: a latency kernel keeps PREEMPT_RT=y, which transparent huge pages
          would need off).
A rule is `change` when any of its options is, else `boot`, else `ok` when one is ok, else `n/a`.

A rule names the options of every kernel and arch it speaks of (PAGE_TABLE_ISOLATION, and
MITIGATION_PAGE_TABLE_ISOLATION, its name since 6.9): the audit checks those this kernel
defines for this arch, once each, and leaves the other names out (`AuditReport.left_out`).
Only a rule none of whose options this kernel defines is n/a for not having them.

Rules are counted, never options: `AuditReport.totals` is the one count every view shows.

Without --profile the config chooses (`choose_profile`): PREEMPT_RT=y is a real-time kernel
(latency), CC_OPTIMIZE_FOR_SIZE=y one built for size (embedded-small); a config that says
neither is refused with the profiles to choose from.

The fragment (`fragment`) holds the changes as assignments, and only those that survive
`make olddefconfig` together: it is checked by resolving it with kconfiglib, whose
resolution the tests hold equal to make's. A recommendation that does not survive, or that
takes more than assignments, is left out with a comment saying why; one that the others
make possible (they turn off what selected its option) is planned again on top of them.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..errors import LabError
from ..knowledge import PROFILES, Rule
from .dotconfig import Setting
from .kconfig import KconfigTree
from .planner import Need, plan, same_value

VERDICTS = ("ok", "boot", "change", "n/a")
# A rule's verdict from its options': the first of these that one of them has.
_RULE_VERDICT_ORDER = ("change", "boot", "ok", "n/a")
# What a config says of its workload, first match wins: (option, value, profile, what it makes).
PROFILE_SIGNS = (("CONFIG_PREEMPT_RT", "y", "latency", "a real-time kernel"),
                 ("CONFIG_CC_OPTIMIZE_FOR_SIZE", "y", "embedded-small", "a kernel built for size"))
# How the planner writes a need on one symbol: NAME=value, then maybe why in parentheses.
_SYMBOL_NEED = re.compile(r'(?P<name>[A-Za-z0-9_]+)=(?P<value>"(?:[^"\\]|\\.)*"|\S+)(?: \(.*\))?', re.S)


@dataclass(frozen=True)
class Held:
    """A value of the audited config that a rule holds: one of its options at an acceptable
    value, or a stronger choice it names (satisfied_by) that holds."""
    option: str   # CONFIG_NAME
    value: str
    rule: str     # the id of the rule holding it

    def text(self) -> str:
        return f"{self.option}={self.value}"


@dataclass
class Finding:
    rule: Rule
    option: str
    current: str | None            # None: the option is not in this tree, or unset
    expected: tuple[str, ...]
    verdict: str
    reason: str = ""
    target: str | None = None      # the acceptable value recommended (change)
    settings: list[Setting] | None = None   # assignments that make the change; None: more than that
    keep: tuple[Held, ...] = ()   # what the rules outranking this one hold: no way may undo it

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.id, "title": self.rule.title, "category": self.rule.category,
                "option": self.option, "current": self.current, "expected": list(self.expected),
                "verdict": self.verdict, "reason": self.reason, "recommended": self.target,
                "settings": [s.line() for s in self.settings] if self.settings else [],
                "evidence": [dataclasses.asdict(e) for e in self.rule.evidence],
                "metric": self.rule.metric, "expected_change": self.rule.expected_change}


@dataclass(frozen=True)
class Kernel:
    """The kernel whose Kconfig the audit answered in."""
    source: str           # as asked: "debian:6.1", a path
    source_version: str   # make kernelversion
    arch: str


@dataclass
class AuditReport:
    config: str
    profile: str
    where: str
    findings: list[Finding]
    kernel: Kernel
    # rule id -> the options it names that this kernel does not define for this arch, left
    # out as other kernels' names: the rule has options this one defines
    left_out: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def rule_verdicts(self) -> dict[str, tuple[Rule, str]]:
        by_rule: dict[str, list[Finding]] = {}
        for f in self.findings:
            by_rule.setdefault(f.rule.id, []).append(f)
        return {rule_id: (findings[0].rule, rule_verdict({f.verdict for f in findings}))
                for rule_id, findings in by_rule.items()}

    def totals(self) -> dict[str, Counter[str]]:
        """Rule verdicts per rule category, plus "total": the audit's one count (rules,
        not options), which every view shows."""
        out: dict[str, Counter[str]] = {}
        for rule, verdict in self.rule_verdicts().values():
            out.setdefault(rule.category, Counter())[verdict] += 1
        out = dict(sorted(out.items()))
        out["total"] = sum(out.values(), Counter())
        return out

    def to_json(self) -> list[dict[str, Any]]:
        """One row per option checked, each with its rule's verdict."""
        verdicts = self.rule_verdicts()
        return [f.to_dict() | {"rule_verdict": verdicts[f.rule.id][1]} for f in self.findings]


def rule_verdict(option_verdicts: set[str]) -> str:
    """A rule's verdict: change when any of its options is, else boot, else ok when one is, else n/a."""
    return next(v for v in _RULE_VERDICT_ORDER if v in option_verdicts)


def choose_profile(tree: KconfigTree) -> tuple[str, str]:
    """The profile the config loaded in `tree` asks for (PROFILE_SIGNS) and why, in words;
    a LabError listing the profiles when it asks for none."""
    for option, value, profile, what in PROFILE_SIGNS:
        if _holds(tree, option, value):
            return profile, f"chosen because the config sets {option}={value}: {what}"
    signs = " nor ".join(f"{o.removeprefix('CONFIG_')}={v} ({what}: {p})" for o, v, p, what in PROFILE_SIGNS)
    raise LabError(f"{tree.loaded} does not say which workload it is for, as it sets neither {signs}: "
                   f"give --profile, one of {', '.join(PROFILES)}")


def _this_kernels(tree: KconfigTree, expected: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The options of a rule this kernel defines for this arch: all of them when it defines
    none (the rule is n/a, each option saying why)."""
    defined = {option: values for option, values in expected.items() if tree.symbol(option) is not None}
    return defined or expected


def audit(tree: KconfigTree, rules: list[Rule], profile: str) -> AuditReport:
    """Audit the config loaded in `tree`."""
    findings = []
    left_out: dict[str, tuple[str, ...]] = {}
    held = {rule.id: _held(tree, rule, profile) for rule in rules}
    for rule in rules:
        named = rule.expected_for(profile) or {}
        expected = _this_kernels(tree, named)
        if len(expected) < len(named):
            left_out[rule.id] = tuple(o for o in named if o not in expected)
        stronger = _stronger(tree, rule)
        keep = tuple(h for other in rules if rule.id in other.outranks for h in held[other.id])
        at_boot = rule.switch is not None and all(_holds(tree, o, v) for o, v in rule.switch.when)
        for option, acceptable in expected.items():
            if stronger:
                sym = tree.symbol(option)
                findings.append(Finding(rule, option, tree.value(sym) if sym is not None else None, acceptable, "ok",
                                        f"{stronger} holds: a stronger choice of the same kind"))
                continue
            finding = _check(tree, rule, option, acceptable, keep)
            if at_boot and finding.verdict == "change":
                assert rule.switch is not None
                finding = dataclasses.replace(finding, verdict="boot", settings=None, reason=(
                    f"no rebuild: boot with {rule.switch.boot} ({rule.switch.text()} lets the kernel choose)"))
            findings.append(finding)
    kernel = Kernel(tree.source.spec, tree.source.version, tree.profile.name)
    return AuditReport(tree.loaded or "", profile, tree.where, findings, kernel, left_out)


def _holds(tree: KconfigTree, option: str, value: str) -> bool:
    sym = tree.symbol(option)
    current = tree.value(sym) if sym is not None else None
    return current is not None and same_value(sym, current, value)


def _stronger(tree: KconfigTree, rule: Rule) -> str:
    """The first of the rule's stronger choices the config makes ("" when none)."""
    for option, value in rule.satisfied_by:
        if _holds(tree, option, value):
            return f"{option}={value}"
    return ""


def _held(tree: KconfigTree, rule: Rule, profile: str) -> tuple[Held, ...]:
    """What `rule` holds in the config for `profile` (nothing where it does not audit it)."""
    expected = rule.expected_for(profile)
    if expected is None:
        return ()
    out = [Held(o, v, rule.id) for o, v in rule.satisfied_by if _holds(tree, o, v)]
    for option, acceptable in expected.items():
        sym = tree.symbol(option)
        current = tree.value(sym) if sym is not None else None
        if current is not None and any(same_value(sym, current, v) for v in acceptable):
            out.append(Held(option, current, rule.id))
    return tuple(out)


def _gives_up(tree: KconfigTree, need: Need, keep: tuple[Held, ...]) -> tuple[Held, str] | None:
    """The first held value the plan's way changes, depth first, and the need that changes it."""
    held = {h.option: h for h in keep}
    ahead, seen = [need], set()
    while held and ahead:
        n = ahead.pop()
        if n.met or id(n) in seen:
            continue
        seen.add(id(n))
        symbol = _SYMBOL_NEED.fullmatch(n.text)
        h = held.get(f"CONFIG_{symbol['name']}") if symbol else None
        if symbol and h is not None and not same_value(tree.symbol(h.option), h.value, symbol["value"]):
            return h, f"{symbol['name']}={symbol['value']}"
        ahead += reversed(n.needs)
    return None


def _check(tree: KconfigTree, rule: Rule, option: str, acceptable: tuple[str, ...],
           keep: tuple[Held, ...] = ()) -> Finding:
    sym = tree.symbol(option)
    if sym is None:
        return Finding(rule, option, None, acceptable, "n/a", tree.missing(option, suggest=False))
    current = tree.value(sym)
    if current is not None and any(same_value(sym, current, v) for v in acceptable):
        return Finding(rule, option, current, acceptable, "ok")
    plans = [(value, plan(tree, sym, value)) for value in acceptable]
    possible = [(value, p) for value, p in plans if p.reason() is None]
    if not possible:
        # Not None: no plan is feasible, so each has a reason.
        return Finding(rule, option, current, acceptable, "n/a", plans[0][1].reason() or "")
    feasible = [(value, p) for value, p in possible if _gives_up(tree, p, keep) is None]
    if not feasible:
        # A stronger rule of the profile holds what every way needs changed: never a change.
        given_up = _gives_up(tree, possible[0][1], keep)
        assert given_up is not None   # every possible plan gives something up
        h, needs = given_up
        return Finding(rule, option, current, acceptable, "n/a",
                       f"not applicable here: needs {needs}, but {h.text()} holds for {h.rule}, "
                       f"which outranks {rule.id}", keep=keep)
    # Prefer a value plain assignments reach, then the fewest of them.
    value, chosen = min(feasible, key=lambda vp: (vp[1].settings() is None, len(vp[1].settings() or ())))
    settings = chosen.settings()
    if settings is None:
        reason = f"takes more than assignments: {_manual(chosen)}"
    else:
        extra = [f"{s.name}={s.value}" for s in settings if s.name != option]
        reason = f"needs {', '.join(extra)} too" if extra else ""
    return Finding(rule, option, current, acceptable, "change", reason, value, settings, keep)


def _manual(need: Need) -> str:
    """The first need that takes a hand-made change (a number, a choice)."""
    if need.manual:
        return need.text
    for n in need.needs:
        if not n.met and (found := _manual(n)):
            return found
    return need.text


# --- the fragment -----------------------------------------------------------------------------

@dataclass
class Applicable:
    """The report's changes as olddefconfig keeps them together: the assignments of each
    change that survives, and why each other one was left out."""
    changes: list[Finding]
    plans: dict[int, list[Setting]]     # id(finding) -> its assignments
    why_not: dict[int, str]             # id(finding) -> why it is left out
    follows: set[int]                   # left out because the others already give its value

    def settings(self, findings: list[Finding] | None = None) -> list[Setting]:
        """The assignments of `findings` (default: every applied change), once each."""
        out: list[Setting] = []
        for f in self.changes if findings is None else findings:
            out += [s for s in self.plans.get(id(f), ()) if s not in out]
        return out


def applicable(tree: KconfigTree, report: AuditReport) -> Applicable:
    """The report's changes that survive olddefconfig together.

    Leaves `tree` with the audited config's values, as it found them.
    """
    changes = [f for f in report.findings if f.verdict == "change"]
    plans = {id(f): f.settings for f in changes if f.settings is not None}
    why_not = {id(f): f.reason for f in changes if f.settings is None}
    retried: set[int] = set()
    while True:
        _apply_surviving(tree, changes, plans, why_not)
        # With the others applied, a change that took more than assignments (an option
        # that many others select) may take only assignments: plan it again, once.
        again = {}
        for f in changes:
            if id(f) in why_not and id(f) not in retried and not _reached(tree, f):
                retried.add(id(f))
                assert f.target is not None   # a change always has its target
                again_plan = plan(tree, tree.symbol(f.option), f.target)
                settings = again_plan.settings() if _gives_up(tree, again_plan, f.keep) is None else None
                if settings:
                    again[id(f)] = settings
        if not again:
            break
        for key, settings in again.items():
            plans[key] = settings
            del why_not[key]
        tree.restore()
    follows = {id(f) for f in changes if id(f) in why_not and _reached(tree, f)}
    tree.restore()
    return Applicable(changes, plans, why_not, follows)


def fragment(tree: KconfigTree, report: AuditReport) -> str:
    """A config fragment applying the report's changes that survive olddefconfig together.

    Leaves `tree` with the audited config's values, as it found them.
    """
    found = applicable(tree, report)
    changes, plans, why_not, follows = found.changes, found.plans, found.why_not, found.follows
    lines = [f"# kernellab audit: profile {report.profile}, base {report.config}, {report.where}",
             "# Resolves cleanly on top of that base: `make olddefconfig` keeps every line.", ""]
    written: set[Setting] = set()
    rule = None
    for f in changes:
        if id(f) not in plans:
            continue
        if f.rule is not rule:
            rule = f.rule
            lines.append(f"# {rule.id}: {rule.title}")
        new = [s for s in plans[id(f)] if s not in written]
        written.update(new)
        extra = [f"{s.name}={s.value}" for s in new if s.name != f.option]
        if not new:
            lines.append(f"#   {f.option}={f.target} comes with the lines above")
        elif extra:
            lines.append(f"#   {f.option}={f.target} needs {', '.join(extra)} too")
        lines += [s.line() for s in new]
    at_boot = [f for f in report.findings if f.verdict == "boot"]
    if at_boot:
        lines += ["", "# Needs no rebuild (the kernel chooses at boot):"]
    for f in at_boot:
        assert f.rule.switch is not None   # a boot verdict comes from the rule's switch
        lines.append(f"# {f.rule.id}: boot with {f.rule.switch.boot} rather than setting {f.option}={f.target}")
    omitted = [f for f in changes if id(f) in why_not]
    if omitted:
        lines += ["", "# Not applied:"]
    for f in omitted:
        why = "the lines above already give it this value" if id(f) in follows else why_not[id(f)]
        lines.append(f"# {f.rule.id}: {f.option}={f.target} left out: {why}")
    return "\n".join(lines) + "\n"


def _apply_surviving(tree: KconfigTree, changes: list[Finding], plans: dict[int, list[Setting]],
                     why_not: dict[int, str]) -> None:
    """Apply every planned change; drop those whose assignments olddefconfig would not keep
    (two rules asking opposite things, a select that wins), saying why, and apply the rest
    again until all of them hold. Leaves `tree` with the survivors applied."""
    while True:
        applied = [f for f in changes if id(f) in plans]
        if not applied:
            return
        tree.apply([s for f in applied for s in plans[id(f)]], "audit fragment")
        failed = [f for f in applied if not _reached(tree, f) or _dropped(tree, plans[id(f)])]
        if not failed:
            return
        for f in failed:
            why_not[id(f)] = _lost(tree, f, plans.pop(id(f)))
        tree.restore()


def _reached(tree: KconfigTree, f: Finding) -> bool:
    assert f.target is not None   # only changes are checked, and a change has its target
    sym = tree.symbol(f.option)
    value = tree.value(sym)
    return value is not None and same_value(sym, value, f.target)


def _dropped(tree: KconfigTree, settings: list[Setting]) -> list[tuple[Setting, str]]:
    """The assignments olddefconfig would not keep, with the value each gets instead."""
    out = []
    for s in settings:
        sym = tree.symbol(s.name)
        value = tree.value(sym)
        if value is None or not same_value(sym, value, s.value):
            out.append((s, value if value is not None else "(unset)"))
    return out


def _lost(tree: KconfigTree, f: Finding, settings: list[Setting]) -> str:
    for s, got in _dropped(tree, settings):
        return f"with the other recommendations, olddefconfig turns {s.line()} into {s.name}={got}"
    return f"with the other recommendations it resolves to {tree.value(tree.symbol(f.option))}"
