"""Summaries of repeated samples, and comparisons between kernel variants.

API
---
- ``summarize(samples) -> Summary`` and ``delta_pct(value, reference)``: plain
  descriptive numbers.
- ``compare_samples(ref, other, better, ...) -> Comparison``: one metric, one pair of
  variants. Delta of medians, bootstrap CI of that delta, a p-value (Welch on logs by
  default, or Mann-Whitney), Cliff's delta, and whether the change is for the better or
  the worse.
- ``compare_all({metric: (ref, other, better)}, ...) -> {metric: Comparison}``: the same
  for every metric of an experiment, with ``adjusted_p`` and ``significant`` filled in
  after a multiple-comparison correction across the metrics.
- ``adjust(p_values, method="holm")``: that correction on its own (Holm or BH).
- ``median_ci``, ``needs_more``, ``needs_another_run``, ``imprecise_metrics``: adaptive
  repetition for wall mode (``while needs_another_run(...) and runs < cap``).
- ``DETERMINISTIC_REASON``: the sentence a report prints for icount mode.
- ``ALPHA``: the significance level (0.05), compare_all's default and the one every
  report and attribution verdict uses.

Every result is a dataclass of plain Python values; ``Comparison.to_dict()`` is ready
for ``json.dumps``.

What is compared: one median per run, tested with Welch on the log scale
--------------------------------------------------------------------------
The independent unit of a kernellab experiment is the boot: the 11 in-guest repeats of
one run share a boot, a page-cache state and a stretch of host weather, so they are not
independent draws. Pooled across runs and fed to a rank test they make the test far too
sure of itself: comparing lab-minimal with itself in wall mode (12 runs x 11 repeats per
side), a pooled Mann-Whitney U test flagged 8 of 104 metrics after Holm's correction, a
false-positive rate of 8% where 5% was promised. So kernellab's reports compare the
per-run medians: each run contributes one number per metric (the median of its repeats,
which tames the outliers within the run), and the test sees as many samples as there were
boots.

With 5 to 12 runs a side, a rank test has too little resolution: Mann-Whitney's smallest
two-sided p-value for 5 against 5 is 0.008, which Holm's correction over a hundred
metrics turns into "never significant". Medians of 11 repeats are close to normally
distributed, so the default test (``test="welch-log"``) is Welch's unequal-variance t-test
on the log of the run medians: the log turns the multiplicative effect of a kernel option
into a shift and steadies the spread of latencies; Welch does not assume both kernels are
equally noisy. (Values that are not all positive, such as interrupt counts that can be
zero, are tested unlogged.) The Mann-Whitney U test remains available
(``test="mann-whitney"``) for samples that really are independent and plentiful; its
statistic is Cliff's delta rescaled, which is the effect size reported either way.

Confidence interval: percentile bootstrap
-----------------------------------------
The interval of the difference of medians is a percentile bootstrap: each sample is
resampled with replacement on its own, ``n_boot`` times, from a numpy Generator seeded
with ``seed``, so a report rebuilt from the same samples shows the same interval. BCa
was considered and not used: its acceleration term comes from a jackknife, which is
inconsistent for the median, and with ~11 samples the bootstrap distribution of a
median is discrete anyway, so the "correction" would mostly add noise. The interval is
per metric and not adjusted for multiplicity: it says how large the change is, the
adjusted p-value says whether to believe it. Its bounds in % of the reference come from
the same resamples' ratio of medians, not from the difference over the observed
reference median: a quantity that cannot go negative cannot drop more than 100%, and a
noisy reference would otherwise give bounds such as -118% (seen on ppc460's mmap).

Multiple comparisons: Holm by default
-------------------------------------
An experiment compares a few dozen metrics at once; at alpha = 0.05 about one in
twenty unchanged metrics would be flagged by chance. We default to Holm's step-down
method, which controls the family-wise error rate: the probability that *any* reported
regression is false stays below alpha. A false "regression" sends a kernel engineer
bisecting for days, and with a few dozen metrics Holm costs little power, so the
conservative promise is the right one. Benjamini-Hochberg (``method="bh"``), which
only bounds the expected *fraction* of false discoveries, is there for large screens
where some false leads are acceptable.

icount mode: an exact difference, no statistics
-----------------------------------------------
Under QEMU ``-icount`` every rerun of a variant is bit-identical. The in-guest repeats
within a run still differ slightly (a timer interrupt lands in some repeats and not in
others), but that pattern is itself deterministic and is reproduced identically on
every rerun. Feeding those repeats (or copies of identical reruns) to Mann-Whitney or
the bootstrap would be pseudo-replication: the "samples" are not independent draws
from any distribution, the p-value would shrink with the number of copies and mean
nothing. So with ``deterministic=True`` we report only the delta of medians, with
``testable=False`` and ``DETERMINISTIC_REASON``.

"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

DETERMINISTIC_REASON = (
    "icount mode: reruns are bit-identical; the difference is exact, not a statistical estimate"
)
SINGLE_SAMPLE_REASON = "a single sample on one side: no test or interval is possible"

# The significance level every comparison uses unless told otherwise: compare_all's
# Holm-adjusted p-values, a report's table (report.model) and attribution's verdict
# (experiments.probe) all test against it.
ALPHA = 0.05

# Phoronix Test Suite reruns a test while the relative standard deviation of its
# results is >= 3% (TestResultValidation/StandardDeviationThreshold, default 3.0).
# We keep the 3% but apply it to the half-width of the CI of the median: unlike the
# RSD, which is a property of the noise and does not shrink with more runs, the CI
# narrows roughly as 1/sqrt(n), so a loop on it terminates.
RERUN_TARGET_REL_CI = 0.03

BETTER = ("lower", "higher")
METHODS = ("holm", "bh")
TESTS = ("welch-log", "mann-whitney")

# Romano et al. (2006), thresholds on |Cliff's delta|.
_EFFECT_LABELS = ((0.147, "negligible"), (0.33, "small"), (0.474, "medium"))


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


@dataclass(frozen=True)
class Comparison:
    """One metric, ``other`` against ``ref``. Deltas are ``other - ref``.

    ``direction`` is the sign of the delta read through ``better`` ("worse", "better"
    or "same"); whether to believe it is ``significant`` (set by ``compare_all``; None
    when no test was possible, see ``reason``). ``ci_low``/``ci_high`` bound the
    difference of medians at ``confidence``; the ``_pct`` variants are the same
    bounds as % of the reference median. ``cliffs_delta`` > 0 means ``other`` tends
    to be larger.
    """

    better: str
    ref_median: float
    other_median: float
    n_ref: int
    n_other: int
    delta: float
    delta_pct: float | None
    direction: str
    testable: bool
    reason: str | None = None
    confidence: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p_value: float | None = None
    cliffs_delta: float | None = None
    effect: str | None = None
    adjusted_p: float | None = None
    significant: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_samples(ref: Sequence[float], other: Sequence[float], better: str,
                    confidence: float = 0.95, n_boot: int = 2000, seed: int = 0,
                    deterministic: bool = False, test: str = "welch-log") -> Comparison:
    """Compare one metric between two variants; see the module docstring for the why.

    ``deterministic=True`` (icount mode) and a single sample on either side give only
    the delta of medians, with ``testable=False`` and a ``reason``.
    """
    if better not in BETTER:
        raise ValueError(f"better must be one of {BETTER}, got {better!r}")
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    _check_confidence(confidence)
    a, b = _as_array(ref, "ref"), _as_array(other, "other")
    ref_med, other_med = float(np.median(a)), float(np.median(b))
    delta = other_med - ref_med
    base = Comparison(
        better=better, ref_median=ref_med, other_median=other_med, n_ref=len(a), n_other=len(b),
        delta=delta, delta_pct=delta_pct(other_med, ref_med),
        direction=_direction(delta, better), testable=False,
    )
    if deterministic:
        return replace(base, reason=DETERMINISTIC_REASON)
    if len(a) < 2 or len(b) < 2:
        return replace(base, reason=SINGLE_SAMPLE_REASON)
    (lo, hi), pct = _diff_of_medians_ci(a, b, confidence, n_boot, seed)
    lo_pct, hi_pct = pct if pct is not None else (_pct_of(lo, ref_med), _pct_of(hi, ref_med))
    cliff = _cliffs_delta(a, b)
    return replace(
        base, testable=True, confidence=float(confidence), ci_low=lo, ci_high=hi,
        ci_low_pct=lo_pct, ci_high_pct=hi_pct,
        p_value=_welch_log_p(a, b) if test == "welch-log" else _mann_whitney_p(a, b),
        cliffs_delta=cliff, effect=effect_label(cliff),
    )


def compare_all(pairs: Mapping[str, tuple[Sequence[float], Sequence[float], str]], *,
                alpha: float = ALPHA, method: str = "holm", confidence: float = 0.95,
                n_boot: int = 2000, seed: int = 0, deterministic: bool = False,
                test: str = "welch-log") -> dict[str, Comparison]:
    """Compare every metric and correct the p-values across them.

    ``pairs`` maps a metric name to ``(ref_samples, other_samples, better)``. Each
    returned Comparison has ``adjusted_p`` and ``significant`` (adjusted_p <= alpha)
    filled in; both stay None for metrics that could not be tested, and those do not
    count toward the number of comparisons. Every metric uses the same ``seed``, so a
    metric's interval does not depend on which other metrics were measured.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    names = list(pairs)
    raw = {name: compare_samples(*pairs[name], confidence=confidence, n_boot=n_boot,
                                 seed=seed, deterministic=deterministic, test=test) for name in names}
    adjusted = adjust([raw[name].p_value for name in names], method)
    return {
        name: replace(raw[name], adjusted_p=q, significant=None if q is None else q <= alpha)
        for name, q in zip(names, adjusted, strict=True)
    }


def adjust(p_values: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Adjust p-values for multiple comparisons: "holm" (FWER, default) or "bh" (FDR).

    None entries (metrics that could not be tested) stay None and do not count toward
    m. Results keep the input order, are monotone in the raw p-values and capped at 1.
    Holm is the default; the module docstring says why.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    present = [(i, float(p)) for i, p in enumerate(p_values) if p is not None]
    for _, p in present:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value out of [0, 1]: {p}")
    order = sorted(present, key=lambda ip: ip[1])
    ranked = [p for _, p in order]
    adjusted = _holm(ranked) if method == "holm" else _bh(ranked)
    out: list[float | None] = [None] * len(p_values)
    for (i, _), q in zip(order, adjusted, strict=True):
        out[i] = q
    return out


def effect_label(cliffs_delta: float) -> str:
    """Conventional magnitude of Cliff's delta (Romano et al. 2006)."""
    size = abs(cliffs_delta)
    for threshold, label in _EFFECT_LABELS:
        if size < threshold:
            return label
    return "large"


def median_ci(samples: Sequence[float], confidence: float = 0.95, n_boot: int = 2000,
              seed: int = 0) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the median; None for fewer than two samples."""
    _check_confidence(confidence)
    if len(samples) < 2:
        return None
    x = _as_array(samples, "samples")
    meds = _boot_medians(x, np.random.default_rng(seed), n_boot)
    return _percentile_interval(meds, confidence)


def needs_more(samples_by_variant: Mapping[str, Sequence[float]],
               target_rel_ci: float = RERUN_TARGET_REL_CI, confidence: float = 0.95,
               n_boot: int = 2000, seed: int = 0) -> bool:
    """Wall mode, one metric: is any variant's median still known too loosely?

    True when a variant has fewer than two samples (none yet included), or when the
    half-width of its bootstrap CI of the median exceeds ``target_rel_ci`` times
    |median| (default 3%, after the Phoronix Test Suite; see RERUN_TARGET_REL_CI).
    A zero median with a non-zero interval counts as imprecise; the runner's cap
    bounds that case. Not for icount mode, where another run adds nothing.
    """
    if target_rel_ci <= 0:
        raise ValueError(f"target_rel_ci must be > 0, got {target_rel_ci}")
    for samples in samples_by_variant.values():
        ci = median_ci(samples, confidence, n_boot, seed)
        if ci is None:
            return True
        half_width = (ci[1] - ci[0]) / 2
        median = abs(float(np.median(np.asarray(samples, dtype=float))))
        if half_width > target_rel_ci * median:
            return True
    return False


def imprecise_metrics(samples_by_metric: Mapping[str, Mapping[str, Sequence[float]]],
                      **kwargs: Any) -> list[str]:
    """Names of the metrics for which ``needs_more`` is true (for the runner's log).

    ``samples_by_metric`` maps metric -> variant -> samples; ``kwargs`` go to
    ``needs_more``.
    """
    return [m for m, by_variant in samples_by_metric.items() if needs_more(by_variant, **kwargs)]


def needs_another_run(samples_by_metric: Mapping[str, Mapping[str, Sequence[float]]],
                      **kwargs: Any) -> bool:
    """Wall mode, all metrics: should the runner do one more run of every variant?

    Meant for ``while needs_another_run(samples) and runs < cap``.
    """
    return bool(imprecise_metrics(samples_by_metric, **kwargs))


def _as_array(samples: Sequence[float], what: str) -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{what}: need a non-empty list of numbers")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: samples must be finite")
    return x


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _direction(delta: float, better: str) -> str:
    if delta == 0:
        return "same"
    went_up = delta > 0
    return "worse" if went_up == (better == "lower") else "better"


def _pct_of(value: float, reference: float) -> float | None:
    return None if reference == 0 else 100.0 * value / abs(reference)


def _boot_medians(x: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    medians: np.ndarray = np.median(x[idx], axis=1)
    return medians


def _percentile_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return float(lo), float(hi)


def _diff_of_medians_ci(a: np.ndarray, b: np.ndarray, confidence: float, n_boot: int, seed: int
                        ) -> tuple[tuple[float, float], tuple[float, float] | None]:
    """The interval of b's median minus a's, and of the same change in % of a's median
    (None where the ratio is undefined: a sample that is not positive)."""
    rng = np.random.default_rng(seed)
    med_b, med_a = _boot_medians(b, rng, n_boot), _boot_medians(a, rng, n_boot)
    diff = _percentile_interval(med_b - med_a, confidence)
    if not (np.all(a > 0) and np.all(b >= 0)):
        return diff, None
    return diff, _percentile_interval(100.0 * (med_b / med_a - 1.0), confidence)


def _welch_log_p(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's t-test, on the log scale when every value is positive: a kernel option
    scales a cost (multiplicative), and the log steadies the spread of latencies."""
    if np.all(a > 0) and np.all(b > 0):
        a, b = np.log(a), np.log(b)
    if np.all(a == a[0]) and np.all(b == b[0]):
        return 1.0 if a[0] == b[0] else 0.0
    with warnings.catch_warnings():
        # Nearly identical samples make scipy warn of precision loss; the p-value it
        # returns then (or NaN, read as "no evidence") is what we want anyway.
        warnings.simplefilter("ignore", RuntimeWarning)
        from scipy.stats import ttest_ind  # scipy costs a second to import: only when testing
        p = float(ttest_ind(b, a, equal_var=False).pvalue)
    return 1.0 if math.isnan(p) else min(max(p, 0.0), 1.0)


def _mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    # All values tied: the rank statistic has zero variance and scipy returns NaN;
    # the samples are indistinguishable, so p = 1.
    if np.all(a == a[0]) and np.all(b == a[0]):
        return 1.0
    from scipy.stats import mannwhitneyu
    p = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else min(max(p, 0.0), 1.0)


def _cliffs_delta(a: np.ndarray, b: np.ndarray) -> float:
    """P(other > ref) - P(other < ref) over all pairs."""
    return float(np.sign(b[:, None] - a[None, :]).mean())


def _holm(ranked: list[float]) -> list[float]:
    """Holm step-down on ascending p-values: max over j <= i of (m - j) p_j, capped."""
    m, running, out = len(ranked), 0.0, []
    for j, p in enumerate(ranked):
        running = max(running, min(1.0, (m - j) * p))
        out.append(running)
    return out


def _bh(ranked: list[float]) -> list[float]:
    """Benjamini-Hochberg on ascending p-values: min over j >= i of m p_j / (j + 1)."""
    m, running, out = len(ranked), 1.0, []
    for j in range(m - 1, -1, -1):
        running = min(running, m * ranked[j] / (j + 1))
        out.append(running)
    return out[::-1]
