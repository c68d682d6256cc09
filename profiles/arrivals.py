"""Arrival statistics: rates over windows, burstiness, daily and weekly shape, bursts, a series.

Pure functions over a sorted numpy array of arrival times in seconds; no I/O.
"""

from __future__ import annotations

import math

import numpy as np

from contracts.errors import InputError
from profiles.model import WINDOWS, Arrivals, Burst, ClockHours, GammaShape, RateSeries
from profiles.readers.timeunits import MAX_SPAN_S
from profiles.vector import dot

WINDOW_S = {"1s": 1, "10s": 10, "60s": 60}
BURST_WINDOW_S = 10
BURST_BASELINE_WINDOWS = 31  # rolling-median baseline over about 5 minutes of 10 s windows
MAX_BURSTS = 50
MAX_SERIES_POINTS = 600
_SERIES_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
BURST_RULE = (
    "a run of 10 s windows whose count is at least twice the baseline and at least 4 Poisson "
    "standard deviations above it; the baseline is the rolling median of the surrounding 5 "
    "minutes, and never below the log's mean"
)


class SecondCounts:
    """Requests per whole second from the first arrival: every window of whole seconds is
    summed from these, so the arrival times are binned once."""

    def __init__(self, t: np.ndarray) -> None:
        self.n = int(t.size)
        self.duration_s = float(t[-1] - t[0]) if self.n else 0.0
        self.per_s = np.bincount((t - t[0]).astype(np.int64)) if self.n else np.zeros(1, np.int64)

    @classmethod
    def of_counts(cls, per_s: np.ndarray, n: int, duration_s: float) -> SecondCounts:
        """From requests per whole second already counted (the streaming profiler's fold)."""
        sc = cls.__new__(cls)
        sc.n, sc.duration_s, sc.per_s = n, duration_s, per_s
        return sc

    def windows(self, window_s: int) -> tuple[np.ndarray, float]:
        """Requests per full window and the window length used.

        Arrivals in a last partial window are left out; a span shorter than one window is one
        window of the span's length (at least 1 s, so a burst at one instant reads as n req/s).
        """
        n_full = int(self.duration_s // window_s)
        if n_full < 1:
            return np.array([self.n], dtype=np.int64), max(self.duration_s, 1.0)
        return self.per_s[: n_full * window_s].reshape(n_full, window_s).sum(axis=1), float(
            window_s
        )

    def bins(self, bin_s: int) -> np.ndarray:
        """Requests per bin of `bin_s` seconds, the last bin partial."""
        n_bins = max(1, math.ceil(self.duration_s / bin_s)) if self.duration_s > 0 else 1
        padded = np.zeros(max(n_bins * bin_s, self.per_s.size), dtype=np.int64)
        padded[: self.per_s.size] = self.per_s
        counts = padded[: n_bins * bin_s].reshape(n_bins, bin_s).sum(axis=1)
        counts[-1] += padded[n_bins * bin_s :].sum()  # an arrival exactly at the end
        return counts


MLE_MAX_GAPS = 1_000_000


def digamma(x: float) -> float:
    """psi(x) for x > 0: recurrence up to x >= 6, then the asymptotic series (error < 1e-12)."""
    acc = 0.0
    while x < 6.0:
        acc -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    return acc + math.log(x) - 0.5 / x - series


def trigamma(x: float) -> float:
    """psi'(x) for x > 0: recurrence up to x >= 6, then the asymptotic series."""
    acc = 0.0
    while x < 6.0:
        acc += 1.0 / (x * x)
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    series = inv2 * inv * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))
    return acc + inv + 0.5 * inv2 + series


def gamma_shape(gaps: np.ndarray, cv: float | None) -> GammaShape:
    """Gamma shape of inter-arrival times by moments (1/CV^2) and by maximum likelihood.

    The MLE uses the positive gaps only (ties at the log's time resolution have log 0 = -inf),
    and every k-th of them when there are more than MLE_MAX_GAPS (the estimate's own standard
    error at a million gaps is far below the model's misfit).
    """
    if cv is None:
        return GammaShape(moments=None, mle=None)
    stride = max(1, gaps.size // MLE_MAX_GAPS)
    pos = gaps[::stride]
    pos = pos[pos > 0]
    return gamma_of_sums(cv, int(pos.size), float(pos.sum()), float(np.log(pos).sum()))


def gamma_of_sums(cv: float | None, count: int, total_s: float, log_sum: float) -> GammaShape:
    """GammaShape from the inter-arrival CV and the count, sum and sum of logs of the positive
    gaps taken for the MLE."""
    if cv is None:
        return GammaShape(moments=None, mle=None)
    moments = float(1 / cv**2) if cv > 0 else None
    if count < 2:
        return GammaShape(moments=moments, mle=None)
    mean, mean_log = total_s / count, log_sum / count
    return GammaShape(
        moments=moments,
        mle=gamma_mle(mean, mean_log),
        positive_gaps=count,
        mean_positive_gap_s=mean,
        mean_log_positive_gap=mean_log,
    )


def gamma_mle(mean: float, mean_log: float) -> float | None:
    """Maximum-likelihood gamma shape from the sufficient statistics of positive gaps."""
    s = math.log(mean) - mean_log
    if s <= 1e-12:
        return None
    k = (3 - s + math.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s)
    for _ in range(50):
        step = (math.log(k) - digamma(k) - s) / (1 / k - trigamma(k))
        k = max(k - step, k / 10)
        if abs(step) < 1e-10 * k:
            break
    return float(k)


def detect_bursts(sc: SecondCounts, t0: float) -> list[Burst]:
    """Bursts by BURST_RULE, the highest peaks first (at most MAX_BURSTS)."""
    counts, w = sc.windows(BURST_WINDOW_S)
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
                start_s=float(t0 + start * w),
                duration_s=float((stop - start) * w),
                peak_rate_rps=float(counts[start:stop].max() / w),
            )
        )
    bursts.sort(key=lambda b: -b.peak_rate_rps)
    return bursts[:MAX_BURSTS]


def rate_series(sc: SecondCounts) -> RateSeries:
    """Request rate in bins of a round size, at most MAX_SERIES_POINTS of them."""
    duration_s = sc.duration_s
    bin_s = next(
        (b for b in _SERIES_BINS_S if duration_s / b <= MAX_SERIES_POINTS), _SERIES_BINS_S[-1]
    )
    counts = sc.bins(bin_s).astype(np.float64)
    n_bins = counts.size
    lengths = np.full(n_bins, float(bin_s))
    if duration_s > 0:
        lengths[-1] = max(duration_s - (n_bins - 1) * bin_s, 1e-9) if n_bins > 1 else duration_s
    rates = counts / lengths
    return RateSeries(bin_s=float(bin_s), rates_rps=[round(float(r), 6) for r in rates])


def periodic_shape(
    counts: np.ndarray, start: float, end: float, bin_s: float, period: int, offset: int = 0
) -> list[float]:
    """Mean rate per phase (hour of day, weekday): arrivals / covered seconds in that phase.

    `counts[i]` is the arrivals in the clock bin floor(start / bin_s) + i (epoch seconds).
    """
    first_bin = math.floor(start / bin_s)
    last_bin = math.floor(end / bin_s)
    bins = np.arange(first_bin, last_bin + 1)
    lo = np.maximum(bins * bin_s, start)
    hi = np.minimum((bins + 1) * bin_s, end)
    exposure = np.clip(hi - lo, 0, None)
    if counts.size < bins.size:
        counts = np.pad(counts, (0, bins.size - counts.size))
    phase = (bins + offset) % period
    exp_by = np.bincount(phase, weights=exposure, minlength=period)
    cnt_by = np.bincount(phase, weights=counts[: bins.size], minlength=period)
    return [float(c / e) if e > 0 else 0.0 for c, e in zip(cnt_by, exp_by, strict=True)]


def clock_hour_peaks(epoch_s: np.ndarray, window_s: int = 60) -> ClockHours:
    """The highest rate over clock-aligned `window_s` windows in every UTC clock hour.

    `epoch_s` are sorted arrival times (UTC epoch seconds). Hours without traffic inside the
    span have a peak of 0; `covered_s` says how much of each hour the span covers.
    """
    start, end = float(epoch_s[0]), float(epoch_s[-1])
    first_hour = math.floor(start / 3600.0)
    idx = np.floor(epoch_s / window_s).astype(np.int64) - first_hour * (3600 // window_s)
    return clock_hours_of(np.bincount(idx), start, end, window_s)


def clock_hours_of(
    counts: np.ndarray, start: float, end: float, window_s: int = 60, *, span_end: bool = False
) -> ClockHours:
    """ClockHours from arrivals per clock-aligned window, `counts[0]` being the first window of
    the hour of `start` (epoch seconds; `end` is the last arrival's, or with `span_end` the end
    of a span the counts cover, which belongs to no hour of its own)."""
    first_hour = math.floor(start / 3600.0)
    last_hour = math.ceil(end / 3600.0) - 1 if span_end else math.floor(end / 3600.0)
    n_hours = last_hour - first_hour + 1
    per_hour = 3600 // window_s
    counts = np.pad(counts, (0, max(0, n_hours * per_hour - counts.size)))
    counts = counts[: n_hours * per_hour]
    peaks = counts.reshape(n_hours, per_hour).max(axis=1) / float(window_s)
    tops = (first_hour + np.arange(n_hours)) * 3600.0
    covered = np.clip(np.minimum(tops + 3600.0, end) - np.maximum(tops, start), 0.0, None)
    return ClockHours(
        first_hour_epoch_s=float(first_hour * 3600.0),
        window_s=float(window_s),
        peak_rps=[round(float(x), 6) for x in peaks],
        covered_s=[float(x) for x in covered],
    )


def arrival_stats(t: np.ndarray, start_epoch_s: float | None) -> Arrivals:
    """Arrival statistics of sorted arrival times `t` (s); `start_epoch_s` is the UTC epoch of
    t = 0 when the log has wall-clock times (for hour-of-day and weekday shapes).

    Raises InputError when the span is implausibly long (a timestamp-unit mistake).
    """
    n = int(t.size)
    duration = float(t[-1] - t[0]) if n else 0.0
    if duration > MAX_SPAN_S:
        raise InputError(
            f"the requests span {duration / 86400:,.0f} days; check the timestamps' unit "
            "(--time-unit) or split the log"
        )
    gaps = np.diff(t)
    mean_gap = float(gaps.mean()) if gaps.size >= 2 else 0.0
    cv = None
    if mean_gap > 0:
        var = max(dot(gaps, gaps) / gaps.size - mean_gap * mean_gap, 0.0)
        cv = math.sqrt(var) / mean_gap
    minutes = None
    if start_epoch_s is not None and n:
        first_day = math.floor((float(t[0]) + start_epoch_s) / 86400.0)
        at, counts = day_minute_counts(t, start_epoch_s, first_day)
        minutes = np.concatenate((np.zeros(at, dtype=np.int64), counts))
    return assemble_arrivals(
        SecondCounts(t), cv, gamma_shape(gaps, cv), start_epoch_s, minutes, float(t[0]) if n else 0
    )


def sorted_bin_counts(t: np.ndarray, width: float, offset: float) -> tuple[int, np.ndarray]:
    """Counts of sorted `t` in the bins [k * width + offset, (k + 1) * width + offset): the
    first non-empty bin's k and the counts from it to the last one.

    A value's bin is the number of edges at or below it (each edge computed as written), so
    chunks of a sorted array binned apart add up to the whole array binned at once. Few bins:
    a binary search per edge; many (a sparse log): a bincount of corrected bin numbers.
    """

    def edge(k: int) -> float:
        return k * width + offset

    def bin_of(x: float) -> int:
        k = math.floor((x - offset) / width)
        while edge(k) > x:
            k -= 1
        while edge(k + 1) <= x:
            k += 1
        return k

    k0, k1 = bin_of(float(t[0])), bin_of(float(t[-1]))
    if k1 - k0 <= 4 * t.size:
        edges = np.arange(k0 + 1, k1 + 1, dtype=np.float64) * width + offset
        pos = np.searchsorted(t, edges, side="left")
        return k0, np.diff(np.concatenate(([0], pos, [t.size]))).astype(np.int64)
    k = np.floor((t - offset) / width).astype(np.int64)
    k[t < k * width + offset] -= 1
    k[t >= (k + 1) * width + offset] += 1
    return k0, np.bincount(k - k0)


def day_minute_counts(
    t: np.ndarray, start_epoch_s: float, first_day: int
) -> tuple[int, np.ndarray]:
    """Arrivals per UTC minute of sorted `t` (s from `start_epoch_s`), as (index of the first
    count from the start of day `first_day`, counts)."""
    m0, counts = sorted_bin_counts(t, 60.0, -start_epoch_s)
    at = m0 - first_day * 1440
    if at < 0:  # a first arrival on the edge of midnight, by rounding: fold into the day
        counts = np.concatenate(([counts[: -at + 1].sum()], counts[-at + 1 :]))
        at = 0
    return at, counts


def assemble_arrivals(
    sc: SecondCounts,
    cv: float | None,
    shape: GammaShape,
    start_epoch_s: float | None,
    day_minutes: np.ndarray | None,
    t0: float = 0.0,
) -> Arrivals:
    """Arrivals from the per-second counts, the inter-arrival CV and gamma shape, and (for
    logs with wall-clock times) arrivals per epoch minute counted from the first request's
    UTC day (`day_minutes`); `t0` is the first arrival (s)."""
    n, duration = sc.n, sc.duration_s
    mean_rate = n / duration if duration > 0 else 0.0
    peak: dict[str, float] = {}
    p2m: dict[str, float] = {}
    fano: dict[str, float] = {}
    pct: dict[str, list[float]] = {}
    for name in WINDOWS:
        counts, w = sc.windows(WINDOW_S[name])
        rates = counts / w
        peak[name] = float(rates.max())
        p2m[name] = float(rates.max() / mean_rate) if mean_rate > 0 else 0.0
        fano[name] = float(counts.var() / counts.mean()) if counts.mean() > 0 else 0.0
        pct[name] = [round(float(x), 6) for x in np.percentile(rates, np.arange(101))]
    hour = weekday = clock = None
    if start_epoch_s is not None and day_minutes is not None and n:
        start, end = t0 + start_epoch_s, t0 + duration + start_epoch_s
        first_day = math.floor(start / 86400.0)
        if duration >= 86400:
            hours = _sum_by(day_minutes, 60)
            skip_h = math.floor(start / 3600.0) - first_day * 24
            hour = periodic_shape(hours[skip_h:], start, end, 3600.0, 24)
            clock = clock_hours_of(day_minutes[skip_h * 60 :], start, end)
        if duration >= 7 * 86400:
            # 1970-01-01 was a Thursday: day 0 is weekday 3 when Monday is 0.
            days = _sum_by(day_minutes, 1440)
            weekday = periodic_shape(days, start, end, 86400.0, 7, offset=3)
    return Arrivals(
        duration_s=duration,
        mean_rate_rps=mean_rate,
        interarrival_cv=cv,
        gamma_shape=shape,
        peak_rate_rps=peak,
        peak_to_mean=p2m,
        fano=fano,
        window_rate_percentiles=pct,
        hour_of_day=hour,
        weekday=weekday,
        clock_hours=clock,
        bursts=detect_bursts(sc, t0) if n else [],
        burst_window_s=float(BURST_WINDOW_S),
        burst_rule=BURST_RULE,
        rate_series=rate_series(sc) if n else RateSeries(bin_s=1.0, rates_rps=[]),
    )


def _sum_by(counts: np.ndarray, k: int) -> np.ndarray:
    """Sums of `counts` over consecutive runs of k (the last run padded with zeros)."""
    padded = np.pad(counts, (0, -counts.size % k))
    return padded.reshape(-1, k).sum(axis=1)
