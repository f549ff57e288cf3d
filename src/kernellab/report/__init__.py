"""Views of a comparison report: terminal table, Markdown, CSV, JSON."""

from __future__ import annotations

import csv
import io
import json

FORMATS = ("table", "markdown", "json", "csv")


def fmt_value(value: float, unit: str) -> str:
    if unit == "KiB":
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}"


def fmt_cell(v: dict | None, unit: str) -> str:
    if v is None:
        return "-"
    text = fmt_value(v["median"], unit)
    if v["n"] > 1:
        spread = 50.0 * (v["q3"] - v["q1"]) / abs(v["median"]) if v["median"] else 0.0
        text += f" ±{spread:.1f}% n={v['n']}"
    return text


def fmt_delta(delta: float | None) -> str:
    return "-" if delta is None else f"{delta:+.1f}%"


def header_lines(report: dict) -> list[str]:
    m = report["machine"]
    runs = report["runs_per_variant"]
    lines = [f"experiment: {report['experiment']}" + (f" - {report['description']}" if report["description"] else ""),
             f"mode: {report['mode']} ({report['mode_note']})",
             f"runs per variant: {runs}" + (" (icount reruns are identical)" if report["mode"] == "icount" else ""),
             f"measured on: {m['host']}, {m['cpu']}, {m['cores']} cores, host kernel {m['kernel']}, {m['qemu']}"]
    for v in report["variants"]:
        b = v["build"]
        lines.append(f"variant {v['name']}: {v['source']} ({v['source_version']}) {v['arch']} "
                     f"base={v['base']} fragments={'+'.join(v['fragments'] + v['options']) or '-'} "
                     f"config {v['config_hash'][:12]}; built -j{b['jobs']} with {b['compiler']}"
                     + (f", ccache {b['ccache_hit_pct']:.0f}% hits" if b.get("ccache_hit_pct") is not None else ""))
        for d in v["dropped_options"]:
            lines.append(f"  dropped by olddefconfig: asked {d['option']}={d['asked']}, got {d['got']}")
        failed = [r for r in v["runs"] if r["status"] != "ok"]
        for r in failed:
            lines.append(f"  run {r['id']} {r['status']}: {r['reason']}")
    lines.append("cells: median; with n > 1, ± is half the interquartile range as % of the median. "
                 "host-time rows are real seconds even in icount mode.")
    return lines


def shown_metrics(report: dict, show_all: bool) -> list[dict]:
    return [m for m in report["metrics"] if show_all or m["group"] != "other" and
            not (m["name"].startswith("meminfo.") and m["label"] == m["name"])]


def render(report: dict, fmt: str, show_all: bool = False) -> str:
    if fmt == "json":
        return json.dumps(report, indent=2)
    if fmt == "csv":
        return _csv(report)
    if fmt == "markdown":
        return _markdown(report, show_all)
    from .table import table_text
    return table_text(report, show_all)


def _csv(report: dict) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["metric", "unit", "better", "mode", "variant", "median", "n", "q1", "q3", "min", "max", "delta_pct"])
    for m in report["metrics"]:
        for variant, v in m["values"].items():
            w.writerow([m["name"], m["unit"], m["better"], report["mode"], variant, v["median"], v["n"],
                        v["q1"], v["q3"], v["min"], v["max"], m["delta_pct"].get(variant, "")])
    return out.getvalue()


def _markdown(report: dict, show_all: bool) -> str:
    names = [v["name"] for v in report["variants"]]
    lines = [f"### {report['experiment']}", ""] + [f"- {l}" for l in header_lines(report)] + [""]
    head = ["metric", "unit"] + names + [f"Δ {n}" for n in names[1:]]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|")
    for m in shown_metrics(report, show_all):
        cells = [m["label"], m["unit"]] + [fmt_cell(m["values"].get(n), m["unit"]) for n in names]
        cells += [fmt_delta(m["delta_pct"].get(n)) for n in names[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", summary(report)]
    return "\n".join(lines) + "\n"


def summary(report: dict, threshold_pct: float = 5.0) -> str:
    """A written summary in the manner of the seed studies: the changes that matter."""
    names = [v["name"] for v in report["variants"]]
    if len(names) < 2:
        return ""
    parts = []
    for other in names[1:]:
        big = [(m, m["delta_pct"][other]) for m in shown_metrics(report, show_all=False)
               if m["delta_pct"].get(other) is not None
               and abs(m["delta_pct"][other]) >= threshold_pct and m["clock"] != "host"]
        if not big:
            parts.append(f"{other} is within {threshold_pct:.0f}% of {names[0]} on every metric.")
            continue
        by_group: dict[str, list[str]] = {}
        for m, d in sorted(big, key=lambda x: -abs(x[1])):
            word = "worse" if (d > 0) == (m["better"] == "lower") else "better"
            by_group.setdefault(m["group"], []).append(f"{m['label']} {d:+.0f}% ({word})")
        text = "; ".join(f"{g}: {', '.join(items[:4])}" for g, items in by_group.items())
        parts.append(f"{other} vs {names[0]} ({report['mode']} mode) - {text}.")
    return "\n".join(parts)
