"""Which options make BAD slower than GOOD on a metric, and by how much.

Adaptive group testing over the options in which the two resolved configs differ: a
set of options is split in half only if applying it moves the metric, so one culprit
among n options costs two endpoint probes plus ceil(log2 n) halvings, and culprits that
each add part of the effect are all found. Every probe is GOOD plus some of BAD's
values, resolved by olddefconfig; when resolution pulls an option in or leaves one out,
the split follows what the kernel actually built, and the report says so. Each culprit
is then measured alone on GOOD and alone removed from BAD; BAD without every culprit
measures what the other options do together (each below the threshold), and what is
left of the difference is the culprits' interaction.

Probes build one after another, each in the tree of a small pool (kernellab.treepool)
whose last build is nearest to it, so a probe costs what its options recompile against
that build. Options a change of which recompiles much of the tree (compiler flags, widely
included headers: kernellab.blast), and the options they need, go first and are split
from the others at the first halving, so they are tested together and early, and the
probes among the many local options that follow rebuild little. Before a probe that
must rebuild widely, the pool keeps a copy of the state it starts from, for a later probe
that comes back to it.

The order of options and of probes depends only on the inputs (and the build records the
radius is read from), so the same inputs give the same sequence of probes; with the
store, an interrupted bisect redoes nothing.

On a Dask cluster whose workers a halving's probe would leave idle (icount mode), the
round of a halving also measures the probes of the two halvings that can come next, one
for each way its verdict can go: the search takes the one the verdict picks without a
round of its own, and the other stays in the store, built and measured, for whatever
asks for it later; the result lists it marked as measured ahead and not needed
("ahead"). One halving in two then costs no round: the culprit is found in about half
the rounds. With one worker, in wall mode (its boots run in turn on one worker) and
on this machine, a round is the halving's probe alone, as before.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import blast, modes, progress
from ..config.dotconfig import differing
from ..errors import LabError
from ..guest.workloads import Provenance, provenances
from ..metrics.catalog import describe
from ..store import Store
from ..workloads import Instance
from . import cluster_probe, executor, lab
from .placement import Placement
from .probe import DIFFERENT, SAME, UNKNOWN, Probe, Verdict, verdict
from .spec import VariantSpec

WALL_MAX_RUNS = 8


@dataclass
class Culprit:
    option: str
    value: str
    alone_on_good: float | None = None     # metric change when set alone on GOOD
    removed_from_bad: float | None = None  # metric change when reverted alone on BAD
    notes: list[str] = field(default_factory=list)


@dataclass
class BisectResult:
    metric: str
    unit: str
    mode: str
    good: float
    bad: float
    candidates: int
    culprits: list[Culprit]
    threshold_pct: float
    below_threshold: float | None  # BAD without the culprits, minus GOOD
    interaction: float | None      # what the culprits do together beyond their own effects
    builds: int
    boots: int
    wall_s: float
    probes: list[dict[str, Any]]
    adjustments: list[str]
    wide: list[str]                # candidates that recompile much of the tree, searched first
    unsure: list[str]              # comparisons that ended "not yet known" (wall mode)
    confirmation: dict[str, Any] | None   # KernelCI's check of the culprits, by reverting them
    families: dict[str, str] = field(default_factory=dict)   # wide option -> its family (the option it needs first)
    workloads: list[Provenance] = field(default_factory=list)   # what a workload metric's figures come from

    def to_dict(self) -> dict[str, Any]:
        out = {k: ([c.__dict__ for c in v] if k == "culprits" else v) for k, v in self.__dict__.items()
               if k != "workloads"}
        return {**out, **({"workloads": [w.to_dict() for w in self.workloads]} if self.workloads else {})}


class ProberLike(Protocol):
    """What the search needs of a prober (probe.Prober; the tests' fake)."""
    builds: int
    boots: int
    probes: list[Probe]

    def probe_all(self, asks: list[tuple[str, dict[str, str]]], runs: int = 1,
                  done: Callable[[Probe], None] | None = None) -> list[Probe]: ...

    def more_runs(self, probe: Probe, *, runs: int) -> None: ...

    def radius(self, options: list[str]) -> blast.Radius: ...

    def needs(self, options: list[str]) -> dict[str, set[str]]: ...


class Bisector:
    """The search itself, over a prober (ProberLike) and the target values. Probes that
    do not depend on each other's results (the endpoints; the confirmation of the culprits)
    are asked for together, so that a Dask cluster builds and boots them at once; with a
    halving, the next halvings either way, when the cluster has workers to spare (_probes)."""

    def __init__(self, prober: ProberLike, target: dict[str, str], metric: str, mode: modes.Mode,
                 threshold_pct: float = 2.0, log: Callable[[str], None] = print,
                 max_runs: int = WALL_MAX_RUNS, store: Store | None = None) -> None:
        self.prober, self.target, self.metric = prober, target, metric
        self.store = store   # where the probes' runs say which programs a workload metric came from
        self.mode, self.threshold, self.log, self.max_runs = mode, threshold_pct, log, max_runs
        self.unsure: list[str] = []
        self.better = describe(metric, "").better
        self.adjustments: list[str] = []
        self.culprits: list[Culprit] = []
        self.wide: list[str] = []
        self._family: dict[str, str] = {}   # wide option -> the option its family needs first
        self._bar = progress.Task(None, None)   # the probes, while the bisect shows
        self._ahead: dict[str, Probe] = {}   # probes measured ahead of the search, by label, until it asks
        self._asked: set[str] = set()        # the labels of every probe the search asked for

    @classmethod
    def for_variants(cls, store: Store, good: VariantSpec, bad: VariantSpec, metric: str,
                     mode: modes.Mode, threshold_pct: float = 2.0,
                     log: Callable[[str], None] = print, max_runs: int = WALL_MAX_RUNS,
                     cluster: executor.Cluster | None = None, placement: Placement | None = None,
                     workloads: tuple[Instance, ...] = ()) -> Bisector:
        """`workloads`: real programs each probe runs, when `metric` is one of theirs."""
        if good.source != bad.source or good.arch != bad.arch:
            raise LabError("bisect compares two configs of one source and arch: give both the same --source/--arch")
        if good.boot_words() != bad.boot_words():
            raise LabError("bisect searches config options: give GOOD and BAD the same boot parameters "
                           "and sysctls (compare them with `kernellab compare`)")
        if threshold_pct <= 0:
            raise LabError(f"--threshold must be a positive percentage, got {threshold_pct:g}")
        prepare = placement.prepare if placement is not None else lab.prepare   # `running`: the target's
        good_p, bad_p = prepare(good), prepare(bad)
        target = differing(good_p.config.values, bad_p.config.values)
        prober = cluster_probe.prober(store, good, good_p.config.text, [metric], mode, cluster, log, placement,
                                      "bisect", workloads)
        return cls(prober, target, metric, mode, threshold_pct, log, max_runs, store)

    def run(self) -> BisectResult:
        start = time.monotonic()
        if not self.target:
            raise LabError("GOOD and BAD resolve to the same config: nothing to bisect")
        good, bad = self._probes([("good", {}), ("bad", self.target)])
        candidates = self._by_radius([o for o in self.target if self._applied(bad, o)])
        missing = sorted(set(self.target) - set(candidates))
        if missing:
            self.adjustments.append(f"{len(missing)} option(s) of BAD do not apply on GOOD as a whole "
                                    f"(derived or unset by olddefconfig): {', '.join(missing[:8])}")
        self.log(f"{len(candidates)} candidate option(s); {self.metric}: good {good.value(self.metric):.4g}, "
                 f"bad {bad.value(self.metric):.4g}")
        # One culprit takes about log2(candidates) halvings; each more culprit as many again.
        estimate = 2 + math.ceil(math.log2(max(len(candidates), 2)))
        with progress.task(f"bisect {self.metric}", estimate, "probes (estimate: one culprit)") as self._bar:
            self._bar.update(completed=2)
            if self._differs(good, bad):
                self._explore(candidates, {}, good, bad)
        total = bad.value(self.metric) - good.value(self.metric)
        below, interaction, confirmation = total, None, None
        if self.culprits:
            removed, rest = self._check_culprits(good, bad)
            below = rest.value(self.metric) - good.value(self.metric)
            alone = [c.alone_on_good for c in self.culprits if c.alone_on_good is not None]
            if len(alone) == len(self.culprits):
                interaction = total - below - sum(alone)
            confirmation = self._confirm(good, bad, rest, removed)
        return BisectResult(
            self.metric, describe(self.metric, "").unit, self.mode.name, good.value(self.metric),
            bad.value(self.metric), len(candidates), self.culprits, self.threshold, below, interaction,
            self.prober.builds, self.prober.boots, time.monotonic() - start,
            [self._record(p) for p in self.prober.probes], self.adjustments, self.wide, self.unsure, confirmation,
            self._family, self._workloads())

    def _record(self, p: Probe) -> dict[str, Any]:
        """A probe as the result lists it; `ahead`: measured ahead of the search on a
        cluster's idle workers and never asked for (false for every probe the search used)."""
        return {"label": p.label, "options": len(p.requested), "value": p.value(self.metric),
                "runs": len(p.runs[self.metric]), "build_s": p.build.wall_s, "built": not p.build.cached,
                "copy_s": p.tree.copy_s if p.tree else 0.0, "tree": p.tree.label() if p.tree else None,
                "ahead": p.label not in self._asked}

    def _workloads(self) -> list[Provenance]:
        """What each workload the probes ran came from, as their runs stored it."""
        store = self.store
        if store is None:   # a search over a prober of the tests' own
            return []
        return provenances(store.run_workloads(r) for p in self.prober.probes for r in p.run_ids)

    # -- search --------------------------------------------------------------------

    def _explore(self, cands: list[str], base: dict[str, str], low: Probe, high: Probe,
                 carried: tuple[str, ...] = ()) -> None:
        """`low` is GOOD + base, `high` is GOOD + base + cands; they differ on the metric.
        `carried`: options taken out of the search because they only apply along with
        others in `cands`; every probe still asks for them, so they come with whichever
        culprit they need."""
        if len(cands) == 1:
            culprit = Culprit(cands[0], self.target[cands[0]])
            if carried:
                culprit.notes.append(f"found with {', '.join(carried)}, which olddefconfig would "
                                     "not set without the rest of BAD")
            self.culprits.append(culprit)
            self.log(f"culprit: {cands[0]}={self.target[cands[0]]}")
            return
        half, label, asked = self._split(cands, base, carried)
        mid = self._probes([(label, asked)], ahead=self._next_splits(cands, half, base, carried))[0]
        left = [o for o in cands if self._applied(mid, o)]
        right = [o for o in cands if o not in left]
        if left != half:
            self.adjustments.append(
                f"probe {mid.label}: asked {len(half)} option(s), olddefconfig applied {len(left)} of the "
                f"candidates ({', '.join(sorted(set(left) ^ set(half))[:6])} moved)")
        if not left:
            # Nothing of this half applies without the other half: these options follow
            # the others (selected, or depending on them); search the others.
            self._explore(cands[len(half):], base, low, high, carried + tuple(half))
            return
        if not right:
            # The half pulled in all the rest: the rest follows it; search the half.
            self._explore(half, base, low, mid, carried + tuple(cands[len(half):]))
            return
        if self._differs(low, mid):
            self._explore(left, base, low, mid, carried)
        if self._differs(mid, high):
            self._explore(right, {**base, **{o: self.target[o] for o in left}}, mid, high, carried)

    def _split(self, cands: list[str], base: dict[str, str],
               carried: tuple[str, ...]) -> tuple[list[str], str, dict[str, str]]:
        """The halving of `cands` on `base`: (the half, its probe's label, what it asks)."""
        half = cands[: self._cut(cands)]
        # Carried options ride along in every probe: they apply whenever what they need does.
        return half, f"{len(base)}+{len(half)}", {**base, **{o: self.target[o] for o in (*half, *carried)}}

    def _next_splits(self, cands: list[str], half: list[str], base: dict[str, str],
                     carried: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
        """The probes of the halvings the search goes to next, whichever way the verdict on
        this one goes: of `half` on `base`, and of the rest on `base` and `half` (as when
        olddefconfig applies the half as asked; when it does not, the search asks for
        others and these stay in the store)."""
        rest_base = {**base, **{o: self.target[o] for o in half}}
        return [self._split(sub, on, carried)[1:] for sub, on in ((half, base), (cands[len(half):], rest_base))
                if len(sub) > 1]

    def _by_radius(self, candidates: list[str]) -> list[str]:
        """Wide options first, the widest first; then the rest by name. Read after the GOOD
        and BAD builds, whose records name every option of the search.

        An option a wide one needs (its Kconfig dependencies name it: FTRACE for
        FUNCTION_TRACER, CPU_MITIGATIONS for RETPOLINE) is wide too, though few objects name
        it: changing it brings the wide one in or out. Such a family stays together, the
        option it all needs first, so that a halving between families applies whole ones."""
        radius = self.prober.radius(candidates)
        needs = {o: n & set(candidates) for o, n in self.prober.needs(candidates).items()}
        reach = {o: radius.recompiles.get(o, 0) for o in candidates}
        for o in candidates:
            for n in needs.get(o, set()):
                reach[n] = max(reach[n], radius.recompiles.get(o, 0))
        wide = {o for o in candidates if radius.objects and reach[o] > blast.WIDE_SHARE * radius.objects}
        inner = {o: needs.get(o, set()) & wide for o in wide}
        # The family of an option: the first of the wide options it needs that need none.
        self._family = {o: min((n for n in inner[o] if not inner[n]), default=o) for o in wide}
        family_reach = {f: max(reach[o] for o in wide if self._family[o] == f) for f in self._family.values()}
        self.wide = sorted(wide, key=lambda o: (-family_reach[self._family[o]], self._family[o],
                                                len(inner[o]), o))
        if self.wide:
            self.log(f"{len(self.wide)} wide option(s) recompile over {blast.WIDE_SHARE:.0%} of the "
                     f"{radius.objects} objects, or are needed by one that does; searched first: "
                     f"{', '.join(self.wide[:8])}")
        return self.wide + sorted(o for o in candidates if o not in wide)

    def _cut(self, cands: list[str]) -> int:
        """Where to halve: between the wide options and the others when both are there, so
        the others' probes never toggle a wide one; else at the family boundary nearest
        the middle, so that no half asks for an option without the one it needs."""
        wide = sum(o in self.wide for o in cands)
        if 0 < wide < len(cands):
            return wide
        middle = len(cands) // 2
        family = [self._family.get(o, o) for o in cands]
        bounds = [i for i in range(1, len(cands)) if family[i] != family[i - 1]]
        return min(bounds, key=lambda i: (abs(i - middle), i)) if bounds else middle

    def _without(self, options: set[str]) -> dict[str, str]:
        return {o: v for o, v in self.target.items() if o not in options}

    def _check_culprits(self, good: Probe, bad: Probe) -> tuple[list[Probe], Probe]:
        """Each culprit removed from BAD, all of them removed together, each alone on GOOD:
        BAD's neighbours first, then GOOD's, so that the wide options change once between
        the two groups, not at every culprit. -> (each removed, all removed)"""
        k = len(self.culprits)
        asks = [(f"without:{c.option}", self._without({c.option})) for c in self.culprits]
        if k > 1:
            asks.append(("without-culprits", self._without({c.option for c in self.culprits})))
        asks += [(f"alone:{c.option}", {c.option: self.target[c.option]}) for c in self.culprits]
        probes = self._probes(asks)
        removed = probes[:k]
        for c, without, alone in zip(self.culprits, removed, probes[-k:], strict=True):
            c.removed_from_bad = bad.value(self.metric) - without.value(self.metric)
            self._alone_on_good(c, good, alone)
        return removed, probes[k] if k > 1 else removed[0]

    def _alone_on_good(self, culprit: Culprit, good: Probe, alone: Probe) -> None:
        option = culprit.option
        if self._applied(alone, option):
            culprit.alone_on_good = alone.value(self.metric) - good.value(self.metric)
        else:
            culprit.notes.append("cannot be set alone on GOOD: " +
                                 "; ".join(f"asked {d['option']}={d['asked']}, got {d['got']}" for d in alone.dropped))

    # -- probes and verdicts ---------------------------------------------------------

    def _probes(self, asks: list[tuple[str, dict[str, str]]],
                ahead: list[tuple[str, dict[str, str]]] | None = None) -> list[Probe]:
        """The probes of `asks`, in one round. `ahead`: probes the search may ask for next,
        measured in the same round when workers of a cluster would otherwise be idle
        (cluster_probe.spare), kept until the search asks for them (and in the store if it
        never does); with one worker, or on this machine, `asks` are measured alone."""
        labelled = [_labelled(label, settings) for label, settings in asks]
        self._asked.update(label for label, _ in labelled)
        due = [a for a in labelled if a[0] not in self._ahead]
        extra = [a for a in (_labelled(label, settings) for label, settings in ahead or [])
                 if a[0] not in self._ahead and a[0] not in dict(due)]
        if extra and (not due or cluster_probe.spare(self.prober, len(due)) < 1):
            extra = []
        for probe in self._round(due, extra):
            self._ahead[probe.label] = probe
        self._bar.advance(len(labelled) - len(due))   # those measured ahead, taken now
        probes = [self._ahead[label] for label, _ in labelled]
        for label, _ in labelled:
            self._ahead.pop(label, None)
        return probes

    def _round(self, due: list[tuple[str, dict[str, str]]], extra: list[tuple[str, dict[str, str]]]) -> list[Probe]:
        """`due` and `extra` measured together; if that fails, `due` alone (the failure may
        have been an extra's, which the search does not need)."""
        if not due:
            return []
        ahead = {label for label, _ in extra}

        def done(probe: Probe) -> None:
            if probe.label not in ahead:
                self._bar.advance()
            self.log(f"probe {probe.label}{' (ahead of the search)' if probe.label in ahead else ''}: "
                     f"{self.metric} {probe.value(self.metric):.4g} "
                     f"({'built' if not probe.build.cached else 'cached build'} {probe.build.wall_s:.0f} s, "
                     f"{probe.boots} boot(s))")
        if not extra:
            return self.prober.probe_all(due, runs=self.mode.probe_runs, done=done)
        try:
            return self.prober.probe_all(due + extra, runs=self.mode.probe_runs, done=done)
        except LabError as exc:
            self.log(f"a round with probes ahead of the search failed ({exc}); the probes it needs, alone")
            return self.prober.probe_all(due, runs=self.mode.probe_runs, done=done)

    def _applied(self, probe: Probe, option: str) -> bool:
        return probe.config.get(option, "n") == self.target[option]

    def _settle(self, low: Probe, high: Probe) -> Verdict:
        """Wall mode: more runs of both while the verdict is not yet known and more runs
        could still decide it, up to the cap; "not yet known" is then the answer, recorded."""
        m = self.metric
        while True:
            v = verdict(low.runs[m], high.runs[m], self.better, self.mode, self.threshold, self.max_runs)
            if v.kind != UNKNOWN:
                return v
            capped = len(low.runs[m]) >= self.max_runs and len(high.runs[m]) >= self.max_runs
            if capped or not v.more_could_decide:
                why = f"the cap of {self.max_runs} runs" if capped else "more runs could not decide it by the cap"
                self.unsure.append(f"{low.label} vs {high.label}: not yet known ({v.reason}; {why})")
                return v
            for p in (low, high):
                self.prober.more_runs(p, runs=min(self.max_runs, len(p.runs[m]) + 1))

    def _differs(self, low: Probe, high: Probe) -> bool:
        """The search goes down a half only when it is known to differ."""
        return self._settle(low, high).kind == DIFFERENT

    def _confirm(self, good: Probe, bad: Probe, rest: Probe, removed: list[Probe]) -> dict[str, Any]:
        """KernelCI's check: BAD without all the culprits is GOOD again (within the
        threshold), and taking out each culprit alone moves BAD by more than it."""
        together = self._settle(good, rest)
        each = {c.option: self._settle(r, bad) for c, r in zip(self.culprits, removed, strict=True)}
        confirmed = together.kind == SAME and all(v.kind == DIFFERENT for v in each.values())
        return {"confirmed": confirmed,
                "together": {"verdict": together.kind, "reason": together.reason},
                "each": {o: {"verdict": v.kind, "reason": v.reason} for o, v in each.items()}}


def _labelled(label: str, settings: dict[str, str]) -> tuple[str, dict[str, str]]:
    """A probe's label made unique by its settings: the same label for the same probe."""
    return f"{label}@{hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()[:8]}", settings
