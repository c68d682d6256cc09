"""Capacity by hour of day and growth from the data, on synthetic multi-day logs whose answer
is known by construction."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from planner.review.hourly import growth_trend, hourly_capacity, next_quarter_end, rule_count
from profiles.arrivals import arrival_stats, clock_hour_peaks

MONDAY = dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()  # 2024-01-01 was a Monday


def _rate(day: int, hour: int) -> float:
    """Weekdays: 0.1 req/s at night, 0.4 from 08 to 20, 0.2 in the evening; weekends half."""
    rate = 0.1 if hour < 8 else 0.4 if hour < 20 else 0.2
    return rate / 2 if day % 7 >= 5 else rate


def _even_log(days: int) -> np.ndarray:
    """Evenly spaced arrivals: every clock minute of an hour holds exactly 60 x rate requests."""
    parts = []
    for day in range(days):
        for hour in range(24):
            r = _rate(day, hour)
            top = MONDAY + (day * 24 + hour) * 3600.0
            parts.append(top + (np.arange(int(round(3600 * r))) + 0.5) / r)
    return np.concatenate(parts)


def test_instances_per_hour_known_by_construction() -> None:
    epoch = _even_log(14)
    clock = arrival_stats(epoch - epoch[0], float(epoch[0])).clock_hours
    assert clock is not None
    # limit 0.15 req/s, 20 % headroom, N+1: ceil(rate x 1.2 / 0.15) + 1 instances.
    # 0.05 and 0.1 -> 2; 0.2 -> 3; 0.4 -> 5.
    count = rule_count(1.0, 0.2, 1, 0.15, 1.0)
    hourly = hourly_capacity(clock, count, tp=2, gpu_hour_price_usd=2.0, scale_up_delay_s=1800)
    assert hourly is not None
    days = {d.day_type: d for d in hourly.day_types}
    assert days["weekday"].instances == [2] * 8 + [5] * 12 + [3] * 4
    assert days["weekend"].instances == [2] * 8 + [3] * 12 + [2] * 4
    assert (days["weekday"].days, days["weekend"].days) == (10, 4)
    assert (hourly.peak_instances, hourly.trough_instances) == (5, 2)
    options = {o.kind: o for o in hourly.options}
    # Peak all day: 5 instances x 2 GPUs x 730 h.
    assert options["peak_all_day"].gpu_hours_per_month == pytest.approx(5 * 2 * 730)
    # Schedule: weekday hours sum to 8x2 + 12x5 + 4x3 = 88, weekend 8x2 + 12x3 + 4x2 = 60.
    schedule = (5 * 88 + 2 * 60) / 168
    assert options["fixed_schedule"].gpu_hours_per_month == pytest.approx(schedule * 2 * 730)
    assert options["fixed_schedule"].monthly_cost_usd == pytest.approx(schedule * 2 * 730 * 2.0)
    # Autoscaled, 30 min load time: each rise at 08:00 is held half an hour early: weekdays
    # +3 x 0.5, weekends +1 x 0.5; two weeks: 2 x (5 x 1.5 + 2 x 0.5) = 17 instance-hours.
    auto = (2 * (5 * 88 + 2 * 60) + 17) / 336
    assert options["autoscaled"].gpu_hours_per_month == pytest.approx(auto * 2 * 730)


def test_under_a_day_has_no_hourly_capacity() -> None:
    epoch = _even_log(2)
    epoch = epoch[epoch < MONDAY + 20 * 3600]
    assert arrival_stats(epoch - epoch[0], float(epoch[0])).clock_hours is None


def test_growth_recovers_known_weekly_trend() -> None:
    """8 weeks; the weekly peak hour (Wednesday 14:00) grows 10 % a week on Poisson traffic."""
    rng = np.random.default_rng(3)
    weeks, growth = 8, 0.10
    span = weeks * 7 * 86400.0
    base = np.cumsum(rng.exponential(1 / 0.02, size=int(span * 0.02 * 1.1)))
    parts = [MONDAY + base[base < span]]
    for w in range(weeks):
        rate = 10.0 * (1 + growth) ** w
        top = MONDAY + (w * 7 + 2) * 86400.0 + 14 * 3600.0
        parts.append(top + np.sort(rng.uniform(0, 3600, rng.poisson(rate * 3600))))
    epoch = np.sort(np.concatenate(parts))
    trend = growth_trend(clock_hour_peaks(epoch), level=0.9)
    assert trend is not None
    assert trend.model == "exponential"
    assert trend.weeks == weeks
    assert trend.weekly_growth == pytest.approx(growth, rel=0.10)
    assert trend.horizon == "2024-06-30"
    true_growth = (1 + growth) ** trend.horizon_weeks
    assert trend.growth == pytest.approx(true_growth, rel=0.10)
    assert trend.growth_low < true_growth < trend.growth_high


def test_too_few_weeks_no_trend() -> None:
    assert growth_trend(clock_hour_peaks(_even_log(14)), level=0.9) is None


def test_next_quarter_end() -> None:
    assert next_quarter_end(dt.date(2024, 2, 25)) == dt.date(2024, 6, 30)
    assert next_quarter_end(dt.date(2024, 11, 3)) == dt.date(2025, 3, 31)
    assert next_quarter_end(dt.date(2024, 9, 30)) == dt.date(2024, 12, 31)
