"""The command line: parses arguments, calls the pieces, prints."""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import dataclasses
import datetime
import functools
import gc
import io
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import shtab
from argparse_manpage.manpage import Manpage

from . import (
    __version__,
    arches,
    cache,
    datafile,
    doctor,
    gate,
    modes,
    paths,
    prebuilt,
    profiler,
    progress,
    reaper,
    sources,
    toolchain,
    userland,
    workloads,
)
from .agent import compile as agent_compile
from .build import build_key, build_tree, cached_build, record_objects_late
from .config import audit, diff, explain, kconfig
from .config.dotconfig import differing
from .config.resolve import base_file_warnings
from .errors import LabError, did_you_mean
from .experiments import (
    audit_measure,
    commits,
    compare,
    crosscheck,
    executor,
    floor,
    lab,
    lava,
    probe,
    profiling,
    study,
    sweep,
    track,
    why,
)
from .experiments.bisect import WALL_MAX_RUNS, Bisector
from .experiments.placement import Placement, TargetOptions, running_config_path
from .experiments.spec import (
    DEFAULT_ARCH,
    DEFAULT_SOURCE,
    Experiment,
    VariantSpec,
    check_groups,
    load_experiment,
    parse_short,
)
from .knowledge import PROFILES, rules_for
from .metrics import catalog as metric_catalog
from .metrics import view as metrics_view
from .proc import stop_on_signals
from .report import (
    auditreport,
    conclusion,
    configdiff,
    explanation,
    kinds,
    model,
    studyreport,
)
from .report import crosscheck as crosscheck_report
from .report import profile as profile_report
from .report.terminal import GuardedOutput, OutputLost, Screen, printable, printable_tree
from .size import objects as size_objects
from .size import symbols as size_symbols
from .size import view as size_view
from .store import Store, begin_command
from .targets.accel import ACCELS
from .targets.kexec import COME_BACK_S
from .targets.lava import read_log
from .targets.registry import Ask
from .workloads import view as workload_view

# The exit codes, documented in --help and the README. A failed run wins over a regression:
# a gate that did not see every variant measured cannot vouch for the comparison.
EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_REGRESSION, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# A reader that went away (`kernellab runs | head -1`) ends kernellab as it ends any Unix
# tool, by SIGPIPE, which a shell reports as 128 + 13: quietly, and under `set -o pipefail`
# a failure as with any other tool, so that a gate whose report was cut off never reads as 0.
EXIT_READER_GONE = 141
# What each means: --help's epilog and the man page's EXIT STATUS.
EXIT_MEANINGS = ((EXIT_OK, "ok"),
                 (EXIT_RUN_FAILED, "a run failed: a panic, a hang, a crash (wins over 3)"),
                 (EXIT_USAGE, "usage or input error, a config that does not build among them"),
                 (EXIT_REGRESSION, "a --fail-on or --fail-on-regression rule broken"),
                 (EXIT_INTERRUPTED, "interrupted"),
                 (EXIT_READER_GONE, "the output's reader went away (| head)"))
EXIT_CODES = "exit status: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_MEANINGS)


def _log(message: str) -> None:
    print(f"· {message}", file=sys.stderr, flush=True)


def _store(args: argparse.Namespace) -> Store:
    store = Store(Path(args.store) if args.store else paths.default_store())
    for run_id in store.abandoned:
        row = store.run(run_id)
        _log(f"run {run_id}: {row['reason'] if row is not None else 'interrupted'}")
    return store


def _variant(text: str, args: argparse.Namespace) -> VariantSpec:
    return parse_short(text, args.source or DEFAULT_SOURCE, args.arch or DEFAULT_ARCH)


def cmd_compare(args: argparse.Namespace) -> int:
    if args.variants and args.experiment:
        raise LabError("give variants on the command line or --experiment FILE, not both")
    if args.variants:
        exp = Experiment("command line", [_variant(v, args) for v in args.variants])
    else:
        exp = load_experiment(args.experiment)
        for v in exp.variants:
            v.source = args.source or v.source
            v.arch = args.arch or v.arch
    exp.with_groups = list(dict.fromkeys(exp.with_groups + check_groups(args.with_groups or [], "--with")))
    # The experiment's and the command line's workloads: their metrics, before the gate's rules.
    run_workloads = compare.resolve_workloads(list(dict.fromkeys([*exp.workloads, *(args.workload or [])])))
    only = list(dict.fromkeys(m for text in args.metric or [] for m in _metrics(text, run_workloads)))
    rules = _gate_rules(args, only)
    if rules:   # before anything is measured: a gate with nothing to compare never passes
        gate.need_a_comparison(len(exp.variants))
    placement = _placement(args)
    how = compare.plan(exp, args.mode, args.runs, args.max_runs, args.timeout, args.initcalls, placement,
                       run_workloads, only)   # adapts the variants to the target
    noise = _floor_for(args, placement, exp.variants[0] if exp.variants else None)
    store = _store(args)
    with _cluster(args) as cluster:
        report, failures = (compare.run_experiment(exp, store, how, log=_log) if cluster is None
                            else executor.run_experiment(exp, store, how, cluster, log=_log))
    # Every cell judged by the floor, which travels with the verdicts: `show` and a later gate read them.
    model.judge(report, noise)
    code = _report_and_gate(report, rules, args)
    if failures:
        for f in failures:
            print(f"kernellab: error: {f}", file=sys.stderr)
        return EXIT_RUN_FAILED
    return code


def _gate_rules(args: argparse.Namespace, only: Iterable[str] = ()) -> list[gate.Rule]:
    """The gate's rules, checked before anything is measured (`only`: compare --metric's
    metrics; a rule on one it leaves out would judge a row the report cannot have)."""
    from .metrics.catalog import measured_with_only
    asked = list(only)
    rules = [_workload_rule(r) if isinstance(r, str) else r for r in args.fail_on or []]
    left_out = [r.metric for r in rules if asked and r.metric and not measured_with_only(r.metric, asked)]
    if left_out:
        raise LabError(f"--fail-on {left_out[0]}: --metric leaves it out (it measures only {', '.join(asked)}): "
                       f"add --metric {left_out[0]}, or drop the rule")
    if args.fail_on_regression is not None:
        rules.append(gate.regression_rule(args.fail_on_regression))
    if args.format == "junit" and not rules:
        raise LabError("--format junit reports the gate: give --fail-on METRIC:+PCT or --fail-on-regression PCT")
    return rules


def _report_and_gate(report: dict[str, Any], rules: list[gate.Rule], args: argparse.Namespace) -> int:
    """Writes the report, then says which rules broke: EXIT_REGRESSION when any did."""
    # Names and reasons come from a report file or the store (a console's words): made
    # printable before any view or verdict shows them. JSON escapes them itself, as they are.
    shown = printable_tree(report)
    checks = gate.check(shown, rules) if rules else []
    view = kinds.View(args.all, checks=checks, screen=_screen(args), verbose=args.verbose)
    _output(kinds.get("compare").render(report, args.format, view), args.output)
    broken = [c for c in checks if c.broken]
    for c in broken:
        print(f"kernellab: regression: {c.metric} {c.variant}: {c.detail} (rule {c.rule.text})", file=sys.stderr)
    if rules:
        _log(f"gate: {len(checks) - len(broken)} of {len(checks)} checks passed "
             f"(noise floor: {shown['noise_floor']['origin']})")
    return EXIT_REGRESSION if broken else EXIT_OK


def _screen(args: argparse.Namespace) -> Screen:
    """The screen a command's view fits: a terminal's width and colours; a file (-o) or a
    pipe keeps every column, in plain text."""
    return Screen() if args.output else Screen.of(sys.stdout)


def _placement(args: argparse.Namespace) -> Placement:
    """Where the command's kernels run: --target, opened by the target registry (which
    refuses, in one line, what the target cannot do), with the options that go with it."""
    arch = args.arch if isinstance(getattr(args, "arch", None), str) else None   # study run: a list of arches
    placement = Placement(TargetOptions(args.target, getattr(args, "accel", "tcg"), args.ssh_config,
                                        args.accept_new_host_key, getattr(args, "block_dir", None),
                                        getattr(args, "power_cycle", None), arch,
                                        getattr(args, "kexec_timeout", COME_BACK_S)), _log)
    if getattr(args, "workers", None) or getattr(args, "cluster", None):
        placement.require(Ask(cluster=True))
    return placement


def _output(text: str, path: str | None) -> None:
    progress.close()   # the report is what stays on the screen
    if path:
        try:
            Path(path).write_text(text)
        except OSError as exc:
            raise LabError(f"cannot write {path}: {exc.strerror}") from None
        _log(f"written to {path}")
    else:
        sys.stdout.write(text)


def _json(data: object) -> str:
    return json.dumps(data, indent=2) + "\n"


def cmd_build(args: argparse.Namespace) -> int:
    p = lab.explained(lab.prepare(_variant(args.variant, args)))
    for line in lab.dropped_lines(p):
        _log(line)
    b = lab.ensure_built(p, _store(args), log=_log, cold=args.cold)
    d = b.to_dict() | {"variant": p.spec.name, "dropped_options": p.config.dropped}
    if args.format == "json":
        sys.stdout.write(_json(d))
    else:
        how = "cached" if b.cached else f"built in {b.wall_s:.0f} s real, {b.user_s:.0f} s user, -j{b.jobs}"
        how += ", from scratch without ccache" if b.cold else ""
        sys.stdout.write(f"{p.spec.name}: {how}; {b.image} {b.image_bytes // 1024} KiB; vmlinux text "
                         f"{b.text // 1024} KiB, data {b.data // 1024} KiB, bss {b.bss // 1024} KiB\n")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    p = lab.prepare(_variant(args.variant, args))
    if args.print_config:
        sys.stdout.write(p.config.text)
        return 0
    # The same warnings compare gives: a base file olddefconfig rewrote is not "kept".
    warnings = base_file_warnings(p.source, p.profile, p.toolchain, p.spec.base)
    p = lab.explained(p)
    d = {"variant": p.spec.name, "source_version": p.source.version, "config_hash": p.config.hash,
         "boot_args": p.spec.boot_args, "sysctls": p.spec.sysctls, "dropped_options": p.config.dropped,
         "base_warnings": warnings}
    if args.format == "json":
        sys.stdout.write(_json(d))
    else:
        lines = [f"{p.spec.name}: Linux {p.source.version}, config {p.config.hash[:12]}"]
        lines += [f"  {line}" for line in lab.dropped_lines(p) + [f"warning: {w}" for w in warnings]]
        lines += [] if len(lines) > 1 else ["  every request kept"]
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


# `runs`' columns: the table's headers are the JSON and CSV keys, in this order, each from the
# store's column of the same meaning. The runs one kernellab command measured share a group
# (the first of them): a blank line between groups in the table, the key "group" elsewhere.
_RUN_COLUMNS = {"run": "id", "started": "started", "variant": "name", "arch": "arch", "kernel": "version",
                "mode": "mode", "target": "target", "machine": "label", "status": "status",
                "samples": "samples", "reason": "reason", "group": "command_run"}
_RUN_NUMBERS = ("run", "samples", "group")
# The widest a table's cell gets, so that a row fits a terminal; JSON and CSV keep it whole.
_RUN_WIDEST = {"variant": 24, "kernel": 16, "target": 24, "machine": 28}


def _run_text(value: Any, fmt: str) -> str | None:
    """A text column of the store as `runs` prints it: a guest's or another program's words,
    made printable for a terminal (JSON escapes them itself); NULL as nothing."""
    if value is None:
        return None if fmt == "json" else ""
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return text if fmt == "json" else printable(text)


def _store_to_read(args: argparse.Namespace) -> Store | None:
    """The store of a command that only reads it (runs, log, cache): None where the default
    store is not made yet. A --store that does not exist is refused: opening it would make an
    empty store, which a mistyped path would then read as "nothing measured"."""
    if args.store and not Path(args.store).exists():
        raise LabError(f"no store at {args.store}: give an existing store, or make one there by measuring "
                       f"(kernellab compare ... --store {shlex.quote(args.store)})")
    return _store_if_any(args)


def cmd_runs(args: argparse.Namespace) -> int:
    store = _store_to_read(args)
    rows: list[dict[str, Any]] = []
    for found in store.runs(args.limit) if store else []:   # the store refuses a run whose start is not a time
        row = {key: found[column] if key in _RUN_NUMBERS else _run_text(found[column], args.format)
               for key, column in _RUN_COLUMNS.items()}
        row["started"] = datetime.datetime.fromtimestamp(found["started"]).strftime("%Y-%m-%d %H:%M:%S")
        rows.append(row)
    if args.format == "json":
        sys.stdout.write(_json(rows))
    elif args.format == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(_RUN_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
        sys.stdout.write(out.getvalue())
    elif not rows:
        print(f"no runs in {store.path if store else paths.default_store()}")
    else:
        print("\n".join(_runs_table(rows)))
    return 0


def _runs_table(rows: list[dict[str, Any]]) -> list[str]:
    """`runs` as a table: columns two spaces apart, each as wide as its widest cell (up to
    _RUN_WIDEST), the runs of one kernellab command together, a blank line between commands."""
    shown = [key for key in _RUN_COLUMNS if key != "group"]
    cells = [{key: str(r[key] if r[key] is not None else "")[:_RUN_WIDEST.get(key)] for key in shown} for r in rows]
    width = {key: max(len(key), *(len(c[key]) for c in cells)) for key in shown[:-1]}   # the reason: as long as it is

    def line(values: dict[str, str]) -> str:
        return "  ".join(values[k].rjust(width[k]) if k in _RUN_NUMBERS else values[k].ljust(width.get(k, 0))
                         for k in shown).rstrip()

    lines = [line({key: key for key in shown})]
    for i, (r, c) in enumerate(zip(rows, cells, strict=True)):
        if i and r["group"] != rows[i - 1]["group"]:
            lines.append("")
        lines.append(line(c))
    return lines


def cmd_log(args: argparse.Namespace) -> int:
    store = _store_to_read(args)
    text = store.run_log(args.run_id) if store else None
    if text is None:
        raise LabError(f"no console log for run {args.run_id}: see `kernellab runs`")
    sys.stdout.write(printable(text))   # what the guest printed, escape sequences shown, not obeyed
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    results = doctor.checks()
    failed = [c for c in results if not c.ok]
    if args.format == "json":
        sys.stdout.write(_json({"checks": [c.to_dict() for c in results],
                                "install": doctor.install_command(failed) if failed else None}))
        return 1 if failed else 0
    width = max(len(c.purpose) for c in results)
    for c in results:
        print(f"{'ok     ' if c.ok else 'MISSING'} {c.purpose:{width}}  {c.found}")
    if failed:
        print(f"\nto install what is missing: {doctor.install_command(failed)}")
        return 1
    print("\neverything kernellab uses is installed")
    return 0


def _kconfig_tree(args: argparse.Namespace, *configs: str | None) -> kconfig.KconfigTree:
    for path in configs:
        if path is not None and not Path(path).is_file():
            raise LabError(f"{path}: no such file")
    profile = arches.load(args.arch or DEFAULT_ARCH)
    tree = kconfig.open_tree(sources.resolve(args.source or DEFAULT_SOURCE), profile, toolchain.detect(profile))
    # The command keeps this tree of a million objects to its end: out of the cyclic
    # collector's sight, they are not walked by every full collection and again at exit
    # (about 1 s per command).
    gc.freeze()
    return tree


def _warn(warnings: list[str]) -> None:
    for w in warnings:
        print(f"kernellab: warning: {w}", file=sys.stderr)


def _running(path: str, args: argparse.Namespace) -> str:
    """A config argument: `running` is the config of the kernel --target runs."""
    if path != lab.RUNNING:
        return path
    return str(running_config_path(TargetOptions(args.target, ssh_config=args.ssh_config,
                                                 accept_new_host_key=args.accept_new_host_key)))


def _config_arg(text: str, args: argparse.Namespace) -> diff.ConfigArg:
    """A config of `config diff` and `config explain`: a .config file, `running` (the config
    of the kernel --target runs), or a variant as compare takes it (lab-minimal,
    debug=lab-minimal+debug-kernel), resolved as `resolve` resolves it."""
    if text == lab.RUNNING or datafile.is_file(Path(text), "config"):
        return diff.ConfigArg(_running(text, args))
    return diff.ConfigArg(text, lab.prepare(_variant(text, args)).config.text)


def cmd_config_diff(args: argparse.Namespace) -> int:
    a, b = _config_arg(args.a, args), _config_arg(args.b, args)
    tree = _kconfig_tree(args)
    result, warnings = diff.diff(tree, a, b, derived=args.all)
    _warn(warnings)
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.format == "json"
                     else configdiff.render_table(result))
    return 0


def cmd_config_explain(args: argparse.Namespace) -> int:
    config = _config_arg(args.config, args) if args.config else None
    tree = _kconfig_tree(args)
    _warn(config.load_into(tree) if config else tree.load_defconfig())
    result = explain.explain(tree, args.symbol)
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.format == "json"
                     else explanation.render(result))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    args.config = _running(args.config, args)
    args.config, args.source = prebuilt.config_argument(args.config, args.source)
    only = auditreport.parse_only(args.only) if args.only else None
    fmt = _output_format(kinds.get("audit"), args.format, args.output)
    tree = _kconfig_tree(args, args.config)
    _warn(tree.load(args.config))
    profile, why = (args.profile, "given with --profile") if args.profile else audit.choose_profile(tree)
    report = audit.audit(tree, rules_for(profile), profile)
    text = datafile.read_text(Path(args.config), "config")
    measured = None
    if args.measure:
        measured = audit_measure.measure(_store(args), report, audit.applicable(tree, report), args.config, text,
                                         args.source or DEFAULT_SOURCE, args.arch or DEFAULT_ARCH,
                                         modes.get(args.mode), args.runs, log=_log,
                                         placement=_placement(args)).to_dict()
    if args.fragment:
        try:
            Path(args.fragment).write_text(audit.fragment(tree, report))
        except OSError as exc:
            raise LabError(f"cannot write the fragment to {args.fragment}: {exc.strerror}") from None
        _log(f"fragment written to {args.fragment}")
    document = auditreport.body(report, measured, profile_reason=why, only=only, config_text=text)
    _output(kinds.get("audit").render(document, fmt, kinds.View(screen=_screen(args))), args.output)
    return 0


# A file's extension says the format -o writes when --format does not.
_EXTENSION_FORMATS = {".json": "json", ".html": "html", ".htm": "html", ".txt": "table"}


def _output_format(kind: kinds.Kind, given: str | None, path: str | None) -> str:
    """The format to write: --format's, else the one -o's extension names, else the kind's
    first; a LabError where they disagree or the extension names none the kind writes."""
    suffix = Path(path).suffix.lower() if path else ""
    implied = _EXTENSION_FORMATS.get(suffix)
    if suffix and implied is None and given is None:
        raise LabError(f"{path}: say the format with --format ({', '.join(kind.formats)}); "
                       f"-o takes it from {', '.join(_EXTENSION_FORMATS)}")
    if given and implied and given != implied:
        raise LabError(f"{path} names {implied}, but --format is {given}: drop one of them, or rename the file")
    fmt = given or implied or kind.formats[0]
    kind.check_format(fmt)
    return fmt


def _metrics(text: str, given: tuple[workloads.Instance, ...] = ()) -> list[str]:
    """--metric's names, each the catalog's or one of the `given` workloads' (resolved
    first: compare.resolve_workloads)."""
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    if not metrics:
        raise LabError("--metric needs at least one metric name (`kernellab metrics` lists them)")
    # The probes' own check, made before any variant is resolved: a typo costs no `make`.
    from .metrics.catalog import check_known
    try:
        check_known(metrics, nor="a metric of a --workload given")
    except LabError as exc:
        raise LabError(f"--metric: {exc}") from None
    return probe.check_workload_metrics(metrics, given, "--metric")


@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[executor.Cluster | None]:
    """The Dask cluster of --workers or --cluster, closed after the command; else None."""
    if not (args.workers or args.cluster):
        yield None
        return
    cluster = executor.connect(args.workers, args.cluster)
    try:
        yield cluster
    finally:
        cluster.close()


def cmd_sweep(args: argparse.Namespace) -> int:
    run_workloads = compare.resolve_workloads(args.workload or [])   # their metrics, before --metric's
    placement = _placement(args)
    store = _store(args)
    metrics = _metrics(args.metric, run_workloads)
    if bool(args.toggle) == bool(args.from_diff):
        raise LabError("give --toggle A,B,... or --from-diff GOOD BAD (one of them)")
    if args.toggle:
        if not args.base:
            raise LabError("--toggle needs the baseline variant: kernellab sweep BASE --toggle A,B")
        base = _variant(args.base, args)
        placement.adapt(base)
        values = placement.prepare(base).config.values
        flips = sweep.flips_from_toggles(values, [t.strip() for t in args.toggle.split(",") if t.strip()])
    else:
        good, bad = (_variant(v, args) for v in args.from_diff)
        for v in (good, bad):
            placement.adapt(v)
        base = good
        flips = differing(placement.prepare(good).config.values, placement.prepare(bad).config.values)
    noise = _floor_for(args, placement, base)   # each flip judged as compare judges a cell
    with _cluster(args) as cluster:
        result = sweep.sweep(store, base, flips, metrics, modes.get(args.mode or placement.default_mode()), args.runs,
                             log=_log, cluster=cluster, placement=placement, workloads=run_workloads, floor=noise)
    _output(kinds.get("sweep").render(result.to_dict(), args.format), None)
    return 0


DEFAULT_THRESHOLD = 2.0
MIN_THRESHOLD = 0.1   # below this a probe's exact difference is rounding, not the option


def cmd_noise_floor(args: argparse.Namespace) -> int:
    base = _variant(args.base, args)
    options = [o.strip() for o in args.options.split(",") if o.strip()] if args.options else None
    run_workloads = compare.resolve_workloads(args.workload or [])
    placement = _placement(args)
    placement.adapt(base)
    with _cluster(args) as cluster:
        result = floor.measure(_store(args), base, modes.get(args.mode), options, log=_log, placement=placement,
                               workloads=run_workloads, cluster=cluster)
    path = floor.save(placement.prepare(base), result)
    _log(f"noise floor written to {path}; compare, the gate, sweep and bisect of these kernels use it")
    _output(kinds.get("noise-floor").render(result.to_dict(), args.format), None)
    return EXIT_OK


def _floor_for(args: argparse.Namespace, placement: Placement, first: VariantSpec | None) -> model.NoiseFloor:
    """--noise-floor FILE, else the floor measured for the first variant's kernels (as they
    build for the target: `running` is its kernel, not this machine's), else none."""
    if args.noise_floor:
        return conclusion.load_floor(Path(args.noise_floor))
    if first is not None:
        p = placement.prepare(first)
        if p.toolchain is not None and (measured := floor.load_for(p)) is not None:
            return measured.noise_floor()
    return model.NoiseFloor()


def _threshold(args: argparse.Namespace, placement: Placement, good: VariantSpec, metric: str) -> float:
    """--threshold, else the noise floor measured for GOOD's kernels, else 2%."""
    if args.threshold is not None:
        return float(args.threshold)
    measured = floor.load_for(placement.prepare(good))
    # The smallest change that is more than layout noise; 2% where nobody measured it.
    threshold = max(measured.pct.get(metric, 0.0), MIN_THRESHOLD) if measured else DEFAULT_THRESHOLD
    _log(f"threshold {threshold:.2f}% for {metric}: " + (f"its noise floor ({measured.measured})" if measured
                                                         else "no noise floor measured for GOOD's kernels "
                                                              "(kernellab noise-floor measures it)"))
    return threshold


def cmd_bisect(args: argparse.Namespace) -> int:
    run_workloads = compare.resolve_workloads(args.workload or [])   # their metrics, before --metric's
    placement = _placement(args)
    store = _store(args)
    metrics = _metrics(args.metric, run_workloads)
    if len(metrics) > 1:
        raise LabError("bisect follows one metric; run it once per metric")
    metric = metrics[0]
    good, bad = _variant(args.good, args), _variant(args.bad, args)
    for v in (good, bad):
        placement.adapt(v)
    threshold = _threshold(args, placement, good, metric)
    with _cluster(args) as cluster:
        bisector = Bisector.for_variants(store, good, bad, metric,
                                         modes.get(args.mode or placement.default_mode()), threshold,
                                         log=_log, max_runs=args.max_runs, cluster=cluster, placement=placement,
                                         workloads=run_workloads)
        result = bisector.run().to_dict()
    _output(kinds.get("bisect").render(result, args.format), None)
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    run_workloads = compare.resolve_workloads(args.workload or [])   # their metrics, before --metric's
    placement = _placement(args)
    metrics = list(dict.fromkeys(m for text in args.metric for m in _metrics(text, run_workloads)))
    if args.source_range and args.sources:
        raise LabError("give --source-range or --sources, not both")
    a_source, b_source = (commits.parse_range(args.source_range) if args.source_range
                          else args.sources or (args.source or DEFAULT_SOURCE,) * 2)
    a = parse_short(args.a, a_source, args.arch or DEFAULT_ARCH)
    b = parse_short(args.b, b_source, args.arch or DEFAULT_ARCH)
    for v in (a, b):
        placement.adapt(v)
    # bad input: one line, before any build; distribution-size configs reduced unless --whole
    checked = why.check(a, b, metrics, placement, whole=args.whole)
    a, b = checked.a, checked.b
    store = _store(args)
    mode = modes.get(args.mode or placement.default_mode())
    with _cluster(args) as cluster:
        ask = why.Ask(a, b, metrics, mode, {m: _threshold(args, placement, a, m) for m in metrics}, args.max_runs,
                      placement, cluster, run_workloads)
        result = why.Why(store, ask, checked, log=_log).run()
    _output(kinds.get("why").render(result, args.format), args.output)
    return 0


def cmd_track(args: argparse.Namespace) -> int:
    run_workloads = compare.resolve_workloads(args.workload or [])   # their metrics, before --metric's
    placement = _placement(args)
    metrics = _metrics(args.metric, run_workloads)
    if len(metrics) > 1:
        raise LabError("track follows one metric; run it once per metric (each run reuses the kernels measured)")
    series = track.series(args.source or [], args.refs, args.range, args.every)   # bad input: before any build
    variant = parse_short(args.variant, series.refs[0].source, args.arch or DEFAULT_ARCH)
    placement.adapt(variant)
    track.check(variant, series, metrics[0], placement)
    store = _store(args)
    mode = modes.get(args.mode or placement.default_mode())
    with _cluster(args) as cluster:
        ask = track.Ask(variant, args.variant, metrics[0], mode, _threshold(args, placement, variant, metrics[0]),
                        args.max_runs, placement, cluster, run_workloads)
        result = track.Track(store, ask, series, log=_log).run()
    _output(kinds.get("track").render(result, args.format), args.output)
    return 0


def cmd_cite(args: argparse.Namespace) -> int:
    from .knowledge import cite, load_rules
    _, results = kinds.load(Path(args.results), expect="results")
    rules = load_rules()
    unknown = sorted(set(args.rule) - {r.id for r in rules})
    if unknown:
        raise LabError(f"unknown rule {', '.join(unknown)}: see src/kernellab/knowledge/*.toml")
    source = str(args.results).removeprefix("./")
    results = cite.only_sweeps(results, args.sweep)
    blocks = [(r, cite.evidence(r, results, source)) for r in rules if not args.rule or r.id in args.rule]
    found = [f"# rule {r.id} (src/kernellab/knowledge/{r.category}.toml)\n{b}\n" for r, b in blocks if b]
    if not found:
        raise LabError(f"{args.results} measured none of the options of "
                       f"{'the rules ' + ', '.join(args.rule) if args.rule else 'any rule'}"
                       + (f" in the sweep{'s' if len(args.sweep) > 1 else ''} {'; '.join(args.sweep)}"
                          if args.sweep else ""))
    sys.stdout.write("\n".join(found))
    return 0


def _register_report_workloads(document: Any) -> None:
    """A compare report's workload metrics (WORKLOAD.METRIC), as it describes them, into the
    catalog: a --fail-on rule may name them as it names the catalog's own."""
    from .metrics import catalog
    rows = document.get("metrics") if isinstance(document, dict) else None
    for m in rows if isinstance(rows, list) else []:
        if isinstance(m, dict) and m.get("source") == "workload":
            try:
                catalog.add_workload_metrics([catalog.Metric(m["name"], m["label"], m["unit"], m["better"],
                                                             catalog.WORKLOAD_GROUP, "guest", "workload")])
            except (KeyError, TypeError, ValueError):
                continue   # not a metric kernellab wrote: a rule on it is refused as unknown


def cmd_show(args: argparse.Namespace) -> int:
    """Any result kernellab wrote, by its kind (report/kinds.py); only a compare report is gated."""
    document = kinds.load_json(Path(args.report))
    _register_report_workloads(document)
    rules = _gate_rules(args)
    kind = kinds.identify(document, args.report)
    if rules and not kind.gated:
        raise LabError(f"{args.report} is {kind.what}; the gate reads a compare report "
                       "(kernellab compare --format json -o FILE)")
    kind.check_format(args.format)
    if args.only and kind.name != "audit":
        raise LabError(f"--only shows an audit's rules of some verdicts; {args.report} is {kind.what}")
    report = kinds.check_readable(kind, document, args.report)
    if args.only:
        report = auditreport.narrowed(report, auditreport.parse_only(args.only), args.report)
    if not kind.gated:
        _output(kind.render(report, args.format, kinds.View(screen=_screen(args), verbose=args.verbose)),
                args.output)
        return 0
    # Read as written (the compare kind judges one of an earlier format on reading);
    # --noise-floor judges every cell again by that floor.
    if args.noise_floor:
        model.judge(report, conclusion.load_floor(Path(args.noise_floor)))
    return _report_and_gate(report, rules, args)


def _store_if_any(args: argparse.Namespace) -> Store | None:
    path = Path(args.store) if args.store else paths.default_store()
    return _store(args) if path.exists() else None


def _cache_entries(args: argparse.Namespace) -> list[cache.Entry]:
    return cache.entries(_store_to_read(args), args.recent, {arch: deb for arch, (deb, _) in userland.DEBIAN.items()})


def cmd_cache_show(args: argparse.Namespace) -> int:
    found = _cache_entries(args)
    kinds = cache.summary(found)
    if args.format == "json":
        sys.stdout.write(_json({"root": str(paths.cache_root()), "kinds": [k.to_dict() for k in kinds],
                                **({"entries": [e.to_dict() for e in found]} if args.all else {})}))
        return 0
    print(f"kernellab's cache: {paths.cache_root()} ({cache.human(sum(e.bytes for e in found))})")
    print(f"{'kind':16} {'entries':>7} {'size':>10} {'used':>5}  prunable")
    for k in kinds:
        print(f"{k.kind:16} {k.entries:>7} {cache.human(k.bytes):>10} {k.used:>5}  "
              + (f"no: {k.kept_because}" if k.kept_because else "yes"))
    if args.all:
        for e in found:
            age = (time.time() - e.modified) / cache.DAY_S
            used = f"used by {cache.runs_text(e.used_by)}" if e.used_by else "unused"
            print(f"  {e.kind}/{e.path.name}: {cache.human(e.bytes)}, {age:.0f} day(s) old, {used}")
    print(f"used: entries a run among the store's {args.recent} most recent measured")
    return 0


def cmd_cache_prune(args: argparse.Namespace) -> int:
    # Identified, not prepared: pruning (and its dry run) installs, extracts and runs nothing.
    source_hashes = sources.identify(args.source) if args.source else None
    with paths.alone():
        found = _cache_entries(args)
        picked = cache.select(found, args.older_than, source_hashes, args.unused)
        for e in picked:
            _log(f"{'would remove' if args.dry_run else 'removing'} {e.kind}/{e.path.name} ({cache.human(e.bytes)})")
        freed = sum(e.bytes for e in picked) if args.dry_run else cache.remove(picked)
    print(f"{'would free' if args.dry_run else 'freed'} {cache.human(freed)} in {len(picked)} entr"
          f"{'y' if len(picked) == 1 else 'ies'}")
    return 0


def cmd_study_list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for name in sorted(study.packaged()):
        s = study.load(name)
        f = s.file
        rows.append({"name": name, "seed": f.seed or "(new)", "arches": f.arches, "builds": s.builds_needed(),
                     "quick_builds": s.builds_needed(quick=True), "expected_minutes": f.expected_minutes,
                     "title": f.title})
    if args.format == "json":
        sys.stdout.write(_json(rows))
        return 0
    width = max(len(r["name"]) for r in rows)
    print(f"{'study':{width}} {'redoes':26} {'arches':22} builds (quick)  minutes  question")
    for r in rows:
        print(f"{r['name']:{width}} {r['seed']:26} {','.join(r['arches']):22} {r['builds']:>6} ({r['quick_builds']:>3})"
              f"  {r['expected_minutes']:>7}  {r['title']}")
    print("\nminutes: the full form, cold, on 2 cores; builds already in the cache cost nothing. "
          "`kernellab study run NAME --quick` runs the smallest meaningful form.")
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    compare.resolve_workloads(args.workload or [])   # registers their WORKLOAD.METRIC names
    rows = metrics_view.rows()
    sys.stdout.write(_json(rows) if args.format == "json" else "\n".join(metrics_view.lines(rows)) + "\n")
    return 0


def cmd_workload_list(args: argparse.Namespace) -> int:
    rows = workload_view.list_rows()
    if args.format == "json":
        sys.stdout.write(_json(rows))
        return 0
    print("\n".join(workload_view.list_lines(rows)))
    return 0


def cmd_workload_show(args: argparse.Namespace) -> int:
    if args.format == "json":
        sys.stdout.write(_json(workloads.describe(workloads.resolve(args.workload))))
        return 0
    print("\n".join(workload_view.show_lines(args.workload)))
    return 0


def cmd_workload_check(args: argparse.Namespace) -> int:
    print("\n".join(workload_view.check_lines(args.file, args.sample)))
    return 0


def cmd_workload_userland(args: argparse.Namespace) -> int:
    instances = [workloads.resolve(spec) for spec in args.workload]
    built = userland.assemble(instances, arches.load(args.arch or DEFAULT_ARCH), args.compression, args.refresh)
    if args.format == "json":
        sys.stdout.write(_json(userland.summary(built)))
        return 0
    print("\n".join(userland.lines(built)))
    return 0


def cmd_workload_crosscheck(args: argparse.Namespace) -> int:
    placement = _placement(args)
    result, failures = crosscheck.run(_store(args), _variant(args.variant, args), args.mode, args.runs,
                                      args.timeout, placement, log=_log, only=args.pair or ())
    _output(kinds.get("crosscheck").render(result, args.format), args.output)
    for f in failures:
        print(f"kernellab: error: {f}", file=sys.stderr)
    outside = crosscheck_report.failed(result)
    if outside:
        print(f"kernellab: cross-check: outside its band: {', '.join(outside)}", file=sys.stderr)
    return EXIT_RUN_FAILED if failures else EXIT_REGRESSION if outside else EXIT_OK


def cmd_study_run(args: argparse.Namespace) -> int:
    s = study.load(args.study)
    floor = conclusion.load_floor(Path(args.noise_floor)) if args.noise_floor else model.NoiseFloor()
    how = study.plan(s, args.arch, args.mode, args.runs, args.quick, args.timeout, args.vcpus, args.workload)
    how = dataclasses.replace(how, floor=floor)   # the sweeps' flips judged as the tables are
    placement = _placement(args)
    if args.format == "results" and not how.sweeps():
        raise LabError(f"--format results writes what a study's sweeps measured, and this run of {s.name} has none "
                       "(the quick form never sweeps; an --arch a sweep does not run on has none): "
                       "run its full form, or use --format json")
    if args.measured_only:
        result = _study_measured_only(args, how, placement)
        _output(_study_text(result, floor, args), args.output)
        return 1 if result.failures else 0
    with _cluster(args) as cluster:
        result = study.run(how, _store(args), log=_log, cluster=cluster, placement=placement)
    _output(_study_text(result, floor, args), args.output)
    for f in result.failures:
        print(f"kernellab: error: {f}", file=sys.stderr)
    return 1 if result.failures else 0


def _study_text(result: study.StudyResult, floor: model.NoiseFloor, args: argparse.Namespace) -> str:
    """The study's report in --format, its tables and header fitted to the screen (a file's whole)."""
    return studyreport.STUDY.render(studyreport.build(result, floor), args.format,
                                    kinds.View(screen=_screen(args), verbose=args.verbose))


def _study_measured_only(args: argparse.Namespace, how: study.StudyPlan, placement: Placement) -> study.StudyResult:
    """study run --measured-only: what the store holds of the study, nothing built or booted."""
    if args.format == "results":
        raise LabError("--measured-only reports a study stopped part-way, and a results file, which rules cite, "
                       "holds whole sweeps: run the study (kernellab study run), or use --format json")
    if args.workers or args.cluster:
        raise LabError("--measured-only builds and boots nothing: drop --workers/--cluster")
    store = _store_if_any(args)
    if store is None:
        raise study.nothing_measured(how, "no store yet")
    return study.measured_only(how, store, log=_log, placement=placement)


def _sized(text: str, args: argparse.Namespace) -> size_view.Kernel:
    """A vmlinux path, or a variant that is built already (`size` never builds)."""
    path = Path(text)
    if path.is_file():
        return size_view.Kernel(path.name if path.name != "vmlinux" else str(path), path,
                                size_objects.load(path.parent) if (path.parent / "build.json").exists() else None)
    p = lab.prepare(_variant(text, args))
    if p.toolchain is None:
        raise LabError(f"{p.spec.name} is not built by kernellab (a prebuilt or running kernel): "
                       "give the path of its vmlinux")
    built = cached_build(build_key(p.source, p.profile, p.toolchain, p.config))
    if built is not None:
        record_objects_late(built, build_tree(p.source, p.profile, p.toolchain))
    else:
        raise LabError(f"{p.spec.name} is not built yet: run `kernellab build {shlex.quote(text)}` first "
                       "(size reads what a build left, it never builds)")
    return size_view.kernel(p.spec.name, built.artifacts)


def cmd_size(args: argparse.Namespace) -> int:
    if len(args.variants) < 2:
        raise LabError("size compares kernels: give at least two (built variants or vmlinux paths)")
    kernels = [_sized(v, args) for v in args.variants]
    if args.format == "bloat-o-meter":
        _output("".join(size_symbols.as_bloat_o_meter(size_symbols.bloat(kernels[0].vmlinux, k.vmlinux, s),
                                                      size_symbols.TITLES[s])
                        for k in kernels[1:] for s in size_symbols.SECTIONS), None)
        return EXIT_OK
    _output(kinds.get("size").render(size_view.compare(kernels, args.top), args.format), None)
    return EXIT_OK


def cmd_profile(args: argparse.Namespace) -> int:
    placement = _placement(args)
    store = _store(args)
    a, b = (profiling.profile(store, _variant(v, args), args.metric, args.mode, args.repeats, log=_log,
                              placement=placement) for v in (args.a, args.b))
    rows = profiler.changes(a.functions, b.functions, args.top)
    how = profiling.how(args.mode, args.metric, args.repeats)
    _output(kinds.get("profile").render(profile_report.body(how, args.metric, (a, b), rows), args.format), None)
    return EXIT_OK


def cmd_completion(args: argparse.Namespace) -> int:
    # From the parser itself, so completion never lags behind a new option; the names a user
    # types (metrics, studies, arches, workloads) from the data that defines them.
    from .metrics.catalog import catalog
    names = {"metric": list(catalog()), "fail_on": list(catalog()), "arch": arches.available(),
             "study": sorted(study.packaged()), "workload": list(workloads.packaged())}
    for action in _actions(parser()):
        if action.dest in names:
            action.complete = _words(action.dest, names[action.dest])  # type: ignore[attr-defined]  # shtab's
    sys.stdout.write(shtab.complete(parser(), shell=args.shell))
    return EXIT_OK


def _actions(p: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """Every argument of the parser and of its commands."""
    for action in p._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)


def _words(what: str, words: list[str]) -> dict[str, Any]:
    """shtab's completion of an argument by a fixed list of words (names, no blanks)."""
    function, listed = f"_kernellab_{what}_names", " ".join(words)
    return {"bash": function, "zsh": f"({listed})",
            "preamble": {"bash": f'{function}() {{\n  compgen -W "{listed}" -- "$1"\n}}'}}


def cmd_man(args: argparse.Namespace) -> int:
    # --help's epilog (examples, exit codes) would be the page's COMMENTS: the page has
    # sections of its own for them instead, so it is made from a copy without it.
    top = copy.copy(parser())
    top.epilog = None
    page = Manpage(top)
    # The attributes argparse-manpage asks callers to set (its private _data is not for us).
    page.source = f"kernellab {__version__}"
    page.manual = "kernellab manual"
    page.description = "build, boot, measure and compare Linux kernel variants"
    # In man-pages(7)'s order.
    page.add_section("exit status", "=", _roff_list((str(code), meaning) for code, meaning in EXIT_MEANINGS))
    page.add_section("environment", "=", _roff_list(ENVIRONMENT))
    page.add_section("examples", "=", _roff_examples())
    sys.stdout.write(str(page) + "\n")
    return EXIT_OK


def _roff(text: str) -> str:
    """Text as roff prints it: a backslash and a minus sign escaped, a line that would read
    as a request (a leading . or ') made text."""
    text = text.replace("\\", "\\\\").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def _roff_list(items: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f".TP\n.B {_roff(term)}\n{_roff(meaning)}" for term, meaning in items)


def _roff_examples() -> str:
    """Every command's examples, once each, kernellab's own first."""
    blocks, seen = [], set()
    for lines in EXAMPLES.values():
        new = [line for line in lines if line not in seen]
        seen.update(new)
        if new:
            blocks.append(".nf\n" + "\n".join(_roff(line) for line in new) + "\n.fi")
    return "\n.PP\n".join(blocks)


def cmd_lava_job(args: argparse.Namespace) -> int:
    run_workloads = compare.resolve_workloads(args.workload or [])
    spec = _variant(args.variant, args)
    lava.check_job_options(args.device_type, args.artifact_url, args.console, args.timeout,  # before a build
                           run_workloads, args.boot_method, args.kernel_type, spec)
    p = lab.prepare(spec)
    build = lab.ensure_built(p, _store(args), log=_log)
    initrd = lab.initramfs_for(p, run_workloads)   # with the workloads' userland, as a QEMU guest's
    options = lab.RunOptions(mode="wall", timeout_s=args.timeout, workloads=run_workloads)
    job = lava.job_definition(p, build, initrd, options, args.device_type, args.artifact_url, args.console,
                              args.kernel_type, args.boot_method)
    _output(lava.job_yaml(job, p, build, initrd, args.variant, args.workload or []), args.output)
    url = args.artifact_url.rstrip("/")
    _log(f"serve {build.image} as {url}/{build.image.name} and {initrd} as {url}/{initrd.name}")
    return 0


def cmd_import_lava(args: argparse.Namespace) -> int:
    lava.check_device_type(args.device_type)
    run_workloads = compare.resolve_workloads(args.workload or [])
    # The run's report, when asked for (-o, --format): a compare report of its one variant.
    report_format = (_output_format(kinds.get("compare"), args.format, args.output)
                     if args.format or args.output else None)
    log = read_log(Path(args.log))  # a log that is none fails before any build
    lava.check_records(log)
    job = lava.job_id(log, args.job_id)
    store = _store(args)
    earlier = lava.imported_run(store, job)
    if earlier is not None and report_format is None:   # says what the first import said: failed, or not
        status = lava.imported_status(store, earlier)
        print(_imported_before(job, earlier, status))
        return 0 if status == "ok" else 1
    p = lab.prepare(_variant(args.variant, args))
    build = lab.ensure_built(p, store, log=_log)
    if earlier is not None:
        run_id, status = earlier, lava.imported_status(store, earlier)
        said = _imported_before(job, earlier, status)
    else:
        outcome = lava.import_log(p, build, store, log, args.device_type, job, lab.initramfs_for(p, run_workloads),
                                  run_workloads)
        run_id, status = outcome.run_id, outcome.status
        said = (f"job {job}: run {outcome.run_id}, {outcome.status}, {outcome.samples} samples"
                + (f" ({outcome.reason})" if outcome.reason else ""))
    if report_format is None or args.output:
        print(said)
    else:
        _log(said)   # the report takes stdout
    if report_format is not None:
        view = kinds.View(screen=_screen(args))
        _output(kinds.get("compare").render(lava.run_report(p, build, store, run_id), report_format, view),
                args.output)
    return 0 if status == "ok" else 1


def _imported_before(job: str, run_id: int, status: str) -> str:
    return f"job {job} already imported as run {run_id}" + ("" if status == "ok" else f" ({status})")


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# SQLite's integers are 64-bit: a larger count or run id is a usage error, not an overflow.
MAX_SQL_INT = 2**63 - 1


def _row_count(text: str) -> int:
    """A run id or a number of rows: at least 1, at most what SQLite holds."""
    value = _at_least_one(text)
    if value > MAX_SQL_INT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SQL_INT}, got {text}")
    return value


def _run_count(text: str) -> int:
    """--runs and --max-runs: 1 to modes.MAX_RUNS boots per variant."""
    value = _at_least_one(text)
    if value > modes.MAX_RUNS:
        raise argparse.ArgumentTypeError(f"must be at most {modes.MAX_RUNS} boots per variant, got {value}")
    return value


# The agent's most repeats of a metric (MAX_REPEATS, agent/harness.h): it refuses more in the
# guest, after the build and the boot, so a larger --repeats is refused here.
AGENT_MAX_REPEATS = 1000
# A top list is read by a person: past this many rows it is no longer a top.
MAX_TOP = 10_000


def _repeats(text: str) -> int:
    """profile --repeats: 1 to what the agent takes."""
    value = _at_least_one(text)
    if value > AGENT_MAX_REPEATS:
        raise argparse.ArgumentTypeError(f"must be at most {AGENT_MAX_REPEATS}, the agent's most repeats of a "
                                         f"metric, got {value}")
    return value


def _top(text: str) -> int:
    """--top: 1 to MAX_TOP rows."""
    value = _at_least_one(text)
    if value > MAX_TOP:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TOP} rows, got {value}")
    return value


def _usable_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _workers(text: str) -> int:
    """--workers: each local Dask worker builds and boots a kernel at a time, so more
    workers than this machine's CPUs only queue on them (and a typo would start thousands
    of processes)."""
    value = _at_least_one(text)
    cpus = _usable_cpus()
    if value > cpus:
        raise argparse.ArgumentTypeError(f"must be at most {cpus}, the CPUs this machine has (more machines: "
                                         f"--cluster ADDRESS), got {value}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    if not math.isfinite(value):  # a timeout or a number of days that never comes is no value
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _given(text: str) -> str:
    """An option's value that must say something: an empty --source, --arch, --store or
    --cluster would otherwise quietly mean the default (Debian's source, the local run)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (leave the option out for its default)")
    return text


def _agent_metric(text: str) -> str:
    """A metric of the catalog that the agent runs: checked before anything is built, and
    never a word that could add to the kernel command line it is passed on."""
    from .metrics.catalog import catalog
    known = sorted(m.name for m in catalog().values() if m.source == "agent")
    if text not in known:
        hint = did_you_mean(text, known)
        raise argparse.ArgumentTypeError(f"{text!r} is not a metric the agent runs: {hint + ' ' if hint else ''}"
                                         "(`kernellab metrics` lists them, source agent)")
    return text


def _rule(text: str) -> gate.Rule | str:
    """A --fail-on rule; a rule on a metric the catalog does not know yet, named as a
    workload's (WORKLOAD.METRIC), is read once the command has resolved its workloads
    (_workload_rule), whatever the order of the options."""
    try:
        return gate.parse_rule(text)
    except ValueError as exc:
        if str(exc).startswith("unknown metric") and "." in text.partition(":")[0]:
            return text
        raise argparse.ArgumentTypeError(str(exc)) from None


def _workload_rule(text: str) -> gate.Rule:
    try:
        return gate.parse_rule(text, nor="a metric of a --workload given")
    except ValueError as exc:
        raise LabError(f"--fail-on: {exc}") from None


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


# Each command's examples, shown under its --help and in the man page's EXAMPLES: real
# command lines, which tests/test_cli_help.py parses (a `#` starts a comment; the shell's
# | and > end the command). "": kernellab's own --help.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("kernellab compare base=lab-minimal hz=lab-minimal+CONFIG_HZ_1000=y   # two variants, one table",
         "kernellab study run debug-cost --quick   # a seed study's smallest meaningful form",
         "kernellab runs   # what was measured, newest first"),
    "compare": ("kernellab compare   # the built-in default experiment",
                "kernellab compare base=lab-minimal hz=lab-minimal+CONFIG_HZ_1000=y   # two variants, one table",
                "kernellab compare base=lab-minimal hz=lab-minimal+CONFIG_HZ_1000=y --metric syscall.null   "
                "# only the metrics asked: shorter boots",
                "kernellab compare -e my-experiment.toml --format json -o report.json --fail-on-regression 5"),
    "build": ("kernellab build debug=lab-minimal+debug-kernel",
              "kernellab build debug=lab-minimal+debug-kernel --cold   # timed from scratch, without ccache"),
    "resolve": ("kernellab resolve 'x=lab-minimal+CONFIG_PROVE_LOCKING=y'   # what olddefconfig kept and dropped",
                "kernellab resolve lab-minimal --print-config > lab-minimal.config"),
    "runs": ("kernellab runs --limit 10",
             "kernellab runs --format json --store ci.sqlite"),
    "log": ("kernellab log 12   # run 12's console log (run ids: kernellab runs)",),
    "doctor": ("kernellab doctor",),
    "config": ("kernellab config diff /boot/config-6.1 my.config",
               "kernellab config explain PROVE_LOCKING --config my.config"),
    "config diff": ("kernellab config diff /boot/config-6.1 my.config   # differing options by menu",
                    "kernellab config diff running my.config   # this machine's config against another"),
    "config explain": ("kernellab config explain PROVE_LOCKING --config my.config",
                       "kernellab config explain CONFIG_E1000   # in the arch's defconfig"),
    "audit": ("kernellab audit my.config --profile throughput-server",
              "kernellab audit running --target ssh://root@nas --profile storage",
              "kernellab audit my.config --profile embedded-small --fragment tune.config"),
    "sweep": ("kernellab sweep lab-minimal --toggle SLUB_DEBUG_ON,CRC64 --metric proc.fork_exit",
              "kernellab sweep --from-diff lab-minimal debug=lab-minimal+debug-kernel --metric syscall.null"),
    "bisect": ("kernellab bisect lab-minimal debug=lab-minimal+debug-kernel --metric proc.fork_exit",),
    "why": ("kernellab why lab-minimal debug=lab-minimal+debug-kernel --metric syscall.null",),
    "track": ("kernellab track --source git:$HOME/linux --range v6.1..master --every 10 --metric syscall.null",
              "kernellab track lab-minimal --source git:$HOME/linux --refs v6.1,v6.2,v6.3 --metric proc.fork_exit",
              "kernellab track --source linux-6.1.tar.xz --source linux-6.2.tar.xz --metric syscall.null"),
    "cite": ("kernellab cite results/debug-cost.json",
             "kernellab cite results/costs.json --rule debug-list"),
    "show": ("kernellab show report.json --format markdown",
             "kernellab show report.json --fail-on-regression 5   # gate a report measured earlier"),
    "noise-floor": ("kernellab noise-floor   # lab-minimal's floor, which compare, sweep and bisect then use",),
    "study": ("kernellab study list",
              "kernellab study run debug-cost --quick"),
    "study list": ("kernellab study list",),
    "metrics": ("kernellab metrics   # every metric's name, unit, group and where it comes from",
                "kernellab metrics --workload hackbench --format json"),
    "study run": ("kernellab study run debug-cost --quick",
                  "kernellab study run pages --arch ppc460 --format markdown -o pages.md",
                  "kernellab study run my-study.toml   # your own study file"),
    "workload": ("kernellab workload list",
                 "kernellab workload show fio:rw=write,bs=1M"),
    "workload list": ("kernellab workload list",),
    "workload show": ("kernellab workload show fio:rw=write,bs=1M",),
    "workload check": ("kernellab workload check my-workload.toml",
                       "kernellab workload check my-workload.toml --sample output.txt"),
    "workload userland": ("kernellab workload userland fio redis --arch arm64",),
    "workload crosscheck": ("kernellab workload crosscheck   # lab-minimal x86_64 under QEMU, icount",
                            "kernellab workload crosscheck running --target local --runs 5"),
    "cache": ("kernellab cache show",
              "kernellab cache prune --unused --dry-run"),
    "cache show": ("kernellab cache show --all",),
    "cache prune": ("kernellab cache prune --unused --recent 20",
                    "kernellab cache prune --older-than 30 --dry-run"),
    "lava-job": ("kernellab lava-job lab-minimal --device-type bbb --artifact-url https://files/kl -o job.yaml",),
    "size": ("kernellab size lab-minimal debug=lab-minimal+debug-kernel",
             "kernellab size old/vmlinux new/vmlinux --format bloat-o-meter"),
    "profile": ("kernellab profile lab-minimal debug=lab-minimal+debug-kernel --metric syscall.null",),
    "completion": ("kernellab completion bash > ~/.local/share/bash-completion/completions/kernellab",
                   "kernellab completion zsh > ~/.zfunc/_kernellab"),
    "man": ("kernellab man | man -l -",),
    "import-lava": ("kernellab import-lava log.yaml lab-minimal --device-type bbb   # the job's log, as a run",),
}

# What kernellab reads from the environment: the man page's ENVIRONMENT (tests/test_cli_help.py
# checks that every variable the code reads is here).
ENVIRONMENT = (
    ("KERNELLAB_CACHE", "the cache directory: source trees, build trees, artifacts, ccache, and the default "
                        "store, kernellab.sqlite (default: $XDG_CACHE_HOME/kernellab, ~/.cache/kernellab)"),
    ("XDG_CACHE_HOME", "where the default cache directory is, when KERNELLAB_CACHE is not set"),
    ("XDG_STATE_HOME", "where the per-user key that seals kernellab's cached Kconfig trees is kept "
                       "(default ~/.local/state/kernellab)"),
    ("CCACHE_MAXSIZE", "ccache's limit for the builds' compiler cache (default 5G)"),
    ("KBUILD_*, KCONFIG_*, KERNELLAB_*", "passed on to make, which reads them: part of every resolved config's "
                                         "cache key"),
    ("COLUMNS", "the width help text and tables are fitted to (default: the terminal's)"),
    ("NO_COLOR", "set: no colours on the terminal either"),
    ("PATH", "where kernellab finds the programs it runs: make, the compilers, QEMU, ssh (kernellab doctor "
             "lists them)"),
    ("DASK_*", "Dask's configuration, for --workers and --cluster (TLS certificates: docs/dask.md)"),
    ("TMPDIR", "where QEMU keeps what a guest writes on a workload's disk (snapshot=on; default /var/tmp): "
               "kernellab checks there is room for the workloads' needs.disk_mib before it starts"),
    ("KERNELLAB_FAULT_KILL_AT_SAMPLE", "kernellab's own fault tests only: kill the process at that sample"),
)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, but a block of indented lines (an epilog's examples) is kept as written;
    the rest is wrapped to the terminal as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = []
        for block in text.split("\n\n"):
            lines = block.splitlines()
            kept = any(line.startswith("  ") for line in lines)
            blocks.append("\n".join(indent + line for line in lines) if kept
                          else super()._fill_text(block, width, indent))
        return "\n\n".join(blocks)


def _subparsers(p: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser under `p` with its command path ("config diff"), `p` first as ""."""
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _subparsers(child, f"{path} {name}".strip())


def _add_examples(top: argparse.ArgumentParser) -> None:
    """Each command's EXAMPLES under its --help, before what its epilog already says."""
    for path, p in _subparsers(top):
        p.formatter_class = _HelpFormatter
        lines = EXAMPLES.get(path)
        if lines:
            p.epilog = "\n\n".join(["examples:\n" + "\n".join(f"  {line}" for line in lines),
                                    *([p.epilog] if p.epilog else [])])


# Built once per process: it is data (parse_args changes nothing in it), and building it
# takes about 30 ms, which every in-process main() of the tests paid again.
@functools.cache
def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="kernellab",
                                  description="Build, boot, measure and compare Linux kernel variants.",
                                  epilog=EXIT_CODES)
    top.add_argument("--version", action="version", version=f"kernellab {__version__}")
    store_help = "SQLite store (default: kernellab.sqlite in the cache directory)"
    one_variant = "NAME=BASE+FRAGMENT+CONFIG_X=y+boot:ARG+sysctl:KEY=VALUE, as for compare (a base alone: lab-minimal)"
    top.add_argument("--store", type=_given, default=None, help=store_help)
    # Accepted after the command too; SUPPRESS keeps the subcommand from overwriting a --store given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", type=_given, default=argparse.SUPPRESS, help=store_help)
    # Not required: `kernellab` alone prints this help (_main), not argparse's one-line error.
    sub = top.add_subparsers(dest="command", metavar="COMMAND",
                             help="what to do (`kernellab COMMAND --help`: its options and examples)")
    top.set_defaults(func=None, help_of=top)

    def command(name: str, help: str, func: Callable[[argparse.Namespace], int],
                parent: argparse._SubParsersAction[argparse.ArgumentParser] = sub) -> argparse.ArgumentParser:
        p = parent.add_parser(name, parents=[common], help=help)
        p.set_defaults(func=func)
        return p

    def cluster_opts(p: argparse.ArgumentParser) -> None:
        cl = p.add_mutually_exclusive_group()
        cl.add_argument("--workers", type=_workers, help="build and boot on a local Dask cluster of N workers")
        cl.add_argument("--cluster", type=_given, metavar="ADDRESS",
                        help="build and boot on the Dask scheduler at ADDRESS (tls://HOST:PORT, or this host's)")

    def variant_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--source", type=_given, default=None,
                       help=f"kernel source: debian:6.1, debian:6.12, the path of a kernel tree or of a "
                            f"linux-X.Y.tar.xz (.tar.gz, .tar.bz2), or git:PATH@REF (default {DEFAULT_SOURCE})")
        p.add_argument("--arch", type=_given, default=None,
                       help=f"arch profile: {', '.join(arches.available())} (default {DEFAULT_ARCH})")

    def machine_opts(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--target", default="qemu", help=what)
        p.add_argument("--ssh-config", type=Path, default=None, help="ssh -F: an ssh config file to use")
        p.add_argument("--accept-new-host-key", action="store_true",
                       help="accept (and record) the host key of an ssh target not yet in known_hosts; "
                            "a changed key is always refused")

    def target_opts(p: argparse.ArgumentParser, accel: str = "auto") -> None:
        machine_opts(p, "where variants run: qemu (default), local (this machine's running kernel) or "
                        "ssh://[user@]host[:port] (a remote machine's, booted with kexec), or a target a "
                        "plugin registers; see README, 'Real machines'")
        p.add_argument("--accel", choices=ACCELS, default=accel,
                       help=f"qemu target: auto (KVM when it works and the mode allows, else TCG), kvm or tcg "
                            f"(default {accel})")
        p.add_argument("--block-dir", default=None,
                       help="local and ssh targets: measure block I/O on a scratch file in this directory "
                            "(never on a device); without it blk.* are not measured")
        p.add_argument("--power-cycle", default=None, metavar="CMD",
                       help="ssh target: a shell command that power-cycles the machine, run when a kexec'd "
                            "variant does not come back (as ktest's POWER_CYCLE)")
        p.add_argument("--kexec-timeout", type=_positive, default=COME_BACK_S, metavar="SECONDS",
                       help=f"ssh target: how long a kexec'd variant, or the reboot back, may take to answer ssh "
                            f"(default {COME_BACK_S:.0f})")

    def format_opt(p: argparse.ArgumentParser, *formats: str) -> None:
        p.add_argument("--format", choices=formats, default=formats[0], help=f"output format (default {formats[0]})")

    def mode_opt(p: argparse.ArgumentParser, default: str | None) -> None:
        p.add_argument("--mode", choices=modes.NAMES, default=default,
                       help=f"timing mode (default {default}; see docs/measurement.md)" if default else
                       f"timing mode (default {modes.DEFAULT} where the target keeps deterministic time, else "
                       "wall; see docs/measurement.md)")

    def runs_opt(p: argparse.ArgumentParser, help: str) -> None:
        p.add_argument("--runs", type=_run_count, default=None, help=help)

    def metric_opt(p: argparse.ArgumentParser, help: str) -> None:
        p.add_argument("--metric", required=True, help=help)

    def workload_opt(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--workload", action="append", metavar="SPEC",
                       help="run a real program too, after the agent's tables: a shipped workload with its "
                            "parameters (fio:rw=read,bs=1M) or your own FILE.toml; its metrics are WORKLOAD.METRIC"
                            f"{what} (repeatable; see docs/workloads.md)")

    def floor_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--noise-floor", metavar="FILE",
                       help="TOML with [floor] METRIC = PCT: changes within it are no difference (default: none)")

    def gate_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--fail-on", action="append", type=_rule, metavar="METRIC:[+-]PCT",
                       help="exit 3 when METRIC rises (+) or falls (-) by more than PCT %%, or without a "
                            "sign gets worse by more, in any variant against the first (repeatable)")
        p.add_argument("--fail-on-regression", type=_percent, metavar="PCT",
                       help="exit 3 when any metric gets worse by more than PCT %% in any variant")
        floor_opt(p)

    def verbose_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--verbose", "-v", action="store_true",
                       help="a compare or study table's whole header on a terminal: how each variant was built "
                            "and booted, CPU flaws, the statistics (a file, -o or a pipe, always has it)")

    wall = modes.get("wall")
    c = command("compare", "build, boot and compare variants (no arguments: the built-in default experiment)",
                cmd_compare)
    c.add_argument("variants", nargs="*", help="NAME=BASE+FRAGMENT+CONFIG_X=y+boot:ARG+sysctl:KEY=VALUE ...")
    c.add_argument("--experiment", "-e", type=Path, help="TOML experiment file")
    variant_opts(c)
    mode_opt(c, None)
    runs_opt(c, f"boots per variant (default: {modes.get(modes.DEFAULT).runs} in {modes.DEFAULT}; in wall, at least "
                f"{wall.runs} and more while a median is looser than +-3%%)")
    c.add_argument("--max-runs", type=_run_count, default=None,
                   help=f"cap on boots per variant in wall mode (default {wall.max_runs})")
    c.add_argument("--initcalls", action="store_true", help="boot with initcall_debug and report the slowest initcalls")
    c.add_argument("--with", dest="with_groups", action="append", metavar="GROUP",
                   help="run an opt-in group of metrics too: net (a data server under load; seconds per boot)")
    c.add_argument("--timeout", type=_positive, default=lab.DEFAULT_TIMEOUT_S,
                   help="seconds before a guest counts as hung (each workload's own timeout is added)")
    c.add_argument("--metric", action="append", metavar="NAME",
                   help="measure only this metric (repeatable, or NAME,NAME): the agent runs only these, "
                        "in shortened boots unless a boot or timer metric is asked; build, size and boot rows "
                        "stay (default: every metric)")
    workload_opt(c, ", which --fail-on and --metric may name")
    target_opts(c)
    cluster_opts(c)
    format_opt(c, *kinds.get("compare").formats)   # each kind of result's formats: report/kinds.py
    c.add_argument("--all", action="store_true", help="show every metric, all of /proc/meminfo included")
    verbose_opt(c)
    c.add_argument("--output", "-o", help="write the report to a file")
    gate_opts(c)

    b = command("build", "resolve and build one variant", cmd_build)
    b.add_argument("variant", help=one_variant)
    b.add_argument("--cold", action="store_true",
                   help="time a build from scratch: an emptied build tree, no ccache (again if cached otherwise)")
    variant_opts(b)
    format_opt(b, "table", "json")

    r = command("resolve", "resolve one variant's config and show what olddefconfig dropped", cmd_resolve)
    r.add_argument("variant", help=one_variant)
    r.add_argument("--print-config", action="store_true", help="print the resolved .config")
    variant_opts(r)
    format_opt(r, "table", "json")

    runs = command("runs", "list past runs, newest first, the runs of one kernellab command together", cmd_runs)
    runs.add_argument("--limit", type=_row_count, default=50, metavar="N", help="the N latest runs (default 50)")
    format_opt(runs, "table", "json", "csv")

    lg = command("log", "print the console log of a run", cmd_log)
    lg.add_argument("run_id", type=_row_count, metavar="RUN", help="the run's number, as `kernellab runs` lists it")

    d = command("doctor", "check the external tools kernellab uses", cmd_doctor)
    format_opt(d, "table", "json")

    cfg = sub.add_parser("config", help="compare configs and explain options, with the Kconfig of the tree")
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="COMMAND",
                                 help="`kernellab config COMMAND --help`: its options and examples")
    cfg.set_defaults(help_of=cfg)
    cd = command("diff", "options that differ between two configs (.config files or variants), by menu",
                 cmd_config_diff, cfg_sub)
    cd.add_argument("a", help="a .config, `running` (the config of the kernel --target runs) or a variant as "
                              "compare takes it (lab-minimal, debug=lab-minimal+debug-kernel), resolved")
    cd.add_argument("b", help="another .config, `running` or variant")
    machine_opts(cd, "whose running kernel `running` means: local (default: this machine) or ssh://...")
    cd.add_argument("--all", action="store_true", help="also show differing options without a prompt")
    format_opt(cd, "table", "json")
    variant_opts(cd)
    ce = command("explain", "an option's value and why: dependencies, selects, what setting it takes",
                 cmd_config_explain, cfg_sub)
    ce.add_argument("symbol", help="option name, with or without CONFIG_")
    ce.add_argument("--config", help="a .config, `running` or a variant as compare takes it (lab-minimal, "
                                     "debug=lab-minimal+debug-kernel), resolved (default: the arch's defconfig)")
    machine_opts(ce, "whose running kernel `running` means: local (default: this machine) or ssh://...")
    format_opt(ce, "table", "json")
    variant_opts(ce)

    a = command("audit", "check a .config against the rule base for a workload profile", cmd_audit)
    a.add_argument("config", help="a .config, `running` (the config of the kernel --target runs) or a "
                                   "prebuilt image (debian-image:6.12-cloud: its own config)")
    machine_opts(a, "whose running kernel `running` means: local (default: this machine) or ssh://...")
    a.add_argument("--profile", choices=PROFILES,
                   help="the workload to audit for (default: the one the config asks for: PREEMPT_RT=y latency, "
                        "CC_OPTIMIZE_FOR_SIZE=y embedded-small; else it must be given)")
    a.add_argument("--only", metavar="VERDICTS",
                   help="show only the rules with these verdicts, comma-separated: change, boot, ok, n/a "
                        "(e.g. --only change,boot: what to act on); the counts stay those of every rule")
    a.add_argument("--format", choices=kinds.get("audit").formats, default=None,
                   help="output format (default: from -o's extension, .json, .html or .txt; else table)")
    a.add_argument("--output", "-o", help="write the audit to a file")
    a.add_argument("--fragment", help="write a config fragment applying the recommended changes")
    a.add_argument("--measure", action="store_true",
                   help="build and boot the config with all recommendations applied and with each rule "
                        "category's alone, and show each rule's measured effect on its metric (a "
                        "distribution's config is measured reduced onto lab-minimal)")
    mode_opt(a, modes.DEFAULT)
    runs_opt(a, "boots per kernel with --measure (default: the mode's)")
    variant_opts(a)

    sw = command("sweep", "flip one option at a time from a baseline and rank the effects", cmd_sweep)
    sw.add_argument("base", nargs="?", help="the baseline variant (with --toggle)")
    sw.add_argument("--toggle", help="options to flip, comma-separated (CONFIG_ prefix optional)")
    sw.add_argument("--from-diff", nargs=2, metavar=("GOOD", "BAD"),
                    help="flip, on GOOD, each option in which BAD differs")
    metric_opt(sw, "metric(s), comma-separated, e.g. proc.fork_exit, or a --workload's: hackbench.process_socket_time")
    workload_opt(sw, ", which --metric may name")
    mode_opt(sw, None)
    runs_opt(sw, f"boots per variant (default {modes.get(modes.DEFAULT).runs} in {modes.DEFAULT}, {wall.runs} in wall)")
    floor_opt(sw)
    format_opt(sw, "table", "json", "html")
    variant_opts(sw)
    target_opts(sw, accel="tcg")
    cluster_opts(sw)

    bi = command("bisect", "name the options that make BAD differ from GOOD on a metric", cmd_bisect)
    bi.add_argument("good", help="the variant with the metric's good value, as compare takes it")
    bi.add_argument("bad", help="the variant with the bad value: its options that differ from GOOD's are bisected")
    metric_opt(bi, "the metric, e.g. proc.fork_exit, or a --workload's: hackbench.process_socket_time")
    workload_opt(bi, ", which --metric may name")
    bi.add_argument("--threshold", type=_positive, default=None,
                    help="smallest change that counts, in %% of the lower probe's value (default: the metric's "
                         f"noise floor where measured, else {DEFAULT_THRESHOLD:g})")
    mode_opt(bi, None)
    bi.add_argument("--max-runs", type=_run_count, default=WALL_MAX_RUNS,
                    help="wall mode: at most this many boots of a probe while its verdict is not yet known "
                         f"(default {WALL_MAX_RUNS}); 'not yet known' is then the answer")
    format_opt(bi, "table", "json", "html")
    variant_opts(bi)
    target_opts(bi, accel="tcg")
    cluster_opts(bi)

    wy = command("why", "why B is worse than A on a metric: the change split into code, toolchain, configuration "
                 "and boot words, down to the commits and options, with their shares", cmd_why)
    wy.add_argument("a", help="the good kernel: NAME=BASE+FRAGMENT+CONFIG_X=y+boot:ARG+cc:TOOLCHAIN ...")
    wy.add_argument("b", help="the bad kernel, in the same syntax")
    wy.add_argument("--metric", action="append", required=True,
                    help="the metric to explain, e.g. syscall.null (repeatable, or comma-separated)")
    wy.add_argument("--source-range", metavar="git:PATH@GOOD..BAD",
                    help="A is built from GOOD, B from BAD: the code part is bisected over the first-parent commits "
                         "between them")
    wy.add_argument("--sources", nargs=2, metavar=("A_SOURCE", "B_SOURCE"),
                    help="A's and B's kernel sources (refs of one git repository: its commits are bisected)")
    workload_opt(wy, ", which --metric may name")
    wy.add_argument("--threshold", type=_positive, default=None,
                    help="smallest change that counts, in %% (default: the metric's noise floor where measured, "
                         f"else {DEFAULT_THRESHOLD:g})")
    mode_opt(wy, None)
    wy.add_argument("--whole", action="store_true",
                    help="measure distribution-size configurations as they are (every probe then builds a "
                         "distribution's kernel: an hour or more on a small machine, hours for a bisection) instead "
                         "of reduced onto lab-minimal keeping every option in which A and B differ")
    wy.add_argument("--max-runs", type=_run_count, default=WALL_MAX_RUNS,
                    help=f"wall mode: at most this many boots of a probe while its verdict is not yet known "
                         f"(default {WALL_MAX_RUNS})")
    format_opt(wy, *kinds.get("why").formats)
    wy.add_argument("--output", "-o", help="write the answer to a file")
    variant_opts(wy)
    target_opts(wy, accel="tcg")
    cluster_opts(wy)

    tr = command("track", "a metric across a series of kernels (git refs, a range, or sources), its change points "
                 "found, each with the `why` command that explains it", cmd_track)
    tr.add_argument("variant", nargs="?", default="lab-minimal",
                    help="the kernel built at every ref: BASE+FRAGMENT+CONFIG_X=y+... (default lab-minimal)")
    tr.add_argument("--source", action="append", type=_given,
                    help="git:PATH, the repository --refs or --range name refs of; or, repeated, one kernel source "
                         "per kernel of the series, oldest first (tarballs, trees, git:PATH@REF, debian:6.1)")
    tr.add_argument("--refs", metavar="REF1,REF2,...", help="the refs to measure, oldest first")
    tr.add_argument("--range", metavar="GOOD..BAD",
                    help="GOOD, the first-parent commits after it up to BAD (every --every'th), and BAD")
    tr.add_argument("--every", type=int, default=None, metavar="N",
                    help="with --range: every Nth commit counted from GOOD (default 1: every commit); the "
                         "kernels picked stay the same when BAD moves on")
    tr.add_argument("--metric", required=True, help="the metric to follow, e.g. syscall.null")
    workload_opt(tr, ", which --metric may name")
    tr.add_argument("--threshold", type=_positive, default=None,
                    help="smallest change that counts, in %% (default: the metric's noise floor where measured, "
                         f"else {DEFAULT_THRESHOLD:g})")
    mode_opt(tr, None)
    tr.add_argument("--max-runs", type=_run_count, default=WALL_MAX_RUNS,
                    help=f"wall mode: at most this many boots of a kernel either side of a change point while its "
                         f"verdict is not yet known (default {WALL_MAX_RUNS})")
    format_opt(tr, *kinds.get("track").formats)
    tr.add_argument("--output", "-o", help="write the series to a file")
    tr.add_argument("--arch", type=_given, default=None,
                    help=f"arch profile: {', '.join(arches.available())} (default {DEFAULT_ARCH})")
    target_opts(tr, accel="tcg")
    cluster_opts(tr)

    ci = command("cite", "the [[rule.evidence]] block each rule can cite from a results file "
                 "(study run --format results), to paste into the rule files", cmd_cite)
    ci.add_argument("results", help="a results file, e.g. results/debug-cost.json")
    ci.add_argument("--rule", action="append", default=[], metavar="ID", help="only this rule (repeatable)")
    ci.add_argument("--sweep", action="append", default=[], metavar="LABEL",
                    help="only the sweep of the file with this label (repeatable; a wrong one lists the labels)")

    sh = command("show", f"render any result kernellab wrote as JSON ({', '.join(k.what for k in kinds.kinds())})",
                 cmd_show)
    sh.add_argument("report", help="a JSON file kernellab wrote (--format json, or study run --format results)")
    format_opt(sh, *kinds.formats())
    sh.add_argument("--all", action="store_true", help="a compare report: show every metric, all of "
                    "/proc/meminfo included")
    verbose_opt(sh)
    sh.add_argument("--output", "-o", help="write the rendering to a file")
    sh.add_argument("--only", metavar="VERDICTS",
                    help="an audit: show only the rules with these verdicts, comma-separated: change, boot, ok, n/a "
                         "(as `kernellab audit --only`)")
    gate_opts(sh)

    nf = command("noise-floor", "measure how far code that never runs moves each metric (memory layout): "
                 "the floor below which a change is no difference", cmd_noise_floor)
    nf.add_argument("base", nargs="?", default="lab-minimal", help="the base variant (default lab-minimal)")
    nf.add_argument("--options", help="the neutral options to flip, comma-separated (default: "
                                      "src/kernellab/metrics/neutral.toml; at least 8)")
    mode_opt(nf, modes.DEFAULT)
    workload_opt(nf, ", whose floor is measured too")
    format_opt(nf, "table", "json")
    variant_opts(nf)
    target_opts(nf, accel="tcg")
    cluster_opts(nf)

    st = sub.add_parser("study", help="the seed studies (and your own study files), each redone by one command")
    st_sub = st.add_subparsers(dest="study_command", metavar="COMMAND",
                               help="`kernellab study COMMAND --help`: its options and examples")
    st.set_defaults(help_of=st)
    sl = command("list", "the studies kernellab ships: what each redoes, its arches, builds and time", cmd_study_list,
                 st_sub)
    format_opt(sl, "table", "json")
    sr = command("run", "run a study: its table, the split into code and config, its sweep, its summary",
                 cmd_study_run, st_sub)
    sr.add_argument("study", help="a study's name (kernellab study list) or the path of a study .toml file")
    sr.add_argument("--arch", type=_given, action="append", default=None,
                    help="run on this arch only (repeatable; default: the study's arches)")
    mode_opt(sr, None)
    runs_opt(sr, "boots per variant (default: the mode's)")
    sr.add_argument("--quick", action="store_true",
                    help="the study's smallest meaningful form (one arch, the fewest builds, no sweep); "
                         "its report says so")
    sr.add_argument("--measured-only", action="store_true",
                    help="build and boot nothing: the report of what the store already holds of the study "
                         "(one stopped part-way), each variant, sweep option and cell not measured yet marked so")
    sr.add_argument("--vcpus", type=_at_least_one, default=None,
                    help="boot every variant with N virtual CPUs (wall mode where the arch brings up only one "
                         "under icount); its report says so")
    floor_opt(sr)
    workload_opt(sr, " in each arch's report, beside the study's own [experiment] workloads; its report "
                     "says so")
    sr.add_argument("--timeout", type=_positive, default=lab.DEFAULT_TIMEOUT_S,
                    help="seconds before a guest counts as hung")
    cluster_opts(sr)
    target_opts(sr, accel="tcg")
    format_opt(sr, *studyreport.STUDY.formats)
    verbose_opt(sr)
    sr.add_argument("--output", "-o", help="write the report to a file")

    me = command("metrics", "every metric: its label, unit, group, who measures it and in which timing modes it "
                 "means something (the names --fail-on, --metric and study files take)", cmd_metrics)
    me.add_argument("--workload", action="append", metavar="SPEC",
                    help="list this workload's metrics too (WORKLOAD.METRIC), as --workload names it (repeatable)")
    format_opt(me, "table", "json")

    wl = sub.add_parser("workload", help="real programs as data files (fio, redis, your own): list, show, check, "
                                         "userland")
    wl_sub = wl.add_subparsers(dest="workload_command", metavar="COMMAND",
                               help="`kernellab workload COMMAND --help`: its options and examples")
    wl.set_defaults(help_of=wl)
    wll = command("list", "the workloads kernellab ships: fixed work or timed, packages, what each runs",
                  cmd_workload_list, wl_sub)
    format_opt(wll, "table", "json")
    wls = command("show", "a workload's command, parameters, server, needs and metrics", cmd_workload_show, wl_sub)
    wls.add_argument("workload", metavar="NAME|FILE",
                     help="a name of `workload list` or the path of a .toml file, then :key=value,... "
                          "(fio:bs=1M,rw=read)")
    format_opt(wls, "table", "json")
    wlc = command("check", "load a workload file and read the sample outputs it names (or --sample) with its parser",
                  cmd_workload_check, wl_sub)
    wlc.add_argument("file", metavar="FILE", help="the workload's .toml file (or a name), then :key=value,...")
    wlc.add_argument("--sample", metavar="OUTPUT", help="read this output of the program instead of the file's samples")
    wlu = command("userland", "assemble the guest's programs for workloads from Debian's packages (cached): "
                  "what it kept", cmd_workload_userland, wl_sub)
    wlu.add_argument("workload", nargs="+", metavar="NAME|FILE", help="workloads, as for `workload show`")
    wlu.add_argument("--arch", type=_given, default=None,
                     help=f"arch profile: {', '.join(arches.available())} (default {DEFAULT_ARCH})")
    wlu.add_argument("--compression", choices=("gzip", "none"), default="gzip",
                     help="of the cpio segment (default gzip; none for a kernel without CONFIG_RD_GZIP)")
    wlu.add_argument("--refresh", action="store_true",
                     help="fetch apt's package lists and the packages again instead of using the cached ones")
    format_opt(wlu, "table", "json")

    wlx = command("crosscheck", "the agent's microbenchmarks beside perf bench, hackbench, cyclictest, stress-ng "
                  "and fio in the same guest and kernel: ratios, judged against docs/crosschecks.md's bands "
                  "(exit 3 outside one)", cmd_workload_crosscheck, wl_sub)
    wlx.add_argument("variant", nargs="?", default="lab-minimal",
                     help="the kernel: NAME=BASE+... as for compare (default lab-minimal, the bands' own)")
    variant_opts(wlx)
    mode_opt(wlx, None)
    runs_opt(wlx, "boots (default: the mode's)")
    wlx.add_argument("--timeout", type=_positive, default=lab.DEFAULT_TIMEOUT_S,
                     help="seconds before a guest counts as hung (each workload's own timeout is added)")
    wlx.add_argument("--pair", action="append", metavar="NAME",
                     help="only this pair (repeatable; the names are the table's first column), e.g. "
                          "--pair 'sequential read, O_DIRECT': a run costs only its programs' time")
    target_opts(wlx)
    format_opt(wlx, "table", "markdown", "json")
    wlx.add_argument("--output", "-o", default=None, help="write the result to this file instead of stdout")

    ca = sub.add_parser("cache", help="what kernellab's cache holds (sources, build trees, artifacts, images) "
                                      "and pruning it")
    ca_sub = ca.add_subparsers(dest="cache_command", metavar="COMMAND",
                               help="`kernellab cache COMMAND --help`: its options and examples")
    ca.set_defaults(help_of=ca)
    cs = command("show", "each part of the cache: entries, size, how many the store's recent runs used",
                 cmd_cache_show, ca_sub)
    cs.add_argument("--all", action="store_true", help="list every entry, not only the totals per kind")
    cs.add_argument("--recent", type=_row_count, default=50, help="how many recent runs count as using (50)")
    format_opt(cs, "table", "json")
    cp = command("prune", "remove source trees, build trees, artifacts and images: those every criterion given "
                          "picks; never while another kernellab command runs", cmd_cache_prune, ca_sub)
    cp.add_argument("--older-than", type=_positive, metavar="DAYS", help="not built or used for DAYS days")
    cp.add_argument("--source", type=_given,
                    help="the source tree and build trees of this source (debian:6.12, a path, ...)")
    cp.add_argument("--unused", action="store_true", help="not used by the store's recent runs (see --recent)")
    cp.add_argument("--recent", type=_row_count, default=50, help="how many recent runs count as using (50)")
    cp.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")

    lj = command("lava-job", "write a LAVA job that boots a variant with the agent (kernel and initramfs)",
                 cmd_lava_job)
    lj.add_argument("variant", help="the variant to boot, as compare takes it")
    lj.add_argument("--device-type", required=True, help="the lab's device type to run on")
    lj.add_argument("--artifact-url", required=True,
                    help="the URL of the directory the lab downloads the kernel image and the initramfs from")
    lj.add_argument("--console", help="the board's serial console device (default: the arch's, e.g. ttyS0)")
    lj.add_argument("--kernel-type", choices=lava.KERNEL_TYPES,
                    help="LAVA's kernel type (default: from the image's name; none for bzImage and vmlinux)")
    lj.add_argument("--boot-method", choices=lava.BOOT_METHODS, default="u-boot",
                    help="how the device type boots the kernel and ramdisk: its bootloader's tftp commands, "
                         "or qemu for LAVA's QEMU device type (default u-boot)")
    lj.add_argument("--timeout", type=_positive, default=lab.DEFAULT_TIMEOUT_S,
                    help="seconds the kernel and the agent may take once the bootloader starts them")
    lj.add_argument("--output", "-o", help="write the job to a file")
    workload_opt(lj, ", run on the board from the Debian userland the job's ramdisk carries, as in QEMU")
    variant_opts(lj)

    sz = command("size", "where the image's bytes go: symbols (as scripts/bloat-o-meter) and directories, "
                 "the first kernel against each other", cmd_size)
    sz.add_argument("variants", nargs="+", metavar="VARIANT_OR_VMLINUX",
                    help="a built variant (as compare takes it) or the path of a vmlinux; at least two")
    sz.add_argument("--top", type=_top, default=size_view.TOP, help="rows of symbols and directories")
    format_opt(sz, "table", "json", "bloat-o-meter")
    variant_opts(sz)

    pr = command("profile", "where the kernel's time goes while a metric runs: the kernel's tick profiler "
                 "(CONFIG_PROFILING, profile=2) on two variants, functions by change of share", cmd_profile)
    pr.add_argument("a", metavar="A", help="a variant, as compare takes it (built with CONFIG_PROFILING=y added)")
    pr.add_argument("b", metavar="B", help="the variant to set beside it")
    pr.add_argument("--metric", type=_agent_metric, required=True,
                    help="the agent metric to run while profiling, e.g. syscall.null")
    pr.add_argument("--repeats", type=_repeats, default=51,
                    help="the metric's repeats: more ticks, a finer profile (default 51)")
    pr.add_argument("--top", type=_top, default=20, help="functions to show")
    mode_opt(pr, modes.DEFAULT)
    format_opt(pr, "table", "json")
    variant_opts(pr)
    target_opts(pr, accel="tcg")

    comp = command("completion", "print a shell completion script: "
                   "`source <(kernellab completion bash)`, or save it where your shell looks", cmd_completion)
    comp.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete for")
    command("man", "print the manual page: `kernellab man | man -l -`", cmd_man)

    il = command("import-lava", "store the agent's records from a LAVA job log as a run of the variant",
                 cmd_import_lava)
    il.add_argument("log", help="the job's log.yaml (lavacli jobs logs --raw JOB)")
    il.add_argument("variant", help="the variant the job booted (as given to lava-job)")
    il.add_argument("--device-type", required=True, help="the lab's device type the job ran on")
    il.add_argument("--job-id", help="the job's number (default: from the log's dispatcher paths)")
    workload_opt(il, ", as given to lava-job (the job's header says them)")
    il.add_argument("--format", choices=[f for f in kinds.get("compare").formats if f != "junit"],
                    help="write the run's report too, as compare writes it (default with -o: from its name)")
    il.add_argument("--output", "-o", help="write the run's report to a file")
    variant_opts(il)
    _add_examples(top)
    return top


def main(argv: list[str] | None = None) -> int:
    # Every write to stdout, --help's included, goes through the guard: an error of the
    # output itself is handled here, once, and told apart from every other OSError.
    stdout, sys.stdout = sys.stdout, GuardedOutput(sys.stdout)
    try:
        return _main(argv)
    except OutputLost as exc:
        _discard_output(stdout)
        if exc.reader_gone:
            return EXIT_READER_GONE
        # Runs were committed to the store as they were measured: none is lost with the output.
        print(f"kernellab: error: cannot write the output: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.stdout = stdout


def _discard_output(stream: Any) -> None:
    """What the output's buffer still holds would fail again when Python exits (an
    'Exception ignored' on stderr): it goes to /dev/null instead, as the Python docs
    advise for SIGPIPE."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):   # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _main(argv: list[str] | None) -> int:
    # A real command line cannot hold a NUL (execve's arguments are C strings); a caller
    # in process can, and no path or word with one means anything.
    if any("\0" in word for word in argv or ()):
        print("kernellab: error: an argument holds a NUL character: remove it", file=sys.stderr)
        return EXIT_USAGE
    args = parser().parse_args(argv)
    if args.func is None:   # no command (`kernellab`, `kernellab config`): the help; nothing was done
        args.help_of.print_help()
        return EXIT_USAGE
    stop_on_signals()
    begin_command()   # `runs` groups this command's runs, even beside another's in this process
    try:
        reaper.reap(_log)   # what a kernellab killed outright left running
        # The workloads' metrics a command registers are its own: gone when it ends.
        # One agent for the whole command, whatever happens to its sources meanwhile.
        with paths.in_use(), progress.display(), metric_catalog.command_scope(), agent_compile.one_agent():
            code: int = args.func(args)
        sys.stdout.flush()   # a full disk says so now, not in the interpreter's exit
        return code
    except LabError as exc:
        print(f"kernellab: error: {exc}", file=sys.stderr)   # LabError made its message printable
        return exc.exit_status
    except OSError as exc:   # a full disk where kernellab writes (the cache, mostly): one line
        full = paths.no_space(exc)
        if full is None:
            raise
        print(f"kernellab: error: {full}", file=sys.stderr)
        return full.exit_status
    except KeyboardInterrupt as exc:
        why = exc.args[0] if exc.args else "Ctrl-C"
        print(f"kernellab: interrupted ({why}); every sample measured so far is in the store", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
