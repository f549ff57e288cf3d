"""The command line: parses arguments, calls the pieces, prints."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from . import doctor, paths
from .errors import LabError
from .experiments import compare, lab
from .experiments.spec import DEFAULT_ARCH, DEFAULT_SOURCE, Experiment, load_experiment, parse_short
from .report import FORMATS, render
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
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except LabError as exc:
        print(f"kernellab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernellab: interrupted; every sample measured so far is in the store", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
