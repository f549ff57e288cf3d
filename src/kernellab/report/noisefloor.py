"""A noise floor (experiments/floor.py) as a kind of result (report/kinds.py): what
`kernellab noise-floor` prints and writes, and the file each kernel's floor is kept in
(which is read back wherever that floor judges a change)."""

from __future__ import annotations

from typing import Any

from ..metrics.catalog import catalog
from . import kinds


def text(floor: dict[str, Any]) -> str:
    lines = [f"noise floor of {floor['base']} ({floor['measured']})",
             "the largest change a neutral option caused, per metric (a change within it is no difference):"]
    described = catalog()
    for m, v in sorted(floor["pct"].items(), key=lambda kv: -kv[1]):
        label = described[m].label if m in described else m
        lines.append(f"  {label:<46} {v:6.2f}%  ({floor['by'].get(m, '?')})")
    return "\n".join(lines) + "\n"


NOISE_FLOOR = kinds.register(kinds.Kind(
    name="noise-floor", tag="kernellab-noise-floor", what="a noise floor", version=1, readable=(1,),
    schema="noise-floor-schema.json", rewrite="delete it and run `kernellab noise-floor` again",
    renderers={"table": lambda floor, view: text(floor)}, formats=("table", "json"), indent=1,
    # floors kept in the cache before files said their kind: the same keys, unstamped
    untagged=True, untagged_version=1))
