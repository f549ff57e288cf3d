"""What it would take to give a Kconfig option a value, as a tree of needs.

`plan` walks the Kconfig expressions the way kconfig evaluates them: an option takes a
value when a prompt condition lets the user set it (its `depends on`, its `if`, the menus
around it), or when a `select` forces it. Each unmet condition becomes a `Need`, with the
needs of its own symbols under it, down to what can be set directly or cannot be met at all
in this tree and arch (a symbol another arch defines, a constant, a promptless symbol
nothing here selects).

`config explain` shows the plan for setting an option to y; `audit` plans each change it
recommends.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import kconfiglib
from kconfiglib import AND, EQUAL, NOT, OR, UNEQUAL, expr_value, split_expr

from .dotconfig import Setting
from .kconfig import BOOL_TRISTATE, KconfigTree, selecting

TRI = {"n": 0, "m": 1, "y": 2}
_DEPTH = 25  # a safety net: the deepest chains in Linux 6.x are about half as long
# Turning off an option more than this many others select is a decision about all of
# them, not a consequence to apply quietly.
_MAX_SELECTORS = 3


class _Unknown(enum.Enum):
    """Not computed yet (None is an answer)."""
    UNKNOWN = enum.auto()


_UNKNOWN = _Unknown.UNKNOWN

# A kconfiglib expression: a symbol, a choice, or a tuple (operator, operands...). Any for
# the type checker: kconfiglib is untyped, and the code tells the three apart by class.
Expr: TypeAlias = Any


@dataclass
class Need:
    """A condition on the way to a value: how kconfig writes it, whether it holds now, and
    what meeting it takes."""
    text: str                        # "DEBUG_KERNEL=y", "!PREEMPT_RT", "NR_CPUS > 1"
    now: str                         # the current value (n/m/y for a condition)
    met: bool = False
    needs: list[Need] = field(default_factory=list)
    blocked: str | None = None       # why it cannot be met in this tree and arch
    manual: bool = False             # can be met, but not by plain assignments (set a number...)
    all_of: bool = False             # only groups its needs (the unmet parts of an AND)
    setting: Setting | None = None   # the assignment that meets it once its needs are met
    # Needs are shared (a DAG: many options need the same PCI=y), so the answers below are
    # computed once, when the plan is complete.
    _reason: str | None | _Unknown = field(default=_UNKNOWN, repr=False, compare=False)
    _settings: list[Setting] | None | _Unknown = field(default=_UNKNOWN, repr=False, compare=False)

    def reason(self) -> str | None:
        """The first reason, depth first, why this cannot be met."""
        if self._reason is _UNKNOWN:
            self._reason = self.blocked or next(
                (r for n in self.needs if (r := n.reason()) is not None), None)
        return self._reason

    def settings(self) -> list[Setting] | None:
        """Assignments that meet this, dependencies first; None if it takes more than that."""
        if self._settings is _UNKNOWN:
            self._settings = self._collect_settings()
        return self._settings

    def _collect_settings(self) -> list[Setting] | None:
        if self.met:
            return []
        if self.blocked or self.manual:
            return None
        out: dict[Setting, None] = {}
        for n in self.needs:
            sub = n.settings()
            if sub is None:
                return None
            out.update(dict.fromkeys(sub))
        if self.setting is not None:
            out[self.setting] = None
        return list(out)

    def to_dict(self, shown: set[int] | None = None) -> dict[str, Any]:
        """A need met the same way elsewhere in the plan is given in full once."""
        shown = set() if shown is None else shown
        out: dict[str, Any] = {"condition": self.text, "now": self.now, "blocked": self.blocked, "manual": self.manual}
        if id(self) in shown:
            return out | {"see_above": True}
        shown.add(id(self))
        return out | {"needs": [n.to_dict(shown) for n in self.needs if not n.met]}


def plan(tree: KconfigTree, sym: kconfiglib.Symbol, value: str) -> Need:
    """What it takes to give `sym` the value `value` (as a .config writes it) in the loaded config."""
    return _Planner(tree).symbol(sym, value, exact=True)


class _Planner:
    def __init__(self, tree: KconfigTree) -> None:
        self.tree = tree
        self.visiting: set[tuple[str, str]] = set()
        self.planned: dict[tuple[str, str, bool], Need] = {}

    def symbol(self, sym: kconfiglib.Symbol, value: str, exact: bool = False, depth: int = 0) -> Need:
        """sym=value; for a dependency (exact=False) a higher tristate value also does."""
        now = self.tree.value(sym)
        need = Need(f"{sym.name}={value}", now if now is not None else "(unset)")
        need.met = _holds(sym, now, value, exact)
        if need.met:
            return need
        if not sym.nodes:
            need.blocked = self._undefined(sym)
            return need
        key = (sym.name, value)
        if (sym.name, value, exact) in self.planned:
            return self.planned[sym.name, value, exact]
        if key in self.visiting:
            need.blocked = f"{sym.name}={value} depends on itself through its dependencies"
            return need
        if depth > _DEPTH:
            need.blocked = f"the dependencies of {sym.name} run more than {_DEPTH} levels deep"
            return need
        self.visiting.add(key)
        try:
            if sym.orig_type in BOOL_TRISTATE:
                self._tristate(need, sym, TRI[value], depth)
            else:
                self._literal(need, sym, value, depth)
        finally:
            self.visiting.discard(key)
        self.planned[sym.name, value, exact] = need
        return need

    def _undefined(self, sym: kconfiglib.Symbol) -> str:
        if sym.is_constant:
            return f"{sym.name} is a constant"
        return f"{sym.name} is not defined for {self.tree.profile.name} in Linux {self.tree.source.version}"

    def _tristate(self, need: Need, sym: kconfiglib.Symbol, target: int, depth: int) -> None:
        setting = Setting("CONFIG_" + sym.name, "nmy"[target], "kernellab audit")
        if target == 0:
            self._off(need, sym, setting, depth)
            return
        if target == 1 and expr_value(self.tree.kconf.modules) < 2:
            need.needs.append(self.symbol(self.tree.kconf.modules, "y", depth=depth + 1))
        prompts = [node.prompt[1] for node in sym.nodes if node.prompt]
        if not prompts:
            self._forced_on(need, sym, target, depth)
            return
        if sym.choice is not None and target == 2 and sym.choice.orig_type is kconfiglib.TRISTATE \
                and sym.choice.tri_value < 2:
            need.manual = True   # the choice must be switched to y mode first
        # A bool option whose dependencies are m can still be y: kconfig promotes it.
        level = target if sym.orig_type is kconfiglib.TRISTATE else 1
        need.needs += self._best([self.expr(cond, level, depth) for cond in prompts])
        need.setting = setting

    def _off(self, need: Need, sym: kconfiglib.Symbol, setting: Setting, depth: int) -> None:
        """Turning an option off: whatever selects it must go off, and then its prompt says
        n, or, without a prompt, its dependencies go off to drop its default."""
        selectors = [t for t in split_expr(sym.rev_dep, OR) if expr_value(t)]
        if len(selectors) > _MAX_SELECTORS:
            need.manual = True
            names = selecting(sym)
            need.text += f" (selected by {len(selectors)} options that are on: {', '.join(names[:6])}" \
                         f"{', ...' if len(names) > 6 else ''})"
            return
        if sym.choice is not None:
            # Only selecting another option of the choice turns this one off; which one is
            # the user's call.
            others = [s.name for s in sym.choice.syms if s is not sym and s.visibility]
            need.manual = True
            need.text += (f" (select another option of the choice {sym.choice.nodes[0].prompt[0]!r}: "
                          f"{', '.join(others) or 'none is visible'})")
            return
        for term in selectors:
            need.needs.append(self.expr(term, 0, depth))
        if sym.visibility:
            need.setting = setting
        elif any(expr_value(default) and expr_value(cond) for default, cond in sym.defaults) \
                or expr_value(sym.weak_rev_dep):
            if sym.direct_dep is self.tree.kconf.y:
                need.blocked = f"{sym.name} has no prompt and is always on"
            else:
                need.needs.append(self.expr(sym.direct_dep, 0, depth))

    def _forced_on(self, need: Need, sym: kconfiglib.Symbol, target: int, depth: int) -> None:
        """A promptless option comes on through a select, an imply or a default: try each way."""
        ways = [term for term in split_expr(sym.rev_dep, OR) if term is not self.tree.kconf.n]
        ways += [self._and(term, sym.direct_dep) for term in split_expr(sym.weak_rev_dep, OR)
                 if term is not self.tree.kconf.n]
        ways += [self._and(default, cond) for default, cond in sym.defaults
                 if default is not self.tree.kconf.n]
        if not ways:
            need.blocked = (f"{sym.name} has no prompt and nothing selects it for "
                            f"{self.tree.profile.name}")
            return
        options = [self.expr(way, target, depth) for way in ways]
        chosen = self._best(options)
        if chosen and chosen[0].reason() is not None:
            need.blocked = f"{sym.name} has no prompt and cannot be forced on: {chosen[0].reason()}"
        need.needs += chosen

    def _literal(self, need: Need, sym: kconfiglib.Symbol, value: str, depth: int) -> None:
        """An int, hex or string option: its prompt must be visible and the value in range."""
        prompts = [node.prompt[1] for node in sym.nodes if node.prompt]
        if not prompts:
            self._by_default(need, sym, value, depth)
            return
        need.needs += self._best([self.expr(cond, 1, depth) for cond in prompts])
        if sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
            try:
                number = _number(sym, value)
            except ValueError:
                need.blocked = f"{value} is not a valid {kconfiglib.TYPE_TO_STR[sym.orig_type]} value"
                return
            low_high = _range(sym)
            if low_high and not low_high[0] <= number <= low_high[1]:
                need.blocked = f"{value} is outside the range of {sym.name} ({low_high[0]}..{low_high[1]})"
                return
        need.setting = Setting("CONFIG_" + sym.name, value, "kernellab audit")

    def _by_default(self, need: Need, sym: kconfiglib.Symbol, value: str, depth: int) -> None:
        """A promptless int, hex or string option (HZ) takes the first default whose
        condition holds: meet the condition of a default giving `value`. Defaults before it
        are taken to switch off with it, as choice-driven ones (HZ_250, HZ_1000) do; the audit
        checks the result by resolving it."""
        conds = [cond for default, cond in sym.defaults if same_value(sym, default.str_value, value)]
        if not conds:
            need.blocked = f"{sym.name} has no prompt and no default gives it {value}"
            return
        need.needs += self._best([self.expr(cond, 2, depth) for cond in conds])

    def expr(self, expr: Expr, target: int, depth: int) -> Need:
        """A Need for an expression to reach at least `target` (0: to be n)."""
        if expr.__class__ is kconfiglib.Symbol:
            return self._symbol_term(expr, target, depth)
        value = expr_value(expr)
        need = Need(expr_text(expr) if target else f"!({expr_text(expr)})", "nmy"[value],
                    met=value >= target if target else value == 0)
        if need.met:
            return need
        if expr.__class__ is kconfiglib.Choice:
            prompts = [node.prompt[1] for node in expr.nodes if node.prompt]
            need.needs += self._best([self.expr(cond, target, depth) for cond in prompts])
            return need
        op = expr[0]
        if op is NOT:
            # !X holds when X is n; it is false when X is y (m stays m).
            return self.expr(expr[1], 0 if target else 2, depth)
        if (op is AND) == (target > 0):
            # Both sides must move: the unmet parts of an AND, or both parts of an OR to n.
            need.all_of = True
            need.needs += _spliced(self.expr(e, target, depth) for e in split_expr(expr, op))
        elif op in (AND, OR):
            # Either side will do.
            need.needs += self._best([self.expr(e, target, depth) for e in split_expr(expr, op)])
        else:
            self._relation(need, expr, target, depth)
        return need

    def _symbol_term(self, sym: kconfiglib.Symbol, target: int, depth: int) -> Need:
        if sym.is_constant:
            need = Need(sym.name, sym.name, met=expr_value(sym) >= target if target else expr_value(sym) == 0)
            if not need.met:
                need.blocked = (f"a condition is the constant {sym.name} for {self.tree.profile.name} "
                                "with this toolchain (a literal, or a compiler or linker probe in Kconfig)")
            return need
        if sym.nodes and sym.orig_type not in BOOL_TRISTATE:
            return Need(sym.name, "n", met=target == 0,
                        blocked=f"{sym.name} is not a bool or tristate: always n in a condition")
        value = "nmy"[target]
        if value == "m" and sym.orig_type is kconfiglib.BOOL:
            value = "y"
        return self.symbol(sym, value, depth=depth + 1)

    def _relation(self, need: Need, expr: Expr, target: int, depth: int) -> None:
        """`A = y`-style tests on a tristate become assignments; anything else (numbers,
        strings) is up to the user."""
        op, left, right = expr
        sym, const = (left, right) if right.is_constant else (right, left)
        if sym.is_constant:
            never_always = "never" if target else "always"
            need.blocked = f"{expr_text(expr)} is {never_always} true for {self.tree.profile.name}"
            return
        if sym.orig_type in BOOL_TRISTATE and const.name in TRI and op in (EQUAL, UNEQUAL) and target:
            if op is EQUAL:
                need.needs.append(self.symbol(sym, const.name, exact=True, depth=depth + 1))
                return
            if const.name == "n":
                need.needs.append(self.symbol(sym, "m" if sym.orig_type is kconfiglib.TRISTATE else "y",
                                              depth=depth + 1))
                return
        need.manual = True

    def _and(self, a: Expr, b: Expr) -> Expr:
        y = self.tree.kconf.y
        return b if a is y else a if b is y else (AND, a, b)

    @staticmethod
    def _best(options: list[Need]) -> list[Need]:
        """Of alternative ways, the first that can be met with the fewest assignments."""
        if not options:
            return []
        if any(o.met for o in options):
            return []

        def cost(o: Need) -> tuple[bool, bool, int]:
            settings = o.settings()
            return (o.reason() is not None, settings is None, len(settings or ()))
        return _spliced([min(options, key=cost)])


def _spliced(needs: Iterable[Need]) -> list[Need]:
    """Unmet needs, with groups replaced by their members: "A && B" reads as A, then B."""
    out: list[Need] = []
    for n in needs:
        if n.all_of and not n.blocked and not n.manual:
            out += n.needs
        elif not n.met:
            out.append(n)
    return out


def _holds(sym: kconfiglib.Symbol, now: str | None, value: str, exact: bool) -> bool:
    if now is None:
        return False
    if sym.orig_type in BOOL_TRISTATE:
        return now == value if exact or value == "n" else TRI[now] >= TRI[value]
    return same_value(sym, now, value)


def same_value(sym: kconfiglib.Symbol, a: str, b: str) -> bool:
    """Equal as kconfig reads them: 0x10 = 16 for numbers, quotes optional for strings."""
    if sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
        try:
            return _number(sym, a) == _number(sym, b)
        except ValueError:
            return a == b
    if sym.orig_type is kconfiglib.STRING:
        return a.strip('"') == b.strip('"')
    return a == b


def _number(sym: kconfiglib.Symbol, text: str) -> int:
    return int(text, 16 if sym.orig_type is kconfiglib.HEX else 10)


def _range(sym: kconfiglib.Symbol) -> tuple[int, int] | None:
    """The active `range` of an int or hex option, as kconfig applies the first one whose
    condition holds."""
    for low, high, cond in sym.ranges:
        if expr_value(cond):
            try:
                return _number(sym, low.str_value), _number(sym, high.str_value)
            except ValueError:
                return None
    return None


def expr_text(expr: Expr) -> str:
    """An expression as Kconfig writes it, with choices named by their prompt."""
    text: str = kconfiglib.expr_str(expr, _item_text)
    return text


def _item_text(item: kconfiglib.Symbol | kconfiglib.Choice) -> str:
    if item.__class__ is kconfiglib.Choice and item.nodes and item.nodes[0].prompt:
        return f'<choice "{item.nodes[0].prompt[0]}">'
    text: str = kconfiglib.standard_sc_expr_str(item)
    return text
