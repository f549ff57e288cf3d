"""`kernellab why`'s answer (experiments/why.py) as a kind of result (report/kinds.py): a
text table, and Markdown in the shape of the 0-day robot's e-mail, for pasting into a
mail or a bug tracker."""

from __future__ import annotations

from typing import Any

from .. import modes
from . import fmt_value, kinds


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
        cost = f"built in {p['build_s']:.0f} s" if p["built"] else "build reused"
        lines.append(f"  {p['label']:<22} {p['role']:<13} " +
                     (f"skipped: {p['skipped']}" if p["skipped"] else f"{cost}, {p['boots']} boot(s), "
                                                                        f"{p['runs']} run(s): {values}"))
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
        lines.append(f"  options: {options['candidates']} differing option(s) bisected, {options['builds']} build(s)")
    lines += [f"  {u}" for u in m["unsure"]]
    return lines


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
    out += [f"A: {_variant(r['a'])}", f"B: {_variant(r['b'])}",
            f"cost: {r['builds']} build(s), {r['boots']} boot(s), {r['wall_s']:.0f} s", ""]
    return "\n".join(out)


def _direction(change: float, better: str) -> str:
    return "regression" if (change > 0) == (better == "lower") else "improvement"


WHY = kinds.register(kinds.Kind(
    name="why", tag="kernellab-why", what="`why`'s answer", version=1, readable=(1,),
    schema="why-schema.json", rewrite="write it again with `kernellab why A B --metric M --format json` (its builds "
                                      "and runs are in the store)",
    renderers={"table": lambda result, view: why_text(result), "markdown": lambda result, view: why_markdown(result)},
    formats=("table", "json", "markdown")))
