"""What sweep's and bisect's views share (report/sweep.py, report/bisect.py, and their
HTML pages in report/html.py)."""

from __future__ import annotations

from typing import Any


def probe_build_s(p: dict[str, Any]) -> float:
    """What a probe's build cost: make, and the copy of a tree it needed first."""
    return float(p["build_s"] + p.get("copy_s", 0.0))
