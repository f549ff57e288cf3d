"""`kernellab profile`'s result (experiments/profiling.py, profiler.py: two kernels'
functions by their share of the ticks) as a kind of result (report/kinds.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import profiler
from . import kinds


def body(how: str, metric: str, kernels: Sequence[Any], rows: Sequence[profiler.Change]) -> dict[str, Any]:
    """The profile as written; `kernels`: the two experiments.profiling.Profiled, A first."""
    return {"how": how, "metric": metric,
            "kernels": [{"name": p.name, "run": p.run_id, "ticks": p.hits, "metric_value": p.metric_value}
                        for p in kernels],
            "changes": [{**c.__dict__, "delta": c.delta} for c in rows]}


def text(profile: dict[str, Any]) -> str:
    a, b = profile["kernels"]
    rows = [profiler.Change(c["function"], c["a_hits"], c["b_hits"], c["a_share"], c["b_share"])
            for c in profile["changes"]]
    return profiler.text((a["name"], b["name"]), (a["ticks"], b["ticks"]), rows, profile["how"])


PROFILE = kinds.register(kinds.Kind(
    name="profile", tag="kernellab-profile", what="a profile", version=1, readable=(1,),
    schema="profile-schema.json", rewrite="write it again with `kernellab profile A B --metric M --format json` "
                                          "(its runs are in the store)",
    renderers={"table": lambda profile, view: text(profile)}, formats=("table", "json")))
