"""A few build trees for the probes of one search, so that each probe builds next to the
configuration nearest its own.

With one shared build tree a probe costs what it changes against the probe before it: a
bisect that goes back and forth across a compiler-flag option (retpolines, -pg) or an
option a widely included header names recompiles most of the tree each time, though an
earlier probe left a tree in nearly the state it needs. The pool keeps up to SIZE trees:
the shared one (kernellab.build.build_tree) and others parked beside it. A probe builds
in the tree whose configuration costs least to rebuild from, by the blast radius of the
options in which the two differ (kernellab.blast); when that still recompiles a wide part
of the tree, a copy of the tree is parked first, so that its state is there again for a
later probe that comes back to it.

Every build runs at the shared tree's path: a parked tree is renamed into place, never
built where it is parked. kbuild's host tools (objtool, fixdep) record their absolute
output paths, and an object depends on objtool, so a tree built under another path
recompiles everything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import blast
from .config.dotconfig import differing, parse_config
from .errors import LabError
from .locks import locked

SIZE = 4


@dataclass
class Choice:
    tree: Path                  # where to build: always the shared tree's path
    came_from: str | None       # the parked tree renamed into place, if any
    kept: str | None            # where a copy of the starting state was parked, if any
    copy_s: float               # what the copy cost
    estimate: int               # objects the build is expected to recompile

    def label(self) -> str:
        """How a report says it: "next to parked tree 2; a copy kept as tree 3 (4 s)"."""
        where = f"next to parked tree {self.came_from}" if self.came_from else "in place"
        return where + (f"; a copy kept as tree {self.kept} ({self.copy_s:.0f} s)" if self.kept else "")


@dataclass
class TreePool:
    home: Path                  # the shared build tree
    source_tree: Path           # for the Makefiles' flag options
    kernel_arch: str
    size: int = SIZE
    _used: list[str] = field(default_factory=list)   # parked trees, least recently used first

    @property
    def parking(self) -> Path:
        return self.home.with_name(self.home.name + ".pool")

    def _slots(self) -> list[str]:
        return [str(i) for i in range(1, self.size)]

    def parked(self) -> list[str]:
        """The parked trees that hold a configuration, least recently used first."""
        held = [n for n in self._slots() if (self.parking / n / ".config").is_file()]
        # Trees this process has not used yet come first, oldest configuration first.
        fresh = sorted((n for n in held if n not in self._used),
                       key=lambda n: (self.parking / n / ".config").stat().st_mtime_ns)
        return fresh + [n for n in self._used if n in held]

    def choose(self, values: dict[str, str]) -> Choice:
        """Make the shared tree the nearest to `values` (a resolved config), parking a copy
        of it first when the build would recompile widely; -> where to build."""
        # Between this choice and the build another kernellab may build in the shared tree;
        # make then starts from what it finds there: slower, never wrong.
        with locked(self.parking), locked(self.home):
            return self._choose(values)

    def _choose(self, values: dict[str, str]) -> Choice:
        parked = self.parked()
        every: dict[str | None, Path] = {None: self.home, **{n: self.parking / n for n in parked}}
        trees = {n: t for n, t in every.items() if _complete(t)}
        if not trees:
            return Choice(self.home, None, None, 0.0, 0)
        differ = {n: set(differing(parse_config((t / ".config").read_text(errors="replace"), str(t / ".config")),
                                   values)) for n, t in trees.items()}
        radius = blast.measure(self.home if None in trees else next(iter(trees.values())), self.source_tree,
                               self.kernel_arch, sorted(set().union(*differ.values())))
        cost = {n: _cost(differ[n], radius) for n in trees}
        # The cheapest; among equals the shared tree, then the most recently used.
        best = min([None, *reversed(parked)], key=lambda n: cost.get(n, float("inf")))
        estimate = min(cost[best], radius.objects) if radius.objects else cost[best]
        if best is not None:
            self._swap_in(best)
        kept, copy_s = None, 0.0
        if radius.objects and estimate > blast.WIDE_SHARE * radius.objects and self.size > 1:
            start = time.monotonic()
            kept = self._park_copy(exclude=best)
            copy_s = time.monotonic() - start
        return Choice(self.home, best, kept, copy_s, estimate)

    def _swap_in(self, name: str) -> None:
        """The parked tree `name` becomes the shared tree, and the shared tree is parked as
        `name` (or, if there was none, the slot is left empty)."""
        parked, spare = self.parking / name, self.parking / f"{name}.swap"
        shutil.rmtree(spare, ignore_errors=True)
        if self.home.exists():
            os.rename(self.home, spare)
        os.rename(parked, self.home)
        if spare.exists():
            os.rename(spare, parked)
        self._touch(name)

    def _park_copy(self, exclude: str | None) -> str:
        """A copy of the shared tree, parked in a free slot, else over the least recently
        used tree other than `exclude` (the one that holds the state just swapped out)."""
        held = self.parked()
        free = [n for n in self._slots() if n not in held]
        others = [n for n in held if n != exclude]
        name = (free or others or held)[0]
        target, staging = self.parking / name, self.parking / f"{name}.copy"
        shutil.rmtree(staging, ignore_errors=True)
        done = subprocess.run(["cp", "-a", "--reflink=auto", str(self.home), str(staging)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise LabError(f"could not copy build tree {self.home} to {staging}: {done.stderr.strip()} "
                           "(is the disk full? `kernellab cache prune` frees build trees)")
        shutil.rmtree(target, ignore_errors=True)
        os.rename(staging, target)
        self._touch(name)
        return name

    def _touch(self, name: str) -> None:
        self._used = [n for n in self._used if n != name] + [name]


def _complete(tree: Path) -> bool:
    """A tree whose last build finished, so that its .config says what it holds: a build
    stopped halfway leaves the new .config beside an older vmlinux, or none."""
    config, vmlinux = tree / ".config", tree / "vmlinux"
    return config.is_file() and vmlinux.is_file() and vmlinux.stat().st_mtime_ns >= config.stat().st_mtime_ns


def _cost(options: set[str], radius: blast.Radius) -> int:
    """The objects each option's change recompiles, added up (an object two options
    recompile counts twice: the tree where fewer wide options differ is nearer); before
    anything is built, the number of options."""
    if not radius.objects:
        return len(options)
    return sum(radius.recompiles.get(o, 0) for o in options)
