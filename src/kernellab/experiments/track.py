"""Where did a metric change: a metric measured across a series of kernels (refs of one git
repository, a first-parent range thinned to every Nth commit, or any list of sources),
its change points found, each handed to `kernellab why` as the command that explains it.

Every kernel of the series is the variant as given, resolved on that kernel's source (a
Kconfig default that changes reaches it, as it reaches a user of the variant), so that
`why VARIANT VARIANT --sources BEFORE AFTER` explains exactly the change seen here. Each
is a probe (experiments.probe) through the store: a second run measures nothing again,
and a nightly job that adds one ref to the series builds and boots that ref alone. A
kernel that does not build or does not boot is a gap with its reason, never a value; a
build that failed is remembered (with `why`'s memory of failed builds, the same file), a
panic is booted again as `why` does.

Change points: ruptures' PELT (exact search of the segmentation minimising the squared
error plus a penalty per change point) on the series in % of its median, the penalty set
so that a step of the threshold between two kernels is worth a change point and, in wall
mode, that the noise of the kernels' medians is not. Each candidate is then judged by
kernellab's own three-way verdict (experiments.probe.verdict) on the runs of the segment
before against those of the segment after: icount exact against the threshold (one run
per kernel: the series is deterministic), wall different / same / not yet known from the
runs' spread, with more runs of the two kernels around it while more could decide. A
candidate found the same is dropped and its segments joined, and the others judged again.

Why ruptures (1.1.10, BSD-2, ENS Paris-Saclay): it needs only numpy and scipy, which
kernellab has. Apache Otava 0.8.0 (Hunter's E-Divisive) installs Google BigQuery, gRPC,
Slack and Postgres clients and pins numpy and scipy to older releases; MongoDB's
signal-processing-algorithms 2.1.6 pins numpy below 2 and brings gevent. E-Divisive's
permutation test is also meant for noisy series: on icount's exact values the question
is only whether a step passes the threshold, which the verdict answers.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from .. import modes
from ..errors import LabError
from ..metrics.catalog import describe
from ..store import Store
from ..workloads import Instance
from . import cluster_probe, commits, executor, failed_builds
from .commits import Commit
from .placement import Placement
from .probe import SAME, UNKNOWN, Probe, Prober, Verdict, verdict
from .spec import DEFAULT_ARCH, VariantSpec

REFS, RANGE, SOURCES = "refs", "range", "sources"


@dataclass(frozen=True)
class Ref:
    """One kernel of the series: its name as given (or a range commit's short id), its source."""
    name: str
    source: str
    commit: Commit | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.name, "source": self.source, "commit": self.commit.to_dict() if self.commit else None}


@dataclass(frozen=True)
class Series:
    kind: str                      # REFS, RANGE or SOURCES
    refs: tuple[Ref, ...]
    repo: Path | None = None
    range: str | None = None
    every: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "repo": str(self.repo) if self.repo else None, "range": self.range,
                "every": self.every, "first_parent": self.kind == RANGE}


def series(sources: list[str], refs: str | None, range_: str | None, every: int | None) -> Series:
    """The kernels to measure, checked before anything is built: one line on bad input."""
    if every is not None and every < 1:
        raise LabError(f"--every {every}: give 1 (every commit) or more")
    if refs is not None and range_ is not None:
        raise LabError("give --refs or --range, not both")
    if every is not None and range_ is None:
        raise LabError("--every thins a --range GOOD..BAD; with --refs, list the refs to measure")
    if not sources:
        raise LabError("give --source: git:PATH with --refs or --range, or one --source per kernel of the series")
    if refs is None and range_ is None:
        return Series(SOURCES, tuple(_source_ref(s) for s in dict.fromkeys(sources)))
    if len(sources) != 1 or "@" in sources[0] or not sources[0].startswith(commits.GIT):
        raise LabError("with --refs or --range give one --source git:PATH (the repository; the refs come from "
                       f"--refs or --range), not {' '.join(sources)}")
    repo = Path(sources[0].removeprefix(commits.GIT)).expanduser().resolve()
    if commits.git(repo, "rev-parse", "--git-dir") is None:
        raise LabError(f"{repo} is not a git repository: give --source git:PATH of one")
    if refs is not None:
        names = [r.strip() for r in refs.split(",") if r.strip()]
        if not names:
            raise LabError("--refs needs at least one ref: --refs v6.1,v6.2,master")
        return Series(REFS, tuple(_git_ref(repo, name) for name in dict.fromkeys(names)), repo)
    assert range_ is not None
    return _range(repo, range_, every or 1)


def _range(repo: Path, text: str, every: int) -> Series:
    """GOOD, every Nth first-parent commit after it counted from GOOD (so that the kernels
    picked stay the same when BAD moves on, and a nightly reuses them), and BAD."""
    good, dots, bad = text.partition(commits.RANGE)
    if not dots or not good or not bad or commits.RANGE in bad:
        raise LabError(f"--range {text!r}: give GOOD..BAD, two refs of the repository")
    h = commits.history(f"{commits.GIT}{repo}@{good}", f"{commits.GIT}{repo}@{bad}")
    assert h is not None   # two refs of one repository
    picked = [c for i, c in enumerate(h.commits, start=1) if i % every == 0 or c == h.bad]
    kernels = [h.good, *picked] if h.good.sha != h.bad.sha else [h.good]
    return Series(RANGE, tuple(Ref(c.short, h.source(c.sha), c) for c in kernels), repo, text, every)


def _git_ref(repo: Path, name: str) -> Ref:
    c = commits.commit(repo, name)
    return Ref(name, f"{commits.GIT}{repo}@{c.sha}", c)


def _source_ref(source: str) -> Ref:
    """A source as kernellab takes it; a git:PATH@REF one with its commit (the ref must exist)."""
    at = commits.git_ref(source)
    if at is None:
        return Ref(source, source)
    repo, ref = at
    if commits.git(repo, "rev-parse", "--git-dir") is None:
        raise LabError(f"{repo} is not a git repository: give git:PATH@REF of one")
    return replace(_git_ref(repo, ref), name=source)


# -- measuring ----------------------------------------------------------------------------

@dataclass
class Ask:
    variant: VariantSpec
    variant_text: str           # as given, for the `why` command lines
    metric: str
    mode: modes.Mode
    threshold: float            # smallest change that counts, in %
    max_runs: int
    placement: Placement
    cluster: executor.Cluster | None = None
    workloads: tuple[Instance, ...] = ()


@dataclass
class Point:
    ref: Ref
    probe: Probe | None = None
    prober: Prober | None = None
    gap: str = ""                 # why it has no value: does not build, does not boot

    def runs(self, metric: str) -> list[float]:
        return list(self.probe.runs[metric]) if self.probe else []


def check(variant: VariantSpec, s: Series, metric: str, placement: Placement) -> None:
    """What is wrong with the variant or the metric, on the series' first kernel, before any build."""
    first = placement.prepare(replace(variant, source=s.refs[0].source))
    if first.toolchain is None or not first.built:
        raise LabError("track builds a kernel per ref: give a variant kernellab builds (not the running kernel or "
                       "a prebuilt image)")
    missing = [o for o in describe(metric, "").needs if first.config.values.get(o, "n") == "n"]
    if missing:
        raise LabError(f"{metric} needs {', '.join(missing)}, which {variant.name} does not set at "
                       f"{s.refs[0].name}: add +{missing[0]}=y to the variant")


class Track:
    def __init__(self, store: Store, ask: Ask, s: Series, log: Callable[[str], None] = print) -> None:
        self.store, self.ask, self.series, self.log = store, ask, s, log
        self.builds = self.boots = 0

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        m, a = self.ask.metric, self.ask
        points = [self._measure(r, i, len(self.series.refs)) for i, r in enumerate(self.series.refs)]
        found = self._changes(points)
        return {"variant": _variant(a.variant, a.variant_text), "metric": m, "unit": describe(m, "").unit,
                "better": describe(m, "").better, "mode": a.mode.name, "deterministic": a.mode.deterministic,
                "threshold_pct": a.threshold, "series": self.series.to_dict(),
                "points": [self._row(p) for p in points],
                "change_points": found, "detector": self.detector,
                "builds": self.builds, "boots": self.boots, "wall_s": time.monotonic() - start}

    def _measure(self, ref: Ref, index: int, count: int) -> Point:
        a = self.ask
        spec = replace(a.variant, source=ref.source)
        point = Point(ref)
        label = f"track:{ref.commit.short if ref.commit else index}"
        try:
            prepared = a.placement.prepare(spec)
        except LabError as exc:
            point.gap = f"does not configure: {exc}"
            self.log(f"[{index + 1}/{count}] {ref.name}: gap, {point.gap}")
            return point
        key = failed_builds.key(prepared.source.content_hash, prepared.config.hash, spec.toolchain)
        remembered = failed_builds.known().get(key)
        if remembered:
            point.gap = f"does not build (remembered): {remembered}"
            self.log(f"[{index + 1}/{count}] {ref.name}: gap, {point.gap}")
            return point
        prober = cluster_probe.prober(self.store, spec, prepared.config.text, [a.metric], a.mode, a.cluster,
                                      self.log, a.placement, "track", a.workloads)
        point.prober = prober
        try:
            point.probe = prober.probe(label, {}, runs=a.mode.probe_runs)
        except LabError as exc:
            built = bool(prober.probes)
            point.gap = ("does not boot: " if built else "does not build: ") + str(exc)
            if not built:
                self.builds += 1
                failed_builds.remember(key, str(exc))
        finally:
            self.builds += prober.builds
            self.boots += prober.boots
        said = f"gap, {point.gap}" if point.probe is None else f"{a.metric} {point.probe.value(a.metric):.4g}"
        self.log(f"[{index + 1}/{count}] {ref.name}: {said}")
        return point

    # -- change points --------------------------------------------------------------------

    def _changes(self, points: list[Point]) -> list[dict[str, Any]]:
        m = self.ask.metric
        measured = [i for i, p in enumerate(points) if p.probe is not None]
        values = [points[i].probe.value(m) for i in measured]   # type: ignore[union-attr]
        cuts, penalty = candidates(values, [points[i].runs(m) for i in measured], self.ask.threshold)
        self.detector = {"library": f"ruptures {version('ruptures')}",
                         "method": "PELT, squared-error cost, on the series in % of its median",
                         "penalty": penalty, "candidates": len(cuts),
                         "judged": "kernellab's verdict on the runs of the segments either side"}
        while True:
            judged = [(k, self._judge(points, measured, cuts, k)) for k in cuts]
            same = [(k, v) for k, v in judged if v.kind == SAME]
            if not same:
                break
            # The candidate least like a change goes first: its segments joined, the rest judged again.
            weakest = min(same, key=lambda kv: abs(_step(points, measured, cuts, kv[0], m)))
            cuts.remove(weakest[0])
        return [self._change(points, measured, cuts, k, v) for k, v in judged]

    def _segment_runs(self, points: list[Point], measured: list[int], cuts: list[int], k: int,
                      side: int) -> list[float]:
        """The runs of the segment just before (side -1) or just after (side +1) cut k."""
        bounds = [0, *cuts, len(measured)]
        at = bounds.index(k)
        lo, hi = (bounds[at - 1], k) if side < 0 else (k, bounds[at + 1])
        return [r for i in measured[lo:hi] for r in points[i].runs(self.ask.metric)]

    def _judge(self, points: list[Point], measured: list[int], cuts: list[int], k: int) -> Verdict:
        a = self.ask
        while True:
            v = verdict(self._segment_runs(points, measured, cuts, k, -1),
                        self._segment_runs(points, measured, cuts, k, +1),
                        describe(a.metric, "").better, a.mode, a.threshold, a.max_runs)
            if v.kind != UNKNOWN or not v.more_could_decide:
                return v
            # The stopping rule of bisect: more runs of the two kernels either side, up to the cap.
            for i in (measured[k - 1], measured[k]):
                p = points[i]
                assert p.probe is not None and p.prober is not None
                before = p.prober.boots
                p.prober.more_runs(p.probe, runs=len(p.probe.runs[a.metric]) + 1)
                self.boots += p.prober.boots - before

    def _change(self, points: list[Point], measured: list[int], cuts: list[int], k: int,
                v: Verdict) -> dict[str, Any]:
        m = self.ask.metric
        before, after = points[measured[k - 1]], points[measured[k]]
        low = statistics.median(self._segment_runs(points, measured, cuts, k, -1))
        high = statistics.median(self._segment_runs(points, measured, cuts, k, +1))
        change = high - low
        better = describe(m, "").better
        regression = (change > 0) == (better == "lower")
        return {"before": measured[k - 1], "after": measured[k],
                "suspects": [points[i].ref.to_dict() for i in range(measured[k - 1] + 1, measured[k] + 1)]
                if measured[k] - measured[k - 1] > 1 else [],
                "before_value": before.probe.value(m) if before.probe else None,
                "after_value": after.probe.value(m) if after.probe else None,
                "from_level": low, "to_level": high, "change": change,
                "change_pct": 100 * change / abs(low) if low else None,
                "direction": "regression" if regression else "improvement",
                "verdict": {"verdict": v.kind, "reason": v.reason},
                "why": self._why(before.ref, after.ref) if regression else None}

    def _why(self, before: Ref, after: Ref) -> str:
        """The command that explains a regression: A the kernel before it, B the one after."""
        a = self.ask
        named = a.variant.name != a.variant_text and a.variant_text.startswith(a.variant.name + "=")
        body = a.variant_text.removeprefix(a.variant.name + "=") if named else a.variant_text
        extra = [f"--mode {a.mode.name}"] if a.mode.name != modes.DEFAULT else []
        if a.variant.arch != DEFAULT_ARCH:
            extra.append(f"--arch {a.variant.arch}")
        return " ".join(["kernellab why", f"a={body}", f"b={body}", "--sources", _quoted(before.source),
                         _quoted(after.source), "--metric", a.metric, *extra])

    def _row(self, p: Point) -> dict[str, Any]:
        m = self.ask.metric
        runs = p.runs(m)
        probe = p.probe
        # A kernel that does not boot was built: its row shows that build.
        built = probe or (p.prober.probes[0] if p.prober is not None and p.prober.probes else None)
        return {**p.ref.to_dict(), "value": probe.value(m) if probe else None, "runs": runs,
                "spread": [min(runs), max(runs)] if len(runs) > 1 else None, "gap": p.gap,
                **commits.build_fields(built.build if built else None), "boots": probe.boots if probe else 0}


def _quoted(text: str) -> str:
    return text if all(c.isalnum() or c in "/:@._-+=," for c in text) else "'" + text.replace("'", "'\\''") + "'"


def candidates(values: list[float], runs: list[list[float]], threshold: float) -> tuple[list[int], float]:
    """Where the series may change: positions k (a change between values[k-1] and values[k]),
    from PELT, and the penalty used. The series is taken in % of its median, so the penalty
    is in the threshold's units: a step of the threshold between one kernel and the next
    (the least a squared-error split gains from it is half its square) is worth a change
    point; in wall mode so must be more than twice the medians' noise times log n (BIC)."""
    if len(values) < 2:
        return [], 0.0
    # ruptures (and scipy under it) take over a second to import: only when a series is judged.
    import numpy as np
    import ruptures
    centre = statistics.median(values) or 1.0
    series = np.array([100 * (v - centre) / abs(centre) for v in values]).reshape(-1, 1)
    noise = [statistics.variance(r) / len(r) * (100 / centre) ** 2 for r in runs if len(r) > 1]
    penalty = max(threshold ** 2 / 4, 2 * statistics.fmean(noise) * math.log(len(values)) if noise else 0.0)
    ends = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(series).predict(pen=penalty)
    return [int(e) for e in ends[:-1]], penalty


def _step(points: list[Point], measured: list[int], cuts: list[int], k: int, metric: str) -> float:
    before, after = points[measured[k - 1]].probe, points[measured[k]].probe
    assert before is not None and after is not None
    return after.value(metric) - before.value(metric)


def _variant(v: VariantSpec, text: str) -> dict[str, Any]:
    return {"name": v.name, "text": text, "base": v.base, "fragments": list(v.fragments), "options": list(v.options),
            "toolchain": v.toolchain, "boot_words": v.boot_words(), "arch": v.arch}


