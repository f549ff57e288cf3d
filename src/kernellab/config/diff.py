"""What differs between two configs, option by option, grouped by menu and category.

Both configs are compared as the kernel resolves them (what `make olddefconfig` would
write), so an option one file omits but kconfig defaults shows its real value. A bool or
tristate option a resolved config leaves out is n; "only in A" means the other config does
not have the option at all (its dependencies are unmet there).
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import kconfiglib

from .. import datafile
from .kconfig import BOOL_TRISTATE, KconfigTree, menus

OTHER = "other"
CATEGORIES = resources.files(__package__) / "categories.toml"


@dataclass(frozen=True)
class Category:
    name: str
    symbols: re.Pattern[str]     # the file's shell-style patterns, as one regex each
    menus: re.Pattern[str]


# The schema of categories.toml, checked by datafile.load.
@dataclass(frozen=True)
class _CategoryTable:
    name: str
    symbols: list[str]
    menus: list[str]


@dataclass(frozen=True)
class _File:
    category: list[_CategoryTable]


def load_categories(path: Path | Traversable = CATEGORIES) -> list[Category]:
    """The categories of `path` (kernellab's categories.toml), in the file's order."""
    tables = datafile.load(_File, datafile.read_toml(path, path.name), path.name).category
    return [Category(c.name, _patterns(c.symbols), _patterns(c.menus)) for c in tables]


def _patterns(globs: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(g) for g in globs) or "(?!)")


def categorize(name: str, menu_path: list[str], categories: list[Category]) -> str:
    """`name` without CONFIG_; `menu_path` outermost first. See categories.toml for the rule."""
    for c in categories:
        if c.symbols.match(name):
            return c.name
    for menu in reversed(menu_path):
        for c in categories:
            if c.menus.match(menu):
                return c.name
    return OTHER


@dataclass(frozen=True)
class Change:
    option: str
    a: str | None          # None: the option is not in A at all
    b: str | None
    prompt: str
    menu: str
    category: str

    @property
    def kind(self) -> str:
        return "only in B" if self.a is None else "only in A" if self.b is None else "changed"

    def to_dict(self) -> dict[str, Any]:
        return {"option": self.option, "a": self.a, "b": self.b, "kind": self.kind,
                "prompt": self.prompt, "menu": self.menu, "category": self.category}


@dataclass
class ConfigDiff:
    a: str
    b: str
    where: str
    changes: list[Change]      # in Kconfig order
    hidden: int                # differing options without a prompt, left out

    def summary(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for c in self.changes:
            out.setdefault(c.category, Counter())[c.kind] += 1
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "kernel": self.where,
                "changes": [c.to_dict() for c in self.changes], "hidden_without_prompt": self.hidden,
                "summary": {cat: dict(counts) for cat, counts in self.summary().items()}}


@dataclass(frozen=True)
class ConfigArg:
    """A config `config diff` and `config explain` read: a .config file (`text` None), or a
    variant's config as kernellab resolves it; `label` names it in headers and messages
    (the path, or the variant as the user wrote it)."""
    label: str
    text: str | None = None

    def load_into(self, tree: KconfigTree) -> list[str]:
        """Loads it into `tree`; the warnings loading gave."""
        return tree.load(self.label) if self.text is None else tree.load_text(self.text, self.label)


def diff(tree: KconfigTree, a: ConfigArg, b: ConfigArg, derived: bool = False) -> tuple[ConfigDiff, list[str]]:
    """The difference, and the warnings loading the two configs gave. Options without a
    prompt follow from others (GENERIC_*, HAVE_*, ARCH_*) and are left out unless `derived`."""
    warnings = a.load_into(tree)
    values_a = tree.resolved()
    warnings += b.load_into(tree)
    values_b = tree.resolved()
    categories = load_categories()
    changes, hidden = [], 0
    for sym in tree.kconf.unique_defined_syms:
        name = "CONFIG_" + sym.name
        va, vb = values_a.get(name), values_b.get(name)
        if _effective(sym, va) == _effective(sym, vb):
            continue
        node = next((n for n in sym.nodes if n.prompt), sym.nodes[0])
        if not node.prompt and not derived:
            hidden += 1
            continue
        path = menus(node)
        changes.append(Change(name, va, vb, node.prompt[0] if node.prompt else "", " > ".join(path),
                              categorize(sym.name, path, categories)))
    return ConfigDiff(a.label, b.label, tree.where, changes, hidden), warnings


def _effective(sym: kconfiglib.Symbol, value: str | None) -> str | None:
    return "n" if value is None and sym.orig_type in BOOL_TRISTATE else value
