"""Arrival statistics: rates over windows, burstiness, daily and weekly shape, bursts, a series.

Pure functions over a sorted numpy array of arrival times in seconds; no I/O.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from profiles.model import WINDOWS, Arrivals, Burst, GammaShape, RateSeries

WINDOW_S = {"1s": 1.0, "10s": 10.0, "60s": 60.0}
BURST_WINDOW_S = 10.0
BURST_BASELINE_WINDOWS = 31  # rolling-median baseline over about 5 minutes of 10 s windows
MAX_BURSTS = 50
MAX_SERIES_POINTS = 600
_SERIES_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
BURST_RULE = (
    "a run of 10 s windows whose count is at least twice the baseline and at least 4 Poisson "
    "standard deviations above it; the baseline is the rolling median of the surrounding 5 "
    "minutes, and never below the log's mean"
)


def window_counts(t: np.ndarray, window_s: float, duration_s: float) -> tuple[np.ndarray, float]:
    """Requests per full window from the first arrival, and the window length used.

    Arrivals in a last partial window are left out; a span shorter than one window is one
    window of the span's length.
    """
    n_full = int(duration_s // window_s)
    if n_full < 1:
        return np.array([t.size], dtype=np.int64), max(duration_s, 1e-9)
    idx = ((t - t[0]) // window_s).astype(np.int64)
    counts = np.bincount(idx[idx < n_full], minlength=n_full)
    return counts, window_s


def gamma_shape(gaps: np.ndarray) -> GammaShape:
    """Gamma shape of inter-arrival times by moments (1/CV^2) and by maximum likelihood.

    The MLE uses the positive gaps only (ties at the log's time resolution have log 0 = -inf).
    """
    if gaps.size < 2 or gaps.mean() <= 0:
        return GammaShape(moments=None, mle=None)
    cv = gaps.std() / gaps.mean()
    moments = float(1 / cv**2) if cv > 0 else None
    pos = gaps[gaps > 0]
    mle = None
    if pos.size >= 2:
        s = math.log(pos.mean()) - float(np.log(pos).mean())
        if s > 1e-12:
            k = (3 - s + math.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s)
            for _ in range(50):
                step = (math.log(k) - float(special.digamma(k)) - s) / (
                    1 / k - float(special.polygamma(1, k))
                )
                k = max(k - step, k / 10)
                if abs(step) < 1e-10 * k:
                    break
            mle = float(k)
    return GammaShape(moments=moments, mle=mle)


def detect_bursts(t: np.ndarray, duration_s: float) -> list[Burst]:
    """Bursts by BURST_RULE, the highest peaks first (at most MAX_BURSTS)."""
    counts, w = window_counts(t, BURST_WINDOW_S, duration_s)
    if counts.size < 3:
        return []
    half = BURST_BASELINE_WINDOWS // 2
    padded = np.pad(counts.astype(np.float64), half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, BURST_BASELINE_WINDOWS)
    # A quiet stretch has a median of 0: the whole log's mean is the floor of the baseline.
    baseline = np.maximum(np.median(windows, axis=1), counts.mean())
    hot = (counts >= 2 * baseline) & (counts >= baseline + 4 * np.sqrt(baseline) + 1)
    bursts: list[Burst] = []
    edges = np.flatnonzero(np.diff(np.concatenate(([0], hot.astype(np.int8), [0]))))
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        bursts.append(
            Burst(
                start_s=float(t[0] + start * w),
                duration_s=float((stop - start) * w),
                peak_rate_rps=float(counts[start:stop].max() / w),
            )
        )
    bursts.sort(key=lambda b: -b.peak_rate_rps)
    return bursts[:MAX_BURSTS]


def rate_series(t: np.ndarray, duration_s: float) -> RateSeries:
    """Request rate in bins of a round size, at most MAX_SERIES_POINTS of them."""
    bin_s = next(
        (b for b in _SERIES_BINS_S if duration_s / b <= MAX_SERIES_POINTS), _SERIES_BINS_S[-1]
    )
    n_bins = max(1, math.ceil(duration_s / bin_s)) if duration_s > 0 else 1
    idx = np.minimum(((t - t[0]) // bin_s).astype(np.int64), n_bins - 1)
    counts = np.bincount(idx, minlength=n_bins).astype(np.float64)
    lengths = np.full(n_bins, float(bin_s))
    if duration_s > 0:
        lengths[-1] = max(duration_s - (n_bins - 1) * bin_s, 1e-9) if n_bins > 1 else duration_s
    rates = counts / lengths
    return RateSeries(bin_s=float(bin_s), rates_rps=[round(float(r), 6) for r in rates])


def _periodic_shape(
    epoch_s: np.ndarray, start: float, end: float, bin_s: float, period: int, offset: int = 0
) -> list[float]:
    """Mean rate per phase (hour of day, weekday): arrivals / covered seconds in that phase."""
    first_bin = math.floor(start / bin_s)
    last_bin = math.floor(end / bin_s)
    bins = np.arange(first_bin, last_bin + 1)
    lo = np.maximum(bins * bin_s, start)
    hi = np.minimum((bins + 1) * bin_s, end)
    exposure = np.clip(hi - lo, 0, None)
    counts = np.bincount(
        (np.floor(epoch_s / bin_s).astype(np.int64) - first_bin), minlength=bins.size
    )
    phase = (bins + offset) % period
    exp_by = np.bincount(phase, weights=exposure, minlength=period)
    cnt_by = np.bincount(phase, weights=counts[: bins.size], minlength=period)
    return [float(c / e) if e > 0 else 0.0 for c, e in zip(cnt_by, exp_by, strict=True)]


def arrival_stats(t: np.ndarray, start_epoch_s: float | None) -> Arrivals:
    """Arrival statistics of sorted arrival times `t` (s); `start_epoch_s` is the UTC epoch of
    t = 0 when the log has wall-clock times (for hour-of-day and weekday shapes)."""
    n = int(t.size)
    duration = float(t[-1] - t[0]) if n else 0.0
    mean_rate = n / duration if duration > 0 else 0.0
    peak: dict[str, float] = {}
    p2m: dict[str, float] = {}
    fano: dict[str, float] = {}
    pct: dict[str, list[float]] = {}
    for name in WINDOWS:
        counts, w = window_counts(t, WINDOW_S[name], duration)
        rates = counts / w
        peak[name] = float(rates.max())
        p2m[name] = float(rates.max() / mean_rate) if mean_rate > 0 else 0.0
        fano[name] = float(counts.var() / counts.mean()) if counts.mean() > 0 else 0.0
        pct[name] = [round(float(x), 6) for x in np.percentile(rates, np.arange(101))]
    gaps = np.diff(t)
    cv = float(gaps.std() / gaps.mean()) if gaps.size >= 2 and gaps.mean() > 0 else None
    hour = weekday = None
    if start_epoch_s is not None and n:
        epoch = t + start_epoch_s
        start, end = float(epoch[0]), float(epoch[-1])
        if duration >= 86400:
            hour = _periodic_shape(epoch, start, end, 3600.0, 24)
        if duration >= 7 * 86400:
            # 1970-01-01 was a Thursday: day 0 is weekday 3 when Monday is 0.
            weekday = _periodic_shape(epoch, start, end, 86400.0, 7, offset=3)
    return Arrivals(
        duration_s=duration,
        mean_rate_rps=mean_rate,
        interarrival_cv=cv,
        gamma_shape=gamma_shape(gaps),
        peak_rate_rps=peak,
        peak_to_mean=p2m,
        fano=fano,
        window_rate_percentiles=pct,
        hour_of_day=hour,
        weekday=weekday,
        bursts=detect_bursts(t, duration) if n else [],
        burst_window_s=BURST_WINDOW_S,
        burst_rule=BURST_RULE,
        rate_series=rate_series(t, duration) if n else RateSeries(bin_s=1.0, rates_rps=[]),
    )
