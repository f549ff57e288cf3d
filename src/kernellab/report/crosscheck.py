"""Cross-checks (issue 31): the agent's own microbenchmarks set beside standard tools that
time the same kernel path in the same guest and kernel, as a kind of result (report/kinds.py).

The pairs are data (metrics/crosschecks.toml, loaded here by the strict loader). `judge`
reads one compare report (experiments/crosscheck.py runs it) and gives each pair its ratio
(the tool's figure x scale / the agent's, medians) and its verdict: inside or outside the band
the data gives for the setting the band was measured in (lab-minimal, x86_64, icount; a
host-timed pair's in wall mode, on a kernel with its disk's file system), or no
band (another setting, where the ratio is shown and not judged), or not measured (with the
reason the report gives for the side that is missing).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from .. import datafile, modes, workloads
from ..errors import LabError
from ..guest.workloads import Provenance
from . import fmt_value, kinds

IN_BAND, OUTSIDE, NO_BAND, NOT_MEASURED = "in band", "outside band", "no band", "not measured"


@dataclass(frozen=True)
class Pair:
    name: str
    agent: str                    # the agent's metric
    workload: str                 # a --workload spec
    metric: str                   # WORKLOAD.METRIC of that workload
    scale: float                  # the tool's figure x scale: the agent's unit, per operation
    band: tuple[float, float]     # where the ratio stays, in the band's setting
    differ: str                   # where the two loops differ
    # Where this pair's band was measured, where it is not the file's setting: a pair of
    # host-timed figures has its band in wall mode, on a kernel that has the disk's file system.
    band_variant: str = ""
    band_mode: str = ""

    def __post_init__(self) -> None:
        lo, hi = self.band
        if not 0 < lo < hi:
            raise ValueError(f"band must be two numbers 0 < low < high, got {list(self.band)}")
        if self.band_mode and self.band_mode not in modes.NAMES:
            raise ValueError(f"band_mode must be one of {', '.join(modes.NAMES)}, got {self.band_mode!r}")
        if self.scale <= 0:
            raise ValueError(f"scale must be positive, got {self.scale}")
        if "." not in self.metric or self.metric.split(".")[0] != self.workload.split(":")[0]:
            raise ValueError(f"metric {self.metric!r} is not a metric of workload {self.workload!r} "
                             "(WORKLOAD.METRIC)")


@dataclass(frozen=True)
class Crosschecks:
    band_variant: str             # the setting every band was measured in
    band_source: str
    band_arch: str
    band_mode: str
    pair: tuple[Pair, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.pair]
        if len(set(names)) != len(names):
            raise ValueError("two pairs share a name")

    @property
    def workloads(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.workload for p in self.pair))

    @property
    def agent_metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.agent for p in self.pair))

    def setting_of(self, p: Pair) -> tuple[str, str, str, str]:
        """Where `p`'s band was measured: variant, source, arch, mode (under QEMU)."""
        return (p.band_variant or self.band_variant, self.band_source, self.band_arch, p.band_mode or self.band_mode)

    def only(self, names: Sequence[str]) -> Crosschecks:
        """These pairs alone (`--pair`), in the file's order."""
        known = [p.name for p in self.pair]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise LabError(f"no cross-check pair {unknown[0]!r}: the pairs are " + ", ".join(repr(n) for n in known))
        return replace(self, pair=tuple(p for p in self.pair if p.name in names))


@functools.cache
def load() -> Crosschecks:
    path = resources.files("kernellab.metrics") / "crosschecks.toml"
    return datafile.load(Crosschecks, datafile.read_toml(path, path.name), path.name)


def _cell(report: dict[str, Any], metric: str, variant: str) -> dict[str, Any]:
    for m in report["metrics"]:
        if m["name"] == metric:
            cell: dict[str, Any] = m["values"].get(variant, {"not_available": "not in the report"})
            return cell
    return {"not_available": "not measured in this run"}


def _side(cell: dict[str, Any], scale: float = 1.0) -> dict[str, Any]:
    if "not_available" in cell:
        return {"not_available": cell["not_available"]}
    return {"median": cell["median"] * scale, "min": cell["min"] * scale, "max": cell["max"] * scale,
            "n": cell["n"], "runs": cell["runs"]}


def _programs(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each workload's provenance, by its spec label, from the report's first run that has it."""
    found: dict[str, dict[str, Any]] = {}
    for v in report["variants"]:
        for run in v.get("runs", []):
            for w in run.get("workloads", []):
                found.setdefault(w["label"], w["provenance"])
    return found


def judge(report: dict[str, Any], setting: dict[str, str], checks: Crosschecks | None = None) -> dict[str, Any]:
    """The cross-check result of one compare report of one variant. `setting`: the variant's
    base name, source, arch, mode and target as the command ran it, and the date."""
    checks = checks or load()
    if len(report["variants"]) != 1:
        raise LabError("a cross-check reads a report of one variant")
    variant = report["variants"][0]["name"]
    here = (setting["base"], setting["source"], setting["arch"], setting["mode"])
    labels = {m["name"]: (m["label"], m["unit"]) for m in report["metrics"]}
    # Each tool as its provenance says, in every report's words.
    programs = {label: Provenance.from_dict(said).program_version() for label, said in _programs(report).items()}
    pairs = []
    for p in checks.pair:
        agent = _side(_cell(report, p.agent, variant))
        tool = _side(_cell(report, p.metric, variant), p.scale)
        row: dict[str, Any] = {
            "name": p.name, "agent_metric": p.agent, "tool_metric": p.metric, "workload": p.workload,
            "label": labels.get(p.agent, (p.agent, ""))[0], "unit": labels.get(p.agent, ("", ""))[1],
            "scale": p.scale, "band": list(p.band), "differ": p.differ, "agent": agent, "tool": tool,
            "program": programs.get(workloads.resolve(p.workload).label, ""), "ratio": None}
        missing = [f"{side}: {value['not_available']}" for side, value in (("agent", agent), ("tool", tool))
                   if "not_available" in value]
        if not missing:
            row["ratio"] = tool["median"] / agent["median"] if agent["median"] else None
        band_setting = checks.setting_of(p)
        host_timed = not modes.get(band_setting[3]).deterministic
        if host_timed and modes.get(setting["mode"]).deterministic:
            row.update(verdict=NO_BAND, why=f"host-timed figures: the pair's band is for {band_setting[3]} mode"
                                            + (f" ({'; '.join(missing)})" if missing else ""))
        elif missing:
            row.update(verdict=NOT_MEASURED, why="; ".join(missing))
        elif row["ratio"] is None:
            row.update(verdict=NOT_MEASURED, why="the agent's figure is zero")
        elif here != band_setting or setting["target"] != "qemu":
            row.update(verdict=NO_BAND, why="the band is for {} of {}, {}, {} mode, under QEMU".format(*band_setting))
        else:
            lo, hi = p.band
            row.update(verdict=IN_BAND if lo <= row["ratio"] <= hi else OUTSIDE, why=f"band {lo:g}..{hi:g}")
        pairs.append(row)
    # QEMU's words for its mode are the mode's summary; a real machine's are its own note.
    how = modes.get(report["mode"]).summary if setting["target"] == "qemu" else report["mode_note"]
    return {"setting": dict(setting), "mode_summary": how,
            "runs": report["runs_per_variant"][variant], "pairs": pairs}


def failed(result: dict[str, Any]) -> list[str]:
    """The pairs whose ratio left its band."""
    return [p["name"] for p in result["pairs"] if p["verdict"] == OUTSIDE]


def _figure(side: dict[str, Any], unit: str) -> str:
    if "not_available" in side:
        return "n/a"
    spread = "" if side["min"] == side["max"] else f" ({fmt_value(side['min'], unit)}..{fmt_value(side['max'], unit)})"
    return f"{fmt_value(side['median'], unit)}{spread} n={side['n']}"


def _rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for p in result["pairs"]:
        ratio = "" if p["ratio"] is None else f"{p['ratio']:.3g}"
        rows.append([p["name"], f"{p['agent_metric']} {_figure(p['agent'], p['unit'])}",
                     f"{p['tool_metric']} x {p['scale']:g} {_figure(p['tool'], p['unit'])}", ratio,
                     f"{p['band'][0]:g}..{p['band'][1]:g}", p["verdict"]])
    return rows


HEADER = ["pair", "agent (median, range, samples)", "tool x scale (same)", "ratio", "band", "verdict"]


def _how(result: dict[str, Any]) -> str:
    s = result["setting"]
    return (f"{s['base']} ({s['source']}) {s['arch']} on {s['target']}, {s['date']}, {result['mode_summary']}, "
            f"{result['runs']} run(s); ratio = tool x scale / agent (medians)")


def text(result: dict[str, Any]) -> str:
    rows = [HEADER, *_rows(result)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = [_how(result)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += _said(result)
    return "\n".join(lines) + "\n"


def _said(result: dict[str, Any]) -> list[str]:
    """Why a pair was not measured or left its band, one line each."""
    return [f"{p['name']}: {p['verdict']}: {p['why']}" for p in result["pairs"]
            if p["verdict"] in (NOT_MEASURED, OUTSIDE)]


def markdown(result: dict[str, Any]) -> str:
    rows = _rows(result)
    lines = [f"_{_how(result)}_", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    said = _said(result)
    lines += ["", *[f"- {line}" for line in said]] if said else []
    lines += ["", "Where the loops differ:", ""]
    lines += [f"- **{p['name']}** ({p['program'] or p['workload']}): {p['differ']}" for p in result["pairs"]]
    return "\n".join(lines) + "\n"


CROSSCHECK = kinds.register(kinds.Kind(
    name="crosscheck", tag="kernellab-crosscheck", what="a cross-check's result", version=1, readable=(1,),
    schema="crosscheck-schema.json", rewrite="write it again with `kernellab workload crosscheck --format json` "
                                             "(its runs are in the store)",
    renderers={"table": lambda result, view: text(result), "markdown": lambda result, view: markdown(result)},
    formats=("table", "json", "markdown")))
