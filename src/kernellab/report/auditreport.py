"""The terminal view of `kernellab audit`: a `config.audit.AuditReport` as one row per
option a rule names, then the rule verdicts per rule category."""

from __future__ import annotations

from ..config.audit import VERDICTS, AuditReport


def render_table(report: AuditReport) -> str:
    lines = [f"audit of {report.config} for profile {report.profile} ({report.where})", ""]
    if not report.findings:
        return "\n".join(lines + ["no rule audits this profile"]) + "\n"
    rw = max(len(f.rule.id) for f in report.findings)
    ow = max(len(f.option) for f in report.findings)
    lines.append(f"{'rule':<{rw}}  {'option':<{ow}}  {'current':>8}  {'expected':<10}  {'verdict':<7}  reason")
    for f in report.findings:
        expected = f.target if f.verdict == "change" else "|".join(f.expected)
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
