"""`kernellab why`'s answer (experiments/why.py) as a kind of result (report/kinds.py): a
text table, Markdown in the shape of the 0-day robot's e-mail, for pasting into a mail or
a bug tracker, and an HTML page with the split and the bisection of commits charted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import modes
from . import fmt_value, kinds
from .bisect import AHEAD, measured_ahead, probe_count
from .model import BETTER, NO_DIFFERENCE, NOT_COMPARED, WORSE

if TYPE_CHECKING:   # html loads the charting libraries: only for an HTML page
    from .html import Section, Table


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def _variant(v: dict[str, Any]) -> str:
    config = "+".join([v["base"], *v["fragments"], *v["options"]]) if v["base"] else "?"
    words = f" {' '.join(v['boot_words'])}" if v["boot_words"] else ""
    return f"{v['name']} ({v['source']}, {config}, {v['toolchain']}{words})"


def _reduced(red: dict[str, Any]) -> list[str]:
    """What a reduction of distribution-size configurations measured, kept and left out."""
    size = ", ".join(f"{side} sets {s['set']} options ({s['modules']} modules)" for side, s in red["size"].items())
    lines = [f"measured reduced onto lab-minimal: {size}, beyond {red['threshold']['options']} options or "
             f"{red['threshold']['modules']} modules (distribution size); kept the {red['differing']} option(s) "
             f"in which A and B differ" + (f" and {len(red['needed'])} they need" if red["needed"] else "")
             + f"; {red['whole']}"]
    groups = "; ".join(f"{g['menu']} {g['count']} ({', '.join(g['options'][:4])}{', ...' if g['count'] > 4 else ''})"
                       for g in red["left_out"])
    if groups:
        lines.append(f"left out {sum(g['count'] for g in red['left_out'])} option(s): {red['left_out_why']}: {groups}")
    lines += [f"could not keep {n['option']}={n['wanted']} of {n['side']} (got {n['got']}): {n['needs']}"
              for n in red["not_kept"]]
    return lines


def _compiled(n: int | None) -> str:
    return "objects not counted" if n is None else f"{n} object{'' if n == 1 else 's'} compiled"


def build_words(p: dict[str, Any]) -> str:
    """A probe's build (experiments.commits.build_fields): built now or its record taken
    from the store, its seconds and the objects it compiled, after which commit's build."""
    after = f" after {p['checkout_from'][:12]}" if p.get("checkout_from") else ""
    what = f"{p['build_s']:.0f} s, {_compiled(p.get('compiled'))}{after}"
    return f"built in {what}" if p["built"] else f"from the store (built in {what})"


def _built_before(p: dict[str, Any]) -> str:
    """A skipped kernel that was built (it did not boot): its build, before why it was skipped."""
    return f"{build_words(p)}; " if has_build(p) else ""


def has_build(p: dict[str, Any]) -> bool:
    """Whether a probe's kernel was built (one skipped because it did not boot was)."""
    return p.get("compiled") is not None or p["build_s"] > 0


def why_text(r: dict[str, Any]) -> str:
    lines = [f"why: A {_variant(r['a'])}", f"     B {_variant(r['b'])}", modes.get(r["mode"]).summary]
    if r.get("reduced"):
        lines += _reduced(r["reduced"])
    if r["not_carried"]:
        lines.append(f"A's configuration on B's source: {len(r['not_carried'])} option(s) do not carry over "
                     f"(olddefconfig): {'; '.join(r['not_carried'][:8])}")
    for m in r["metrics"]:
        lines += ["", *_metric_text(m, r)]
    lines += ["", "probes:"]
    for p in r["probes"]:
        values = ", ".join(f"{k} {v:.4g}" for k, v in p["values"].items())
        lines.append(f"  {p['label']:<22} {p['role']:<13} " +
                     (f"{_built_before(p)}skipped: {p['skipped']}" if p["skipped"] else
                      f"{build_words(p)}, {p['boots']} boot(s), {p['runs']} run(s): {values}"))
    lines.append(f"cost: {r['builds']} build(s), {r['boots']} boot(s), {len(r['probes'])} kernel(s), "
                 f"{r['wall_s']:.0f} s wall")
    return "\n".join(lines) + "\n"


def _metric_text(m: dict[str, Any], r: dict[str, Any]) -> list[str]:
    unit = m["unit"]
    lines = [f"{m['metric']} ({unit}, {m['better']} is better): A {fmt_value(m['a'], unit)}, "
             f"B {fmt_value(m['b'], unit)}: {m['total']:+.4g} {unit} ({_pct(m['total_pct'])})",
             "  the change, in parts that add up:"]
    for p in m["parts"]:
        lines.append(f"    {p['part']:<14} {p['delta']:+10.4g} {unit} {_share(p['share_pct']):>5} of it  "
                     f"{p['verdict']['verdict']} ({p['verdict']['reason']}; {p['how']})")
    lines.append("  culprits, largest share first:")
    if not m["culprits"]:
        lines.append("    none found")
    for c in m["culprits"]:
        lines.append(f"    {c['kind']:<8} {c['name']}: {c['share']:+.4g} {unit}, {_share(c['share_pct'])} of the "
                     f"change ({c['how']})")
        if c.get("commit"):
            lines.append(f"             author {c['commit']['author']}")
        if c.get("suspects"):
            lines.append(f"             skipped commits hide it: the culprit is one of "
                         f"{', '.join(s['sha'][:12] for s in c['suspects'])}")
        if c.get("brought_along"):
            lines.append(f"             brings along {', '.join(c['brought_along'])}")
        conf = c.get("confirmation")
        if c["kind"] == "commit" and conf:
            parent = conf["parent"]
            lines.append(f"             parent {parent['commit'][:12]}: {parent['verdict']['verdict']} as A "
                         f"({parent['verdict']['reason']})")
            if conf.get("revert"):
                lines.append(f"             {conf['revert_how']}: B moves back {conf['moved_back']:+.4g} {unit}, "
                             f"{conf['verdict']['verdict']}; confirmed: {'yes' if conf['confirmed'] else 'NO'}")
            else:
                lines.append(f"             not confirmed by a revert: {conf['revert_how']}")
    lines.append(f"  remainder (interactions, changes below the threshold of {m['threshold_pct']:g}%): "
                 f"{m['remainder']:+.4g} {unit}, {_share(m['remainder_pct'])} of the change, "
                 + ("within" if m["within_noise"] else "beyond") + " the noise floor")
    search = m.get("commit_search")
    if search and search.get("searched"):
        skipped = search["skipped"]
        lines.append(f"  commits: {search['candidates']} on the first-parent line searched with A's configuration "
                     f"held fixed; {len(search['steps'])} probe(s), {search['builds']} build(s) (bound "
                     f"{search['max_builds']})" + (f"; skipped {', '.join(s['sha'][:12] for s in skipped)}"
                                                    if skipped else ""))
        for s in search["steps"]:
            lines.append(f"    {s['commit'][:12]} " + (f"skipped: {s['skipped']}" if s["verdict"] is None
                                                       else f"{s['verdict']['verdict']} ({s['verdict']['reason']})"))
    elif search:
        lines.append(f"  commits: {search['why']}")
    options = m.get("option_search")
    if options:
        lines.append(f"  options: {options['candidates']} differing option(s) bisected, {_option_cost(options)}")
        lines += [f"    {p['label']:<40} {p['options']:>4} option(s)  {_option_value(p, unit)} ({p['runs']} run(s))"
                  + (f"  {AHEAD}" if p.get("ahead") else "") for p in options["probes"]]
    lines += [f"  {u}" for u in m["unsure"]]
    return lines


def _option_cost(options: dict[str, Any]) -> str:
    """What the option bisection took: its probes, those measured ahead counted apart."""
    return f"{probe_count(options['probes'])}, {options['builds']} build(s)"


def _option_value(p: dict[str, Any], unit: str) -> str:
    return "-" if p.get("value") is None else fmt_value(p["value"], unit)


def _subsystem(subject: str) -> str:
    head, colon, _ = subject.partition(":")
    return head.strip() if colon and head.strip() and " " not in head.strip() else "kernel"


def why_markdown(r: dict[str, Any]) -> str:
    """The 0-day robot's report: one block per culprit, headed [subsystem] id: metric change."""
    out = ["Greeting,", ""]
    if r.get("reduced"):
        out += [*_reduced(r["reduced"]), ""]
    for m in r["metrics"]:
        unit, better = m["unit"], m["better"]
        out.append(f"kernellab `why` measured a {_pct(m['total_pct'])} change of {m['metric']} ({better} is better) "
                   f"from A to B: {fmt_value(m['a'], unit)} -> {fmt_value(m['b'], unit)}, "
                   f"{modes.get(r['mode']).summary}.")
        out.append("")
        for c in m["culprits"]:
            head = (f"[{_subsystem(c['commit']['subject'])}] {c['commit']['sha'][:12]}" if c["kind"] == "commit"
                    else f"[config] {c['name']}" if c["kind"] == "option" else f"[{c['kind']}] {c['name']}")
            out += [f"### {head}: {m['metric']} {_pct(c['change_pct'])} {_direction(c['share'], better)}", ""]
            if c["kind"] == "commit":
                out += [f"commit: {c['commit']['sha']} (\"{c['commit']['subject']}\")",
                        f"author: {c['commit']['author']}"]
                if c.get("suspects"):
                    out.append("could be any of: " + ", ".join(s["sha"][:12] for s in c["suspects"])
                               + " (commits between them do not build or boot)")
            if c.get("brought_along"):
                out.append(f"brings along: {', '.join(c['brought_along'])}")
            out += [f"share: {c['share']:+.4g} {unit}, {_share(c['share_pct'])} of the change A -> B",
                    f"measured: {c['how']}; {c['verdict']['verdict']} ({c['verdict']['reason']})"]
            conf = c.get("confirmation") or {}
            if c["kind"] == "commit" and conf.get("revert"):
                out.append(f"confirmed: {conf['revert_how']} moves B back by {conf['moved_back']:+.4g} {unit} "
                           f"({'yes' if conf['confirmed'] else 'NO'})")
            out.append("")
        out += ["| part | change | share | verdict |", "|---|---:|---:|---|"]
        out += [f"| {p['part']} | {p['delta']:+.4g} {unit} | {_share(p['share_pct'])} | {p['verdict']['verdict']} |"
                for p in m["parts"]]
        out += [f"| remainder | {m['remainder']:+.4g} {unit} | {_share(m['remainder_pct'])} | "
                f"{'within' if m['within_noise'] else 'beyond'} the noise floor |", ""]
        search = m.get("commit_search")
        if search and search.get("searched"):
            out += [f"bisected {search['candidates']} first-parent commits with A's configuration held fixed: "
                    f"{len(search['steps'])} probe(s), {search['builds']} build(s)"
                    + (f", skipped {', '.join(s['sha'][:12] for s in search['skipped'])}" if search["skipped"] else ""),
                    ""]
        if m.get("option_search"):
            out += _option_probes_markdown(m)
    out += [f"A: {_variant(r['a'])}", f"B: {_variant(r['b'])}",
            f"cost: {r['builds']} build(s), {r['boots']} boot(s), {r['wall_s']:.0f} s", ""]
    return "\n".join(out + _probes_markdown(r))


def _probes_markdown(r: dict[str, Any]) -> list[str]:
    """Every kernel with its build: a commit probe's few objects show that it built incrementally."""
    out = ["| kernel | commit | build | objects compiled | build s | values |", "|---|---|---|---:|---:|---|"]
    for p in r["probes"]:
        values = ", ".join(f"{k} {v:.4g}" for k, v in p["values"].items())
        commit = p["commit"][:12] if p["commit"] else "-"
        if p["skipped"] and not has_build(p):
            out.append(f"| {p['label']} | {commit} | skipped: {p['skipped'].split(':')[0]} | - | - | - |")
            continue
        after = f", after {p['checkout_from'][:12]}" if p.get("checkout_from") else ""
        compiled = "not counted" if p.get("compiled") is None else str(p["compiled"])
        skipped = f"; skipped: {p['skipped'].split(':')[0]}" if p["skipped"] else ""
        out.append(f"| {p['label']} | {commit} | {'built' if p['built'] else 'from the store'}{after}{skipped} | "
                   f"{compiled} | {p['build_s']:.0f} | {values or '-'} |")
    return [*out, ""]


def _option_probes_markdown(m: dict[str, Any]) -> list[str]:
    """The option bisection's probes, each marked when it was measured ahead and not needed."""
    options = m["option_search"]
    out = [f"bisected {options['candidates']} differing option(s) on the configuration step: "
           f"{_option_cost(options)}", "",
           f"| option probe | options | {m['metric']}, {m['unit']} | runs | note |", "|---|---:|---:|---:|---|"]
    out += [f"| {p['label']} | {p['options']} | {_option_value(p, m['unit'])} | {p['runs']} | "
            f"{AHEAD if p.get('ahead') else ''} |" for p in options["probes"]]
    return [*out, ""]


def _direction(change: float, better: str) -> str:
    return "regression" if (change > 0) == (better == "lower") else "improvement"


# -- HTML -----------------------------------------------------------------------------

# The part of the change a culprit of each kind explains (experiments/why.py's chain).
_PART_OF = {"commit": "code", "toolchain": "toolchain", "option": "configuration", "boot words": "boot words"}
_REMAINDER, _TOTAL = "remainder", "A -> B"
_CHART_WIDTH = 640
# The bisection chart's verdicts, in the words of a step (experiments/probe.py's three):
# html's marks, worse or better saying which way the kernel moved from A.
_STEP_LEGEND = {WORSE: "different, worse than A", BETTER: "different, better than A", NO_DIFFERENCE: "same",
                NOT_COMPARED: "cannot tell (the tooltip says why)"}
_STEP_WORDS = {"different": "different", "same": "same", "not yet known": "cannot tell"}
# Table columns of prose (reasons, paths): fixed shares of the page, so that a long word wraps.
_STEP_WIDTHS = ("5%", "7%", "11%", "27%", "10%", "12%", "28%")
_PROBE_WIDTHS = ("14%", "7%", "20%", "16%", "5%", "5%", "8%", "25%")
_INCREMENTAL = ("Each build compiles what differs from the build before it in its tree: the commits of a repository "
                "build in its one checkout for builds, so a commit probe compiles the objects its commit touched "
                "(\"after\" names the commit that checkout held before). A build from the store was made by an "
                "earlier command; its figures are that build's.")


def _how_measured(r: dict[str, Any]) -> str:
    mode = modes.get(r["mode"])
    runs = max((p["runs"] for p in r["probes"]), default=0)
    threshold = ", ".join(f"{t:g}% ({m})" for m, t in r["thresholds"].items())
    if mode.deterministic:
        return (f"{mode.summary}: one run per kernel, every figure exact; a step is different from its reference "
                f"at a change of {threshold} or more, else the same")
    return (f"{mode.summary}: up to {runs} run(s) per kernel, each figure a median with its 95% interval; a step is "
            f"different when its change is significant and at least {threshold}, the same when the interval lies "
            "within it, else cannot tell (runs are added while more could settle it)")


def _html_summary(r: dict[str, Any]) -> list[str]:
    lines = [f"A: {_variant(r['a'])}", f"B: {_variant(r['b'])}"]
    lines += [f"{m['metric']} ({m['unit']}, {m['better']} is better): A {fmt_value(m['a'], m['unit'])}, "
              f"B {fmt_value(m['b'], m['unit'])}: {m['total']:+.4g} {m['unit']} ({_pct(m['total_pct'])}); "
              + ("; ".join(f"{c['name']} {_share(c['share_pct'])}" for c in m["culprits"]) or "no culprit named")
              + f"; remainder {_share(m['remainder_pct'])}" for m in r["metrics"]]
    lines += [f"{m['metric']}: the option bisection took {probe_count(m['option_search']['probes'])}"
              for m in r["metrics"] if m.get("option_search") and measured_ahead(m["option_search"]["probes"])]
    return lines


def _html_how(r: dict[str, Any]) -> list[str]:
    items = [_how_measured(r)]
    if r.get("reduced"):
        items.append("measured reduced onto lab-minimal: see \"Measured reduced\"")
    if r["not_carried"]:
        items.append(f"A's configuration on B's source: {len(r['not_carried'])} option(s) do not carry over "
                     f"(olddefconfig): {'; '.join(r['not_carried'])}")
    items.append(f"cost: {r['builds']} build(s), {r['boots']} boot(s), {len(r['probes'])} kernel(s), "
                 f"{r['wall_s']:.0f} s wall")
    return items


def _culprit_label(c: dict[str, Any]) -> str:
    """A culprit as a chart row and the table name it: a toolchain's or boot words' name says its kind."""
    return f"{c['kind']} {c['name']}" if c["kind"] in ("commit", "option") else c["name"]


def _split_rows(m: dict[str, Any]) -> list[dict[str, Any]]:
    """The waterfall of the change from A: the parts one after another, then the culprits
    (in the parts' order, each under its part when the part has no remainder), the
    remainder, and the whole change from 0; each row from where the one before it ends."""
    unit = m["unit"]
    rows: list[dict[str, Any]] = []

    def add(label: str, part: str, level: str, delta: float, share_pct: float | None, start: float,
            how: str) -> float:
        rows.append({"label": label, "part": part, "level": level, "start": start, "end": start + delta,
                     "text": f"{delta:+.4g} {unit}, {_share(share_pct)}", "how": how})
        return start + delta
    at = 0.0
    for p in m["parts"]:
        at = add(f"the {p['part']} part", p["part"], "part", p["delta"], p["share_pct"], at,
                 f"{p['verdict']['verdict']} ({p['verdict']['reason']}); {p['how']}")
    at = 0.0
    order = [p["part"] for p in m["parts"]]
    for c in sorted(m["culprits"], key=lambda c: order.index(_PART_OF[c["kind"]]) if _PART_OF[c["kind"]] in order
                    else len(order)):
        at = add(_culprit_label(c), _PART_OF[c["kind"]], "culprit", c["share"], c["share_pct"], at,
                 f"{c['verdict']['verdict']} ({c['verdict']['reason']}); {c['how']}")
    add("remainder: interactions, changes below the threshold", _REMAINDER, "culprit", m["remainder"],
        m["remainder_pct"], at, ("within" if m["within_noise"] else "beyond") + " the noise floor")
    rows.append({"label": f"the change A -> B ({_pct(m['total_pct'])})", "part": _TOTAL, "level": "culprit",
                 "start": 0.0, "end": m["total"], "text": f"{m['total']:+.4g} {unit}, 100%", "how": ""})
    return rows


def _split_chart(m: dict[str, Any]) -> dict[str, Any]:
    import altair as alt

    from . import html
    rows = _split_rows(m)
    labels = html.row_labels([r["label"] for r in rows], [r["part"] for r in rows])
    rows = [r | {"row": label} for r, label in zip(rows, labels, strict=True)]
    data = alt.Data(values=rows)  # type: ignore[no-untyped-call]
    y = alt.Y("row:N", sort=labels, axis=html.label_axis())
    parts = list(dict.fromkeys(r["part"] for r in rows))
    colour = alt.Color("part:N", sort=parts, title="part", legend=alt.Legend(orient="top", labelLimit=0))
    # A part's bar is paler than its culprits': the culprits' chain reads against it.
    levels = ["part", "culprit"]
    opacity = alt.Opacity("level:N", sort=levels, scale=alt.Scale(domain=levels, range=[0.45, 1.0]), legend=None)
    bars = alt.Chart(data).mark_bar(height={"band": 0.7}).encode(
        x=alt.X("start:Q", title=f"change from A, {m['unit']}"), x2="end:Q", y=y, color=colour, opacity=opacity,
        tooltip=[alt.Tooltip("label:N", title="what"), alt.Tooltip("text:N", title="change, share"), "how:N"])
    zero = alt.Chart(alt.Data(values=[{"start": 0.0}])).mark_rule(  # type: ignore[no-untyped-call]
        color="#8a8f9c").encode(x="start:Q")
    figures = alt.Chart(data).mark_text(align="left", dx=10, fontSize=11, color="#1d2330",
                                        limit=html.TEXT_LIMIT).encode(x=alt.value(html.PLOT_WIDTH), y=y,
                                                                      text="text:N")
    spec: dict[str, Any] = alt.layer(zero, bars, figures).properties(
        width=html.PLOT_WIDTH, height=alt.Step(html.row_step(rows, 1))).to_dict()
    return spec


def _step_rows(m: dict[str, Any], r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each step of the commit bisection: where it probed, what it measured, its verdict."""
    search = m["commit_search"]
    commits = r["history"]["commits"]   # a search went over them
    values = {p["commit"]: p["values"].get(m["metric"]) for p in r["probes"] if p["role"] == "commit"}
    rows = []
    for n, s in enumerate(search["steps"], start=1):
        commit = commits[s["index"]]
        value = values.get(s["commit"])
        verdict = s["verdict"]
        rows.append({"step": n, "at": s["index"], "commit": s["commit"][:12], "subject": commit["subject"],
                     "author": commit["author"], "value": value,
                     "shown": "-" if value is None else fmt_value(value, m["unit"]),
                     "said": "skipped" if verdict is None else _STEP_WORDS.get(verdict["verdict"], verdict["verdict"]),
                     "verdict": None if verdict is None else _step_kind(verdict["verdict"], value, m),
                     "why": s["skipped"] if verdict is None else verdict["reason"]})
    return rows


def _step_kind(verdict: str, value: float | None, m: dict[str, Any]) -> str:
    if verdict == "same":
        return NO_DIFFERENCE
    if verdict != "different" or value is None:
        return NOT_COMPARED
    return WORSE if _direction(value - m["a"], m["better"]) == "regression" else BETTER


def _bisection_chart(m: dict[str, Any], r: dict[str, Any]) -> dict[str, Any] | None:
    import altair as alt

    from . import html
    steps = _step_rows(m, r)
    measured = [s for s in steps if s["verdict"] is not None and s["value"] is not None]
    if not measured:
        return None
    search, unit = m["commit_search"], m["unit"]
    last = search["candidates"] - 1
    split = m["a"] + sum(p["delta"] for p in m["parts"] if p["part"] == "code")
    x = alt.X("at:Q", title="commit on the first-parent line, oldest first (A is -1, B's source the last)",
              scale=alt.Scale(domain=[-1.5, last + 0.5], nice=False), axis=alt.Axis(tickMinStep=1, format="d"))
    y = alt.Y("value:Q", title=f"{m['metric']}, {unit}", scale=alt.Scale(zero=False, padding=24))
    tooltip = ["step:Q", alt.Tooltip("at:Q", title="commit #"), "commit:N", "subject:N", "author:N",
               alt.Tooltip("shown:N", title=f"value, {unit}"), alt.Tooltip("said:N", title="verdict"), "why:N"]
    data = alt.Data(values=measured)  # type: ignore[no-untyped-call]
    points = alt.Chart(data).mark_point(size=90, strokeWidth=1.5, opacity=1).encode(
        x=x, y=y, **html.verdict_marks(_STEP_LEGEND), tooltip=tooltip)
    numbers = alt.Chart(data).mark_text(dy=-13, fontSize=11, color="#1d2330").encode(x=x, y=y, text="step:Q")
    ends = alt.Chart(alt.Data(values=[  # type: ignore[no-untyped-call]
        {"at": -1, "value": m["a"], "end": "A", "what": f"A: {fmt_value(m['a'], unit)} {unit}"},
        {"at": last, "value": split, "end": "B",
         "what": f"B's source, A's configuration: {fmt_value(split, unit)} {unit}"}]))
    layers = [ends.mark_square(size=70, color="#1d2330").encode(x=x, y=y, tooltip=["what:N"]),
              ends.mark_text(dy=-13, fontSize=11, fontWeight="bold", color="#1d2330").encode(x=x, y=y, text="end:N"),
              points, numbers]
    skipped = [s for s in steps if s["verdict"] is None]
    if skipped:
        gaps = alt.Chart(alt.Data(values=skipped))  # type: ignore[no-untyped-call]
        layers += [gaps.mark_rule(color="#b4b9c5", strokeDash=[4, 3], strokeWidth=2).encode(x=x, tooltip=tooltip),
                   gaps.mark_text(fontSize=11, color="#5a6275", dx=7).encode(x=x, y=alt.value(9), text="step:Q")]
    spec: dict[str, Any] = alt.layer(*layers).properties(width=_CHART_WIDTH, height=260).to_dict()
    return spec


def _culprits_table(m: dict[str, Any]) -> Table:
    from . import html
    unit = m["unit"]
    rows = []
    for n, c in enumerate(m["culprits"], start=1):
        where = f"{_pct(c['change_pct'])} from {fmt_value(c['from_value'], unit)} {unit}: {c['how']}"
        verdict = c["verdict"]
        rows.append(html.Row([
            html.Cell(str(n), "num"), html.Cell(_culprit_label(c)), html.Cell(_culprit_detail(c)),
            html.Cell(f"{c['share']:+.4g} {unit}", "num"), html.Cell(_share(c["share_pct"]), "num"),
            html.Cell(where), html.Cell(f"{verdict['verdict']} ({verdict['reason']})",
                                        "significant" if verdict["verdict"] == "different" else ""),
            html.Cell(_confirmation(c, unit))]))
    rows.append(html.Row([
        html.Cell(""), html.Cell("remainder: interactions, changes below the threshold"), html.Cell(""),
        html.Cell(f"{m['remainder']:+.4g} {unit}", "num"), html.Cell(_share(m["remainder_pct"]), "num"),
        html.Cell(""), html.Cell(("within" if m["within_noise"] else "beyond") + " the noise floor"), html.Cell("")]))
    return html.Table(["#", "culprit", "author, or what it brings along", "share", "of the change", "where found",
                       "verdict", "confirmed"], rows, widths=("3%", "19%", "15%", "8%", "6%", "20%", "15%", "14%"))


def _culprit_detail(c: dict[str, Any]) -> str:
    if c["kind"] == "commit":
        hidden = ", ".join(s["sha"][:12] for s in c.get("suspects") or [])
        return str(c["commit"]["author"]) + (f"; skipped commits hide it: one of {hidden}" if hidden else "")
    if c.get("brought_along"):
        return f"brings along {', '.join(c['brought_along'])}"
    return "; ".join(c.get("notes") or []) or "-"


def _confirmation(c: dict[str, Any], unit: str) -> str:
    conf = c.get("confirmation") or {}
    if c["kind"] == "commit" and conf:
        parent = conf["parent"]
        said = f"parent {parent['commit'][:12]}: {parent['verdict']['verdict']} as A"
        if conf.get("revert"):
            return (f"{said}; {conf['revert_how']}: B moves back {conf.get('moved_back', 0):+.4g} {unit}: "
                    f"{'yes' if conf['confirmed'] else 'NO'}")
        return f"{said}; not confirmed by a revert: {conf['revert_how']}"
    if conf.get("confirmed") is not None:
        return ("yes" if conf["confirmed"] else "NO") + (f": removed from B, {conf['removed_from_b']:+.4g} {unit}"
                                                         if conf.get("removed_from_b") is not None else "")
    return "-"


def _parts_table(m: dict[str, Any]) -> Table:
    from . import html
    unit = m["unit"]
    return html.Table(["part", "from -> to", "change", "share", "verdict", "how measured"], [
        html.Row([html.Cell(p["part"]), html.Cell(f"{p['from']} -> {p['to']}"),
                  html.Cell(f"{p['delta']:+.4g} {unit}", "num"), html.Cell(_share(p["share_pct"]), "num"),
                  html.Cell(f"{p['verdict']['verdict']} ({p['verdict']['reason']})"), html.Cell(p["how"])])
        for p in m["parts"]], "The parts, which add up to the change")


def _metric_sections(m: dict[str, Any], r: dict[str, Any]) -> list[Section]:
    from . import html
    name, unit = m["metric"], m["unit"]
    split = html.Section(
        f"{name}: the split", paragraphs=[
            f"The change A -> B of {name}, {m['total']:+.4g} {unit} ({_pct(m['total_pct'])}, {m['better']} is "
            "better), from A: first in the parts that add up to it (paler bars), then in the culprits, each "
            "under its part, and the remainder no single culprit explains; the last bar is the whole change."],
        charts=[html.Chart(f"{name}: the change A -> B in parts and culprits", _split_chart(m))],
        tables=[_parts_table(m)])
    culprits = html.Section(f"{name}: culprits, largest share first", tables=[_culprits_table(m)],
                            items=list(m["unsure"]))
    return [split, culprits, *_search_sections(m, r)]


def _search_sections(m: dict[str, Any], r: dict[str, Any]) -> list[Section]:
    from . import html
    name, search = m["metric"], m["commit_search"]
    sections: list[Section] = []
    if search and search.get("searched"):
        steps = _step_rows(m, r)
        section = html.Section(f"{name}: the bisection of commits", paragraphs=[
            f"{search['candidates']} commit(s) on the first-parent line between A and B, bisected with A's "
            f"configuration held fixed: {len(steps)} probe(s), {search['builds']} build(s) (bound "
            f"{search['max_builds']}). Each probe is drawn at its commit with the value it measured, numbered in "
            "the order the bisection took them; its verdict against the search's reference (A, or the last "
            "commit found like it): different, same or cannot tell. A commit that does not build or boot is "
            "skipped, as git bisect skip does (grey dashed line)."])
        chart = _bisection_chart(m, r)
        if chart:
            section.charts.append(html.Chart(f"{name}: the bisection, step by step", chart))
        section.tables.append(html.Table(["step", "commit #", "commit", "subject", f"value, {m['unit']}",
                                          "verdict", "why"], [
            html.Row([html.Cell(str(s["step"]), "num"), html.Cell(str(s["at"]), "num"), html.Cell(s["commit"]),
                      html.Cell(s["subject"]), html.Cell(s["shown"], "num"),
                      html.Cell(s["said"], "muted" if s["verdict"] is None else ""), html.Cell(s["why"])])
            for s in steps], "The steps", widths=_STEP_WIDTHS))
        section.items = [f"skipped {s['sha'][:12]} \"{s['subject']}\" ({s['author']})" for s in search["skipped"]]
        sections.append(section)
    elif search:
        sections.append(html.Section(f"{name}: the bisection of commits", paragraphs=[search["why"]]))
    options = m["option_search"]
    if options:
        sections.append(html.Section(f"{name}: the bisection of options", paragraphs=[
            f"{options['candidates']} differing option(s) bisected on the configuration step, "
            f"{_option_cost(options)}"], tables=[html.Table(
                ["probe", "options", f"value, {m['unit']}", "runs", "note"], [
                    html.Row([html.Cell(p["label"]), html.Cell(str(p["options"]), "num"),
                              html.Cell(_option_value(p, m["unit"]), "num"), html.Cell(str(p["runs"]), "num"),
                              html.Cell(AHEAD if p.get("ahead") else "", "muted")])
                    for p in options["probes"]], "Its probes")]))
    return sections


def _probes_section(r: dict[str, Any]) -> Section:
    from . import html
    subjects = {c["sha"]: c["subject"] for c in (r["history"] or {}).get("commits", [])}
    rows = []
    for p in r["probes"]:
        values = ", ".join(f"{k} {v:.4g}" for k, v in p["values"].items())
        build = f"{_built_before(p)}skipped: {p['skipped']}" if p["skipped"] else build_words(p)
        commit = f"{p['commit'][:12]} {subjects.get(p['commit'], '')}".strip() if p["commit"] else p["source"]
        compiled = "-" if p.get("compiled") is None else str(p["compiled"])
        rows.append(html.Row([html.Cell(p["label"]), html.Cell(p["role"]), html.Cell(commit), html.Cell(values),
                              html.Cell(str(p["boots"]), "num"), html.Cell(str(p["runs"]), "num"),
                              html.Cell(compiled, "num"),
                              html.Cell(build + (f"; not carried: {'; '.join(p['not_carried'])}"
                                                 if p["not_carried"] else ""),
                                        "failed" if p["skipped"] else "")]))
    return html.Section("Probes: every kernel built and booted", paragraphs=[_INCREMENTAL], tables=[html.Table(
        ["kernel", "role", "commit or source", "values", "boots", "runs", "objects compiled", "build"], rows,
        widths=_PROBE_WIDTHS)])


def _reduced_section(red: dict[str, Any]) -> Section:
    from . import html
    left_out = html.Table(["menu", "options left out", "which"], [
        html.Row([html.Cell(g["menu"]), html.Cell(str(g["count"]), "num"), html.Cell(", ".join(g["options"]))])
        for g in red["left_out"]], f"Left out: {red['left_out_why']}", widths=("25%", "10%", "65%"))
    return html.Section("Measured reduced", items=_reduced(red) + [f"kept: {k}" for k in red["kept"]],
                        tables=[left_out])


def why_html(r: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML page

    sections = [html.Section("Summary", summary=_html_summary(r)),
                html.Section("How the numbers were obtained", items=_html_how(r))]
    if r.get("reduced"):
        sections.append(_reduced_section(r["reduced"]))
    for m in r["metrics"]:
        sections += _metric_sections(m, r)
    sections += [_probes_section(r), html.Section("The text report", text=why_text(r))]
    return html.page(f"kernellab why: {', '.join(m['metric'] for m in r['metrics'])}",
                     f"A {r['a']['name']} -> B {r['b']['name']}", sections, modes.get(r["mode"]).summary)


def _upgrade(result: dict[str, Any], origin: str) -> dict[str, Any]:
    """Format 1 as format 2: its probes' builds without what they compiled (not recorded then)."""
    for row in result["probes"]:
        row.setdefault("compiled", None)
        row.setdefault("checkout_from", None)
    return result


WHY = kinds.register(kinds.Kind(
    name="why", tag="kernellab-why", what="`why`'s answer", version=2, readable=(1, 2),
    schema="why-schema.json", rewrite="write it again with `kernellab why A B --metric M --format json` (its builds "
                                      "and runs are in the store)",
    renderers={"table": lambda result, view: why_text(result), "markdown": lambda result, view: why_markdown(result),
               "html": why_html},
    formats=("table", "json", "markdown", "html"), from_dict=_upgrade))
