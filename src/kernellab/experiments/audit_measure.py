"""`kernellab audit --measure`: what the audit's recommendations do, measured by kernellab.

The audited config is built as it resolves, then with every recommendation applied, then
with each rule category's recommendations on their own; each kernel is booted for the
metrics the recommending rules name, and each rule is shown the effect its group and all
recommendations had on its metric. A recommendation the kernel makes at boot (verdict
"boot") is measured by booting the kernel as configured with its parameter. A
distribution's config is measured reduced onto lab-minimal (kernellab.config.reduce, with
every option the rules check kept at the config's value), and the result says so. What
cannot be measured is listed with why.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .. import modes, paths, progress
from ..config import reduce
from ..config.audit import Applicable, AuditReport, Finding
from ..config.dotconfig import format_config, parse_config
from ..config.kconfig import open_tree
from ..errors import LabError
from ..guest import vulnerabilities
from ..report.model import NoiseFloor, judge_probes
from ..store import Store
from . import floor, lab
from .placement import Placement
from .probe import Probe, Prober
from .spec import VariantSpec

ALL = "all recommendations"


@dataclass
class Group:
    name: str                                # ALL, a rule category, or "boot PARAM"
    settings: dict[str, str]
    rules: list[str]
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)   # metric -> comparison
    dropped: list[str] = field(default_factory=list)
    build_s: float = 0.0
    built: bool = False
    flaws: list[dict[str, str]] = field(default_factory=list)   # per run: what its kernel said


@dataclass
class MeasuredAudit:
    mode: str
    runs: int
    kernel: str                              # what was built: the config, or its reduction
    metrics: list[str]
    baseline: dict[str, float]
    groups: list[Group]
    rules: list[dict[str, Any]]              # per measured rule: its group, metric, effects
    unmeasured: list[dict[str, str]]         # rule, option, why
    noise_floor: str                         # whose floor judged the exact changes, or why none
    builds: int
    boots: int
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "groups": [g.__dict__ for g in self.groups]}


def measure(store: Store, report: AuditReport, found: Applicable, config_path: str, config_text: str,
            source: str, arch: str, mode: modes.Mode, runs: int | None = None,
            log: Callable[[str], None] = print, placement: Placement | None = None) -> MeasuredAudit:
    start = time.monotonic()
    runs = runs or mode.runs
    unmeasured: list[dict[str, str]] = []
    measurable: list[Finding] = []
    for f in found.changes:
        if id(f) not in found.plans:
            why = ("the other recommendations already give it this value" if id(f) in found.follows
                   else found.why_not[id(f)])
            unmeasured.append(_why(f, f"not built: {why}"))
        elif not f.rule.metric:
            unmeasured.append(_why(f, "the rule names no metric kernellab measures"))
        else:
            measurable.append(f)
    at_boot: list[Finding] = []
    for f in report.findings:
        if f.verdict == "boot" and not f.rule.metric:
            unmeasured.append(_why(f, "the rule names no metric kernellab measures"))
        elif f.verdict == "boot" and f.rule.id not in {b.rule.id for b in at_boot}:
            at_boot.append(f)
    for rule_id, (_rule, verdict) in report.rule_verdicts().items():
        if verdict == "n/a":
            reason = next(f.reason for f in report.findings if f.rule.id == rule_id)
            unmeasured.append({"rule": rule_id, "option": "", "why": f"not applicable here: {reason}"})

    base, kernel = _base(report, config_path, config_text, source, arch)
    prepared = lab.prepare(base)
    for f in list(measurable):
        if prepared.config.values.get(f.option, "n") == f.target:
            measurable.remove(f)
            unmeasured.append(_why(f, f"the measured kernel already has {f.option}={f.target} "
                                      "(the reduction keeps lab-minimal's value)"))
    if not measurable and not at_boot:
        raise LabError("audit --measure: no recommended change can be built and measured here "
                       "(see the audit's reasons); nothing was built")
    metrics = sorted({f.rule.metric for f in measurable + at_boot})
    measured_floor = floor.load_for(prepared) if mode.deterministic else None
    floor_pct = measured_floor.pct if measured_floor else {}
    # Tolerant: a metric this kernel cannot measure leaves its rules unmeasured, not the rest.
    prober = Prober(store, base, prepared.config.text, metrics, mode, tolerant=True, placement=placement,
                    command="audit --measure")
    groups = _groups(found, measurable) if measurable else []
    boot_groups = [Group(f"boot {_param(f)}", {}, [f.rule.id]) for f in at_boot]
    log(f"audit --measure: {kernel}; {len(groups) + len(boot_groups)} variant(s) beside it, {mode.name} mode, "
        f"{runs} run(s), metrics {', '.join(metrics)}")
    with progress.task("audit --measure", len(groups) + len(boot_groups) + 1, "kernels measured") as bar:
        baseline = prober.probe("as-configured", {}, runs)
        bar.advance()
        for g in groups:
            _record(store, g, baseline, prober.probe(f"audit:{g.name}", g.settings, runs), metrics, mode, floor_pct)
            log(f"{g.name}: " + ", ".join(f"{m} {_pct(c)}" for m, c in g.effects.items()))
            bar.advance()
        for f, g in zip(at_boot, boot_groups, strict=True):
            # The same kernel, booted with the parameter: its build is reused.
            booted = Prober(store, replace(base, boot_args=[*base.boot_args, _param(f)]), prepared.config.text,
                            metrics, mode, tolerant=True, placement=placement, command="audit --measure")
            _record(store, g, baseline, booted.probe(f"audit:{g.name}", {}, runs), metrics, mode, floor_pct)
            prober.boots += booted.boots
            log(f"{g.name}: " + ", ".join(f"{m} {_pct(c)}" for m, c in g.effects.items()))
            bar.advance()
    by_name = {g.name: g for g in groups + boot_groups}
    rules = []
    for f in at_boot:
        g = by_name[f"boot {_param(f)}"]
        if f.rule.metric not in g.effects:
            unmeasured.append(_why(f, f"the measured kernel gave no {f.rule.metric} (not available here)"))
            continue
        rules.append({"rule": f.rule.id, "option": f.option, "value": f.target, "group": g.name,
                      "metric": f.rule.metric, "group_effect": g.effects[f.rule.metric], "all_effect": None,
                      "flaws": list(f.rule.flaws),
                      "not_affected": vulnerabilities.inactive(g.flaws, list(f.rule.flaws),
                                                               [*base.boot_words(), _param(f)])})
    for f in measurable:
        own, every = by_name[f.rule.category], by_name[ALL]
        if f.option in own.dropped or f.option in every.dropped:
            unmeasured.append(_why(f, "olddefconfig did not keep it on the measured kernel"))
            continue
        if f.rule.metric not in own.effects or f.rule.metric not in every.effects:
            unmeasured.append(_why(f, f"the measured kernel gave no {f.rule.metric} (not available here)"))
            continue
        rules.append({"rule": f.rule.id, "option": f.option, "value": f.target, "group": f.rule.category,
                      "metric": f.rule.metric, "group_effect": own.effects[f.rule.metric],
                      "all_effect": every.effects[f.rule.metric],
                      "flaws": list(f.rule.flaws),
                      "not_affected": vulnerabilities.inactive(own.flaws + every.flaws, list(f.rule.flaws),
                                                               base.boot_words())})
    return MeasuredAudit(mode.name, runs, kernel, metrics, {m: baseline.value(m) for m in metrics if baseline.runs[m]},
                         groups + boot_groups,
                         rules, unmeasured, _floor_origin(measured_floor, mode), prober.builds, prober.boots,
                         time.monotonic() - start)


def _param(f: Finding) -> str:
    assert f.rule.switch is not None   # a boot verdict comes from the rule's switch
    return f.rule.switch.boot


def _why(f: Finding, why: str) -> dict[str, str]:
    return {"rule": f.rule.id, "option": f"{f.option}={f.target}", "why": why}


def _base(report: AuditReport, config_path: str, config_text: str, source: str,
          arch: str) -> tuple[VariantSpec, str]:
    """The kernel the recommendations are measured on, and what to call it."""
    values = parse_config(config_text, config_path)
    if not reduce.is_distribution_size(values):
        return VariantSpec("as-configured", config_path, source=source, arch=arch), f"{config_path} as it resolves"
    lean = lab.prepare(VariantSpec("lab-minimal", "lab-minimal", source=source, arch=arch))
    assert lean.toolchain is not None   # lab-minimal is a kernel kernellab builds
    checked = {o for f in report.findings for o in (f.option, *(s.name for s in f.settings or ()))}
    reduced = reduce.reduce(open_tree(lean.source, lean.profile, lean.toolchain), lean.config.values,
                            values, checked)
    text = f"# {config_path} reduced onto lab-minimal (kernellab.config.reduce)\n" + format_config(reduced)
    path = paths.cache_dir("audit") / f"reduced-{hashlib.sha256(text.encode()).hexdigest()[:16]}.config"
    if not path.exists():
        path.write_text(text)
    modules = sum(v == "m" for v in values.values())
    return (VariantSpec("as-configured", "lab-minimal", [str(path)], source=source, arch=arch),
            f"{config_path} reduced onto lab-minimal ({modules} modules: a distribution's config; "
            f"{len(reduced)} of its kernel-wide choices and every option the rules check kept, "
            f"drivers left out: {path})")


def _groups(found: Applicable, measurable: list[Finding]) -> list[Group]:
    def group(name: str, findings: list[Finding]) -> Group:
        settings = {s.name: s.value for s in found.settings(findings)}
        return Group(name, settings, sorted({f.rule.id for f in findings}))
    out = [group(ALL, measurable)]
    for category in sorted({f.rule.category for f in measurable}):
        out.append(group(category, [f for f in measurable if f.rule.category == category]))
    return out


def _floor_origin(measured: floor.Floor | None, mode: modes.Mode) -> str:
    if not mode.deterministic:
        return f"none: in {mode.name} mode the intervals say what is noise"
    if measured is None:
        return "none measured for these kernels (`kernellab noise-floor`): every exact difference counts"
    return f"{measured.base}'s ({measured.measured})"


def _record(store: Store, g: Group, baseline: Probe, probe: Probe, metrics: list[str], mode: modes.Mode,
            floor_pct: dict[str, float]) -> None:
    g.dropped = [d["option"] for d in probe.dropped]
    g.build_s, g.built = probe.build.wall_s, not probe.build.cached
    g.flaws = [flaws for run_id in probe.run_ids if (flaws := store.run_vulnerabilities(run_id))]
    measured = [m for m in metrics if baseline.runs[m] and probe.runs[m]]
    g.effects = judge_probes({m: baseline.runs[m] for m in measured}, probe.runs, mode.name,
                             NoiseFloor(floor_pct, "the audit's"))
    for m in measured:
        if m in floor_pct:
            g.effects[m]["floor_pct"] = floor_pct[m]


def _pct(c: dict[str, Any]) -> str:
    return "-" if c.get("delta_pct") is None else f"{c['delta_pct']:+.2f}%"
