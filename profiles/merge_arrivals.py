"""Arrival statistics of shards joined on one timeline, for `capplan profile --merge`.

Each shard's arrivals start at t = 0 (its first request); `offsets_s` place those starts on
the merged timeline. Counts, span, mean rate and the inter-arrival moments merge exactly
(the gaps at the joins are known from the offsets); window-grid statistics are estimated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from profiles.arrivals import (
    _SERIES_BINS_S,
    MAX_BURSTS,
    MAX_SERIES_POINTS,
    MLE_MAX_GAPS,
    WINDOW_S,
    gamma_mle,
)
from profiles.model import WINDOWS, Arrivals, Bound, GammaShape, RateSeries


@dataclass
class MergeNotes:
    """What a merge proved exact, bounded or only estimated, by key path."""

    exact: list[str] = field(default_factory=list)
    bounds: dict[str, Bound] = field(default_factory=dict)
    estimated: dict[str, str] = field(default_factory=dict)


GRID_NOTE = (
    "from the shards' own windows (each shard's grid starts at its first request; a window "
    "spanning a join is not seen): equal to the whole log's when the shard starts fall on "
    "its window grid"
)


def _gap_sums(a: Arrivals, n: int) -> tuple[float, float]:
    """(sum, sum of squares) of a shard's n - 1 inter-arrival gaps, from its mean and CV."""
    g = n - 1
    if g <= 0:
        return 0.0, 0.0
    mean = a.duration_s / g
    cv = a.interarrival_cv if g >= 2 else 0.0
    var = (cv * mean) ** 2 if cv is not None else 0.0
    return a.duration_s, g * (var + mean * mean)


def merge_arrivals(
    parts: list[Arrivals], counts: list[int], offsets_s: list[float], key: str, notes: MergeNotes
) -> Arrivals:
    """Arrivals of shards in timeline order (`counts` requests each, starting at `offsets_s`)."""
    n = sum(counts)
    ends = [o + a.duration_s for o, a in zip(offsets_s, parts, strict=True)]
    duration = ends[-1] - offsets_s[0]
    mean_rate = n / duration if duration > 0 else 0.0
    joins = [s - e for s, e in zip(offsets_s[1:], ends[:-1], strict=True)]
    sums = [_gap_sums(a, c) for a, c in zip(parts, counts, strict=True)]
    gap_sum = sum(s for s, _ in sums) + sum(joins)
    gap_sq = sum(q for _, q in sums) + sum(j * j for j in joins)
    gaps = n - 1
    cv = None
    if gaps >= 2 and gap_sum > 0:
        mean_gap = gap_sum / gaps
        cv = math.sqrt(max(gap_sq / gaps - mean_gap * mean_gap, 0.0)) / mean_gap
    notes.exact += [f"{key}.{k}" for k in ("duration_s", "mean_rate_rps", "interarrival_cv")]
    notes.exact.append(f"{key}.gamma_shape.moments")
    shape = _merge_gamma(parts, joins, cv, gaps, key, notes)

    n_windows = {w: [max(1, int(a.duration_s // WINDOW_S[w])) for a in parts] for w in WINDOWS}
    peak = {w: max(a.peak_rate_rps.get(w, 0.0) for a in parts) for w in WINDOWS}
    fano, pct = {}, {}
    for w in WINDOWS:
        weights = np.array(n_windows[w], dtype=np.float64)
        mu = np.array([a.mean_rate_rps * WINDOW_S[w] for a in parts])
        var = np.array([a.fano.get(w, 0.0) for a in parts]) * mu
        pooled_mu = float((weights * mu).sum() / weights.sum())
        pooled_var = float((weights * (var + mu * mu)).sum() / weights.sum()) - pooled_mu**2
        fano[w] = pooled_var / pooled_mu if pooled_mu > 0 else 0.0
        have = [a.window_rate_percentiles.get(w) for a in parts]
        if all(h is not None and len(h) == 101 for h in have):
            pct[w] = _pooled_percentiles([list(h or ()) for h in have], n_windows[w])
    for name in ("peak_rate_rps", "peak_to_mean", "fano", "window_rate_percentiles"):
        notes.estimated[f"{key}.{name}"] = GRID_NOTE
    notes.estimated[f"{key}.bursts"] = "each shard's bursts against its own baseline, joined"
    notes.estimated[f"{key}.rate_series"] = "shards' series re-binned by bin start"
    for name in ("hour_of_day", "weekday", "clock_hours"):
        notes.estimated[f"{key}.{name}"] = (
            "not merged (left out): profile the logs of a week in one go for these shapes"
        )
    bursts = [
        b.model_copy(update={"start_s": b.start_s + o})
        for a, o in zip(parts, offsets_s, strict=True)
        for b in a.bursts
    ]
    bursts.sort(key=lambda b: -b.peak_rate_rps)
    return Arrivals(
        duration_s=duration,
        mean_rate_rps=mean_rate,
        interarrival_cv=cv,
        gamma_shape=shape,
        peak_rate_rps=peak,
        peak_to_mean={w: peak[w] / mean_rate if mean_rate > 0 else 0.0 for w in WINDOWS},
        fano=fano,
        window_rate_percentiles=pct,
        bursts=bursts[:MAX_BURSTS],
        burst_window_s=parts[0].burst_window_s,
        burst_rule=parts[0].burst_rule,
        rate_series=_merge_series(parts, counts, offsets_s, duration),
    )


# The most window rates `_pooled_percentiles` rebuilds over all shards (a month of 1 s
# windows would be millions); shards keep their shares of it.
POOLED_MAX_WINDOWS = 200_000


def _pooled_percentiles(tables: list[list[float]], windows: list[int]) -> list[float]:
    """Percentiles 0-100 of all shards' window rates together, from each shard's percentile
    table and window count: each shard's rates are read back off its table at its windows'
    order-statistic positions (np.percentile's linear rule), then pooled. The quantile of the
    pooled windows, not the average of the shards' quantiles: p100 is the highest shard's
    peak, and a quiet shard does not pull a busy shard's tail down."""
    total = sum(windows)
    scale = min(1.0, POOLED_MAX_WINDOWS / total) if total else 1.0
    grid = np.arange(101, dtype=np.float64)
    rates = [
        np.interp(np.linspace(0.0, 100.0, max(1, round(n * scale))), grid, np.asarray(t))
        for t, n in zip(tables, windows, strict=True)
    ]
    pooled = np.percentile(np.concatenate(rates), grid)
    return [round(float(x), 6) for x in pooled]


def _merge_gamma(
    parts: list[Arrivals],
    joins: list[float],
    cv: float | None,
    gaps: int,
    key: str,
    notes: MergeNotes,
) -> GammaShape:
    """Gamma shape: moments from the merged CV; the MLE from the shards' sufficient statistics
    plus the gaps at the joins (exact when no shard, nor the whole log, thinned its gaps)."""
    moments = 1 / cv**2 if cv else None
    stats = [
        (g.positive_gaps, g.mean_positive_gap_s, g.mean_log_positive_gap)
        for g in (a.gamma_shape for a in parts)
        if g.positive_gaps and g.mean_positive_gap_s and g.mean_log_positive_gap is not None
    ]
    stats += [(1, j, math.log(j)) for j in joins if j > 0]
    count = sum(c for c, _, _ in stats)
    if count < 2:
        notes.estimated[f"{key}.gamma_shape.mle"] = "too few positive gaps"
        return GammaShape(moments=moments, mle=None)
    mean = sum(c * m for c, m, _ in stats) / count
    mean_log = sum(c * lg for c, _, lg in stats) / count
    whole_stride = max(1, gaps // MLE_MAX_GAPS)
    if whole_stride == 1 and all(
        a.gamma_shape.mle is None or a.gamma_shape.positive_gaps for a in parts
    ):
        notes.exact.append(f"{key}.gamma_shape.mle")
    else:
        notes.estimated[f"{key}.gamma_shape.mle"] = (
            "from the shards' gap samples (the whole log thins its gaps to about "
            f"{MLE_MAX_GAPS:,} too; both are unbiased estimates of the same shape)"
        )
    return GammaShape(
        moments=moments,
        mle=gamma_mle(mean, mean_log),
        positive_gaps=count,
        mean_positive_gap_s=mean,
        mean_log_positive_gap=mean_log,
    )


def _merge_series(
    parts: list[Arrivals], counts: list[int], offsets_s: list[float], duration_s: float
) -> RateSeries:
    """Rate series of the merged span: each shard bin's requests go to the bin of its start."""
    bin_s = next(
        (b for b in _SERIES_BINS_S if duration_s / b <= MAX_SERIES_POINTS), _SERIES_BINS_S[-1]
    )
    n_bins = max(1, math.ceil(duration_s / bin_s)) if duration_s > 0 else 1
    totals = np.zeros(n_bins)
    t0 = offsets_s[0]
    for a, n, off in zip(parts, counts, offsets_s, strict=True):
        rs = a.rate_series
        k = len(rs.rates_rps)
        if k == 0:
            continue
        lengths = np.full(k, rs.bin_s)
        lengths[-1] = max(a.duration_s - (k - 1) * rs.bin_s, 1e-9) if k > 1 else a.duration_s
        req = np.asarray(rs.rates_rps) * lengths
        if req.sum() > 0:
            req *= n / req.sum()  # the series is rounded; keep the shard's exact count
        else:
            req[0] = n
        idx = np.minimum(((off - t0 + np.arange(k) * rs.bin_s) // bin_s).astype(int), n_bins - 1)
        np.add.at(totals, idx, req)
    lengths = np.full(n_bins, float(bin_s))
    if duration_s > 0:
        lengths[-1] = max(duration_s - (n_bins - 1) * bin_s, 1e-9) if n_bins > 1 else duration_s
    return RateSeries(bin_s=float(bin_s), rates_rps=[round(float(r), 6) for r in totals / lengths])
