"""The terminal view of `kernellab config explain`: a `config.explain.Explanation`, with
the planner's needs as an indented tree."""

from __future__ import annotations

from ..config.explain import Explanation
from ..config.planner import Need


def render(e: Explanation) -> str:
    lines = [f"{e.option}={e.value if e.value is not None else '(unset)'}    "
             f"[{e.type}, in {e.config}]"]
    if e.prompt:
        lines.append(f'  "{e.prompt}"')
    else:
        lines.append("  no prompt: set only by select, imply or its default")
    lines.append(f"  menu: {e.menu or '(top level)'}")
    lines.append(f"  defined at {', '.join(e.locations)}")
    for title, terms in (("depends on", e.depends_on), ("prompt only if", e.prompt_if),
                         ("selected by", e.selected_by), ("implied by", e.implied_by),
                         ("selects when on", e.selects)):
        if terms:
            lines.append(f"{title}:")
            lines += [f"  {t.text:<60} = {t.value}" for t in terms]
    if e.to_y is not None:
        lines.append("to set it to y:")
        lines += _need_lines(e.to_y, 1, set()) or [f"  nothing else has to change: set {e.option}=y"]
        if (reason := e.to_y.reason()) is not None:
            lines.append(f"  not possible in this tree: {reason}")
    if e.help:
        lines.append("help:")
        lines += [f"  {line}".rstrip() for line in e.help.splitlines()]
    return "\n".join(lines) + "\n"


def _need_lines(need: Need, depth: int, shown: set[str]) -> list[str]:
    """One line per unmet need, indented under what needs it; a need met the same way
    elsewhere in the tree is shown once."""
    lines = []
    for n in need.needs:
        if n.met:
            continue
        note = f"blocked: {n.blocked}" if n.blocked else "set by hand" if n.manual else ""
        if n.text in shown:
            note = "(see above)"
        width = max(44 - 2 * depth, 20)
        lines.append(f"{'  ' * depth}{n.text:<{width}} now {n.now}{'   ' + note if note else ''}")
        if n.text not in shown:
            shown.add(n.text)
            lines += _need_lines(n, depth + 1, shown)
    return lines
