"""Why is B slower than A: the change A -> B on a metric split into parts that add up, each
part taken down to its culprits with their measured shares.

The split is a chain of kernels from A to B, one axis changing at each step, so that the
steps add up to the whole change by construction:

    A --code--> B's source, A's configuration (carried by olddefconfig), A's toolchain
      --toolchain--> the same with B's toolchain        (when the toolchains differ)
      --configuration--> B's source and configuration, A's boot words
      --boot words--> B                                   (when the boot words differ)

The code step goes down to commits when A's and B's sources are refs of one git repository
(experiments.commits: first-parent bisection with A's configuration held fixed, skips,
confirmation by revert); the configuration step goes down to options by the option
bisection (experiments.bisect: Kconfig-valid, blast-radius ordering, confirmation by
revert), called as it is. A culprit's share is the change it makes where it was found
(a commit against its parent, an option alone on the configuration step's start); what no
culprit explains is the remainder.

Every kernel is a probe (experiments.probe), built and booted through the store: after an
interruption the same command reuses every probe measured, and a commit that did not
build is remembered and not built again.

Two distribution-size configurations (config.reduce.is_distribution_size) are measured
reduced onto lab-minimal (config.reduce, as `debian-reduced` and the audit do), keeping
every option in which A and B differ and what Kconfig says those need: a probe costs a
lab kernel's build, not a distribution's hour. `whole` measures them as they are.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from .. import modes, paths
from ..config import reduce
from ..config.dotconfig import differing, format_config
from ..config.explain import why as unmet
from ..config.kconfig import KconfigTree, menus, open_tree
from ..config.planner import plan
from ..errors import LabError
from ..metrics.catalog import describe
from ..store import Store
from ..workloads import Instance
from . import cluster_probe, commits, executor, failed_builds
from .bisect import Bisector, ProberLike
from .commits import Commit, History
from .lab import Prepared
from .placement import Placement
from .probe import DIFFERENT, SAME, Probe, Prober, Verdict, base_file
from .spec import VariantSpec

MAX_COMMIT_CULPRITS = 4   # commits found one after another on a metric, at most
# Rounds of adding what Kconfig says a differing option needs, when its reduction does not
# hold it: each round plans from the last one's resolved config; Linux needs one or two.
NEED_ROUNDS = 3


@dataclass
class Ask:
    a: VariantSpec
    b: VariantSpec
    metrics: list[str]
    mode: modes.Mode
    thresholds: dict[str, float]          # metric -> smallest change that counts, in %
    max_runs: int
    placement: Placement
    cluster: executor.Cluster | None = None
    workloads: tuple[Instance, ...] = ()


@dataclass
class Point:
    """One kernel of the answer: what it is, and its measurement (None: skipped)."""
    label: str
    role: str                    # A, B, split, toolchain, configuration, commit, revert
    spec: VariantSpec
    probe: Probe | None = None
    prober: Prober | None = None
    commit: Commit | None = None
    not_carried: list[str] = field(default_factory=list)   # A's options this kernel does not hold
    skipped: str = ""
    build_failed: bool = False

    def value(self, metric: str) -> float:
        assert self.probe is not None
        return self.probe.value(metric)


class _Runs:
    """More runs of a probe, by the prober that made it: the stopping rule (the option
    bisection's, Bisector._settle) asks for them, and every point has its own prober."""

    def __init__(self) -> None:
        self.owner: dict[int, Prober] = {}

    def more_runs(self, probe: Probe, runs: int = 1) -> None:
        self.owner[id(probe)].more_runs(probe, runs=runs)


@dataclass(frozen=True)
class Checked:
    """What was checked before anything is built, and the kernels A and B measured: the
    variants given, or their reductions (`reduction`)."""
    a_text: str
    b_text: str
    a_values: dict[str, str]
    history: History | None
    a: VariantSpec
    b: VariantSpec
    reduction: dict[str, Any] | None = None


def check(a: VariantSpec, b: VariantSpec, metrics: list[str], placement: Placement, whole: bool = False) -> Checked:
    """Bad input, one line each, before any build; two distribution-size configurations
    reduced unless `whole`."""
    if a.arch != b.arch:
        raise LabError(f"why compares two kernels of one arch: A is {a.arch}, B {b.arch}")
    for axis in ("vcpus", "devices", "fs"):
        if getattr(a, axis) != getattr(b, axis):
            raise LabError(f"why splits source, configuration, toolchain and boot words: give A and B the same "
                           f"{axis} (compare them with `kernellab compare`)")
    history = commits.history(a.source, b.source)
    pa, pb = placement.prepare(a), placement.prepare(b)
    if pa.toolchain is None or pb.toolchain is None or not pa.built or not pb.built:
        raise LabError("why builds A, B and the kernels between them: give two variants kernellab builds "
                       "(not the running kernel or a prebuilt image as they are)")
    values = {"A": pa.config.values, "B": pb.config.values}
    for m in metrics:
        for (name, config), v in zip(values.items(), (a, b), strict=True):
            missing = [o for o in describe(m, "").needs if config.get(o, "n") == "n"]
            if missing:
                raise LabError(f"{m} needs {', '.join(missing)}, which {name} ({v.name}) does not set: why explains "
                               "a metric both kernels have")
    if whole or not (reduce.is_distribution_size(values["A"]) or reduce.is_distribution_size(values["B"])):
        return Checked(pa.config.text, pb.config.text, values["A"], history, a, b)
    metric_needs = {o for m in metrics for o in describe(m, "").needs}
    ra, rb, reduction = _reduce(placement, {"A": (a, pa), "B": (b, pb)}, metric_needs)
    return Checked(ra.config.text, rb.config.text, ra.config.values, history, ra.spec, rb.spec, reduction)


class Why:
    def __init__(self, store: Store, ask: Ask, checked: Checked, log: Callable[[str], None] = print) -> None:
        self.store, self.ask, self.checked, self.log = store, ask, checked, log
        self.runs = _Runs()
        self.points: list[Point] = []
        self._known: dict[tuple[str, ...], Point] = {}
        self._settlers: dict[str, Bisector] = {}
        self._commits: dict[str, Point] = {}
        self._searches: dict[str, dict[str, Any]] = {}         # metric -> how its commits were searched
        self._option_searches: dict[str, dict[str, Any]] = {}  # metric -> the option bisection's result
        self.builds = self.boots = 0

    # -- the answer --------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        checked = self.checked
        a, b = self.ask.a, self.ask.b
        self.a_text, self.a_values, self.history = checked.a_text, checked.a_values, checked.history
        pa = self._measure("A", "A", a)
        pb = self._measure("B", "B", b)
        for m in self.ask.metrics:
            self._check_regression(m, pa, pb)
        split = self._measure("split", "split", self._carried(b.source, a.toolchain, "split"))
        tool = (self._measure("toolchain", "toolchain", self._carried(b.source, b.toolchain, "toolchain"))
                if a.toolchain != b.toolchain else split)
        config_end = (self._measure("configuration", "configuration",
                                    replace(b, name="configuration", boot_args=list(a.boot_args),
                                            sysctls=dict(a.sysctls)))
                      if a.boot_words() != b.boot_words() else pb)
        chain = [("code", pa, split), ("toolchain", split, tool), ("configuration", tool, config_end),
                 ("boot words", config_end, pb)]
        answers = [self._metric(m, pa, pb, chain) for m in self.ask.metrics]
        reduction = checked.reduction
        return {"a": reduction["a"] if reduction else _variant(a), "b": reduction["b"] if reduction else _variant(b),
                "reduced": reduction, "mode": self.ask.mode.name, "thresholds": self.ask.thresholds,
                "history": self.history.to_dict() if self.history else None,
                "not_carried": split.not_carried,
                "metrics": answers,
                "probes": [_probe_row(p, self.ask.metrics) for p in self.points],
                "builds": self.builds, "boots": self.boots, "wall_s": time.monotonic() - start}

    def _check_regression(self, m: str, pa: Point, pb: Point) -> None:
        """GOOD must be better than BAD: why explains a change for the worse."""
        v = self._settle(m, pa, pb)
        if v.kind != DIFFERENT:
            raise LabError(f"A is not better than B on {m}: they do not differ by the threshold "
                           f"({self.ask.thresholds[m]:g}%): {v.reason}")
        if not _worse(m, pa.value(m), pb.value(m)):
            raise LabError(f"A is not better than B on {m} (A {pa.value(m):.4g}, B {pb.value(m):.4g}): "
                           "why explains a regression; give them the other way round to explain the improvement")

    def _metric(self, m: str, pa: Point, pb: Point, chain: list[tuple[str, Point, Point]]) -> dict[str, Any]:
        good, bad = pa.value(m), pb.value(m)
        total = bad - good
        parts, culprits = [], []
        for name, low, high in chain:
            if low is high:
                continue
            v = self._settle(m, low, high)
            delta = high.value(m) - low.value(m)
            parts.append({"part": name, "from": low.label, "to": high.label, "delta": delta,
                          "share_pct": _share(delta, total), "verdict": _verdict(v), "how": self._how(m, low, high)})
            if v.kind != DIFFERENT:
                continue
            if name == "code":
                culprits += self._commit_culprits(m, pa, high, total)
            elif name == "configuration":
                culprits += self._option_culprits(m, low, high, total)
            else:
                culprits.append({"kind": name, "name": _axis(name, self.ask.a, self.ask.b), "share": delta,
                                 "share_pct": _share(delta, total), "from_value": low.value(m),
                                 "change_pct": _pct(delta, low.value(m)), "verdict": _verdict(v),
                                 "how": self._how(m, low, high)})
        culprits.sort(key=lambda c: -abs(c["share"]))
        remainder = total - sum(c["share"] for c in culprits)
        floor = abs(good) * self.ask.thresholds[m] / 100
        settler = self._settler(m)
        return {"metric": m, "unit": describe(m, "").unit, "better": describe(m, "").better,
                "a": good, "b": bad, "total": total, "total_pct": _pct(total, good),
                "threshold_pct": self.ask.thresholds[m], "parts": parts, "culprits": culprits,
                "remainder": remainder, "remainder_pct": _share(remainder, total),
                "within_noise": abs(remainder) <= floor,
                "commit_search": self._searches.get(m), "option_search": self._option_searches.get(m),
                "unsure": list(settler.unsure)}

    # -- code -> commits ---------------------------------------------------------------

    def _commit_culprits(self, m: str, pa: Point, split: Point, total: float) -> list[dict[str, Any]]:
        h = self.history
        if h is None or not h.commits:
            self._searches[m] = {"searched": False, "why": "A's and B's sources are not two refs of one git "
                                                           "repository: the code part is not split into commits"}
            return []
        n = len(h.commits)
        before = self.builds

        def at(i: int) -> Point | None:
            point = self._commit_point(h.commits[i]) if i < n - 1 else split
            return point if point.probe is not None else None
        search: commits.Search[Point] = commits.Search(
            n, at, lambda ref, p: self._settle(m, ref, p), lambda i: self._commit_point(h.commits[i]).skipped,
            self.log)
        found: list[commits.Found[Point]] = []
        low, low_point = -1, pa
        while len(found) < MAX_COMMIT_CULPRITS and self._settle(m, low_point, split).kind == DIFFERENT:
            f = search.find(low, low_point, n - 1, split)
            found.append(f)
            if f.suspects:
                break
            low, low_point = f.index, f.probe
        out = []
        for f in found:
            commit = h.commits[f.index]
            share = f.probe.value(m) - f.before_probe.value(m)
            confirmation = self._confirm_commit(m, h, f, split, share)
            out.append({"kind": "commit", "name": f"{commit.short} {commit.subject}", "commit": commit.to_dict(),
                        "share": share, "share_pct": _share(share, total), "from_value": f.before_probe.value(m),
                        "change_pct": _pct(share, f.before_probe.value(m)),
                        "verdict": _verdict(self._settle(m, f.before_probe, f.probe)),
                        "how": self._how(m, f.before_probe, f.probe) + "; against "
                               + ("its parent" if f.before == f.index - 1 else f"the last commit like A ({f.before})"),
                        "suspects": [h.commits[i].to_dict() for i in f.suspects],
                        "confirmation": confirmation})
        steps = [{"commit": h.commits[s.index].sha, "index": s.index,
                  "verdict": _verdict(s.verdict) if s.verdict else None, "skipped": s.skipped}
                 for s in search.steps]
        self._searches[m] = {
            "searched": True, "first_parent": True, "candidates": n, "steps": steps,
            "skipped": [h.commits[i].to_dict() for i in sorted(search.skipped)],
            "builds": self.builds - before, "max_builds": h.max_builds()}
        return out

    def _confirm_commit(self, m: str, h: History, f: commits.Found[Point], split: Point,
                        share: float) -> dict[str, Any]:
        """KernelCI's check: the culprit's parent does not show the change (measured by the
        search), and B with the culprit reverted moves back."""
        like = (Verdict(SAME, "it is the reference") if f.before_probe is f.reference
                else self._settle(m, f.reference, f.before_probe))
        parent = {"commit": h.commits[f.before].sha if f.before >= 0 else h.good.sha,
                  "is_parent": f.before == f.index - 1, "verdict": _verdict(like)}
        sha, how = commits.revert(h, h.commits[f.index])
        if sha is None:
            return {"parent": parent, "revert": None, "revert_how": how, "confirmed": None}
        point = self._commit_point(Commit(sha, f"Revert \"{h.commits[f.index].subject}\"", "kernellab"), "revert")
        if point.probe is None:
            return {"parent": parent, "revert": sha, "revert_how": how + f": not measured ({point.skipped})",
                    "confirmed": None}
        v = self._settle(m, point, split)
        back = split.value(m) - point.value(m)
        moved_back = v.kind == DIFFERENT and (back > 0) == (share > 0)
        return {"parent": parent, "revert": sha, "revert_how": how, "moved_back": back,
                "verdict": _verdict(v), "confirmed": moved_back}

    def _commit_point(self, commit: Commit, role: str = "commit") -> Point:
        assert self.history is not None
        if commit.sha in self._commits:
            return self._commits[commit.sha]
        spec = self._carried(self.history.source(commit.sha), self.ask.a.toolchain, f"{role}:{commit.short}")
        self._commits[commit.sha] = self._measure(f"{role}:{commit.short}", role, spec, commit)
        return self._commits[commit.sha]

    # -- configuration -> options ------------------------------------------------------

    def _option_culprits(self, m: str, low: Point, high: Point, total: float) -> list[dict[str, Any]]:
        assert low.probe is not None and high.probe is not None and low.prober is not None
        if not differing(low.probe.config, high.probe.config):
            return []
        bisector = Bisector.for_variants(self.store, low.spec, high.spec, m, self.ask.mode, self.ask.thresholds[m],
                                         log=self.log, max_runs=self.ask.max_runs, cluster=self.ask.cluster,
                                         placement=self.ask.placement, workloads=self.ask.workloads)
        result = bisector.run()
        self.builds += result.builds
        self.boots += result.boots
        self._option_searches[m] = result.to_dict()
        out = []
        for c in result.culprits:
            share = c.alone_on_good if c.alone_on_good is not None else c.removed_from_bad
            if share is None:
                continue
            brought = differing(low.probe.config, low.prober.resolve({c.option: c.value}))
            conf = (result.confirmation or {}).get("each", {}).get(c.option)
            out.append({"kind": "option", "name": f"{c.option}={c.value}", "option": c.option, "value": c.value,
                        "brought_along": [f"{o}={v}" for o, v in brought.items() if o != c.option],
                        "share": share, "share_pct": _share(share, total), "from_value": low.value(m),
                        "change_pct": _pct(share, low.value(m)),
                        "verdict": conf or {"verdict": "-", "reason": "not confirmed"},
                        "how": ("alone on the configuration step's start" if c.alone_on_good is not None
                                else "removed from B's configuration")
                               + f"; {self.ask.mode.name}, {self.ask.mode.probe_runs} run(s) per probe",
                        "notes": c.notes,
                        "confirmation": {"confirmed": (result.confirmation or {}).get("confirmed"),
                                         "removed_from_b": c.removed_from_bad}})
        return out

    # -- probes ------------------------------------------------------------------------

    def _carried(self, source: str, toolchain: str, name: str) -> VariantSpec:
        """A's configuration (and boot words) on another source or toolchain, by olddefconfig."""
        return replace(self.ask.a, name=name, source=source, toolchain=toolchain, base=str(base_file(self.a_text)),
                       fragments=[], options=[])

    def _measure(self, label: str, role: str, spec: VariantSpec, commit: Commit | None = None) -> Point:
        prepared = self.ask.placement.prepare(spec)
        key = (prepared.source.content_hash, prepared.config.hash, spec.toolchain, " ".join(spec.boot_words()))
        if key in self._known:
            return self._known[key]
        point = Point(label, role, spec, commit=commit,
                      not_carried=[f"{o}: A {self.a_values.get(o, 'n')}, here {v}"
                                   for o, v in differing(self.a_values, prepared.config.values).items()]
                      if role in ("split", "commit", "revert") else [])
        self._known[key] = point
        self.points.append(point)
        remembered = failed_builds.known().get(failed_builds.key(*key[:3]))
        if remembered:
            point.skipped, point.build_failed = f"does not build (remembered): {remembered}", True
            self.log(f"{label}: skipped, {point.skipped}")
            return point
        a = self.ask
        prober = cluster_probe.prober(self.store, spec, prepared.config.text, a.metrics, a.mode, a.cluster,
                                      self.log, a.placement, "why", a.workloads)
        point.prober = prober
        try:
            point.probe = prober.probe(label, {}, runs=a.mode.probe_runs)
        except LabError as exc:
            if commit is None:
                raise
            point.build_failed = not prober.probes
            point.skipped = ("does not build: " if point.build_failed else "does not boot: ") + str(exc)
            if point.build_failed:
                self.builds += 1
                failed_builds.remember(failed_builds.key(*key[:3]), str(exc))
            self.log(f"{label}: skipped, {point.skipped}")
        finally:
            self.builds += prober.builds
            self.boots += prober.boots
        if point.probe is not None:
            self.runs.owner[id(point.probe)] = prober
            self.log(f"{label}: " + ", ".join(f"{m} {point.probe.value(m):.4g}" for m in a.metrics))
        return point

    def _settler(self, m: str) -> Bisector:
        if m not in self._settlers:
            self._settlers[m] = Bisector(cast(ProberLike, self.runs), {}, m, self.ask.mode, self.ask.thresholds[m],
                                         self.log, self.ask.max_runs)
        return self._settlers[m]

    def _settle(self, m: str, low: Point, high: Point) -> Verdict:
        assert low.probe is not None and high.probe is not None
        if low is high:
            return Verdict(SAME, "the same kernel")
        return self._settler(m)._settle(low.probe, high.probe)

    def _how(self, m: str, low: Point, high: Point) -> str:
        assert low.probe is not None and high.probe is not None
        runs = f"{len(low.probe.runs[m])} and {len(high.probe.runs[m])} run(s)"
        return f"{self.ask.mode.name}, {runs}: " + ("exact" if self.ask.mode.deterministic else "95% interval")


def _worse(m: str, good: float, bad: float) -> bool:
    return bad > good if describe(m, "").better == "lower" else bad < good


def _pct(delta: float, reference: float) -> float | None:
    return 100 * delta / abs(reference) if reference else None


def _share(part: float, whole: float) -> float | None:
    return 100 * part / whole if whole else None


def _verdict(v: Verdict) -> dict[str, str]:
    return {"verdict": v.kind, "reason": v.reason}


def _axis(part: str, a: VariantSpec, b: VariantSpec) -> str:
    if part == "toolchain":
        return f"toolchain {a.toolchain} -> {b.toolchain}"
    return f"boot words {' '.join(a.boot_words()) or '(none)'} -> {' '.join(b.boot_words()) or '(none)'}"


def _variant(v: VariantSpec) -> dict[str, Any]:
    return {"name": v.name, "source": v.source, "base": v.base, "fragments": list(v.fragments),
            "options": list(v.options), "toolchain": v.toolchain, "boot_words": v.boot_words()}


def _probe_row(p: Point, metrics: list[str]) -> dict[str, Any]:
    probe = p.probe
    # A kernel that does not boot was built: its row shows that build.
    built = probe or (p.prober.probes[0] if p.prober is not None and p.prober.probes else None)
    return {"label": p.label, "role": p.role, "source": p.spec.source,
            "commit": p.commit.sha if p.commit else None,
            "values": {m: probe.value(m) for m in metrics} if probe else {},
            "runs": max((len(probe.runs[m]) for m in metrics), default=0) if probe else 0,
            **commits.build_fields(built.build if built else None),
            "boots": probe.boots if probe else 0, "skipped": p.skipped, "not_carried": p.not_carried}


# -- distribution-size configurations, reduced -----------------------------------------

def _reduce(placement: Placement, given: dict[str, tuple[VariantSpec, Prepared]],
            metric_needs: set[str]) -> tuple[Prepared, Prepared, dict[str, Any]]:
    """A and B reduced onto lab-minimal, each keeping its values of the options in which
    they differ, of those the metrics need, and of what Kconfig says those need (planned
    from the reduction's resolved config where it does not hold them, NEED_ROUNDS times at
    most). -> (reduced A, reduced B, what the answer says of it)"""
    (a, pa), (b, pb) = given["A"], given["B"]
    full = {"A": pa.config.values, "B": pb.config.values}
    differ = sorted(set(differing(full["A"], full["B"])))
    keep = set(differ) | metric_needs
    leans = {side: placement.prepare(replace(spec, name="lab-minimal", base="lab-minimal", fragments=[], options=[]))
             for side, (spec, _) in given.items()}
    trees = {side: _tree(lean) for side, lean in leans.items()}
    pinned: set[str] = set()   # set alike in A and B, kept so that the reductions agree (_apart)
    for round_ in range(NEED_ROUNDS + 1):
        kept = {side: reduce.reduce(trees[side], leans[side].config.values, full[side], keep) for side in given}
        reduced = {side: placement.prepare(_reduced_spec(given[side][0], kept[side])) for side in given}
        lost = _lost(differ, full, reduced)
        # A pinned option that does not hold needs what Kconfig says, as a differing one does
        # (Debian's DEFAULT_SECURITY_APPARMOR needs SECURITY_APPARMOR, outside the menus).
        unheld = _lost(sorted(pinned), full, reduced)
        needed = set().union(*(_needs(trees[side], reduced[side], name, full[side].get(name, "n"))
                               for side, name in [*lost, *unheld]))
        apart = _apart(trees["A"], full, reduced)
        more = (needed | apart) - keep if round_ < NEED_ROUNDS else set()
        if not more:
            break
        keep |= more
        pinned |= apart
    return reduced["A"], reduced["B"], {
        "a": _variant(a), "b": _variant(b), "measured": "reduced onto lab-minimal",
        "size": {side: _size(values) for side, values in full.items()},
        "threshold": {"modules": reduce.DISTRIBUTION_MODULES, "options": reduce.DISTRIBUTION_OPTIONS},
        "configs": {side: p.spec.fragments[0] for side, p in reduced.items()},
        "differing": len(differ),
        "kept": [f"{name}: A {full['A'].get(name, 'n')}, B {full['B'].get(name, 'n')}" for name in differ
                 if not any(n == name for _, n in lost)],
        "needed": sorted(keep - set(differ)),
        "not_kept": [_not_kept(trees[side], reduced[side], side, name, full[side].get(name, "n"))
                     for side, name in lost],
        "left_out": _left_out(trees, leans, full, kept),
        "left_out_why": "A and B set them alike, outside the reduction's menus (drivers, file systems, networking, "
                        "modules...): they are no part of the change A -> B, and the reduced kernels have "
                        "lab-minimal's values instead",
        "whole": "--whole measures the configurations as they are: every probe builds a distribution's kernel, "
                 "an hour or more on a small machine"}


def _tree(lean: Prepared) -> KconfigTree:
    assert lean.toolchain is not None   # lab-minimal is a kernel kernellab builds
    return open_tree(lean.source, lean.profile, lean.toolchain)


def _reduced_spec(spec: VariantSpec, kept: dict[str, str]) -> VariantSpec:
    """lab-minimal with the reduction's settings as a fragment, named by its content."""
    text = f"# {spec.name} reduced onto lab-minimal (kernellab why)\n" + format_config(kept)
    name = f"reduced-{hashlib.sha256(text.encode()).hexdigest()[:16]}.config"
    path = paths.cache_dir("why") / paths.component("config", name)
    if not path.exists():
        path.write_text(text)
    return replace(spec, base="lab-minimal", fragments=[str(path)], options=[])


def _lost(differ: list[str], full: dict[str, dict[str, str]], reduced: dict[str, Prepared]) -> list[tuple[str, str]]:
    """(side, option) of the differing options a reduction does not hold at the config's value."""
    return [(side, name) for name in differ for side in ("A", "B")
            if reduced[side].config.values.get(name, "n") != full[side].get(name, "n")]


def _apart(tree: KconfigTree, full: dict[str, dict[str, str]], reduced: dict[str, Prepared]) -> set[str]:
    """Options A and B set alike that their reductions set apart: what a kept option
    selects (SCHED_AUTOGROUP=y selects CGROUPS, which lab-minimal leaves out), so that only
    one side has it. Kept at the configurations' common value on both sides, or the reduced
    pair would differ in options the change A -> B does not touch (Debian's amd64 config
    against it with a dozen options changed: the reductions 78 options apart where the
    resolved configs differ in 43). Only
    those a user can set: the others follow from what is kept."""
    a, b = reduced["A"].config.values, reduced["B"].config.values
    alike = (tree.symbol(name) for name in differing(a, b) if full["A"].get(name, "n") == full["B"].get(name, "n"))
    settable = [sym for sym in alike if sym is not None and any(n.prompt for n in sym.nodes)]
    # A choice is kept whole (config.reduce): its entry the configurations choose is pinned too.
    return {"CONFIG_" + s.name for sym in settable for s in (sym.choice.syms if sym.choice is not None else [sym])}


def _needs(tree: KconfigTree, reduced: Prepared, name: str, value: str) -> set[str]:
    """What the planner would set for the option to take `value` on the reduction (its
    names: the reduction then keeps the config's own values of them)."""
    sym = tree.symbol(name)
    if sym is None or name.startswith("CONFIG_DEBUG_INFO"):
        return set()
    tree.load_text(reduced.config.text, "the reduction")
    return {s.name for s in plan(tree, sym, value).settings() or ()}


def _not_kept(tree: KconfigTree, reduced: Prepared, side: str, name: str, value: str) -> dict[str, str]:
    got = reduced.config.values.get(name, "n")
    if name.startswith("CONFIG_DEBUG_INFO"):
        needs = reduce.NO_DEBUG_INFO
    else:
        tree.load_text(reduced.config.text, "the reduction")
        needs = unmet(tree, name, value) or f"olddefconfig gives it {got}"
    return {"option": name, "side": side, "wanted": value, "got": got, "needs": needs}


def _left_out(trees: dict[str, KconfigTree], leans: dict[str, Prepared], full: dict[str, dict[str, str]],
              kept: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The options A or B set (a user can set: those with a prompt) that their reduction
    does not keep, by the top-level menu they are in."""
    by_menu: dict[str, set[str]] = {}
    for side, tree in trees.items():
        for name in differing(leans[side].config.values, full[side]):
            sym = tree.symbol(name)
            node = next((n for n in sym.nodes if n.prompt), None) if sym is not None else None
            if node is not None and name not in kept[side]:
                by_menu.setdefault((menus(node) or ["(main menu)"])[0], set()).add(name)
    return [{"menu": menu, "count": len(names), "options": sorted(names)}
            for menu, names in sorted(by_menu.items(), key=lambda item: -len(item[1]))]


def _size(values: dict[str, str]) -> dict[str, int]:
    return {"set": sum(v in ("y", "m") for v in values.values()), "modules": sum(v == "m" for v in values.values())}


# -- commits that do not build, remembered ---------------------------------------------



