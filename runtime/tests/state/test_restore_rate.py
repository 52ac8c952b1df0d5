"""RecentRate: a restore's records per second over the recent window, not since the start."""

from __future__ import annotations

import pytest
from streamapp.state.restore_rate import RecentRate


def test_the_rate_is_none_until_two_samples_lie_apart_in_time() -> None:
    rate = RecentRate(now=0.0)
    assert rate.rate() is None
    rate.observe(0.0, 50)
    assert rate.rate() is None
    rate.observe(2.0, 50)
    assert rate.rate() == 25.0


def test_the_rate_follows_the_last_window_not_the_whole_restore() -> None:
    rate = RecentRate(now=0.0, window_s=10.0)
    for second in range(1, 31):  # 1000/s for 20 s, then 100/s
        rate.observe(float(second), 1000 * min(second, 20) + 100 * max(0, second - 20))
    assert rate.rate() == pytest.approx(100.0)


def test_a_stalled_restore_reaches_a_rate_of_zero_within_the_window() -> None:
    rate = RecentRate(now=0.0, window_s=10.0)
    rate.observe(1.0, 500)
    for second in range(2, 13):
        rate.observe(float(second), 500)
    assert rate.rate() == 0.0


def test_frequent_samples_are_merged_so_memory_stays_bounded() -> None:
    rate = RecentRate(now=0.0, window_s=10.0)
    for step in range(1, 100_001):
        rate.observe(step / 1000, step)  # a sample every millisecond for 100 s
    assert len(rate._samples) <= 23
    assert rate.rate() == pytest.approx(1000.0)


def test_a_window_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="window_s must be positive"):
        RecentRate(now=0.0, window_s=0.0)
