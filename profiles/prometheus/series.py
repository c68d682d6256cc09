"""Pure arithmetic on Prometheus series: counter increases per step and histogram quantiles.

No I/O. Counters are read as values on a grid of steps; a step's increase is the difference of
its value and the last value before it, and a value that falls is a restart (the counter began
again at 0, so the increase is the value itself, as Prometheus's `increase()` reads it). A
series that first appears after the start of the range counts from 0 (it was created then);
one already there at the start counts from its first value.
Quantiles are read from cumulative bucket counts the way PromQL's `histogram_quantile` does:
linear inside the bucket, the first bucket starting at 0, a quantile in the +Inf bucket
reported as the highest finite edge.
"""

from __future__ import annotations

import math

import numpy as np


def increases(
    values: np.ndarray, prev: float, *, from_zero: bool = False
) -> tuple[np.ndarray, float]:
    """Per point, the counter's increase since the last value before it; and the last value.

    `values` holds NaN where the series had no sample within the lookback. `prev` is the last
    value before `values` (NaN when none). With no value before, the first value counts 0
    (nothing is known of what came before it), unless `from_zero`: a series that appears after
    the start of the range was created then (a new process, a label value's first request),
    so its first value is all increase.
    """
    out = np.zeros(values.size)
    x = np.concatenate(([0.0 if from_zero and np.isnan(prev) else prev], values))
    have = np.flatnonzero(~np.isnan(x))
    if have.size == 0:
        return out, prev
    later, earlier = x[have[1:]], x[have[:-1]]
    inc = np.where(later >= earlier, later - earlier, later)
    out[have[1:] - 1] = inc
    return out, float(x[have[-1]])


def parse_le(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


def bucket_quantiles(
    edges: np.ndarray, cumulative: np.ndarray, qs: tuple[float, ...]
) -> list[float | None]:
    """Quantiles of a histogram: `edges` are the sorted upper edges (the last may be +inf) and
    `cumulative` the counts at or below each; None where there are no observations."""
    total = float(cumulative[-1]) if cumulative.size else 0.0
    if total <= 0:
        return [None for _ in qs]
    finite_top = float(edges[np.isfinite(edges)][-1]) if np.isfinite(edges).any() else 0.0
    out: list[float | None] = []
    for q in qs:
        rank = q * total
        i = int(np.searchsorted(cumulative, rank, side="left"))
        i = min(i, edges.size - 1)
        if not math.isfinite(edges[i]):
            out.append(finite_top)
            continue
        lo_edge = float(edges[i - 1]) if i > 0 else 0.0
        lo_count = float(cumulative[i - 1]) if i > 0 else 0.0
        in_bucket = float(cumulative[i]) - lo_count
        frac = (rank - lo_count) / in_bucket if in_bucket > 0 else 1.0
        out.append(lo_edge + (float(edges[i]) - lo_edge) * frac)
    return out


def cdf_at(edges: np.ndarray, cumulative: np.ndarray, x: float) -> float:
    """Share of observations at or below `x`, linear inside a bucket (as the quantiles)."""
    total = float(cumulative[-1])
    if total <= 0:
        return 0.0
    i = int(np.searchsorted(edges, x, side="left"))
    if i >= edges.size:
        return 1.0
    lo_edge = float(edges[i - 1]) if i > 0 else 0.0
    lo_count = float(cumulative[i - 1]) if i > 0 else 0.0
    if not math.isfinite(edges[i]):
        return lo_count / total
    frac = (x - lo_edge) / (float(edges[i]) - lo_edge) if edges[i] > lo_edge else 1.0
    return (lo_count + (float(cumulative[i]) - lo_count) * frac) / total


def draw_binned(
    edges: np.ndarray, cumulative: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """Whole numbers (>= 1) drawn from the histogram: a bucket by its count, uniform inside it
    (the +Inf bucket reads as its lower edge)."""
    counts = np.diff(np.concatenate(([0.0], cumulative)))
    if counts.sum() <= 0:
        return np.ones(size, dtype=np.int64)
    b = rng.choice(edges.size, size=size, p=counts / counts.sum())
    lo = np.concatenate(([0.0], edges[:-1]))[b]
    hi = np.where(np.isfinite(edges[b]), edges[b], lo)
    return np.maximum(1, np.ceil(lo + (hi - lo) * rng.random(size))).astype(np.int64)
