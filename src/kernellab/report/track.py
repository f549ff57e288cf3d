"""`kernellab track`'s series (experiments/track.py) as a kind of result (report/kinds.py): a
table of the kernels with their change points marked, a sparkline of the series, the
`kernellab why` command line that explains each regression, and an HTML page with the
series charted and its change points drawn."""

from __future__ import annotations

from typing import Any

from .. import modes
from . import fmt_value, kinds
from .why import has_build

SPARKS = "▁▂▃▄▅▆▇█"
GAP = "·"
_SUBJECT = 44
_GAP = 100
_BUILD = 18


def sparkline(values: list[float | None]) -> str:
    """One character a kernel, its height its value between the series' least and greatest;
    a gap (no value) a dot."""
    known = [v for v in values if v is not None]
    if not known:
        return GAP * len(values)
    lo, hi = min(known), max(known)
    top = len(SPARKS) - 1
    return "".join(GAP if v is None else SPARKS[round((v - lo) / (hi - lo) * top) if hi > lo else 0]
                   for v in values)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def _subject(p: dict[str, Any]) -> str:
    subject = p["commit"]["subject"] if p["commit"] else ""
    return subject if len(subject) <= _SUBJECT else subject[:_SUBJECT - 3] + "..."


def _build(p: dict[str, Any]) -> str:
    """A kernel's build in a few characters: objects compiled, seconds, and whether it is from the store."""
    objects = "?" if p.get("compiled") is None else str(p["compiled"])
    return f"{objects} obj, {p['build_s']:.0f} s" + ("" if p["built"] else ", stored")


def _how(r: dict[str, Any]) -> str:
    runs = max((len(p["runs"]) for p in r["points"]), default=0)
    if r["deterministic"]:
        return (f"{modes.get(r['mode']).summary}: one run per kernel, the series is deterministic; a change "
                f"counts from {r['threshold_pct']:g}%")
    return (f"{modes.get(r['mode']).summary}: up to {runs} run(s) per kernel, spread = least..greatest run; "
            f"a change counts from {r['threshold_pct']:g}% and when significant")


def _where(r: dict[str, Any]) -> str:
    s = r["series"]
    if s["kind"] == "range":
        return f"first-parent {s['range']} of {s['repo']}, every {s['every']} commit(s)"
    if s["kind"] == "refs":
        return f"refs of {s['repo']}"
    return "the sources given"


def _marks(r: dict[str, Any]) -> dict[int, str]:
    """The change point each kernel begins, as the table marks it."""
    marks = {}
    for c in r["change_points"]:
        arrow = "▲" if c["change"] > 0 else "▼"
        sure = "" if c["verdict"]["verdict"] == "different" else f", {c['verdict']['verdict']}"
        marks[c["after"]] = f"{arrow} {_pct(c['change_pct'])} {c['direction']}{sure}"
    return marks


def track_text(r: dict[str, Any]) -> str:
    unit, points = r["unit"], r["points"]
    lines = [f"track: {r['metric']} ({unit}, {r['better']} is better) of {r['variant']['text']} over "
             f"{len(points)} kernel(s): {_where(r)}", _how(r), ""]
    width = max((len(p["ref"]) for p in points), default=3)
    width = min(max(width, 3), 40)
    lines.append(f"  {'#':>3}  {'ref':<{width}}  {'subject':<{_SUBJECT}}  {'value':>10}  {'spread':>17}  "
                 f"{'build':<{_BUILD}}  change")
    marks = _marks(r)
    for i, p in enumerate(points):
        ref = p["ref"] if len(p["ref"]) <= width else "..." + p["ref"][-width + 3:]
        if p["value"] is None:
            gap = p["gap"] if len(p["gap"]) <= _GAP else p["gap"][:_GAP - 3] + "..."   # whole in the JSON
            lines.append(f"  {i:>3}  {ref:<{width}}  {_subject(p):<{_SUBJECT}}  gap: {gap}")
            continue
        spread = f"{fmt_value(p['spread'][0], unit)}..{fmt_value(p['spread'][1], unit)}" if p["spread"] else "-"
        lines.append(f"  {i:>3}  {ref:<{width}}  {_subject(p):<{_SUBJECT}}  {fmt_value(p['value'], unit):>10}  "
                     f"{spread:>17}  {_build(p):<{_BUILD}}  {marks.get(i, '')}".rstrip())
    values = [p["value"] for p in points]
    lines += ["", "  build: the objects its make compiled (what differs from the build before it in the tree) and its "
              "seconds; \"stored\": built by an earlier command",
              "", f"  {sparkline(values)}   ({GAP} a gap; {_range(values, unit)})", ""]
    lines += _change_lines(r)
    measured = sum(p["built"] or p["boots"] > 0 for p in points)
    lines.append(f"cost: {r['builds']} build(s), {r['boots']} boot(s) now ({measured} of {len(points)} kernel(s) "
                 f"measured now, the others from the store), {r['wall_s']:.0f} s wall")
    return "\n".join(lines) + "\n"


def _range(values: list[float | None], unit: str) -> str:
    known = [v for v in values if v is not None]
    return f"{fmt_value(min(known), unit)} to {fmt_value(max(known), unit)} {unit}" if known else "no value"


def _change_lines(r: dict[str, Any]) -> list[str]:
    changes, points, unit = r["change_points"], r["points"], r["unit"]
    if not changes:
        d = r["detector"]
        return [f"no change point ({d['candidates']} candidate(s) from {d['library']}, none a change of "
                f"{r['threshold_pct']:g}% or more)", ""]
    lines = [f"change points ({r['detector']['library']}, {r['detector']['method']}; each judged on the runs "
             "either side):"]
    for n, c in enumerate(changes, start=1):
        before, after = points[c["before"]], points[c["after"]]
        lines.append(f"  {n}. between {before['ref']} and {after['ref']}"
                     + (f" \"{after['commit']['subject']}\"" if after["commit"] else "")
                     + f": {fmt_value(c['from_level'], unit)} -> {fmt_value(c['to_level'], unit)} {unit} "
                       f"({_pct(c['change_pct'])}, {c['direction']}); {c['verdict']['verdict']} "
                       f"({c['verdict']['reason']})")
        if c["suspects"]:
            lines.append(f"     gaps hide where: it is one of {', '.join(s['ref'] for s in c['suspects'])}")
        if c["why"]:
            lines.append(f"     explain it: {c['why']}")
        else:
            lines.append("     an improvement: `kernellab why` explains regressions")
    return [*lines, ""]


def _html(r: dict[str, Any], view: kinds.View) -> str:
    import altair as alt

    from . import html  # the charting libraries load only for an HTML page

    unit, points = r["unit"], r["points"]
    rows = [{"kernel": i, "ref": p["ref"], "subject": _subject(p), "value": p["value"],
             "lo": p["spread"][0] if p["spread"] else p["value"], "hi": p["spread"][1] if p["spread"] else p["value"]}
            for i, p in enumerate(points) if p["value"] is not None]
    x = alt.X("kernel:Q", title="kernel of the series (oldest first)", axis=alt.Axis(tickMinStep=1))
    y = alt.Y("value:Q", title=f"{r['metric']}, {unit}", scale=alt.Scale(zero=False))
    tooltip = ["ref:N", "subject:N", "value:Q"]
    data = alt.Data(values=rows)  # type: ignore[no-untyped-call]
    line = alt.Chart(data).mark_line(point=True, color="#1d2330").encode(x=x, y=y, tooltip=tooltip)
    spread = alt.Chart(data).mark_rule(color="#8a8f9c").encode(x=x, y="lo:Q", y2="hi:Q")
    cuts = [{"at": (c["before"] + c["after"]) / 2, "what": f"{_pct(c['change_pct'])} {c['direction']}"}
            for c in r["change_points"]]
    gaps = [{"kernel": i, "ref": p["ref"], "gap": p["gap"]} for i, p in enumerate(points) if p["value"] is None]
    layers = [spread, line]
    if cuts:
        layers.append(alt.Chart(alt.Data(values=cuts)).mark_rule(  # type: ignore[no-untyped-call]
            color="#9c2a1a", strokeDash=[5, 3], strokeWidth=2).encode(x="at:Q", tooltip=["what:N"]))
    if gaps:
        layers.append(alt.Chart(alt.Data(values=gaps)).mark_tick(  # type: ignore[no-untyped-call]
            color="#b4b9c5", thickness=2).encode(x="kernel:Q", tooltip=["ref:N", "gap:N"]))
    chart = html.Chart("The series, its change points dashed (gaps: grey ticks)",
                       alt.layer(*layers).properties(width=640).to_dict())
    text = track_text(r)
    table = html.Table(["#", "ref", "subject", f"value, {unit}", "objects compiled", "build s", "build", "gap"], [
        html.Row([html.Cell(str(i), "num"), html.Cell(p["ref"]), html.Cell(_subject(p)),
                  html.Cell("-" if p["value"] is None else fmt_value(p["value"], unit), "num"),
                  html.Cell("-" if p.get("compiled") is None else str(p["compiled"]), "num"),
                  html.Cell(f"{p['build_s']:.0f}" if has_build(p) else "-", "num"),
                  html.Cell(("built now" if p["built"] else "from the store")
                            + (f", after {p['checkout_from'][:12]}" if p.get("checkout_from") else "")
                            if has_build(p) else ""),
                  html.Cell(p["gap"])])
        for i, p in enumerate(points)], "The kernels: each build compiles what differs from the build before it")
    changes = [f"between {points[c['before']]['ref']} and {points[c['after']]['ref']}: {_pct(c['change_pct'])} "
               f"{c['direction']} ({c['verdict']['verdict']})" + (f"; explain it: {c['why']}" if c["why"] else "")
               for c in r["change_points"]]
    sections = [html.Section("Summary", summary=text.splitlines()[:2]),
                html.Section("Change points", items=changes or ["none"], charts=[chart]),
                html.Section("Kernels", tables=[table]), html.Section("The text report", text=text)]
    return html.page(f"kernellab track: {r['metric']}", modes.get(r["mode"]).summary, sections,
                     modes.get(r["mode"]).summary)


def _upgrade(result: dict[str, Any], origin: str) -> dict[str, Any]:
    """Format 1 as format 2: its kernels' builds without what they compiled (not recorded then)."""
    for row in result["points"]:
        row.setdefault("compiled", None)
        row.setdefault("checkout_from", None)
    return result


TRACK = kinds.register(kinds.Kind(
    name="track", tag="kernellab-track", what="`track`'s series", version=2, readable=(1, 2),
    schema="track-schema.json", rewrite="write it again with `kernellab track ... --format json` (every kernel it "
                                        "measured is in the store)",
    renderers={"table": lambda result, view: track_text(result), "html": _html},
    formats=("table", "json", "html"), from_dict=_upgrade))
