"""The arrival rate an autoscaler faces, step by step, rebuilt from what a profile stores.

A profile keeps a rate series of at most 600 points, the peak minute of every clock hour
(logs and metrics that span a day or more), the mean rate per hour of day and the bursts it
detected. `build_trace` uses the finest of these:

- a rate series with bins of a step or less (logs up to 10 hours): the measured rates, summed
  into steps; the bursts the profile detected mark where the burst minutes are;
- else the clock hours: each hour holds its mean, estimated as the hour's peak minute times
  the hour of day's mean-to-peak ratio (mean rate of that hour of day over the mean of its
  peaks), and its peak minute at one seeded step of the hour; each day's highest minute is
  the day's burst;
- else the rate series held over its bins.

Rates are multiplied by the plan's growth. Hours of day are UTC, from the profile's first
clock hour or first timestamp.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from contracts.errors import ConfigError
from profiles.model import Profile


@dataclass(frozen=True, kw_only=True)
class Trace:
    """Arrival rate per step, the UTC second of day of its start, and the burst starts."""

    step_s: float
    rate_rps: np.ndarray
    day_offset_s: float
    burst_starts_s: tuple[float, ...]
    how: str

    @property
    def horizon_s(self) -> float:
        return len(self.rate_rps) * self.step_s

    def hour_of_day(self) -> np.ndarray:
        """UTC hour of day (0..23) of every step."""
        t = self.day_offset_s + np.arange(len(self.rate_rps)) * self.step_s
        return ((t // 3600) % 24).astype(np.int64)


def _rebin(rates: np.ndarray, bin_s: float, step_s: float) -> np.ndarray:
    k = max(1, int(round(step_s / bin_s)))
    padded = np.pad(rates, (0, -len(rates) % k), constant_values=np.nan)
    return np.nan_to_num(np.nanmean(padded.reshape(-1, k), axis=1))


def _offset_of(profile: Profile) -> float:
    first = profile.source.first_timestamp
    if not first:
        return 0.0
    try:
        stamp = dt.datetime.fromisoformat(first)
    except ValueError:
        return 0.0
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return float(stamp.timestamp() % 86400)


def _from_clock_hours(profile: Profile, step_s: float, rng: np.random.Generator) -> Trace:
    arrivals = profile.arrivals
    clock = arrivals.clock_hours
    assert clock is not None
    peaks = np.asarray(clock.peak_rps, dtype=float)
    hod = ((clock.first_hour_epoch_s // 3600 + np.arange(len(peaks))) % 24).astype(np.int64)
    covered = np.asarray(clock.covered_s) > 0
    ratio = np.ones(24)
    if arrivals.hour_of_day is not None:
        for h in range(24):
            sel = (hod == h) & covered & (peaks > 0)
            if sel.any():
                ratio[h] = min(1.0, arrivals.hour_of_day[h] / float(peaks[sel].mean()))
    per_hour = max(1, int(round(3600.0 / step_s)))
    levels = np.repeat(peaks * ratio[hod], per_hour)
    peak_at = np.arange(len(peaks)) * per_hour + rng.integers(0, per_hour, len(peaks))
    levels[peak_at] = peaks
    keep = np.repeat(covered, per_hour)
    levels = np.where(keep, levels, 0.0)
    day_hours = 24
    bursts = []
    for d in range(0, len(peaks), day_hours):
        block = peaks[d : d + day_hours]
        if block.size and block.max() > 0:
            bursts.append(float(peak_at[d + int(block.argmax())] * step_s))
    return Trace(
        step_s=step_s,
        rate_rps=levels,
        day_offset_s=float(clock.first_hour_epoch_s % 86400),
        burst_starts_s=tuple(bursts),
        how=(
            f"{len(peaks)} clock hours: each hour at its peak minute x the hour of day's "
            "mean-to-peak ratio, with its peak minute at one seeded step; bursts: each day's "
            "highest minute"
        ),
    )


def build_trace(profile: Profile, step_s: float, growth: float, rng: np.random.Generator) -> Trace:
    """The per-step arrival rate of `profile` x `growth`. Raises ConfigError for an empty one."""
    if step_s <= 0:
        raise ConfigError(f"the autoscale step must be > 0 s, got {step_s}")
    series = profile.arrivals.rate_series
    rates = np.asarray(series.rates_rps, dtype=float)
    if series.bin_s <= step_s and rates.size:
        stepped = _rebin(rates, series.bin_s, step_s)
        trace = Trace(
            step_s=step_s,
            rate_rps=stepped,
            day_offset_s=_offset_of(profile),
            burst_starts_s=tuple(sorted(b.start_s for b in profile.arrivals.bursts)),
            how=f"the profile's rate series ({series.bin_s:g} s bins) summed into steps",
        )
    elif profile.arrivals.clock_hours is not None:
        trace = _from_clock_hours(profile, step_s, rng)
    elif rates.size:
        held = np.repeat(rates, max(1, int(round(series.bin_s / step_s))))
        trace = Trace(
            step_s=step_s,
            rate_rps=held,
            day_offset_s=_offset_of(profile),
            burst_starts_s=tuple(sorted(b.start_s for b in profile.arrivals.bursts)),
            how=f"the profile's rate series held over its {series.bin_s:g} s bins",
        )
    else:
        raise ConfigError("the profile has no rate series to simulate an autoscaler over")
    if trace.rate_rps.max(initial=0.0) <= 0:
        raise ConfigError("the profile's rate series is all zero: nothing to autoscale")
    return Trace(
        step_s=trace.step_s,
        rate_rps=trace.rate_rps * growth,
        day_offset_s=trace.day_offset_s,
        burst_starts_s=trace.burst_starts_s,
        how=trace.how + (f"; x {growth:g} growth" if growth != 1 else ""),
    )
