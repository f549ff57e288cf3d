"""Why an option has its value, and what it would take to give it another.

An `Explanation` holds where the option is defined, what it depends on, what selects or
implies it and what it selects, each with its current value; for a bool or tristate option
not at y, the planner's tree of what setting it to y takes (`planner.plan`). `why` says in
one line why a config does not give an option the value a variant asked for (`kernellab
resolve`, `build`): the same plan, its first level.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import kconfiglib
from kconfiglib import AND, OR, expr_value, split_expr

from .kconfig import BOOL_TRISTATE, KconfigTree, menus
from .planner import Expr, Need, expr_text, plan


@dataclass
class Term:
    text: str
    value: str

    def to_dict(self) -> dict[str, Any]:
        return {"expr": self.text, "value": self.value}


@dataclass
class Explanation:
    option: str
    type: str
    value: str | None
    config: str                      # where the values come from
    prompt: str | None
    menu: str
    locations: list[str]             # file:line of each definition
    depends_on: list[Term]
    prompt_if: list[Term]            # extra conditions on the prompt, beyond depends on
    selected_by: list[Term]
    implied_by: list[Term]
    selects: list[Term]              # what it forces on when it is on
    to_y: Need | None                # what setting it to y takes (bool/tristate not at y)
    help: str

    def to_dict(self) -> dict[str, Any]:
        return {"option": self.option, "type": self.type, "value": self.value, "config": self.config,
                "prompt": self.prompt, "menu": self.menu, "defined_at": self.locations,
                "depends_on": [t.to_dict() for t in self.depends_on],
                "prompt_if": [t.to_dict() for t in self.prompt_if],
                "selected_by": [t.to_dict() for t in self.selected_by],
                "implied_by": [t.to_dict() for t in self.implied_by],
                "selects": [t.to_dict() for t in self.selects],
                "to_set_y": self.to_y.to_dict() if self.to_y else None, "help": self.help}


def explain(tree: KconfigTree, name: str) -> Explanation:
    sym = tree.require(name)
    node = next((n for n in sym.nodes if n.prompt), sym.nodes[0])
    dep_terms = split_expr(sym.direct_dep, AND)
    prompt_if = [t for t in split_expr(node.prompt[1], AND) if t not in dep_terms] if node.prompt else []
    to_y = None
    if sym.orig_type in BOOL_TRISTATE and sym.tri_value < 2:
        to_y = plan(tree, sym, "y")
    return Explanation(
        option="CONFIG_" + sym.name,
        type=kconfiglib.TYPE_TO_STR[sym.orig_type],
        value=tree.value(sym),
        config=tree.loaded or "",
        prompt=node.prompt[0] if node.prompt else None,
        menu=" > ".join(menus(node)),
        locations=[f"{n.filename}:{n.linenr}" for n in sym.nodes],
        depends_on=_terms(t for t in dep_terms if t is not tree.kconf.y),
        prompt_if=_terms(prompt_if),
        selected_by=_terms(split_expr(sym.rev_dep, OR), drop=tree.kconf.n),
        implied_by=_terms(split_expr(sym.weak_rev_dep, OR), drop=tree.kconf.n),
        selects=_selects(sym),
        to_y=to_y,
        help="\n".join(n.help.rstrip() for n in sym.nodes if n.help),
    )


def _selects(sym: kconfiglib.Symbol) -> list[Term]:
    """What the option forces on when it is on, with the select's own `if` (the option's
    dependencies, which kconfiglib folds into each select, left out)."""
    return [Term(target.name if cond is sym.kconfig.y else f"{target.name} if {expr_text(cond)}",
                 _truth(target))
            for target, cond in sym.orig_selects]


def _terms(exprs: Iterable[Expr], drop: Expr | None = None) -> list[Term]:
    return [Term(expr_text(e), _truth(e)) for e in exprs if e is not drop]


def _truth(expr: Expr) -> str:
    return "nmy"[expr_value(expr)]


def why(tree: KconfigTree, name: str, asked: str) -> str:
    """Why the loaded config does not give the option the value `asked`, in one line: the
    unmet conditions `explain` shows under "to set it", each with its value now, and the
    settings that would meet them (or why nothing can); "" when the plan finds nothing."""
    sym = tree.symbol(name)
    if sym is None:
        return ""
    need = plan(tree, sym, asked)
    parts = [f"needs {', '.join(f'{n.text} (now {n.now})' for n in need.needs)}"] if need.needs else []
    if (reason := need.reason()) is not None:
        parts.append(f"not possible in {tree.where}: {reason}")
    elif need.manual and not need.needs:
        parts.append(need.text)   # a choice to switch, an option many others select
    else:
        own = "CONFIG_" + sym.name
        more = [f"{s.name}={s.value}" for s in need.settings() or () if s.name != own]
        if more:
            parts.append(f"add +{'+'.join(more)}")
    return "; ".join(parts)
