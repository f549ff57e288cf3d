"""Studies: the seed studies (shared/reference/seeds) as data, each redone by one command.

A study file (src/kernellab/studies/NAME.toml, or a user's own file) holds an experiment
(its variants), the arches it runs on, the table layout of its seed, the summary it writes
and, optionally, how a difference splits into code and configuration and which sweep
names the options responsible. `run` measures it arch by arch through the ordinary
experiment loop, so every build and run lands in the store, and a study run again (after
an interruption, or to add an arch) reuses what the store already has.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from .. import arches, datafile, knowledge, modes, paths, prebuilt, progress
from ..build import Build, build_key, cached_build
from ..config.dotconfig import differing
from ..errors import LabError, did_you_mean
from ..guest import workloads as guest_workloads
from ..metrics.catalog import catalog, metric_hint
from ..proc import require_tool
from ..report.model import NoiseFloor, VariantRecord, build_report
from ..store import Store
from ..targets.registry import Ask
from ..workloads import Instance
from . import compare, executor, lab, sweep
from .placement import Placement
from .probe import Probe, Prober
from .spec import Experiment, VariantSpec, experiment_from_data

# A variant's base `config-of:NAME`: the resolved .config of the study's variant NAME on
# the same arch, carried to this variant's source by olddefconfig. It is how a study asks
# "the new code with the old configuration".
CONFIG_OF = "config-of:"


@dataclass(frozen=True)
class TableSection:
    """One block of the seed's table: a title and the metrics it lists, in order."""
    title: str
    metrics: list[str]


@dataclass(frozen=True)
class SummaryItem:
    """One line of the written summary: a headline and the metrics that decide it."""
    says: str
    metrics: list[str]
    subject: str | None = None      # the variant compared with the baseline (default: the study's)
    against: str | None = None      # what it is compared with (default: the study's baseline)


@dataclass(frozen=True)
class Decomposition:
    """How much of `to` against `from_` comes from the code and how much from the config:
    `via` is `to`'s code with `from_`'s configuration."""
    from_: str
    via: str
    to: str


@dataclass(frozen=True)
class SweepPart:
    """The seed's own method automated: flip, on `good`, each option in which `bad` differs."""
    good: str
    bad: str
    metrics: list[str]
    arches: list[str] = field(default_factory=list)    # default: the study's first arch
    title: str = ""        # what this sweep asks, when a study has several (e.g. "on from lean")
    # Flip only the options the audit's rules of these categories name (default: every option
    # that differs): what a cost table for those rules needs, in a fraction of the builds.
    rules: list[str] = field(default_factory=list)

    def label(self, arch: str, alone: bool) -> str:
        """The report's key: the arch, and which sweep when the study has several."""
        return arch if alone else f"{arch}, {self.title or f'{self.bad} onto {self.good}'}"


@dataclass(frozen=True)
class QuickForm:
    """The smallest meaningful form of the study (it never sweeps)."""
    arches: list[str]
    variants: list[str] = field(default_factory=list)   # default: all


@dataclass(frozen=True)
class StudyFile:
    name: str
    title: str
    seed: str                     # the file under shared/reference/seeds it redoes ("" for a new one)
    question: str
    arches: list[str]
    baseline: str
    subject: str
    expected_minutes: int         # the full form, cold, on a 2-core machine
    experiment: dict[str, Any]    # an experiment file's keys: variants, source, mode, runs
    table: list[TableSection]
    summary: list[SummaryItem]
    quick: QuickForm
    decompose: list[Decomposition] = field(default_factory=list)
    sweep: list[SweepPart] = field(default_factory=list)   # [[sweep]], each in the full form only
    # What the seed measured that this study cannot measure yet, said in every report.
    not_yet: list[str] = field(default_factory=list)
    # Where the figures mean something (e.g. "sequential I/O: wall mode only").
    caveats: list[str] = field(default_factory=list)


@dataclass
class Study:
    file: StudyFile
    experiment: Experiment
    origin: str

    @property
    def name(self) -> str:
        return self.file.name

    def variant_names(self) -> list[str]:
        return [v.name for v in self.experiment.variants]

    def builds_needed(self, quick: bool = False) -> int:
        """Distinct kernels to build: variants that differ only in boot parameters share one,
        and build-only arches build too."""
        variants = [v for v in self.variants(quick) if not prebuilt.is_image(v.base)]   # Debian built those
        return len({(a, v.source, v.base, tuple(v.fragments), tuple(v.options), v.toolchain)
                    for a in self.arches(quick) for v in variants if _buildable(v, a)})

    def arches(self, quick: bool = False) -> list[str]:
        return list(self.file.quick.arches if quick else self.file.arches)

    def variants(self, quick: bool = False) -> list[VariantSpec]:
        keep = set(self.file.quick.variants) if quick and self.file.quick.variants else None
        return [v for v in self.experiment.variants if keep is None or v.name in keep]


def packaged() -> dict[str, Path]:
    folder = resources.files("kernellab") / "studies"
    return {p.name.removesuffix(".toml"): Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def load(name_or_path: str) -> Study:
    """A shipped study by name, or a study file by path; a one-line error otherwise."""
    path = Path(name_or_path).expanduser()
    known = packaged()
    if name_or_path in known:
        path, origin = known[name_or_path], f"study {name_or_path}"
    elif path.suffix == ".toml" and path.is_file():
        origin = f"study {path}"
    else:
        studies = (f"the studies are {', '.join(sorted(known))} (`kernellab study list`), or give the path of a "
                   "study .toml file")
        hint = did_you_mean(name_or_path, known)
        raise LabError(f"unknown study {name_or_path!r}: {f'{hint} ({studies})' if hint else studies}")
    return parse(datafile.read_toml(path, origin), origin)


def parse(data: dict[str, Any], origin: str) -> Study:
    f = datafile.load(StudyFile, data, origin)
    exp = experiment_from_data(f.experiment, f"{origin} [experiment]")
    # Its workloads' metrics registered first: the tables, the summary and a sweep may name them.
    try:
        instances = compare.resolve_workloads(exp.workloads)
    except LabError as exc:
        raise LabError(f"{origin} [experiment] workloads: {exc}") from None
    names = [v.name for v in exp.variants]
    _check(f, names, origin, {guest_workloads.metric_name(i, m) for i in instances for m in i.metrics()})
    return Study(f, replace(exp, name=f.name, description=f.title), origin)


def _check(f: StudyFile, names: list[str], origin: str, workload_metrics: set[str]) -> None:
    """The cross-references a schema cannot see: variant names, metric names (a workload's
    only when [experiment] workloads runs it), arch names."""
    def variant(name: str | None, where: str) -> None:
        if name is not None and name not in names:
            raise LabError(f"{origin}: {where} names variant {name!r}, not one of {', '.join(names)}")

    def metric(name: str, where: str) -> None:
        theirs = name in catalog() and catalog()[name].source == "workload"   # registered by any command
        if name not in catalog() or (theirs and name not in workload_metrics):
            raise LabError(f"{origin}: {where} names metric {name!r}, which neither the catalog nor a workload "
                           f"of [experiment] workloads has: {metric_hint(name)}")

    known_arches = arches.available()
    for a in [*f.arches, *f.quick.arches, *(a for s in f.sweep for a in s.arches)]:
        if a not in known_arches:
            hint = did_you_mean(a, known_arches)
            raise LabError(f"{origin}: unknown arch {a!r}{': ' + hint if hint else ''} "
                           f"(arches: {', '.join(known_arches)})")
    for a in f.quick.arches:
        if a not in f.arches:
            raise LabError(f"{origin}: [quick] arch {a!r} is not one of the study's arches")
    variant(f.baseline, "baseline")
    variant(f.subject, "subject")
    for v in f.experiment.get("variant", []):
        if v.get("name") in (f.baseline, f.subject) and v.get("toolchain", "gcc") != "gcc":
            raise LabError(f"{origin}: the baseline and the subject build with GCC on every arch; "
                           f"compare {v['name']} with `against` in a [[summary]]")
    for v in f.quick.variants:
        variant(v, "[quick] variants")
    _check_config_of(f, origin)
    if f.quick.variants and not {f.baseline, f.subject} <= set(f.quick.variants):
        raise LabError(f"{origin}: [quick] variants must keep the baseline and the subject")
    for section in f.table:
        for m in section.metrics:
            metric(m, f"table {section.title!r}")
    for item in f.summary:
        variant(item.subject, f"summary {item.says!r}")
        variant(item.against, f"summary {item.says!r}")
        for m in item.metrics:
            metric(m, f"summary {item.says!r}")
    for d in f.decompose:
        for n in (d.from_, d.via, d.to):
            variant(n, "decompose")
    for s in f.sweep:
        variant(s.good, "sweep")
        variant(s.bad, "sweep")
        for m in s.metrics:
            metric(m, "sweep")
        for c in s.rules:
            if c not in knowledge.CATEGORIES:
                raise LabError(f"{origin}: sweep rules names category {c!r}, not one of "
                               f"{', '.join(knowledge.CATEGORIES)}")


def _check_config_of(f: StudyFile, origin: str) -> None:
    """Every `config-of:NAME` base names a variant of the study with a config of its own,
    kept in the quick form wherever the variant that names it is: checked when the file is
    read, so a bad one is a usage error (exit 2) before anything is built, not a failed arch."""
    bases = {v.get("name"): v.get("base", "") for v in f.experiment.get("variant", []) if isinstance(v, dict)}
    for name, base in bases.items():
        if not isinstance(base, str) or not base.startswith(CONFIG_OF):
            continue
        other = base.removeprefix(CONFIG_OF)
        if other not in bases or str(bases[other]).startswith(CONFIG_OF):
            raise LabError(f"{origin}: variant {name}: base {base} names no variant of this study with a "
                           "config of its own")
        if f.quick.variants and name in f.quick.variants and other not in f.quick.variants:
            raise LabError(f"{origin}: [quick] variants keep {name} and must keep {other}, whose config it is based on")


@dataclass
class StudyPlan:
    study: Study
    arches: list[str]
    quick: bool
    mode: str | None          # as asked (None: the study's, else the target's default); compare.plan resolves it
    runs: int | None
    timeout_s: float = lab.DEFAULT_TIMEOUT_S
    vcpus: int | None = None  # every variant booted with this many vCPUs (--vcpus), else each its own
    # Real programs every run measures: the study's own ([experiment] workloads), then those
    # this run adds (--workload, in `added`), resolved and their metrics registered.
    workloads: tuple[Instance, ...] = ()
    added: tuple[Instance, ...] = ()
    # --noise-floor: judges the sweeps' flips as the report judges its tables.
    floor: NoiseFloor = field(default_factory=NoiseFloor)

    def changed(self) -> list[str]:
        """What this run does differently from the study file: said in its report."""
        out = [f"every variant booted with {self.vcpus} vCPUs (--vcpus {self.vcpus})"] if self.vcpus else []
        return out + [f"every variant runs the workload {inst.label} too (--workload)" for inst in self.added]

    def left_out(self) -> list[str]:
        """What of the full study this run does not do: said in its report."""
        f = self.study.file
        out = []
        arches_out = [a for a in f.arches if a not in self.arches]
        if arches_out:
            out.append(f"the arch{'es' if len(arches_out) > 1 else ''} {', '.join(arches_out)}")
        kept = {v.name for v in self.study.variants(self.quick)}
        variants_out = [n for n in self.study.variant_names() if n not in kept]
        if variants_out:
            out.append(f"the variant{'s' if len(variants_out) > 1 else ''} {', '.join(variants_out)}")
        if any(n not in kept for d in f.decompose for n in (d.from_, d.via, d.to)):
            out.append("the split into code and configuration")
        if f.sweep and not self.sweeps():
            out.append("the sweep that names the options responsible")
        return out + self.unbuildable()

    def sweeps(self) -> list[tuple[SweepPart, str]]:
        """Each sweep with each arch it runs on: the full form only."""
        if self.quick:
            return []
        return [(s, a) for s in self.study.file.sweep for a in s.arches or self.study.file.arches[:1]
                if a in self.arches and not arches.load(a).build_only]

    def experiment(self, arch: str) -> Experiment:
        # The baseline first: every delta of the report is against the first variant.
        chosen = sorted(self.study.variants(self.quick), key=lambda v: v.name != self.study.file.baseline)
        return replace(self.study.experiment, variants=[replace(v, arch=arch, vcpus=self.vcpus or v.vcpus)
                                                        for v in chosen if _buildable(v, arch)])

    def unbuildable(self) -> list[str]:
        """Variants an arch of this run cannot build (Clang where the kernel supports GCC only)."""
        return [f"{v.name} on {a} (no {v.toolchain} kernel builds for {a})" for a in self.arches
                for v in self.study.variants(self.quick) if not _buildable(v, a)]


def _buildable(v: VariantSpec, arch: str) -> bool:
    return v.toolchain != "clang" or arches.load(arch).llvm


def plan(study: Study, arch: list[str] | None, mode: str | None, runs: int | None, quick: bool,
         timeout_s: float = lab.DEFAULT_TIMEOUT_S, vcpus: int | None = None,
         workloads: list[str] | None = None) -> StudyPlan:
    """`workloads`: specs (as --workload names them) every variant runs beside the study's own."""
    chosen = list(dict.fromkeys(arch)) if arch else study.arches(quick)
    unknown = [a for a in chosen if a not in study.file.arches]
    if unknown:
        raise LabError(f"study {study.name} runs on {', '.join(study.file.arches)}, not {', '.join(unknown)}")
    if mode is not None and mode not in modes.NAMES:
        raise LabError(f"unknown mode {mode!r} (modes: {', '.join(modes.NAMES)})")
    if vcpus is not None:
        own = [v.name for v in study.experiment.variants if v.vcpus is not None]
        if own:
            # Its variants differ in vCPUs on purpose: one count for all would erase the question.
            raise LabError(f"study {study.name} sets the vCPUs of {', '.join(own)} itself: run it without --vcpus")
        # The mode and the arch may not allow that many (compare.plan checks, before any build).
    own = study.experiment.workloads
    added = [spec for spec in dict.fromkeys(workloads or []) if spec not in own]
    # Resolved together: two that would give the same metric names are refused (guest.workloads.check).
    instances = compare.resolve_workloads([*own, *added])
    return StudyPlan(study, chosen, quick, mode, runs, timeout_s, vcpus, instances, instances[len(own):])


def preflight(p: StudyPlan) -> None:
    """Every compiler and emulator the study needs, before any build: a missing one is
    one line naming the package to install, not an error an hour into the study."""
    from .. import toolchain
    for a in p.arches:
        profile = arches.load(a)
        require_tool(profile.cc)
        if not profile.build_only:
            require_tool(profile.require_machine().binary)
        for kind in sorted({v.toolchain for v in p.experiment(a).variants}):
            toolchain.detect(profile, kind)


@dataclass
class ArchResult:
    arch: str
    report: dict[str, Any]
    failures: list[str]


@dataclass
class StudyResult:
    plan: StudyPlan
    results: list[ArchResult]
    sweeps: dict[str, dict[str, Any]]      # arch -> sweep result
    failures: list[str]
    wall_s: float = 0.0
    builds: int = 0                        # kernels built by this run (the others came from the cache)
    # What the store does not hold yet: set by measured_only, whose report says it (None: a run)
    missing: Missing | None = None


def run(p: StudyPlan, store: Store, log: Callable[[str], None] = print,
        cluster: executor.Cluster | None = None, placement: Placement | None = None) -> StudyResult:
    """Each arch in turn through the experiment loop, reusing every finished run of the
    same kernel measured the same way; then the sweep, in the full form only."""
    if placement is not None:   # what the variants need of --target, in one line before anything starts
        for a in p.arches:
            for v in p.experiment(a).variants:
                placement.require(Ask(mode=p.mode, variant=v.name, vcpus=v.vcpus, fs=v.fs or None,
                                      devices=v.devices, built=v.base != lab.RUNNING, running=v.base == lab.RUNNING))
    preflight(p)
    start = time.monotonic()
    results, failures = [], []
    steps = len(p.arches) + len(p.sweeps())
    with progress.task(f"study {p.study.name}", steps, "arches and sweeps") as bar:
        for a in p.arches:
            log(f"study {p.study.name}: {a}" + (" (quick form)" if p.quick else ""))
            try:
                exp = _with_config_bases(p.experiment(a), log)
                how = replace(compare.plan(exp, p.mode, p.runs, None, p.timeout_s, placement=placement,
                                           workloads=p.workloads), reuse=True)
                report, failed = (compare.run_experiment(exp, store, how, log=log) if cluster is None
                                  else executor.run_experiment(exp, store, how, cluster, log=log))
            except LabError as exc:
                # One arch that cannot be built or booted does not cost the others their results.
                log(f"study {p.study.name}: {a} failed: {exc}")
                failures.append(f"{a}: {exc}")
                continue
            finally:
                bar.advance()
            results.append(ArchResult(a, report, failed))
            failures += [f"{a}: {f}" for f in failed]
        sweeps: dict[str, dict[str, Any]] = {}
        alone = len(p.study.file.sweep) == 1
        for s, a in p.sweeps():
            label = s.label(a, alone)
            try:
                sweeps[label] = _sweep(p, s, a, store, log, cluster, placement)
            except LabError as exc:   # the study's tables stand without it
                log(f"study {p.study.name}: the sweep on {label} failed: {exc}")
                failures.append(f"{label} sweep: {exc}")
            finally:
                bar.advance()
    built = sum(1 for r in results for v in r.report["variants"] if v["build"] and not v["build"]["cached"])
    return StudyResult(p, results, sweeps, failures, time.monotonic() - start, built)


def _sweep(p: StudyPlan, s: SweepPart, arch: str, store: Store, log: Callable[[str], None],
           cluster: executor.Cluster | None, placement: Placement | None) -> dict[str, Any]:
    """The sweep's probes boot where the study's variants did (`placement`; None: QEMU TCG)."""
    ask = _sweep_ask(p, s, arch, log, placement)
    result = sweep.sweep(store, ask.good, ask.flips, s.metrics, ask.mode, p.runs, log=log, cluster=cluster,
                         placement=placement, workloads=p.workloads, floor=p.floor).to_dict()
    return _study_sweep(result, arch, s, ask)


def _study_sweep(result: dict[str, Any], arch: str, s: SweepPart, ask: _SweepAsk) -> dict[str, Any]:
    """A sweep as its study's report holds it: which arch and variants, the rules that
    chose its flips, and always which workloads its probes ran (study format 2: [] for none,
    where a sweep's own result leaves the key out)."""
    return {**result, "workloads": result.get("workloads", []), "arch": arch, "good": s.good, "bad": s.bad,
            **ask.chosen}


@dataclass(frozen=True)
class _SweepAsk:
    """What a sweep of the study flips: on `good`, each option of `flips`, in `mode`."""
    good: VariantSpec
    flips: dict[str, str]
    chosen: dict[str, Any]     # the rules' categories that chose the flips, and how many they left out
    mode: modes.Mode


def _sweep_ask(p: StudyPlan, s: SweepPart, arch: str, log: Callable[[str], None],
               placement: Placement | None) -> _SweepAsk:
    exp = _with_config_bases(p.experiment(arch), log)
    by_name = {v.name: v for v in exp.variants}
    good, bad = by_name[s.good], by_name[s.bad]
    if placement is not None:   # as the study's variants were: of the target's arch, `running` its kernel
        for v in (good, bad):
            placement.adapt(v)
    prepare = placement.prepare if placement is not None else lab.prepare
    flips = differing(prepare(good).config.values, prepare(bad).config.values)
    log(f"study {p.study.name}: sweep on {arch}, {len(flips)} options in which {s.bad} differs from {s.good}")
    chosen: dict[str, Any] = {}
    if s.rules:
        named = {o for r in knowledge.load_rules() if r.category in s.rules for o in r.options()}
        kept = {o: v for o, v in flips.items() if o in named}
        left = len(flips) - len(kept)
        chosen = {"rules": s.rules, "left_out": left}
        log(f"study {p.study.name}: {len(kept)} of them named by the rules of {', '.join(s.rules)}; "
            f"the other {left} are not flipped")
        flips = kept
    # As compare.plan resolved it for the study's variants.
    mode = modes.get(p.mode or exp.mode or (placement.default_mode() if placement is not None else modes.DEFAULT))
    return _SweepAsk(good, flips, chosen, mode)


# -- what a study stopped part-way has measured (study run --measured-only) ----------------

@dataclass
class Missing:
    """What the store does not hold yet of a study: each missing thing once, for its report."""
    planned: dict[str, list[str]] = field(default_factory=dict)    # arch -> its variants, in report order
    variants: dict[str, list[str]] = field(default_factory=dict)   # arch -> variants neither built nor run
    unbooted: dict[str, list[str]] = field(default_factory=dict)   # arch -> variants built, not booted yet
    short: list[str] = field(default_factory=list)                 # "VARIANT on ARCH: 1 of 3 runs"
    flips: dict[str, int] = field(default_factory=dict)            # sweep label -> the options it flips
    # sweep label -> its probes not measured yet ("the baseline", "CONFIG_X=y")
    sweeps: dict[str, list[str]] = field(default_factory=dict)


class _NotInStore(Exception):
    """A probe the store (or the build cache) does not hold: measured_only does not make it."""


def measured_only(p: StudyPlan, store: Store, log: Callable[[str], None] = print,
                  placement: Placement | None = None) -> StudyResult:
    """What the store already holds of the study, building and booting nothing: each
    variant's kernel from the build cache and its runs taken as a run of the study takes
    them (compare.earlier_runs: the same kernel, mode, agent and target), each sweep's
    probes likewise; what is not there yet is in the result's `missing`. Nothing at all
    is a one-line error saying to run the study first."""
    missing = Missing()
    results, failures = [], []
    for a in p.arches:
        try:
            report = _stored_arch(p, a, store, log, placement, missing)
        except LabError as exc:   # a source or a config that cannot be resolved: the others still count
            failures.append(f"{a}: {exc}")
            missing.planned[a] = [v.name for v in p.experiment(a).variants]
            missing.variants[a] = list(missing.planned[a])
            continue
        if report is not None:
            results.append(ArchResult(a, report, []))
    sweeps: dict[str, dict[str, Any]] = {}
    alone = len(p.study.file.sweep) == 1
    for s, a in p.sweeps():
        label = s.label(a, alone)
        try:
            result = _stored_sweep(p, s, a, store, log, label, missing, placement)
        except LabError as exc:
            failures.append(f"{label} sweep: {exc}")
            continue
        if result is not None:
            sweeps[label] = result
    if not results and not sweeps:
        raise nothing_measured(p, failures[0] if failures else "")
    return StudyResult(p, results, sweeps, failures, missing=missing)


def nothing_measured(p: StudyPlan, why: str = "") -> LabError:
    """The one line of a measured-only report of a study the store holds nothing of."""
    return LabError(f"study {p.study.name}: nothing of it is measured yet{f' ({why})' if why else ''}: run it first "
                    f"(kernellab study run {p.study.origin.removeprefix('study ')}{' --quick' if p.quick else ''})")


def _stored_arch(p: StudyPlan, arch: str, store: Store, log: Callable[[str], None], placement: Placement | None,
                 missing: Missing) -> dict[str, Any] | None:
    """The arch's report of the variants the store holds (None: it holds none of them);
    the rest said in `missing`."""
    exp = _with_config_bases(p.experiment(arch), log)
    how = replace(compare.plan(exp, p.mode, p.runs, None, p.timeout_s, placement=placement, workloads=p.workloads),
                  reuse=True)
    records, nothing, unbooted, short = [], [], [], []
    for spec in exp.variants:
        r = VariantRecord(lab.prepare(spec, how.machine))
        prepared, bootable = r.prepared, not r.prepared.profile.build_only
        if prepared.built:
            assert prepared.toolchain is not None   # a kernel kernellab builds
            r.build = cached_build(build_key(prepared.source, prepared.profile, prepared.toolchain, prepared.config))
        if bootable and (r.build is not None or not prepared.built):
            agent = lab.agent_for(prepared, compare.target_of(how, r), how.options.workloads)
            r.runs = compare.earlier_runs(r, store, how, agent)
        if r.build is None and not r.runs:
            nothing.append(spec.name)
            continue
        if bootable and not r.runs:
            unbooted.append(spec.name)
        elif bootable and len(r.runs) < how.min_runs:
            short.append(f"{spec.name} on {arch}: {len(r.runs)} of {how.min_runs} runs")
        if r.runs:
            log(f"{spec.name} on {arch}: {len(r.runs)} run(s) from the store (runs "
                f"{', '.join(str(o.run_id) for o in r.runs)})")
        records.append(r)
    report = build_report(exp.name, exp.description, records, store, how.mode.name) if records else None
    # Said only once the arch is read whole: an arch that fails part-way is missing whole.
    missing.planned[arch] = [v.name for v in exp.variants]
    missing.variants.update({arch: nothing} if nothing else {})
    missing.unbooted.update({arch: unbooted} if unbooted else {})
    missing.short += short
    return report


class _StoredProber(Prober):
    """A prober that builds and boots nothing: a probe is what the build cache and the
    store already hold, found as the sweep's own prober finds it (same kernel, agent and
    run options), or _NotInStore."""

    def _build(self, prepared: lab.Prepared, chosen: list[Any]) -> Build:
        assert prepared.toolchain is not None   # a probe is a kernel kernellab builds
        hit = cached_build(build_key(prepared.source, prepared.profile, prepared.toolchain, prepared.config))
        if hit is None:
            raise _NotInStore
        return hit

    def _complete(self, probes: list[tuple[Probe, lab.Prepared]], runs: int) -> None:
        for probe, prepared in probes:
            self._due(probe, prepared, runs)   # takes the store's equal runs, boots nothing
            if not probe.run_ids:
                raise _NotInStore


def _stored_sweep(p: StudyPlan, s: SweepPart, arch: str, store: Store, log: Callable[[str], None], label: str,
                  missing: Missing, placement: Placement | None) -> dict[str, Any] | None:
    """The sweep's flips whose probes the store holds, as the sweep reports them (None:
    not even its baseline): those measured on the target of `placement`, as a run of the
    study would take them; the others said in `missing`."""
    ask = _sweep_ask(p, s, arch, log, placement)
    good_config = (placement.prepare(ask.good) if placement is not None else lab.prepare(ask.good)).config
    prober = _StoredProber(store, ask.good, good_config.text, s.metrics, ask.mode, command="sweep",
                           placement=placement, workloads=p.workloads)
    runs = p.runs or ask.mode.runs
    missing.flips[label] = len(ask.flips)
    try:
        baseline = prober.probe("baseline", {}, runs)
    except _NotInStore:
        missing.sweeps[label] = ["the baseline", *(f"{o}={v}" for o, v in sorted(ask.flips.items()))]
        return None
    base = good_config.values
    flips, lacking = [], []
    run_ids = list(baseline.run_ids)
    for option, radius in sweep.cheapest_first(prober, base, ask.flips).items():   # the sweep's own order
        value = ask.flips[option]
        try:
            probe = prober.probe(f"flip:{option}={value}", {option: value}, runs)
        except _NotInStore:
            lacking.append(f"{option}={value}")
            continue
        flips.append(sweep.measured_flip(sweep.Flip(option, value, radius), base, baseline, probe, store, ask.good,
                                         ask.mode.name, p.floor))
        run_ids.extend(probe.run_ids)
    missing.sweeps[label] = lacking
    # The workloads its stored runs ran, as the sweep that measured them said.
    ran = guest_workloads.provenances(store.run_workloads(r) for r in run_ids)
    result = sweep.SweepResult(ask.mode.name, s.metrics, {m: baseline.value(m) for m in s.metrics}, flips,
                               0, 0, 0.0, ran).to_dict()
    return _study_sweep(result, arch, s, ask)


def _with_config_bases(exp: Experiment, log: Callable[[str], None]) -> Experiment:
    """Variants based on `config-of:NAME` get NAME's resolved config as a base file."""
    by_name = {v.name: v for v in exp.variants}
    out = []
    for v in exp.variants:
        if v.base.startswith(CONFIG_OF):
            other = by_name.get(v.base.removeprefix(CONFIG_OF))
            if other is None or other.base.startswith(CONFIG_OF):
                raise LabError(f"variant {v.name}: base {v.base} names no variant of this study with a config "
                               "of its own")
            text = lab.prepare(other).config.text
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            name = paths.component("variant name", other.name)
            path = paths.cache_file("studies", f"{name}-{other.arch}-{digest}.config")
            if not path.exists():
                path.write_text(text)
            log(f"{v.name}: {v.source} with the resolved config of {other.name} ({other.source}), "
                "carried over by olddefconfig")
            v = replace(v, base=str(path))
        out.append(v)
    return replace(exp, variants=out)
