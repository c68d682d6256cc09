"""Profile statistics from what metrics hold: requests per step, histogram buckets, gauges.

Pure functions (no I/O) that fill the same `Arrivals`, `Lengths` and `LatencyStats` a request
log fills, from coarser evidence: rates are known per step (the query resolution) and never
below it, lengths only as bucket counts. Where a field needs what metrics cannot tell, the
value is the stated assumption (see `LIMITATIONS` in profiles.prometheus.build).
"""

from __future__ import annotations

import math

import numpy as np

from profiles.arrivals import WINDOW_S, clock_hours_of, periodic_shape
from profiles.lengths import LONG_MIN_TOKENS, SAMPLER_PAIRS, SHORT_MAX_TOKENS
from profiles.model import (
    WINDOWS,
    Arrivals,
    GammaShape,
    Gauge,
    Histogram,
    LatencyStats,
    LengthClasses,
    Lengths,
    LengthStats,
    ObservedWindows,
    RateSeries,
    Sampler,
)
from profiles.prometheus.series import bucket_quantiles, cdf_at, draw_binned

_SERIES_BINS_S = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_SERIES_POINTS = 600
SAMPLER_WHY = (
    "input and output lengths drawn apart (seeded) from the servers' histogram buckets, "
    "uniform inside a bucket: metrics hold no (input, output) pairs, so the two are assumed "
    "independent"
)


def window_counts(counts: np.ndarray, k: int) -> np.ndarray:
    """Sums over full runs of k steps (a last partial run left out; one run if fewer)."""
    n_full = counts.size // k
    if n_full < 1:
        return np.array([counts.sum()])
    return counts[: n_full * k].reshape(n_full, k).sum(axis=1)


def arrivals_from_steps(counts: np.ndarray, step_s: int, start_epoch_s: float) -> Arrivals:
    """Arrival statistics of requests per step (`counts[j]` over [start + j step, + step)).

    Windows of a whole number of steps are summed from the steps; a window shorter than a step
    reads as the step's own rate (its mean under Poisson arrivals inside the step, so its peak
    is a lower bound) with a Fano factor of 1. The inter-arrival CV is unknown (None: the
    planner then assumes Poisson). `start_epoch_s` is aligned to a whole minute.
    """
    n_steps = counts.size
    duration = float(n_steps * step_s)
    total = float(counts.sum())
    mean_rate = total / duration if duration > 0 else 0.0
    names = list(WINDOWS)
    if f"{step_s}s" not in names and step_s not in WINDOW_S.values():
        names.append(f"{step_s}s")
    peak, p2m, fano, pct = {}, {}, {}, {}
    for name in names:
        w = int(name[:-1])
        k = max(1, w // step_s)
        wc = window_counts(counts, k)
        rates = wc / float(k * step_s)
        peak[name] = float(rates.max())
        p2m[name] = float(rates.max() / mean_rate) if mean_rate > 0 else 0.0
        fano[name] = 1.0 if w < step_s else (float(wc.var() / wc.mean()) if wc.mean() > 0 else 0.0)
        pct[name] = [round(float(x), 6) for x in np.percentile(rates, np.arange(101))]
    end = start_epoch_s + duration
    hour = weekday = clock = None
    if duration >= 86400:
        per_min = window_counts(counts, 60 // step_s)
        skip = int((start_epoch_s % 3600) // 60)
        clock = clock_hours_of(
            np.concatenate((np.zeros(skip), per_min)), start_epoch_s, end, span_end=True
        )
        per_hour = _by_clock(counts, step_s, start_epoch_s, 3600)
        hour = periodic_shape(per_hour, start_epoch_s, end, 3600.0, 24)
    if duration >= 7 * 86400:
        per_day = _by_clock(counts, step_s, start_epoch_s, 86400)
        weekday = periodic_shape(per_day, start_epoch_s, end, 86400.0, 7, offset=3)
    return Arrivals(
        duration_s=duration,
        mean_rate_rps=mean_rate,
        interarrival_cv=None,
        gamma_shape=GammaShape(),
        peak_rate_rps=peak,
        peak_to_mean=p2m,
        fano=fano,
        window_rate_percentiles=pct,
        hour_of_day=hour,
        weekday=weekday,
        clock_hours=clock,
        bursts=[],
        burst_window_s=float(step_s),
        burst_rule=f"not detected: the metrics count requests per {step_s} s step only",
        rate_series=_rate_series(counts, step_s),
    )


def _by_clock(counts: np.ndarray, step_s: int, start_epoch_s: float, bin_s: int) -> np.ndarray:
    """Requests per clock bin (epoch multiples of bin_s) from the bin of the start."""
    t = start_epoch_s + step_s * np.arange(counts.size)
    idx = (np.floor(t / bin_s) - math.floor(start_epoch_s / bin_s)).astype(np.int64)
    return np.bincount(idx, weights=counts)


def _rate_series(counts: np.ndarray, step_s: int) -> RateSeries:
    duration = counts.size * step_s
    bin_s = next(
        (b for b in _SERIES_BINS_S if b % step_s == 0 and duration / b <= MAX_SERIES_POINTS),
        _SERIES_BINS_S[-1],
    )
    k = max(1, bin_s // step_s)
    padded = np.pad(counts.astype(np.float64), (0, -counts.size % k))
    sums = padded.reshape(-1, k).sum(axis=1)
    lengths = np.full(sums.size, float(k * step_s))
    lengths[-1] = float((counts.size - (sums.size - 1) * k) * step_s)
    return RateSeries(
        bin_s=float(k * step_s), rates_rps=[round(float(r), 6) for r in sums / lengths]
    )


def length_from_buckets(edges: np.ndarray, cumulative: np.ndarray, total: float) -> LengthStats:
    """LengthStats of a token-count histogram: `total` is its _sum's increase (for the mean)."""
    n = float(cumulative[-1])
    q = bucket_quantiles(edges, cumulative, (0.5, 0.9, 0.95, 0.99))
    counts = np.diff(np.concatenate(([0.0], cumulative)))
    nonzero = np.flatnonzero(counts > 0)
    finite = edges[np.isfinite(edges)]
    lowers = np.concatenate(([0.0], edges[:-1]))
    lo = float(lowers[nonzero[0]]) if nonzero.size else 0.0
    top = float(edges[nonzero[-1]]) if nonzero.size else 0.0
    hist_counts = counts[: finite.size].copy()
    if finite.size < edges.size:  # the +Inf bucket into the last finite one
        hist_counts[-1] += counts[-1]
    return LengthStats(
        mean=total / n if n else 0.0,
        p50=q[0] or 0.0,
        p90=q[1] or 0.0,
        p95=q[2] or 0.0,
        p99=q[3] or 0.0,
        max=top if math.isfinite(top) else float(finite[-1]),
        min=lo,
        histogram=Histogram(
            edges=[0.0, *map(float, finite)], counts=[int(round(c)) for c in hist_counts]
        ),
        bucket_edges=[float(e) for e in finite],
    )


def lengths_from_buckets(
    edges_in: np.ndarray,
    cum_in: np.ndarray,
    sum_in: float,
    edges_out: np.ndarray,
    cum_out: np.ndarray,
    sum_out: float,
    seed: int,
) -> Lengths:
    """Lengths of prompt and answer histograms; pairs drawn independently (seeded)."""
    short = cdf_at(edges_in, cum_in, SHORT_MAX_TOKENS)
    below_long = cdf_at(edges_in, cum_in, LONG_MIN_TOKENS)
    rng = np.random.default_rng(seed)
    k = int(min(SAMPLER_PAIRS, max(1.0, cum_in[-1])))
    ins = draw_binned(edges_in, cum_in, k, rng)
    outs = draw_binned(edges_out, cum_out, k, rng)
    return Lengths(
        input=length_from_buckets(edges_in, cum_in, sum_in),
        output=length_from_buckets(edges_out, cum_out, sum_out),
        classes=LengthClasses(
            basis="input_tokens",
            short_max_tokens=SHORT_MAX_TOKENS,
            long_min_tokens=LONG_MIN_TOKENS,
            shares={"short": short, "medium": below_long - short, "long": 1.0 - below_long},
        ),
        io_rank_correlation=None,
        sampler=Sampler(
            kind="independent-binned",
            seed=seed,
            why=SAMPLER_WHY,
            pairs=[(int(i), int(o)) for i, o in zip(ins, outs, strict=True)],
        ),
        requests=int(round(float(cum_in[-1]))),
    )


def latency_from_buckets(edges: np.ndarray, cumulative: np.ndarray, total_s: float) -> LatencyStats:
    n = float(cumulative[-1]) if cumulative.size else 0.0
    q = bucket_quantiles(edges, cumulative, (0.5, 0.9, 0.95, 0.99))
    return LatencyStats(
        requests=int(round(n)),
        mean_s=total_s / n if n else None,
        p50_s=q[0],
        p90_s=q[1],
        p95_s=q[2],
        p99_s=q[3],
        bucket_edges_s=[float(e) for e in edges if math.isfinite(e)],
    )


def observed_windows(
    requests: np.ndarray,
    step_s: int,
    start_epoch_s: float,
    window_s: int,
    latency: dict[str, tuple[np.ndarray, np.ndarray]],
) -> ObservedWindows:
    """Load (requests per step summed per window) beside each window's latency percentiles
    (`latency`: role -> (edges, cumulative counts per window))."""
    k = window_s // step_s
    padded = np.pad(requests, (0, -requests.size % k))
    sums = padded.reshape(-1, k).sum(axis=1)
    lengths = np.full(sums.size, float(window_s))
    lengths[-1] = float((requests.size - (sums.size - 1) * k) * step_s)
    qs = (0.5, 0.9, 0.95, 0.99)
    out: dict[str, dict[str, list[float | None]]] = {}
    for role, (edges, cum) in latency.items():
        per = [bucket_quantiles(edges, cum[w], qs) for w in range(min(cum.shape[0], sums.size))]
        out[role] = {
            f"p{round(q * 100)}": [None if (v := p[i]) is None else round(v, 6) for p in per]
            for i, q in enumerate(qs)
        }
    return ObservedWindows(
        window_s=float(window_s),
        start_epoch_s=start_epoch_s,
        rate_rps=[round(float(x), 6) for x in sums / lengths],
        latency_s=out,
    )


def gauge_stats(values: np.ndarray) -> Gauge | None:
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None
    p50, p99 = np.percentile(v, [50, 99])
    return Gauge(mean=float(v.mean()), p50=float(p50), p99=float(p99), max=float(v.max()))
