"""The command line: parses arguments, calls the pieces, prints."""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import sys
from pathlib import Path

from . import arches, doctor, paths, sources, toolchain
from .config import audit, diff, explain, kconfig
from .errors import LabError
from .proc import stop_on_signals
from .experiments import compare, lab, sweep
from .experiments.bisect import Bisector
from .experiments.probe import differing
from .experiments.spec import DEFAULT_ARCH, DEFAULT_SOURCE, Experiment, load_experiment, parse_short
from .knowledge import PROFILES, rules_for
from .report import FORMATS, attribution, render
from .store import Store


def _log(message: str) -> None:
    print(f"· {message}", file=sys.stderr, flush=True)


def _store(args) -> Store:
    return Store(Path(args.store) if args.store else paths.default_store())


def _variant(text: str, args):
    return parse_short(text, args.source or DEFAULT_SOURCE, args.arch or DEFAULT_ARCH)


def cmd_compare(args) -> int:
    if args.variants and args.experiment:
        raise LabError("give variants on the command line or --experiment FILE, not both")
    if args.variants:
        exp = Experiment("command line", [_variant(v, args) for v in args.variants])
    else:
        exp = load_experiment(args.experiment)
        for v in exp.variants:
            v.source = args.source or v.source
            v.arch = args.arch or v.arch
    store = _store(args)
    how = compare.plan(exp, args.mode, args.runs, args.max_runs, args.timeout, args.initcalls)
    report, failures = compare.run_experiment(exp, store, how, log=_log)
    text = render(report, args.format, args.all)
    if args.output:
        Path(args.output).write_text(text)
        _log(f"report written to {args.output}")
    else:
        sys.stdout.write(text)
    if failures:
        for f in failures:
            print(f"kernellab: error: {f}", file=sys.stderr)
        return 1
    return 0


def cmd_build(args) -> int:
    store = _store(args)
    p = lab.prepare(_variant(args.variant, args), store)
    for d in p.config.dropped:
        _log(f"asked {d['option']}={d['asked']}, got {d['got']} ({d['origin']})")
    b = lab.ensure_built(p, store, log=_log)
    print(json.dumps(b.to_dict() | {"dropped_options": p.config.dropped}, indent=2))
    return 0


def cmd_resolve(args) -> int:
    store = _store(args)
    p = lab.prepare(_variant(args.variant, args), store)
    if args.print_config:
        sys.stdout.write(p.config.text)
    else:
        print(json.dumps({"variant": p.spec.name, "source_version": p.source.version,
                          "config_hash": p.config.hash, "dropped_options": p.config.dropped}, indent=2))
    return 0


def cmd_runs(args) -> int:
    store = _store(args)
    rows = store.runs(args.limit)
    if not rows:
        print(f"no runs in {store.path}")
        return 0
    print(f"{'run':>5}  {'started':19}  {'variant':16} {'arch':7} {'kernel':10} {'mode':6} {'status':11} samples  reason")
    for r in rows:
        started = datetime.datetime.fromtimestamp(r["started"]).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{r['id']:>5}  {started}  {r['name'][:16]:16} {r['arch']:7} {r['version'][:10]:10} "
              f"{r['mode']:6} {r['status']:11} {r['samples']:>7}  {r['reason'] or ''}")
    return 0


def cmd_log(args) -> int:
    text = _store(args).run_log(args.run_id)
    if text is None:
        raise LabError(f"no console log for run {args.run_id}: see `kernellab runs`")
    sys.stdout.write(text)
    return 0


def cmd_doctor(args) -> int:
    results = doctor.checks()
    width = max(len(c.what) for c in results)
    for c in results:
        print(f"{'ok ' if c.ok else 'MISSING'} {c.what:{width}}  {c.found}")
    failed = [c for c in results if not c.ok]
    if failed:
        print(f"\nto install what is missing: {doctor.install_command(failed)}")
        return 1
    print("\neverything kernellab uses is installed")
    return 0


def _kconfig_tree(args, *configs: str | None) -> kconfig.KconfigTree:
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


def cmd_config_diff(args) -> int:
    tree = _kconfig_tree(args, args.a, args.b)
    result, warnings = diff.diff(tree, args.a, args.b, derived=args.all)
    _warn(warnings)
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.format == "json"
                     else diff.render_table(result))
    return 0


def cmd_config_explain(args) -> int:
    tree = _kconfig_tree(args, args.config)
    _warn(tree.load(args.config) if args.config else tree.load_defconfig())
    result = explain.explain(tree, args.symbol)
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.format == "json"
                     else explain.render(result))
    return 0


def cmd_audit(args) -> int:
    tree = _kconfig_tree(args, args.config)
    _warn(tree.load(args.config))
    report = audit.audit(tree, rules_for(args.profile), args.profile)
    if args.fragment:
        try:
            Path(args.fragment).write_text(audit.fragment(tree, report))
        except OSError as exc:
            raise LabError(f"cannot write the fragment to {args.fragment}: {exc.strerror}") from None
        _log(f"fragment written to {args.fragment}")
    sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n" if args.format == "json"
                     else audit.render_table(report))
    return 0


def _metrics(text: str) -> list[str]:
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    if not metrics:
        raise LabError("--metric needs at least one metric name (see src/kernellab/measure/metrics.toml)")
    return metrics


def cmd_sweep(args) -> int:
    store = _store(args)
    metrics = _metrics(args.metric)
    if bool(args.toggle) == bool(args.from_diff):
        raise LabError("give --toggle A,B,... or --from-diff GOOD BAD (one of them)")
    if args.toggle:
        if not args.base:
            raise LabError("--toggle needs the baseline variant: kernellab sweep BASE --toggle A,B")
        base = _variant(args.base, args)
        values = lab.prepare(base, store).config.values
        flips = sweep.flips_from_toggles(values, [t.strip() for t in args.toggle.split(",") if t.strip()])
    else:
        good, bad = (_variant(v, args) for v in args.from_diff)
        base = good
        flips = differing(lab.prepare(good, store).config.values, lab.prepare(bad, store).config.values)
    result = sweep.sweep(store, base, flips, metrics, args.mode, args.runs, log=_log)
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.format == "json"
                     else attribution.sweep_text(result.to_dict()))
    return 0


def cmd_bisect(args) -> int:
    store = _store(args)
    metrics = _metrics(args.metric)
    if len(metrics) > 1:
        raise LabError("bisect follows one metric; run it once per metric")
    metric = metrics[0]
    bisector = Bisector.for_variants(store, _variant(args.good, args), _variant(args.bad, args), metric,
                                     args.mode, args.threshold, log=_log)
    result = bisector.run().to_dict()
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.format == "json"
                     else attribution.bisect_text(result))
    return 0


def cmd_show(args) -> int:
    try:
        report = json.loads(Path(args.report).read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"cannot read a report from {args.report}: {exc}; "
                       "write one with `kernellab compare --format json -o FILE`") from None
    sys.stdout.write(render(report, args.format, args.all))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="kernellab", description="Build, boot, measure and compare Linux kernel variants.")
    store_help = "SQLite store (default: kernellab.sqlite in the cache directory)"
    top.add_argument("--store", default=None, help=store_help)
    # Accepted after the command too; SUPPRESS keeps the subcommand from overwriting a --store given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS, help=store_help)
    sub = top.add_subparsers(dest="command", required=True)
    _add = sub.add_parser

    def add_parser(name, **kw):
        return _add(name, parents=[common], **kw)

    sub.add_parser = add_parser

    def variant_opts(p):
        p.add_argument("--source", default=None, help=f"kernel source: debian:6.1, debian:6.12 or a path (default {DEFAULT_SOURCE})")
        p.add_argument("--arch", default=None, help=f"arch profile (default {DEFAULT_ARCH})")

    c = sub.add_parser("compare", help="build, boot and compare variants (no arguments: the built-in default experiment)")
    c.add_argument("variants", nargs="*", help="NAME=BASE+FRAGMENT+CONFIG_X=y ...")
    c.add_argument("--experiment", "-e", type=Path, help="TOML experiment file")
    variant_opts(c)
    c.add_argument("--mode", choices=("icount", "wall"), default=None, help="timing mode (default icount)")
    c.add_argument("--runs", type=int, default=None,
                   help="boots per variant (default: 1 in icount; in wall, at least 5 and more while a median is looser than +-3%%)")
    c.add_argument("--max-runs", type=int, default=None, help="cap on boots per variant in wall mode (default 12)")
    c.add_argument("--initcalls", action="store_true", help="boot with initcall_debug and report the slowest initcalls")
    c.add_argument("--timeout", type=float, default=lab.DEFAULT_TIMEOUT_S, help="seconds before a guest counts as hung")
    c.add_argument("--format", choices=FORMATS, default="table")
    c.add_argument("--all", action="store_true", help="show every metric, all of /proc/meminfo included")
    c.add_argument("--output", "-o", help="write the report to a file")
    c.set_defaults(func=cmd_compare)

    b = sub.add_parser("build", help="resolve and build one variant")
    b.add_argument("variant")
    variant_opts(b)
    b.set_defaults(func=cmd_build)

    r = sub.add_parser("resolve", help="resolve one variant's config and show what olddefconfig dropped")
    r.add_argument("variant")
    r.add_argument("--print-config", action="store_true", help="print the resolved .config")
    variant_opts(r)
    r.set_defaults(func=cmd_resolve)

    runs = sub.add_parser("runs", help="list past runs")
    runs.add_argument("--limit", type=int, default=50)
    runs.set_defaults(func=cmd_runs)

    lg = sub.add_parser("log", help="print the console log of a run")
    lg.add_argument("run_id", type=int)
    lg.set_defaults(func=cmd_log)

    d = sub.add_parser("doctor", help="check the external tools kernellab uses")
    d.set_defaults(func=cmd_doctor)

    cfg = sub.add_parser("config", help="compare configs and explain options, with the Kconfig of the tree")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    cd = cfg_sub.add_parser("diff", parents=[common], help="options that differ between two .config files, by menu")
    cd.add_argument("a", help="a .config")
    cd.add_argument("b", help="another .config")
    cd.add_argument("--all", action="store_true", help="also show differing options without a prompt")
    cd.add_argument("--format", choices=("table", "json"), default="table")
    variant_opts(cd)
    cd.set_defaults(func=cmd_config_diff)
    ce = cfg_sub.add_parser("explain", parents=[common],
                            help="an option's value and why: dependencies, selects, what setting it takes")
    ce.add_argument("symbol", help="option name, with or without CONFIG_")
    ce.add_argument("--config", help="a .config (default: the arch's defconfig)")
    ce.add_argument("--format", choices=("table", "json"), default="table")
    variant_opts(ce)
    ce.set_defaults(func=cmd_config_explain)

    a = sub.add_parser("audit", help="check a .config against the rule base for a workload profile")
    a.add_argument("config", help="a .config")
    a.add_argument("--profile", required=True, choices=PROFILES)
    a.add_argument("--format", choices=("table", "json"), default="table")
    a.add_argument("--fragment", help="write a config fragment applying the recommended changes")
    variant_opts(a)
    a.set_defaults(func=cmd_audit)
    sw = sub.add_parser("sweep", help="flip one option at a time from a baseline and rank the effects")
    sw.add_argument("base", nargs="?", help="the baseline variant (with --toggle)")
    sw.add_argument("--toggle", help="options to flip, comma-separated (CONFIG_ prefix optional)")
    sw.add_argument("--from-diff", nargs=2, metavar=("GOOD", "BAD"),
                    help="flip, on GOOD, each option in which BAD differs")
    sw.add_argument("--metric", required=True, help="metric(s), comma-separated, e.g. proc.fork_exit")
    sw.add_argument("--mode", choices=("icount", "wall"), default="icount")
    sw.add_argument("--runs", type=int, default=None, help="boots per variant (default 1 in icount, 5 in wall)")
    sw.add_argument("--format", choices=("text", "json"), default="text")
    variant_opts(sw)
    sw.set_defaults(func=cmd_sweep)

    bi = sub.add_parser("bisect", help="name the options that make BAD differ from GOOD on a metric")
    bi.add_argument("good")
    bi.add_argument("bad")
    bi.add_argument("--metric", required=True, help="the metric, e.g. proc.fork_exit")
    bi.add_argument("--threshold", type=float, default=2.0,
                    help="smallest change that counts, in %% of the lower probe's value (default 2)")
    bi.add_argument("--mode", choices=("icount", "wall"), default="icount")
    bi.add_argument("--format", choices=("text", "json"), default="text")
    variant_opts(bi)
    bi.set_defaults(func=cmd_bisect)

    sh = sub.add_parser("show", help="render a saved JSON report (from compare --format json)")
    sh.add_argument("report")
    sh.add_argument("--format", choices=FORMATS, default="table")
    sh.add_argument("--all", action="store_true")
    sh.set_defaults(func=cmd_show)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    stop_on_signals()
    try:
        return args.func(args)
    except LabError as exc:
        print(f"kernellab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        why = exc.args[0] if exc.args else "Ctrl-C"
        print(f"kernellab: interrupted ({why}); every sample measured so far is in the store", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
