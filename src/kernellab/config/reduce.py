"""A distribution's config reduced onto lab-minimal: its kernel-wide choices, none of its
drivers, so that measuring it costs lab kernel builds, not distribution ones.

A distribution config builds thousands of modules and most of drivers/; what a lab kernel
can carry of it, and what decides the speed of a system call or a fork, are the
kernel-wide choices. The reduction is lab-minimal with the config's value for every
option a user can set in
  - Kernel hacking (debug checks, tracing, lockup detectors),
  - General architecture-dependent options (stack protector, stack offset randomization,
    VMAP_STACK, jump labels, kprobes),
  - the CPU mitigations menu (retpolines, return thunks, page table isolation, ...),
  - the standard features tinyconfig strips and the above need (BUG, KALLSYMS, ...: the
    menu under EXPERT),
  - security/Kconfig and security/Kconfig.hardening (the LSM framework, hardened
    usercopy, FORTIFY_SOURCE, init_on_alloc),
and any option the caller names (those an audit's rules check); nothing of drivers, file
systems, networking, modules or the LSMs themselves (their policies are not loaded in the
lab). DEBUG_INFO stays off: it changes no code and doubles the build. olddefconfig
decides what the reduced kernel really is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .kconfig import KconfigTree, menus

MENUS = ("Kernel hacking", "General architecture-dependent options")
FILES = ("security/Kconfig", "security/Kconfig.hardening")
# Menus given by their symbol: (include the symbol itself, include what is under it).
# EXPERT's menu holds the standard features tinyconfig strips (BUG, KALLSYMS, ...), which
# the debugging options need; EXPERT itself stays on, or those options would go back to
# their defaults.
MENU_SYMBOLS = {"CPU_MITIGATIONS": True, "EXPERT": False}
# A config with more modules than this, or more options set (=y or =m), is a
# distribution's: measure its reduction. Linux 6.1 on x86_64: lab-minimal sets about 680
# options and no module, defconfig about 1500 and 13 modules; Debian's amd64 config 6271
# (3853 modules), its cloud config 2700 (1119 modules).
DISTRIBUTION_MODULES = 300
DISTRIBUTION_OPTIONS = 2000
# Why the reduction leaves DEBUG_INFO off whatever the config says.
NO_DEBUG_INFO = "a reduction builds without debug info: it changes no code and doubles the build"


def is_distribution_size(config: dict[str, str]) -> bool:
    modules = sum(v == "m" for v in config.values())
    return modules > DISTRIBUTION_MODULES or sum(v in ("y", "m") for v in config.values()) > DISTRIBUTION_OPTIONS


def reduce(tree: KconfigTree, lean: dict[str, str], config: dict[str, str],
           also: Iterable[str] = ()) -> dict[str, str]:
    """`config`'s values where they differ from `lean`'s, for the options of the reduction
    and those in `also` (CONFIG_ names)."""
    menu_symbols = {tree.kconf.syms[name]: itself for name, itself in MENU_SYMBOLS.items()
                    if name in tree.kconf.syms}
    wanted = set(also)
    # A choice is kept whole: the config's PREEMPT_NONE=n means nothing without the
    # PREEMPT_VOLUNTARY=y beside it.
    for name in list(wanted):
        sym = tree.kconf.syms.get(name.removeprefix("CONFIG_"))
        if sym is not None and sym.choice is not None:
            wanted |= {"CONFIG_" + s.name for s in sym.choice.syms}
    out = {}
    for sym in tree.kconf.unique_defined_syms:
        node = next((n for n in sym.nodes if n.prompt), None)
        name = "CONFIG_" + sym.name
        if node is None or not (name in wanted or _in_reduction(node, menu_symbols)):
            continue
        if config.get(name, "n") != lean.get(name, "n"):
            out[name] = config.get(name, "n")
    for name in [n for n in out if n.startswith("CONFIG_DEBUG_INFO")]:
        del out[name]
    if "DEBUG_INFO_NONE" in tree.kconf.syms:   # Linux >= 5.18 (and not the tests' fake tree)
        out["CONFIG_DEBUG_INFO_NONE"] = "y"
    return out


def _in_reduction(node: Any, menu_symbols: dict[Any, bool]) -> bool:
    outer = menus(node)
    if outer and outer[0] in MENUS or node.filename in FILES:
        return True
    if menu_symbols.get(node.item, False):
        return True
    parent = node.parent
    while parent is not None:
        if parent.item in menu_symbols:
            return True
        parent = parent.parent
    return False
