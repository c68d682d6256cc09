"""The per-minute trace rebuilt from what a profile stores: a metrics profile's clock-hour peaks
stay the peaks, its hour-of-day means stay the means, each day has its burst; a log's fine
rate series is used as measured."""

from __future__ import annotations

import numpy as np
import pytest

from planner.autoscale.trace import build_trace
from profiles.presets import preset_profile
from profiles.prometheus.stats import arrivals_from_steps
from testkit.prom_fleet import END_EPOCH_S, STEP_S, rate_rps


def test_clock_hours_rebuild_peaks_and_means() -> None:
    days = 4
    start = END_EPOCH_S - days * 86400
    t = start + STEP_S * np.arange(days * 86400 // STEP_S)
    counts = np.random.default_rng(1).poisson(rate_rps(t, 20.0) * STEP_S).astype(float)
    arrivals = arrivals_from_steps(counts, STEP_S, float(start))
    profile = preset_profile("chat").model_copy(update={"arrivals": arrivals})
    trace = build_trace(profile, 60.0, 1.5, np.random.default_rng(0))
    clock = arrivals.clock_hours
    assert clock is not None and arrivals.hour_of_day is not None
    per_hour = trace.rate_rps.reshape(-1, 60)
    assert per_hour.max(axis=1) == pytest.approx(1.5 * np.asarray(clock.peak_rps))
    hod = trace.hour_of_day()
    for h in range(24):
        mean = trace.rate_rps[hod == h].mean() / 1.5
        assert mean == pytest.approx(arrivals.hour_of_day[h], rel=0.03)
    assert len(trace.burst_starts_s) == days
    assert trace.day_offset_s == clock.first_hour_epoch_s % 86400


def test_fine_rate_series_is_summed_into_steps() -> None:
    profile = preset_profile("chat", rate_rps=10.0)
    series = profile.arrivals.rate_series
    trace = build_trace(profile, 60.0, 1.0, np.random.default_rng(0))
    k = int(60 / series.bin_s)
    rates = np.asarray(series.rates_rps)
    assert trace.rate_rps[0] == pytest.approx(rates[:k].mean())
    assert len(trace.rate_rps) == -(-len(rates) // k)
