"""A study's sweeps as a results file: what each option switched alone cost, per metric,
compact and dated, to commit to the repository and cite as kernellab's own evidence in
the rule files (`source = "kernellab:results/FILE"`).

Every row says how it was obtained: the kernel it was flipped on, the mode, the runs, the
date and the kernellab version; an option olddefconfig would not set alone, or a
mitigation the emulated CPU never needed, says so instead of a cost.
"""

from __future__ import annotations

import datetime
from typing import Any

from .. import __version__


def from_study(study: dict[str, Any], today: datetime.date | None = None) -> dict[str, Any]:
    """The results file of a study report (studyreport.build) that has sweeps, as its kind
    (costtable.RESULTS) writes it."""
    sweeps = []
    for label, sweep in study["sweeps"].items():
        report = study["reports"].get(sweep.get("arch", label), {})
        good = next((v for v in report.get("variants", []) if v["name"] == sweep.get("good")), None)
        sweeps.append({
            "label": label, "arch": sweep.get("arch", label), "mode": sweep["mode"],
            "flipped_on": _kernel(good) if good else sweep.get("good", ""),
            "runs": _runs(good), "baseline": sweep["baseline"],
            "options": [_row(f, sweep["metrics"]) for f in sweep["flips"]],
            # Which options were flipped: those the audit's rules of these categories name.
            **({"rules": sweep["rules"], "left_out": sweep["left_out"]} if sweep.get("rules") else {}),
        })
    return {"study": study["study"], "title": study["title"],
            "date": (today or datetime.datetime.now(datetime.UTC).date()).isoformat(),
            "kernellab": __version__, "emulated": True, "sweeps": sweeps}


def _kernel(v: dict[str, Any]) -> str:
    parts = [f"{v['source']} ({v['source_version']})", v["arch"], f"base {v['base']}"]
    if v.get("fragments"):
        parts.append("+".join(v["fragments"]))
    if v.get("boot_args"):
        parts.append("booted with " + " ".join(v["boot_args"]))
    return ", ".join(parts) + f", config {v['config_hash'][:12]}"


def _runs(v: dict[str, Any] | None) -> int:
    return sum(r["status"] == "ok" for r in v["runs"]) if v else 0


def _row(flip: dict[str, Any], metrics: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"option": flip["option"], "value": flip["value"]}
    if flip.get("dropped"):
        row["not_measured"] = "olddefconfig does not set it alone: " + "; ".join(flip["dropped"])
        return row
    row["delta_pct"] = {m: _pct(flip["effects"].get(m, {}).get("delta_pct")) for m in metrics}
    if flip.get("also_changed"):
        row["with"] = flip["also_changed"]
    if flip.get("not_affected"):
        row["inactive_on_emulated_cpu"] = flip["not_affected"]
        row["mitigates"] = flip["flaws"]   # more than the inactive ones: partly inactive
    return row


def _pct(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
