"""`kernellab audit`'s result as a kind of result (report/kinds.py): the findings of a
`config.audit.AuditReport` and what `--measure` measured, as data; as text, one row per
option a rule names, then the rule verdicts per rule category, then the measured effects.
Its HTML page is html.audit_page."""

from __future__ import annotations

from typing import Any

from .. import modes
from ..config.audit import VERDICTS, AuditReport
from ..guest import vulnerabilities
from . import kinds
from .conclusion import DELTA_LEGEND, pct_text, verdict_text
from .model import DIFFERENCE


def body(report: AuditReport, measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """The audit as written: what was audited, the findings, and what --measure measured."""
    return {"config": report.config, "profile": report.profile, "where": report.where, "findings": report.to_json(),
            # rule verdicts per rule category, and "total"
            "totals": {category: dict(counts) for category, counts in report.totals().items()},
            **({"measured": measured} if measured else {})}


def render_table(audit: dict[str, Any]) -> str:
    findings = audit["findings"]
    lines = [f"audit of {audit['config']} for profile {audit['profile']} ({audit['where']})", ""]
    if not findings:
        return "\n".join(lines + ["no rule audits this profile"]) + "\n"
    rw = max(len(f["rule"]) for f in findings)
    ow = max(len(f["option"]) for f in findings)
    lines.append(f"{'rule':<{rw}}  {'option':<{ow}}  {'current':>8}  {'expected':<10}  {'verdict':<7}  reason")
    for f in findings:
        expected = f["recommended"] if f["verdict"] in ("change", "boot") else "|".join(f["expected"])
        lines.append(f"{f['rule']:<{rw}}  {f['option']:<{ow}}  {_shown(f['current']):>8}  {expected:<10}  "
                     f"{f['verdict']:<7}  {f['reason']}".rstrip())
    lines += ["", _totals_table(audit["totals"])]
    return "\n".join(lines)


def _shown(value: str | None) -> str:
    return "-" if value is None else value


def _totals_table(totals: dict[str, dict[str, int]]) -> str:
    title = "rules per category"
    width = max(len(title), *(len(c) for c in totals))
    rows = [f"{title:<{width}}  " + "  ".join(f"{v:>6}" for v in VERDICTS) + "   rules"]
    for cat, counts in totals.items():
        rows.append(f"{cat:<{width}}  " + "  ".join(f"{counts.get(v, 0):>6}" for v in VERDICTS)
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
        lines.append(DELTA_LEGEND)
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
    """A measured effect with its verdict (report.model, as every compare cell has), the
    direction said in words where it is a difference; one written before effects carried
    their verdict shows its change and interval, unjudged."""
    if c is None or c.get("delta_pct") is None:
        return "-"
    v = c.get("verdict")
    if v is None:
        interval = (f" [{c['ci_low_pct']:+.1f},{c['ci_high_pct']:+.1f}]" if c.get("ci_low_pct") is not None
                    and c.get("ci_high_pct") is not None else "")
        return pct_text(c["delta_pct"], 2) + interval
    return verdict_text(v, c) + (f" {v['kind']}" if v["kind"] in DIFFERENCE else "")


def _text(audit: dict[str, Any], view: kinds.View) -> str:
    return render_table(audit) + (render_measured(audit["measured"]) if audit.get("measured") else "")


def _html(audit: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML page
    return html.audit_page(audit["findings"], audit["config"], audit["profile"], audit.get("measured"))


AUDIT = kinds.register(kinds.Kind(
    name="audit", tag="kernellab-audit", what="an audit", version=1, readable=(1,), schema="audit-schema.json",
    rewrite="write it again with `kernellab audit CONFIG --profile PROFILE --format json`",
    renderers={"table": _text, "html": _html}, formats=("table", "json", "html")))
