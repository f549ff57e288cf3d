"""Summaries of repeated samples."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    n: int
    q1: float
    q3: float
    low: float
    high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_spread_pct(self) -> float:
        """Half the interquartile range, as % of the median."""
        return 50.0 * self.iqr / abs(self.median) if self.median else 0.0


def summarize(samples: list[float]) -> Summary:
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    if len(ordered) == 1:
        v = ordered[0]
        return Summary(v, 1, v, v, v, v)
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return Summary(statistics.median(ordered), len(ordered), q1, q3, ordered[0], ordered[-1])


def delta_pct(value: float, reference: float) -> float | None:
    if reference == 0:
        return None
    return 100.0 * (value - reference) / abs(reference)
