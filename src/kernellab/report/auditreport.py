"""`kernellab audit`'s result as a kind of result (report/kinds.py): the findings of a
`config.audit.AuditReport` and what `--measure` measured, as data, with what was audited
(the config, its kernel, the profile and why that one) and by which kernellab; as text,
the count of rules per verdict, one row per option a rule checks (those of the rules
--only chose), then the rule verdicts per rule category, then the measured effects. Its
HTML page is html.audit_page.

Rules are counted, never options: `count_line` says the counts every view shows, from
the totals `AuditReport.totals` wrote (of every rule, whatever --only shows)."""

from __future__ import annotations

import hashlib
import io
from typing import Any

from rich.console import Console
from rich.text import Text

from .. import __version__, modes
from ..config.audit import VERDICTS, AuditReport
from ..errors import LabError
from ..guest import vulnerabilities
from . import kinds
from .conclusion import DELTA_LEGEND, pct_text, verdict_text
from .model import DIFFERENCE

# How a verdict looks on a terminal: what to act on stands out, what needs nothing recedes.
VERDICT_STYLES = {"change": "bold red", "boot": "yellow", "ok": "green", "n/a": "dim"}


def parse_only(text: str) -> tuple[str, ...]:
    """--only's verdicts, in the order VERDICTS has them; a LabError naming the known ones."""
    asked = [word.strip() for word in text.split(",") if word.strip()]
    unknown = [word for word in asked if word not in VERDICTS]
    if unknown or not asked:
        wrong = f"unknown verdict {unknown[0]!r}" if unknown else "no verdict"
        raise LabError(f"--only {text!r}: {wrong}; give verdicts, comma-separated: {', '.join(VERDICTS)}")
    return tuple(v for v in VERDICTS if v in asked)


def body(report: AuditReport, measured: dict[str, Any] | None = None, *, profile_reason: str = "given with --profile",
         only: tuple[str, ...] | None = None, config_text: str = "") -> dict[str, Any]:
    """The audit as written: what was audited (the config, with the sha256 of its text) and
    by which kernellab, the findings (of the rules whose verdict is in `only`, when given),
    the counts of every rule, and what --measure measured."""
    audit = {"kernellab": __version__, "config": report.config,
             "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(), "source": report.kernel.source,
             "source_version": report.kernel.source_version, "arch": report.kernel.arch, "where": report.where,
             "profile": report.profile, "profile_reason": profile_reason,
             "only": None, "findings": report.to_json(),
             # rule verdicts per rule category, and "total": of every rule, whatever `only` shows
             "totals": {category: dict(counts) for category, counts in report.totals().items()},
             "left_out": {rule: list(options) for rule, options in report.left_out.items()},
             **({"measured": measured} if measured else {})}
    return narrowed(audit, only, report.config) if only else audit


def narrowed(audit: dict[str, Any], only: tuple[str, ...], origin: str) -> dict[str, Any]:
    """The audit with the findings of the rules whose verdict is in `only` (--only, of
    `audit` and of `show`); its counts stay those of every rule. One written with --only
    holds no other findings: asking it for more is a LabError saying how to get them."""
    held = audit["only"]
    if held and not set(only) <= set(held):
        raise LabError(f"{origin} holds only the rules whose verdict is {', '.join(held)} (written with --only "
                       f"{','.join(held)}): audit the config again without --only for the others")
    return {**audit, "only": list(only), "findings": [f for f in audit["findings"] if f["rule_verdict"] in only]}


def count_line(audit: dict[str, Any]) -> str:
    """The audit's counts, in rules: "rules: 42 ok, 3 boot, 2 change, 5 n/a (52 rules)"."""
    total = audit["totals"].get("total", {})
    counts = ", ".join(f"{total.get(v, 0)} {v}" for v in VERDICTS)
    return f"rules: {counts} ({sum(total.values())} rules)"


def render_table(audit: dict[str, Any]) -> str:
    return styled_table(audit).plain


def styled_table(audit: dict[str, Any]) -> Text:
    """The text view, each verdict in its style (VERDICT_STYLES)."""
    out = Text()
    for line in [*summary_lines(audit), ""]:
        out.append(line + "\n")
    findings = audit["findings"]
    if not audit["totals"].get("total"):
        out.append("no rule audits this profile\n")
        return out
    if not findings:
        out.append("no rule has " + " or ".join(audit["only"] or ()) + "\n")
    else:
        _rows(out, findings)
    if audit["left_out"]:
        out.append("\n" + _left_out_line(audit) + "\n")
    out.append("\n" + _totals_table(audit["totals"]))
    return out


def summary_lines(audit: dict[str, Any]) -> list[str]:
    """What was audited, for which profile and why, the counts of rules (count_line), and
    which rules --only shows: the head of every view of an audit."""
    lines = [f"audit of {audit['config']} ({audit['where']})",
             f"profile: {audit['profile']} ({audit['profile_reason']})", count_line(audit)]
    if audit["only"]:
        shown = len({f["rule"] for f in audit["findings"]})
        lines.append(f"showing the rules whose verdict is {', '.join(audit['only'])}: {shown} of "
                     f"{sum(audit['totals']['total'].values())}")
    return lines


def _rows(out: Text, findings: list[dict[str, Any]]) -> None:
    rw = max(len(f["rule"]) for f in findings)
    ow = max(len(f["option"]) for f in findings)
    out.append(f"{'rule':<{rw}}  {'option':<{ow}}  {'current':>8}  {'expected':<10}  {'verdict':<7}  reason\n")
    for f in findings:
        expected = f["recommended"] if f["verdict"] in ("change", "boot") else "|".join(f["expected"])
        out.append(f"{f['rule']:<{rw}}  {f['option']:<{ow}}  {_shown(f['current']):>8}  {expected:<10}  ")
        out.append(f"{f['verdict']:<7}" if f["reason"] else f["verdict"], style=VERDICT_STYLES.get(f["verdict"], ""))
        out.append(f"  {f['reason']}\n" if f["reason"] else "\n")


def _left_out_line(audit: dict[str, Any]) -> str:
    names = sum(len(options) for options in audit["left_out"].values())
    return (f"left out: {names} option name(s) that {audit['where']} does not define, other kernels' names of "
            f"the options of {len(audit['left_out'])} rule(s) (listed in --format json)")


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
    """The text view; its verdicts coloured on a screen that takes colours (rich honours NO_COLOR)."""
    text = styled_table(audit)
    if audit.get("measured"):
        text.append(render_measured(audit["measured"]))
    if not view.screen.colour:
        return text.plain
    console = Console(file=io.StringIO(), force_terminal=True, color_system="standard", highlight=False)
    console.print(text, soft_wrap=True, end="")
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def _html(audit: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML page
    return html.audit_page(audit)


AUDIT = kinds.register(kinds.Kind(
    name="audit", tag="kernellab-audit", what="an audit", version=2, readable=(2,), schema="audit-schema.json",
    rewrite="write it again with `kernellab audit CONFIG --format json`",
    renderers={"table": _text, "html": _html}, formats=("table", "json", "html")))
