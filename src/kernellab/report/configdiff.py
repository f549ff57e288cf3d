"""The terminal view of `kernellab config diff`: a `config.diff.ConfigDiff` as a table of
changed options grouped by menu, then the count per category."""

from __future__ import annotations

from collections import Counter

from ..config.diff import Change, ConfigDiff


def render_table(d: ConfigDiff) -> str:
    if not d.changes:
        return (f"no differences between {d.a} and {d.b} ({d.where}, as olddefconfig resolves them)\n"
                + _hidden_note(d))
    lines = [f"A: {d.a}", f"B: {d.b}", f"{d.where}, both as olddefconfig resolves them; "
             f"'-' marks an option a config does not have (its dependencies are unmet)"]
    width = min(max(len(c.option) for c in d.changes), 36)
    vwidth = min(max(len(v or "-") for c in d.changes for v in (c.a, c.b)), 12)
    by_menu: dict[str, list[Change]] = {}
    for c in d.changes:
        by_menu.setdefault(c.menu, []).append(c)
    for menu, changes in by_menu.items():
        lines += ["", menu or "(top level)"]
        lines += [f"  {c.option:<{width}}  {c.a or '-':>{vwidth}} -> {c.b or '-':<{vwidth}}  "
                  f"{c.category:<22}  {c.prompt}".rstrip() for c in changes]
    lines += ["", _summary_table(d)]
    return "\n".join(lines) + _hidden_note(d)


def _hidden_note(d: ConfigDiff) -> str:
    if not d.hidden:
        return ""
    return f"{d.hidden} more options without a prompt differ as a consequence (--all shows them)\n"


def _summary_table(d: ConfigDiff) -> str:
    kinds = ("changed", "only in A", "only in B")
    summary = d.summary()
    width = max(len("category"), *(len(c) for c in summary))
    rows = [f"{'category':<{width}}  " + "  ".join(f"{k:>9}" for k in kinds) + "      all"]
    for cat, counts in summary.items():
        rows.append(f"{cat:<{width}}  " + "  ".join(f"{counts[k]:>9}" for k in kinds)
                    + f"  {sum(counts.values()):>7}")
    totals = sum(summary.values(), Counter())
    rows.append(f"{'total':<{width}}  " + "  ".join(f"{totals[k]:>9}" for k in kinds)
                + f"  {sum(totals.values()):>7}")
    return "\n".join(rows) + "\n"
