"""A study's report: its seed's table layout across arches, the code/config split, the
sweep, and the written summary last, as the seed ends with its conclusion. The study
report is a kind of result (STUDY, report/kinds.py) with all its formats here; each arch's
part is an ordinary compare report, format and all.

On a screen (terminal.Screen with a width) its tables fit the width as the compare table
does (table.fit_shape: the Δ's intervals, the cells' spreads, long labels' middles, the
later variants' values go, in that order, and one line says what went), and its header is
the short block compare's is (report.short_header), the rest under --verbose; a file or a
pipe gets them whole. Units say when a time counts instructions (report.display_unit).
"""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import lifecycle
from ..errors import LabError
from ..metrics.catalog import describe
from . import (
    clip,
    conclusion,
    display_unit,
    first_fitting,
    fit_items,
    fmt_cell,
    fmt_value,
    kinds,
    md_table,
    perdevice,
    short_header,
    targets,
    workload_lines,
)
from .model import NoiseFloor, judge, measured_when
from .table import FULL_WIDTH, GAP, LABEL_MIN, Shape, fit_shape, left_out, shortened, unavailable
from .terminal import Screen, fold_header, header_pieces


def build(result: Any, floor: NoiseFloor) -> dict[str, Any]:
    """The study report as data, from an experiments.study.StudyResult."""
    plan = result.plan
    f = plan.study.file
    reports = {r.arch: r.report for r in result.results}
    for report in reports.values():   # by the study's floor: the verdicts it keeps and its summary says
        judge(report, floor)
    lines = conclusion.write(f.summary, reports, f.baseline, f.subject, floor)
    held = None if result.missing is None else _held(result, reports)
    if held is not None:
        lines = _summary_so_far(f.summary, lines, f.baseline, f.subject, held)
    splits = []
    for d in f.decompose:
        for arch, report in reports.items():
            rows = [s for m in _table_metrics(f) if (s := conclusion.split(report, m, d.from_, d.via, d.to))]
            if rows:
                splits.append({"arch": arch, "from": d.from_, "via": d.via, "to": d.to, "rows": rows})
    return STUDY.stamp({
        "study": f.name, "title": f.title, "seed": f.seed, "question": f.question,
        "quick": plan.quick, "left_out": plan.left_out(),
        **({"changed": plan.changed()} if plan.changed() else {}),   # optional: absent in earlier reports
        "arches": plan.arches, "baseline": f.baseline, "subject": f.subject,
        "noise_floor": {"origin": floor.origin, "pct": dict(floor.pct)},
        "not_yet": f.not_yet, "caveats": f.caveats,
        "support": _support(reports),
        "tables": [{"title": t.title, "metrics": t.metrics} for t in f.table],
        "decomposition": splits, "sweeps": result.sweeps,
        "per_device": perdevice.rows(reports),   # variants that differ only in devices:N
        "summary": lines, "failures": result.failures, "wall_s": result.wall_s, "builds": result.builds,
        "reports": reports,
        **({"measured_only": held} if held is not None else {}),   # optional: a report of a study stopped part-way
    })


NOT_MEASURED = "not measured yet"


def _held(result: Any, reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What a measured-only report holds of its study (experiments.study.measured_only),
    and each thing it lacks, once."""
    plan, missing = result.plan, result.missing
    f = plan.study.file
    lacking = {a: [*missing.variants.get(a, []), *missing.unbooted.get(a, [])] for a in missing.planned}
    splits = [f"the split into code and configuration on {a} ({d.via}): {NOT_MEASURED}, it needs "
              f"{', '.join(n for n in (d.from_, d.via, d.to) if n in lacking[a])}"
              for d in f.decompose for a in plan.arches
              if a in lacking and any(n in lacking[a] for n in (d.from_, d.via, d.to))]
    sweeps = {label: {"flips": missing.flips.get(label, 0), "not_measured": list(left)}
              for label, left in missing.sweeps.items()}
    mode = next((r["mode"] for r in reports.values()), None) or next(
        (s["mode"] for s in result.sweeps.values()), None)
    return {"so_far": _so_far(missing, result.sweeps, len(plan.sweeps())), "mode": mode,
            "planned": missing.planned, "variants": missing.variants, "unbooted": missing.unbooted,
            "short": missing.short, "splits": splits, "sweeps": sweeps}


def _so_far(missing: Any, sweeps: dict[str, Any], planned_sweeps: int) -> str:
    """How much of the study the store holds: "3 of 4 variants, 0 of 1 sweeps (1 partly: ...)"."""
    total = sum(len(v) for v in missing.planned.values())
    unbooted = sum(len(v) for v in missing.unbooted.values())
    done = total - unbooted - sum(len(v) for v in missing.variants.values())
    words = f"{done} of {total} variants" + (f" ({unbooted} more built, not booted yet)" if unbooted else "")
    if planned_sweeps:
        whole = sum(1 for label in sweeps if not missing.sweeps.get(label))
        partly = [label for label in sweeps if missing.sweeps.get(label)]
        words += f", {whole} of {planned_sweeps} sweeps"
        if partly:
            flipped = sum(len(sweeps[label]["flips"]) for label in partly)
            words += (f" ({len(partly)} partly: {flipped} of {sum(missing.flips[label] for label in partly)} "
                      "options)")
    return words


def _summary_so_far(items: list[Any], lines: list[str], baseline: str, subject: str,
                    held: dict[str, Any]) -> list[str]:
    """Each summary line whose variants are not measured yet (on some arch) says so."""
    out = []
    for item, line in zip(items, lines, strict=True):
        pair = (item.subject or subject, item.against or baseline)
        where = [a for a, names in _lacking_by_arch(held).items() if any(n in names for n in pair)]
        if where and len(where) == len(held["planned"]):
            line = f"{item.says} ({pair[0]} against {pair[1]}): {NOT_MEASURED}"
        elif where:
            line += f"; {NOT_MEASURED} on {', '.join(where)}"
        out.append(line)
    return out


def _lacking_by_arch(held: dict[str, Any]) -> dict[str, set[str]]:
    """arch -> the variants a measured-only report has not all of (not built, or not booted)."""
    return {a: {*held["variants"].get(a, []), *held["unbooted"].get(a, [])} for a in held["planned"]}


def _support(reports: dict[str, dict[str, Any]]) -> list[str]:
    """Each kernel series measured, and who maintains it until when."""
    versions = {v["source_version"] for r in reports.values() for v in r["variants"] if v.get("source_version")}
    return sorted({lifecycle.status(v) for v in versions})


def _table_metrics(f: Any) -> list[str]:
    return list(dict.fromkeys(m for t in f.table for m in t.metrics))


def _from_dict(study: dict[str, Any], origin: str) -> dict[str, Any]:
    """A study's report (its every key checked by study-schema.json), each arch's read as an
    ordinary compare report (one of an earlier format judged as this kernellab judges).
    Format 1 as format 2: a sweep that did not say which workloads its probes ran names
    none (format 1 left them out where none ran; those of before it said nothing of them)."""
    for result in study["sweeps"].values():
        result.setdefault("workloads", [])
    for arch, report in study["reports"].items():
        study["reports"][arch] = kinds.read(report, f"{origin}, its report of {arch},", expect="compare")[1]
    return study


def _html(study: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML report
    return html.study_page(study, _markdown(study), _sweep_notes(study))


def _results(study: dict[str, Any], view: kinds.View) -> str:
    """The sweeps' option costs, to commit and cite: a results file (report/results.py)."""
    if not study["sweeps"]:
        raise LabError(f"study {study['study']}: this report has no sweep (the quick form never sweeps), so no "
                       "option costs to write: run the study's full form")
    from . import results
    from .costtable import RESULTS
    return RESULTS.dump(results.from_study(study))


def header(study: dict[str, Any]) -> list[str]:
    first = next(iter(study["reports"].values()), None)
    lines = [f"study {study['study']}: {study['title']}"]
    held = study.get("measured_only")
    if held is not None:
        lines.append(f"MEASURED SO FAR (a study stopped part-way): {held['so_far']}")
    if study["seed"]:
        lines.append(f"redoes: shared/reference/seeds/{study['seed']}")
    lines.append(f"question: {study['question']}")
    if study["left_out"]:
        form = "QUICK FORM" if study["quick"] else "PART OF THE STUDY"
        lines.append(f"{form}: it leaves out {'; '.join(study['left_out'])}")
    if study.get("changed"):
        lines.append(f"CHANGED FROM THE STUDY FILE: {'; '.join(study['changed'])}")
    if held is not None:
        lines.append("this report: built and booted nothing, every figure from the store; the study run "
                     "again (without --measured-only) measures the rest")
        lines += _missing_lines(held)
    else:
        lines.append(f"this run: {study['wall_s'] / 60:.1f} min, {study['builds']} kernel(s) built "
                     "(the rest from the cache), every run in the store")
    when = measured_when(list(study["reports"].values()))
    if when:
        lines.append(f"measured: {when}")
    if first is not None:
        lines.append(f"mode: {first['mode']} ({first['mode_note']})")
        lines.append(f"statistics: {first['statistics']}")
    for arch, report in study["reports"].items():
        runs = ", ".join(f"{n} {k}" for n, k in report["runs_per_variant"].items())
        lines.append(f"{arch}: runs per variant: {runs}")
        lines += [f"  target: {t}" for t in targets(report)]
        lines += [f"  {line}" for line in workload_lines(report)]
        for v in report["variants"]:
            b = v["build"]
            built = (f"Debian's prebuilt {v['prebuilt']}" if v.get("prebuilt") else
                     f"built with {b['compiler']}" if b else "not built")
            changes = "".join(f" + {c}" for c in v["fragments"] + v["options"])
            lines.append(f"  {v['name']}: {v['source']} ({v['source_version']}), base {v['base']}{changes}"
                         f", config {v['config_hash'][:12]}, {built}{_run_words(v)}")
            for r in v["runs"]:
                if r["status"] != "ok":
                    lines.append(f"    run {r['id']} {r['status']}: {r['reason']}")
    hidden = sorted({m for t in study["tables"] for m in t["metrics"] for r in study["reports"].values()
                     for x in r["metrics"] if x["name"] == m and not x["valid_in_mode"]})
    if hidden:
        lines.append(f"left out, meaningless in {first['mode'] if first else 'this'} mode: {', '.join(hidden)}")
    lines += [f"support: {line}" for line in study["support"]]
    lines.append(f"noise floor: {study['noise_floor']['origin']}")
    lines += [f"caveat: {c}" for c in study["caveats"]]
    lines += [f"not measured yet (the seed did): {n}" for n in study["not_yet"]]
    lines += [f"FAILED: {f}" for f in study["failures"]]
    return lines


def short_head(study: dict[str, Any], width: int) -> list[str]:
    """The header a screen shows (header() has it all: --verbose, every file): the study,
    what a reader must not miss of it as a whole, then how and where it was measured and
    which runs failed, as compare's short header says them of its arches' reports, and what
    its workload rows come from."""
    lines = [clip(f"study {study['study']}: {study['title']}", width)]
    notices = _notices(study)
    if notices:   # each cut to leave room for the next ones' count: none is lost unsaid
        room = width - len("attention: ") - len(" and 99 more")
        lines.append(fit_items("attention: ", [clip(n, room) for n in notices], width))
    if study["reports"]:
        lines += short_header(_as_one(study), width, verbose_hint=False)[1:]   # its first: a compare's what
    lines += _workloads(study)
    caveats = f"{len(study['caveats'])} caveat{'s' if len(study['caveats']) != 1 else ''}, " if study["caveats"] else ""
    lines.append(first_fitting([f"--verbose: the question, {caveats}how each variant was built and booted, "
                                "support, the statistics",
                                f"--verbose: {caveats}how each variant was built and booted, the statistics",
                                "--verbose: the whole header"], width))
    return lines


def _workloads(study: dict[str, Any]) -> list[str]:
    """What the workload rows' figures come from, a line each (wrapped, not cut: the
    command line is what it says), named with their arch where there are several."""
    several = len(study["reports"]) > 1
    return list(dict.fromkeys(f"{arch}: {line}" if several else line for arch, report in study["reports"].items()
                              for line in workload_lines(report)))


def _notices(study: dict[str, Any]) -> list[str]:
    """What of the study as a whole a reader must not miss, a few words each (header()
    says each in full): measured so far, a part of the study, changed, failed."""
    held = study.get("measured_only")
    out = [f"measured so far: {held['so_far']}"] if held is not None else []
    if study["left_out"]:
        form = "the quick form" if study["quick"] else "part of the study"
        out.append(f"{form}, {len(study['left_out'])} thing{'s' if len(study['left_out']) != 1 else ''} left out")
    out += [f"changed: {c}" for c in study.get("changed", [])]
    return out + [f"failed: {f}" for f in study["failures"]]


def _as_one(study: dict[str, Any]) -> dict[str, Any]:
    """The arches' reports as one compare report, for short_header: every variant's runs
    (named with their arch where there are several), the first report's mode and machine."""
    reports = study["reports"]
    several = len(reports) > 1

    def named(name: str, arch: str) -> str:
        return f"{name} on {arch}" if several else name
    variants = [{**v, "name": named(v["name"], arch)} for arch, r in reports.items() for v in r["variants"]]
    runs = {named(n, arch): k for arch, r in reports.items() for n, k in r["runs_per_variant"].items()}
    return {**next(iter(reports.values())), "variants": variants, "runs_per_variant": runs}


def _missing_lines(held: dict[str, Any]) -> list[str]:
    """Each thing a measured-only report lacks, once."""
    lines = [f"{NOT_MEASURED} on {a}: {', '.join(names)}" for a, names in held["variants"].items()]
    lines += [f"built, not booted yet on {a}: {', '.join(names)}" for a, names in held["unbooted"].items()]
    lines += [f"fewer runs than the study asks: {s}" for s in held["short"]]
    return lines + list(held["splits"])


def _run_words(v: dict[str, Any]) -> str:
    """How a variant's runs differ from its kernel's defaults: boot words and the machine."""
    words = [*v["boot_args"], *(f"sysctl {k}={val}" for k, val in v["sysctls"].items())]
    words += [f"{v[k]} {what}" for k, what in (("vcpus", "vCPUs"), ("devices", "extra devices")) if v.get(k)]
    words += [f"fs {v['fs']}"] if v.get("fs") else []
    return f"; runs with {', '.join(words)}" if words else ""


def _variant_names(study: dict[str, Any]) -> list[str]:
    """The tables' columns: each variant measured; in a measured-only report each the study has."""
    held = study.get("measured_only")
    names: dict[str, None] = {}
    for variants in held["planned"].values() if held is not None else ():
        names.update(dict.fromkeys(variants))
    for report in study["reports"].values():
        for v in report["variants"]:
            names.setdefault(v["name"], None)
    return list(names)


# Every column and every cell's spread: a file's tables, the Markdown's.
WHOLE = Shape()


def section_head(study: dict[str, Any], shape: Shape = WHOLE) -> list[str]:
    """The columns of the seed's table: the variants whose values `shape` shows, then each Δ."""
    names = _variant_names(study)
    return ["metric", "arch", "unit", *names[:shape.values or len(names)], *(f"Δ {n}" for n in names[1:])]


def section_rows(study: dict[str, Any], metrics: list[str], shape: Shape = WHOLE) -> list[list[str]]:
    """Rows of one section of the seed's table: a metric on each arch, each variant's
    cell, then each variant's Δ against the baseline (what of them `shape` shows). In a
    measured-only report every row the study will have, each cell it has not measured yet
    marked so."""
    names = _variant_names(study)
    shown = names[:shape.values or len(names)]
    held = study.get("measured_only")
    lacking = _lacking_by_arch(held) if held is not None else {}
    rows = []
    for metric in metrics:
        for arch in study["arches"] if held is not None else study["reports"]:
            report = study["reports"].get(arch)
            mode = report["mode"] if report else held["mode"] if held is not None else None
            m = next((x for x in report["metrics"] if x["name"] == metric), None) if report else None
            if m is not None and not m["valid_in_mode"]:
                continue
            if m is not None and any(m["values"].get(n) for n in names):
                rows.append(_row(m, arch, mode, (names, shown), lacking.get(arch, set()), shape))
            elif held is not None and lacking[arch] and _valid(metric, mode):
                info = describe(metric, "")
                rows.append([info.label, arch, _unit({"name": metric, "unit": info.unit}, mode),
                             *(NOT_MEASURED if n in lacking[arch] else "-" for n in shown), *("" for _ in names[1:])])
    return rows


def _row(m: dict[str, Any], arch: str, mode: str | None, columns: tuple[list[str], list[str]], lacking: set[str],
         shape: Shape) -> list[str]:
    """A metric's row on one arch: a cell not measured yet is marked, and has no Δ.
    `columns`: every variant (each has a Δ), and those whose values are shown."""
    names, shown = columns

    def unmeasured(n: str) -> bool:
        return n in lacking and not m["values"].get(n)
    return [m["label"], arch, _unit(m, mode),
            *(NOT_MEASURED if unmeasured(n) else fmt_cell(m["values"].get(n), m["unit"], shape.spreads) for n in shown),
            *("" if unmeasured(n) or unmeasured(names[0]) else conclusion.delta_text(m, n, shape.intervals)
              for n in names[1:])]


def _unit(m: dict[str, Any], mode: str | None) -> str:
    """A row's unit as every view shows it (display_unit: "ns (icount)"); as written where
    nothing of its arch was measured yet to say the mode."""
    return display_unit(m, mode) if mode else str(m["unit"])


def _arch_mode(study: dict[str, Any], arch: str) -> str | None:
    report = study["reports"].get(arch)
    return report["mode"] if report else None


def _valid(metric: str, mode: str | None) -> bool:
    return mode is None or describe(metric, "").valid_in(mode)


def _split_rows(study: dict[str, Any], split: dict[str, Any]) -> list[list[str]]:
    mode = _arch_mode(study, split["arch"])
    return [[r["label"], _unit({"name": r["metric"], "unit": r["unit"]}, mode), fmt_value(r["from"], r["unit"]),
             fmt_value(r["via"], r["unit"]), fmt_value(r["to"], r["unit"]), f"{r['total_pct']:+.1f}%",
             f"{r['code_pct']:+.1f}%", f"{r['config_pct']:+.1f}%"] for r in split["rows"]]


def _split_head(split: dict[str, Any]) -> list[str]:
    return ["metric", "unit", split["from"], split["via"], split["to"], f"Δ {split['to']}",
            "of it: code", "of it: config"]


def _split_title(split: dict[str, Any]) -> str:
    return (f"{split['arch']}: code or configuration? {split['via']} is {split['to']}'s code with "
            f"{split['from']}'s configuration; the parts add up to the total, in % of {split['from']}")


def _sweep_lines(study: dict[str, Any]) -> list[str]:
    from .sweep import sweep_text
    out = []
    for label, result in study["sweeps"].items():
        out.append(f"sweep on {label}: one option at a time, as the seed did by hand")
        out += _rules_line(result)
        out.append(sweep_text(result))
        out += _flips_not_measured(study, label)
    for label, info in _held_sweeps(study).items():
        if label not in study["sweeps"]:
            out.append(f"sweep on {label}: {_nothing_measured(info)}")
    return out


def _sweep_notes(study: dict[str, Any]) -> dict[str, list[str]]:
    """By each sweep's label, what the study's page says of it beside its figures, in the
    text report's words: the workloads its probes ran, the rules that chose its options, the
    flips not measured yet; of a sweep of which nothing is measured yet, that."""
    from .sweep import workload_lines as sweep_workloads
    notes = {label: [*sweep_workloads(result), *_rules_line(result), *_flips_not_measured(study, label)]
             for label, result in study["sweeps"].items()}
    return notes | {label: [_nothing_measured(info)] for label, info in _held_sweeps(study).items()
                    if label not in study["sweeps"]}


def _rules_line(result: dict[str, Any]) -> list[str]:
    """Which options a sweep flipped when the audit's rules chose them (none: every differing one)."""
    if not result.get("rules"):
        return []
    return [f"the options the audit's rules of {', '.join(result['rules'])} name; "
            f"{result['left_out']} other differing option(s) not flipped"]


def _held_sweeps(study: dict[str, Any]) -> dict[str, Any]:
    """A measured-only report's sweeps: label -> the options planned, the probes not measured yet."""
    held: dict[str, Any] = study.get("measured_only", {}).get("sweeps", {})
    return held


def _flips_not_measured(study: dict[str, Any], label: str) -> list[str]:
    """The flips of a sweep measured in part that a measured-only report lacks."""
    info = _held_sweeps(study).get(label, {})
    left = info.get("not_measured")
    return [f"{NOT_MEASURED} on {label}: {len(left)} of {info['flips']} options: {', '.join(left)}"] if left else []


def _nothing_measured(info: dict[str, Any]) -> str:
    return f"{NOT_MEASURED}: {', '.join(info['not_measured'])}"


def _legend(study: dict[str, Any]) -> list[str]:
    """What the marks of the tables' Δ columns say (each cell's verdict), when there are any."""
    return [conclusion.DELTA_LEGEND] if study["tables"] and len(_variant_names(study)) > 1 else []


def _terminal(study: dict[str, Any], view: kinds.View) -> str:
    screen = view.screen
    shape = _fit(study, screen.width) if screen.width else WHOLE
    width = screen.width or FULL_WIDTH
    console = Console(record=True, width=width, file=io.StringIO())   # renders; never writes stdout
    fitted = bool(screen.width) and not view.verbose
    with console.capture() as capture:
        for line in short_head(study, width) if fitted else header(study):
            _say(console, line, screen)
        for t in study["tables"]:
            rows = section_rows(study, t["metrics"], shape)
            console.print(_table(t["title"], section_head(study, shape), rows, 3, screen, shape.label_width))
        names = _variant_names(study)
        mode = next((r["mode"] for r in study["reports"].values()), None)
        for line in [*_legend(study), *left_out({"mode": mode}, shape, names, screen.width),
                     *_unavailable(study, names[:shape.values or len(names)], shape, width)]:
            _say(console, line, screen)
        for split in study["decomposition"]:
            head, rows = _split_head(split), _split_rows(study, split)
            if screen.width and _width(head, rows)[0] > screen.width:   # the percentages say the split
                head, rows = [head[0], *head[5:]], [[row[0], *row[5:]] for row in rows]
                _say(console, f"left out to fit {screen.width} columns: the split's values (its % shown)", screen)
            console.print(_table(_split_title(split), head, rows, 1 if len(head) < 8 else 2, screen))
        if study["per_device"]:
            console.print(_table(perdevice.TITLE, perdevice.HEAD, _per_device_rows(study), 4, screen))
        for line in _sweep_lines(study):   # laid out by report/sweep.py: as it is, never re-wrapped
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        console.print("Summary", style="bold")
        for line in study["summary"]:
            _say(console, f"  • {line}", screen)
    return capture.get()


def _say(console: Console, line: str, screen: Screen) -> None:
    """A line of words: on a screen wrapped at its width (between words), in a file whole."""
    console.print(line, highlight=False, markup=False, soft_wrap=not screen.width)


def _table(title: str, head: list[str], rows: list[list[str]], left: int, screen: Screen,
           label_width: int | None = None) -> Table:
    """One of the report's tables: its first `left` columns (names) left-aligned. On a
    screen rows never wrap: a long header folds (after a hyphen or a space) to its
    column's cells, labels are shortened to `label_width` (else to what the width leaves
    them), what still does not fit is cut by rich."""
    fitted = bool(screen.width)
    if fitted and label_width is None:
        label_width = _label_room(head, rows, screen.width or 0)
    # Cells are rich markup: the report's words are escaped ("[/]" in a name).
    table = Table(title=escape(title), title_justify="left", box=box.MINIMAL if fitted else box.HEAVY_HEAD,
                  show_edge=not fitted, pad_edge=not fitted)
    for i, col in enumerate(head):
        cells = [row[i] for row in rows]
        shown = fold_header(col, max(map(cell_len, cells), default=0)) if fitted and i else col
        table.add_column(escape(shown), justify="left" if i < left else "right", no_wrap=fitted,
                         overflow="ellipsis" if i == 0 else "fold")
    labels = shortened([row[0] for row in rows], label_width)
    for label, row in zip(labels, rows, strict=True):
        table.add_row(escape(label), *map(escape, row[1:]))
    return table


def _width(head: list[str], rows: list[list[str]]) -> tuple[int, int]:
    """A fitted table's width (each header folded: fold_header), and its label column's."""
    widths = [max(max((cell_len(cell) for cell in column[1:]), default=0),
                  max(cell_len(p.rstrip()) for p in header_pieces(column[0])) if i else cell_len(column[0]))
              for i, column in enumerate(zip(head, *rows, strict=True))]
    return sum(widths) + GAP * (len(widths) - 1), widths[0]


def _label_room(head: list[str], rows: list[list[str]], width: int) -> int | None:
    """The label width that lets a table fit `width` (None: it fits whole)."""
    if not rows:
        return None
    needed, label = _width(head, rows)
    return None if needed <= width else max(label - (needed - width), LABEL_MIN)


def _fit(study: dict[str, Any], width: int) -> Shape:
    """The shape of the seed's tables (one for all, so that they read alike) for `width`."""
    def widths(shape: Shape) -> tuple[int, int]:
        rows = [row for t in study["tables"] for row in section_rows(study, t["metrics"], shape)]
        return _width(section_head(study, shape), rows) if rows else (0, 0)
    return fit_shape(widths, len(_variant_names(study)), width)


def _unavailable(study: dict[str, Any], shown: list[str], shape: Shape, width: int) -> list[str]:
    """Why the cells that say only "n/a" are not available (their reasons left out to fit)."""
    wanted = {m for t in study["tables"] for m in t["metrics"]}
    lines = [line for report in study["reports"].values()
             for line in unavailable([m for m in report["metrics"] if m["name"] in wanted], shown, shape, width)]
    return list(dict.fromkeys(lines))


def _per_device_rows(study: dict[str, Any]) -> list[list[str]]:
    rows = perdevice.table_rows(study["per_device"])
    return [[row[0], row[1], _unit({"name": r["metric"], "unit": r["unit"]}, _arch_mode(study, r["arch"])), *row[3:]]
            for row, r in zip(rows, study["per_device"], strict=True)]


def _markdown(study: dict[str, Any]) -> str:
    lines = [f"### Study {study['study']}: {study['title']}", ""] + [f"- {h}" for h in header(study)] + [""]
    for t in study["tables"]:
        lines += [f"#### {t['title']}", ""]
        lines += md_table(section_head(study), section_rows(study, t["metrics"])) + [""]
    lines += [*_legend(study), ""] if _legend(study) else []
    for split in study["decomposition"]:
        lines += [f"#### {_split_title(split)}", ""] + md_table(_split_head(split), _split_rows(study, split)) + [""]
    if study["per_device"]:
        lines += [f"#### {perdevice.TITLE}", ""]
        lines += md_table(perdevice.HEAD, _per_device_rows(study)) + [""]
    sweep = _sweep_lines(study)
    if sweep:
        lines += ["```", *sweep, "```", ""]
    lines += ["#### Summary", ""] + [f"- {line}" for line in study["summary"]]
    return "\n".join(lines) + "\n"


STUDY = kinds.register(kinds.Kind(
    name="study", tag="kernellab-study", what="a study report", version=2, readable=(1, 2),
    schema="study-schema.json", rewrite="run the study again (its builds and runs are in the store)",
    renderers={"table": _terminal, "markdown": lambda study, view: _markdown(study),
               "html": _html, "results": _results},
    formats=("table", "markdown", "json", "html", "results"), from_dict=_from_dict))
