import pytest

from kernellab.stats import delta_pct, summarize


def test_single_sample():
    s = summarize([5.0])
    assert (s.median, s.n, s.iqr, s.rel_spread_pct) == (5.0, 1, 0.0, 0.0)


def test_median_and_iqr():
    s = summarize([1, 2, 3, 4, 100])
    assert s.median == 3 and s.n == 5 and s.low == 1 and s.high == 100
    assert (s.q1, s.q3) == (2, 4)
    assert s.rel_spread_pct == pytest.approx(100 * 1 / 3)


def test_delta():
    assert delta_pct(110, 100) == pytest.approx(10)
    assert delta_pct(90, 100) == pytest.approx(-10)
    assert delta_pct(1, 0) is None


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        summarize([])
