"""Views of a comparison report: terminal table, Markdown, CSV, JSON."""

from __future__ import annotations

import csv
import io
from typing import Any

from .. import modes
from ..guest import vulnerabilities
from ..guest.workloads import Provenance
from ..metrics.catalog import describe
from .model import measured_when, most_vcpus
from .terminal import FULL_SCREEN, Screen

TOP_INITCALLS = 10
# Below this many samples a cell shows its range: there are no quartiles to speak of.
FEW_SAMPLES = 5
# Details of a target that change run to run (a real machine's load): in the JSON, not in
# the header's one line per target.
PER_RUN_DETAILS = ("loadavg", "loadavg_after")


# Units of things counted: a whole number of them prints as one ("77" devices, not "77.0").
COUNTED_UNITS = ("count", "MiB", "irq/s")
# Units of a time, or of something per unit of time.
TIME_UNITS = ("ns", "us", "ms", "s")


def fmt_value(value: float, unit: str) -> str:
    if unit in ("KiB", "us") or (unit in COUNTED_UNITS and value == int(value)):
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}"


def fmt_cell(v: dict[str, Any] | None, unit: str, spreads: bool = True) -> str:
    """A cell: its median and, with `spreads`, how far its samples lie apart and how many,
    or why it is not available (without `spreads`, "n/a" alone: the reason said elsewhere)."""
    if v is None:
        return "-"
    if "not_available" in v:
        return f"n/a: {v['not_available']}" if spreads else "n/a"
    text = fmt_value(v["median"], unit)
    if not spreads:
        return text
    if "min" in v and (1 < v["n"] < FEW_SAMPLES or (v["n"] > 1 and not v["median"])):
        # Quartiles of three samples are interpolations between them: one repeat out of
        # line made a half-IQR of +-59,000% that nobody could read. The range says it, as
        # it does where a median of 0 leaves no percentage.
        text += f" ({fmt_value(v['min'], unit)}..{fmt_value(v['max'], unit)}) n={v['n']}"
    elif v["n"] > 1:
        spread = 50.0 * (v["q3"] - v["q1"]) / abs(v["median"]) if v["median"] else 0.0
        text += f" ±{spread:.1f}% n={v['n']}"
    return text


def display_unit(m: dict[str, Any], mode: str) -> str:
    """A metric's unit as a view shows it. A time (or a rate per time) on the guest's clock
    in a deterministic mode counts instructions: "ns (icount)", so that nobody reads an
    emulated figure as a hardware time. Host-clock rows keep real seconds."""
    unit: str = m["unit"]
    timed = unit in TIME_UNITS or unit.endswith("/s")
    clock = m.get("clock") or describe(m["name"], unit).clock
    if timed and clock == "guest" and modes.get(mode).deterministic:
        return f"{unit} ({mode})"
    return unit


def md_table(head: list[str], rows: list[list[str]], left: int = 3, notes: int = 0) -> list[str]:
    """A Markdown table: the figures right-aligned, its first `left` columns (names) and its
    last `notes` columns (words) left."""
    words = set(range(left)) | set(range(len(head) - notes, len(head)))
    rule = "|" + "|".join("---" if i in words else "---:" for i in range(len(head))) + "|"
    out = ["| " + " | ".join(head) + " |", rule]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def targets(report: dict[str, Any]) -> list[str]:
    """Each distinct target the runs were measured on, as one line."""
    seen: dict[str, None] = {}
    for v in report["variants"]:
        for r in v["runs"]:
            t = r.get("target")
            if t:
                details = ", ".join(f"{k} {_short(str(val))}" for k, val in t.get("details", {}).items()
                                    if k not in PER_RUN_DETAILS)
                seen.setdefault(f"{t['label']} ({details})" if details else t["label"], None)
    return list(seen) or ["none (build only)"]


def cpu_flaws(report: dict[str, Any]) -> list[str]:
    """What the kernels said of the CPU's speculation flaws, one line per distinct answer
    with the variants that gave it: a mitigation on a CPU 'not affected' never ran, unless
    a boot word forced it on (said)."""
    seen: dict[str, list[str]] = {}
    for v in report["variants"]:
        forced = vulnerabilities.forced_unreported(v.get("boot_args") or [])
        for text in dict.fromkeys(vulnerabilities.summary(r["vulnerabilities"]) for r in v["runs"]
                                  if r.get("vulnerabilities")):
            seen.setdefault(f"{text}; {forced}" if forced else text, []).append(v["name"])
    return [f"CPU flaws as {', '.join(names)} saw them: {text}" for text, names in seen.items()]


def _short(text: str, limit: int = 72) -> str:
    """A long detail (a kernel command line) cut for the header; JSON keeps it whole."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def header_lines(report: dict[str, Any]) -> list[str]:
    m = report["machine"]
    runs = ", ".join(f"{name} {n}" for name, n in report["runs_per_variant"].items())
    lines = [f"experiment: {report['experiment']}" + (f" - {report['description']}" if report["description"] else ""),
             f"mode: {report['mode']} ({report['mode_note']})",
             *only_lines(report),
             f"runs: {runs}; statistics: {report['statistics']}",
             *([f"measured: {when}"] if (when := measured_when([report])) else []),
             *([f"noise floor: {report['noise_floor']['origin']}"] if report.get("noise_floor") else []),
             f"measured on: {m['host']}, {m['cpu']}, {m['cores']} cores, host kernel {m['kernel']}",
             *(f"target: {t}" for t in targets(report)),
             *cpu_flaws(report)]
    for v in report["variants"]:
        b = v["build"]
        head = (f"variant {v['name']}: {v['source']} ({v['source_version']}) {v['arch']} "
                f"base={v['base']} fragments={'+'.join(v['fragments'] + v['options']) or '-'} "
                f"config {v['config_hash'][:12]}; ")
        if v.get("prebuilt"):
            lines.append(head + f"not built: Debian's prebuilt {v['prebuilt']}")
        elif b is None:
            lines.append(head + "not built: the kernel the machine runs")
        else:
            lines.append(head + f"built -j{b['jobs']} with {b['compiler']}" + _warmth(b))
        boot = v["boot_args"] + [f"sysctl {k}={val}" for k, val in v["sysctls"].items()]
        if v.get("vcpus"):
            boot.append(f"{v['vcpus']} vCPUs")
        if v.get("fs"):
            boot.append(f"scratch file system {v['fs']}")
        if v.get("devices"):
            boot.append(f"{v['devices']} extra devices")
        if boot:
            lines.append(f"  boot parameters and sysctls: {' '.join(boot)}")
        if v.get("note"):
            lines.append(f"  {v['note']}")
        if v.get("build_only"):
            lines.append(f"  {v['build_only_note']} (build and size rows only)")
        for d in v["dropped_options"]:
            lines.append(f"  dropped by olddefconfig: asked {d['option']}={d['asked']}, got {d['got']}"
                         + (f": {d['why']}" if d.get("why") else ""))
        for r in v["runs"]:
            if r["status"] != "ok":
                lines.append(f"  run {r['id']} {r['status']}: {r['reason']}")
    lines.append(f"cells: median; with n >= {FEW_SAMPLES}, ± is half the interquartile range as % of the median, "
                 f"with 1 < n < {FEW_SAMPLES} (min..max) the range. "
                 "host-time rows are real seconds even in icount mode.")
    return lines


def only_lines(report: dict[str, Any]) -> list[str]:
    """What a report of some metrics only (compare --metric) says of how it was obtained:
    a reader must not take it for the whole suite, nor its boot rows for a full boot's."""
    if not report.get("only_metrics"):
        return []
    return [f"only the metrics asked: {', '.join(report['only_metrics'])} (booted with {report['only_words']}); "
            "build, size and boot rows as always"]


# -- the header on a screen: what was compared, how, where, in a few lines -------------

def short_header(report: dict[str, Any], width: int, verbose_hint: bool = True) -> list[str]:
    """The header a screen shows (header_lines has it all: --verbose, every file): what
    was compared, how, where, and what went wrong, a line each that fits `width`."""
    only = report.get("only_metrics")
    lines = [_what(report, width), _how(report, width),
             *([fit_items("only the metrics asked: ", only, width, "; build, size and boot rows too")] if only else []),
             _where(report, width)]
    trouble = _trouble(report)
    if trouble:
        lines.append(fit_items("attention: ", trouble, width))
    if verbose_hint:
        lines.append(clip("--verbose: how each variant was built and booted, CPU flaws, the statistics", width))
    return lines


def _what(report: dict[str, Any], width: int) -> str:
    names = [v["name"] for v in report["variants"]]
    who = f"{', '.join(names[1:])} against {names[0]}" if len(names) > 1 else names[0]
    kernels = ", ".join(dict.fromkeys(f"Linux {v['source_version']} {v['arch']}" for v in report["variants"]))
    head = report["experiment"]
    said = [f"{head}: {report['description']} ({kernels})", f"{head}: {report['description']}"] \
        if report["description"] else []
    return first_fitting([*said, f"{head}: {who} ({kernels})", f"{head}: {who}"], width)


def _how(report: dict[str, Any], width: int) -> str:
    per = report["runs_per_variant"]
    counts = set(per.values())
    runs = (f"{counts.pop()} run{'s' if max(per.values()) != 1 else ''} each" if len(counts) == 1
            else "runs " + ", ".join(f"{name} {n}" for name, n in per.items()))
    note = report["mode_note"]
    if note.startswith("MIXED TARGETS"):   # never cut: figures of different kinds side by side
        return clip(f"{note}; {runs}", width)
    mode = modes.get(report["mode"])
    return first_fitting([f"{report['mode']} mode, {runs}: {note}",
                          *(f"{summary}, {runs}" for summary in _shorter(mode.summary))], width)


def _shorter(text: str) -> list[str]:
    """`text`, then without its last clauses one by one ("a (b, c; d)" -> "a (b, c)" -> "a (b)")."""
    out = [text]
    inner = text.endswith(")") and "(" in text
    body = text[:-1] if inner else text
    while any(sep in body for sep in ("; ", ", ")):
        body = body[:max(body.rfind("; "), body.rfind(", "))]
        out.append(body + (")" if inner and "(" in body else ""))
    return out


def _where(report: dict[str, Any], width: int) -> str:
    m = report["machine"]
    labels = ", ".join(dict.fromkeys(r["target"]["label"] for v in report["variants"] for r in v["runs"]
                                     if r.get("target")) or ["none (build only)"])
    started = sorted(r["started"] for v in report["variants"] for r in v["runs"] if r.get("started"))
    when = [f"{measured_when([report])} ", f"{started[0][:10]} {started[0][11:16]} UTC "] if started else [""]
    machine = [f"{m['host']} ({m['cpu']}, {m['cores']} cores)", m["host"]]
    return first_fitting([f"measured {w}on {on}, target {labels}" for w in when for on in machine]
                         + [f"on {m['host']}, target {labels}"], width)


def _trouble(report: dict[str, Any]) -> list[str]:
    """What a reader must not miss: failed runs, options the kernel would not take."""
    out = [f"{v['name']} run {r['id']} {r['status']}" for v in report["variants"] for r in v["runs"]
           if r["status"] != "ok"]
    out += [f"{v['name']} asked {d['option']}={d['asked']}, got {d['got']}" for v in report["variants"]
            for d in v["dropped_options"]]
    return out


def first_fitting(candidates: list[str], width: int) -> str:
    """The first of `candidates` (most said first) that fits `width`; the last one cut."""
    return next((c for c in candidates if len(c) <= width), clip(candidates[-1], width))


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def fit_items(head: str, items: list[str], width: int | None, tail: str = "") -> str:
    """`head`, as many of `items` as fit `width` (None: all) in their order, "and N more"
    for those left out, and `tail`: a line that says where it stops."""
    if width is None:
        return head + ", ".join(items) + tail
    for shown in range(len(items), 0, -1):
        more = len(items) - shown
        text = head + ", ".join(items[:shown]) + (f" and {more} more" if more else "") + tail
        if len(text) <= width:
            return text
    return clip(f"{head}{len(items)} rows{tail}", width)


def short_footer(report: dict[str, Any], width: int) -> list[str]:
    """footer_lines on a screen: the rows left out, counted (--verbose names them)."""
    hidden = [m for m in report["metrics"] if not m["valid_in_mode"]]
    if not hidden:
        return []
    said = f"not shown: {len(hidden)} rows meaningless in {report['mode']} mode"
    return [first_fitting([f"{said} (measured, kept in JSON/CSV; --verbose names them)",
                           f"{said} (--verbose names them)", said], width)]


def _warmth(b: dict[str, Any]) -> str:
    if b.get("cold"):
        return ", from scratch without ccache (timed cold)"
    return f", ccache {b['ccache_hit_pct']:.0f}% hits" if b.get("ccache_hit_pct") is not None else ""


def footer_lines(report: dict[str, Any]) -> list[str]:
    hidden = [m["name"] for m in report["metrics"] if not m["valid_in_mode"]]
    # Meaningful in the mode, not with this many vCPUs (the catalog's icount_max_vcpus).
    smp = [m for m in hidden if describe(m, "").valid_in(report["mode"])]
    lines = size_lines(report)
    if len(hidden) > len(smp):
        lines.append(f"not shown, meaningless in {report['mode']} mode (measured, kept in JSON/CSV): "
                     f"{', '.join(m for m in hidden if m not in smp)}")
    if smp:
        vcpus = most_vcpus(v.get("vcpus") for v in report["variants"])
        lines.append(f"not shown, meaningless in {report['mode']} mode with {vcpus} vCPUs (measured, kept in "
                     f"JSON/CSV): {', '.join(smp)}")
    return lines


def workloads_head(report: dict[str, Any]) -> str:
    """The heading of a compare report's workload lines (workload_lines)."""
    return (f"workloads ({report['mode']} mode): the program, its version and Debian package, where it ran, "
            "its command line")


def workload_lines(report: dict[str, Any]) -> list[str]:
    """A line per workload the report's runs ran (Provenance.line, the wording sweep and
    bisect use too; a workload without fixed work says there that icount does not reproduce
    its figures, and why), said once for all its runs; a workload that some runs ran otherwise
    (another version, another target) has a line per way, each after the runs it holds for.
    None for a report without workloads."""
    ways: dict[str, dict[str, dict[str, list[int]]]] = {}   # label -> line -> variant -> its runs' ids
    for v in report["variants"]:
        for r in v["runs"]:
            for w in r.get("workloads", []):
                line = Provenance.from_dict(w["provenance"]).line()
                ways.setdefault(w["label"], {}).setdefault(line, {}).setdefault(v["name"], []).append(r["id"])
    lines = []
    for by_line in ways.values():
        if len(by_line) == 1:
            lines += list(by_line)
            continue
        ran: dict[str, list[int]] = {}   # variant -> the ids of its runs that ran the workload at all
        for runs in by_line.values():
            for name, ids in runs.items():
                ran.setdefault(name, []).extend(ids)
        lines += [f"in {_runs_named(runs, ran)}: {line}" for line, runs in by_line.items()]
    return lines


def _runs_named(runs: dict[str, list[int]], ran: dict[str, list[int]]) -> str:
    """`runs` in words: a variant by its name where they are all of its runs that ran the
    workload, else the variant's runs by id."""
    said = [f"variant {name}" if len(ids) == len(ran[name])
            else f"variant {name}'s run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"
            for name, ids in runs.items()]
    return " and ".join(said)


SIZE_ROWS = 5


def size_lines(report: dict[str, Any]) -> list[str]:
    """Where the size went, in a few lines: the directories and symbols that moved most
    (`kernellab size` and the JSON have the rest)."""
    size = report.get("size")
    if not size:
        return []
    lines = []
    for name, c in size["changes"].items():
        dirs = ", ".join(f"{r['dir']} {r['delta']:+,}" for r in c["dirs"][:SIZE_ROWS] if r["delta"])
        syms = ", ".join(f"{r['name']} {r['delta']:+,}" for r in c["symbols"][:SIZE_ROWS])
        code = c["sections"]["code"]
        lines.append(f"size, {name} against {size['baseline']} (bytes): code symbols "
                     f"{code['after'] - code['before']:+,}" + (f"; by directory: {dirs}" if dirs else "")
                     + (f"; symbols: {syms}" if syms else ""))
    return lines


def shown_metrics(report: dict[str, Any], show_all: bool) -> list[dict[str, Any]]:
    """The rows of a table: every metric valid in the mode; uncatalogued meminfo fields and
    all but the slowest initcalls only with show_all."""
    metrics: list[dict[str, Any]] = report["metrics"]
    if show_all:
        return metrics
    first = report["variants"][0]["name"]
    initcalls = [m for m in report["metrics"] if m["group"] == "initcalls"]
    slowest = {m["name"] for m in sorted(initcalls, key=lambda m: -m["values"].get(first, {}).get("median", 0))
               [:TOP_INITCALLS]}
    return [m for m in report["metrics"]
            if m["valid_in_mode"] and m["group"] != "other"
            and not (m["name"].startswith("meminfo.") and m["label"] == m["name"])
            and (m["group"] != "initcalls" or m["name"] in slowest)]


def render(report: dict[str, Any], fmt: str, show_all: bool = False, screen: Screen = FULL_SCREEN,
           verbose: bool = False) -> str:
    """A compare report in `fmt`. The table fits `screen` (the default: the full width, as
    a file is written); Markdown, CSV and JSON always have everything."""
    if fmt == "json":   # as every result is written: with its kind and version (report/kinds.py)
        from .compare import COMPARE
        return COMPARE.dump(report)
    if fmt == "csv":
        return _csv(report)
    if fmt == "markdown":
        return _markdown(report, show_all)
    from .table import table_text
    return table_text(report, show_all, screen, verbose)


def _csv(report: dict[str, Any]) -> str:
    """One row per metric and variant; verdict and reason: the cell's verdict as the report
    holds it (report.model.judge), empty for the first variant."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["metric", "unit", "better", "mode", "valid_in_mode", "variant", "median", "n", "q1", "q3",
                "min", "max", "not_available", "delta_pct", "ci_low_pct", "ci_high_pct", "p_adjusted", "significant",
                "verdict", "reason"])
    for m in report["metrics"]:
        for variant, v in m["values"].items():
            c = m["comparison"].get(variant, {})
            said = m.get("verdict", {}).get(variant, {})
            w.writerow([m["name"], m["unit"], m["better"], report["mode"], m["valid_in_mode"], variant,
                        v.get("median", ""), v.get("n", ""), v.get("q1", ""), v.get("q3", ""), v.get("min", ""),
                        v.get("max", ""), v.get("not_available", ""), m["delta_pct"].get(variant, ""),
                        c.get("ci_low_pct", ""), c.get("ci_high_pct", ""), c.get("adjusted_p", ""),
                        c.get("significant", ""), said.get("kind", ""), said.get("reason", "")])
    return out.getvalue()


def _markdown(report: dict[str, Any], show_all: bool) -> str:
    # conclusion reads this package's views (shown_metrics): imported here, not at the top.
    from .conclusion import DELTA_LEGEND, delta_text, summary
    names = [v["name"] for v in report["variants"]]
    lines = [f"### {report['experiment']}", ""] + [f"- {h}" for h in header_lines(report)] + [""]
    head = ["metric", "unit"] + names + [f"Δ {n}" for n in names[1:]]
    rows = [[m["label"], display_unit(m, report["mode"]), *(fmt_cell(m["values"].get(n), m["unit"]) for n in names),
             *(delta_text(m, n) for n in names[1:])] for m in shown_metrics(report, show_all)]
    lines += md_table(head, rows, left=2)
    legend = [DELTA_LEGEND] if len(names) > 1 else []
    lines += [""] + legend + footer_lines(report) + _markdown_workloads(report) + ["", summary(report)]
    return "\n".join(lines) + "\n"


def _markdown_workloads(report: dict[str, Any]) -> list[str]:
    lines = workload_lines(report)
    return ["", f"{workloads_head(report)}:", "", *(f"- {line}" for line in lines)] if lines else []
