"""The blast radius of a config option: how many objects of a build tree a change of it
recompiles, so that attribution can build the expensive options together and early.

Two records say it. kbuild's fixdep writes, for each object, the `include/config/X`
files of every option its sources and headers name (`.foo.o.cmd`); an option a widely
included header names is in thousands of them. An option the Makefiles turn into compiler
flags (retpolines, the stack protector, function tracing's -pg/-mfentry, ...) is in none
of them, yet it changes every object's command line, and kbuild recompiles an object
whose command line changed: such an option counts as the whole tree.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_CONFIG_DEP = re.compile(r"include/config/([A-Za-z0-9_]+)\)")
_MAKEFILE_OPTION = re.compile(r"CONFIG_([A-Za-z0-9_]+)")
# KBUILD_CFLAGS += ..., cflags-$(CONFIG_X) := ..., objtool-args-$(CONFIG_X) += ... (objtool runs
# in the command that compiles an object)
_FLAGS_ASSIGNMENT = re.compile(r"(flags|args)\S*\s*(\+|:|\?)?=", re.IGNORECASE)
# kbuild's SRCARCH for the ARCH values whose source directory has another name.
_SRCARCH = {"x86_64": "x86", "i386": "x86", "sparc32": "sparc", "sparc64": "sparc", "parisc64": "parisc"}
# An option whose change recompiles more than this share of the tree is "wide".
WIDE_SHARE = 0.05


@dataclass(frozen=True)
class Radius:
    objects: int                  # objects with a kbuild record in the build tree
    recompiles: dict[str, int]    # option -> objects a change of it recompiles
    flag_options: frozenset[str]  # of those, the ones the Makefiles make compiler flags of

    def wide(self, option: str) -> bool:
        return self.objects > 0 and self.recompiles.get(option, 0) > WIDE_SHARE * self.objects


def measure(build_tree: Path, source_tree: Path, kernel_arch: str, options: list[str]) -> Radius:
    """The radius of each option (CONFIG_ names) in a tree that holds a build."""
    dependents, objects = _dependents(build_tree, options)
    flags = _flag_options(source_tree, kernel_arch) & {o.removeprefix("CONFIG_") for o in options}
    recompiles = {o: objects if o.removeprefix("CONFIG_") in flags else dependents.get(o, 0) for o in options}
    return Radius(objects, recompiles, frozenset(f"CONFIG_{f}" for f in flags))


def dependents(build_tree: Path, options: list[str]) -> dict[str, int]:
    """How many objects of an existing build tree depend on each option (fixdep's records)."""
    return _dependents(build_tree, options)[0]


def _dependents(build_tree: Path, options: list[str]) -> tuple[dict[str, int], int]:
    wanted = {o.removeprefix("CONFIG_") for o in options}
    counts: Counter[str] = Counter()
    objects = 0
    for root, _dirs, files in os.walk(build_tree):
        for name in files:
            if name.endswith(".o.cmd"):
                objects += 1
                text = Path(root, name).read_text(errors="replace")
                counts.update(set(_CONFIG_DEP.findall(text)) & wanted)
    return {o: counts.get(o.removeprefix("CONFIG_"), 0) for o in options}, objects


def _flag_options(source_tree: Path, kernel_arch: str) -> set[str]:
    """Options that set the flags every object is compiled with: those the top-level, arch
    and scripts/Makefile.* files name on a line assigning flags, or in a conditional
    around one."""
    srcarch = _SRCARCH.get(kernel_arch, kernel_arch)
    files = [source_tree / "Makefile", source_tree / "arch" / srcarch / "Makefile",
             *sorted((source_tree / "scripts").glob("Makefile.*"))]
    found: set[str] = set()
    for path in files:
        if path.is_file():
            found |= flag_options_of(path.read_text(errors="replace"))
    return found


def flag_options_of(makefile: str) -> set[str]:
    found: set[str] = set()
    conditions: list[list[str]] = []
    for line in makefile.splitlines():
        words = line.split(maxsplit=1)
        keyword = words[0] if words else ""
        if keyword in ("ifdef", "ifndef", "ifeq", "ifneq"):
            conditions.append(_MAKEFILE_OPTION.findall(line))
        elif keyword == "else" and len(words) > 1 and conditions:   # else ifdef ...
            conditions[-1] += _MAKEFILE_OPTION.findall(line)
        elif keyword == "endif" and conditions:
            conditions.pop()
        elif _FLAGS_ASSIGNMENT.search(line):
            found.update(_MAKEFILE_OPTION.findall(line))
            found.update(o for named in conditions for o in named)
    return found
