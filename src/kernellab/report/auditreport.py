"""The terminal view of `kernellab audit`: a `config.audit.AuditReport` as one row per
option a rule names, then the rule verdicts per rule category."""

from __future__ import annotations

from typing import Any

from .. import modes
from ..config.audit import VERDICTS, AuditReport
from ..guest import vulnerabilities
from . import within_floor


def render_table(report: AuditReport) -> str:
    lines = [f"audit of {report.config} for profile {report.profile} ({report.where})", ""]
    if not report.findings:
        return "\n".join(lines + ["no rule audits this profile"]) + "\n"
    rw = max(len(f.rule.id) for f in report.findings)
    ow = max(len(f.option) for f in report.findings)
    lines.append(f"{'rule':<{rw}}  {'option':<{ow}}  {'current':>8}  {'expected':<10}  {'verdict':<7}  reason")
    for f in report.findings:
        expected = f.target if f.verdict in ("change", "boot") else "|".join(f.expected)
        lines.append(f"{f.rule.id:<{rw}}  {f.option:<{ow}}  {_shown(f.current):>8}  {expected:<10}  "
                     f"{f.verdict:<7}  {f.reason}".rstrip())
    lines += ["", _totals_table(report)]
    return "\n".join(lines)


def _shown(value: str | None) -> str:
    return "-" if value is None else value


def _totals_table(report: AuditReport) -> str:
    totals = report.totals()
    title = "rules per category"
    width = max(len(title), *(len(c) for c in totals))
    rows = [f"{title:<{width}}  " + "  ".join(f"{v:>6}" for v in VERDICTS) + "   rules"]
    for cat, counts in totals.items():
        rows.append(f"{cat:<{width}}  " + "  ".join(f"{counts[v]:>6}" for v in VERDICTS)
                    + f"  {sum(counts.values()):>6}")
    return "\n".join(rows) + "\n"


def render_measured(m: dict[str, Any]) -> str:
    """What `audit --measure` measured: per rule, its metric's change with its own group
    of recommendations and with all of them, then what was not measured and why."""
    how = modes.get(m["mode"]).summary
    lines = ["", f"measured by kernellab: {m['kernel']}",
             f"{how}; {m['runs']} run(s) per kernel; each effect is against the kernel as configured",
             f"noise floor: {m.get('noise_floor', 'none')}"]
    if m["rules"]:
        rw = max(len(r["rule"]) for r in m["rules"])
        cw = max(len(f"{r['option']}={r['value']}") for r in m["rules"])
        mw = max(len(r["metric"]) for r in m["rules"])
        own = [f"{effect_text(r['group_effect'])} ({r['group']})" for r in m["rules"]]
        gw = max(len(text) for text in [*own, "its group"])
        lines.append(f"{'rule':<{rw}}  {'change':<{cw}}  {'metric':<{mw}}  {'its group':<{gw}}  all recommendations")
        for r, its in zip(m["rules"], own, strict=True):
            lines.append(f"{r['rule']:<{rw}}  {r['option'] + '=' + r['value']:<{cw}}  {r['metric']:<{mw}}  "
                         f"{its:<{gw}}  {effect_text(r['all_effect'])}")
            if r.get("not_affected"):
                lines.append(f"{'':<{rw}}  {vulnerabilities.caveat(r['flaws'], r['not_affected'])}")
    lines.append("groups measured (each a kernel built and booted):")
    for g in m["groups"]:
        unit_values = ", ".join(f"{metric} {effect_text(c)}" for metric, c in g["effects"].items())
        built = f"built in {g['build_s']:.0f} s" if g["built"] else "build reused"
        what = f"{len(g['settings'])} setting(s)" if g["settings"] else "the kernel as configured"
        lines.append(f"  {g['name']}: {what}, {built}: {unit_values}")
    if m["unmeasured"]:
        lines.append("not measured:")
        lines += [f"  {u['rule']}{' ' + u['option'] if u['option'] else ''}: {u['why']}" for u in m["unmeasured"]]
    lines.append(f"cost: {m['builds']} build(s), {m['boots']} boot(s), {m['wall_s'] / 60:.1f} min wall")
    return "\n".join(lines) + "\n"


def effect_text(c: dict[str, Any] | None) -> str:
    if c is None or c.get("delta_pct") is None:
        return "-"
    d = c["delta_pct"]
    if c.get("ci_low_pct") is None and (within := within_floor(d, c.get("floor_pct"))):
        return within
    interval = (f" [{c['ci_low_pct']:+.1f}, {c['ci_high_pct']:+.1f}]{'*' if c.get('significant') else ''}"
                if c.get("ci_low_pct") is not None else "")
    word = "" if c["direction"] in ("same", "") else f" {c['direction']}"
    # Exact (icount) changes far below a percent still show their size, never "-0.00%".
    return f"{d:+.2f}%{interval}{word}" if abs(d) >= 0.01 or d == 0 else f"{d:+.1e}%{interval}{word}"
