"""Mergeable quantile sketches of non-negative integers (token counts) for partial profiles.

DDSketch's logarithmic mapping (Masson et al., VLDB 2019): a value's bucket depends only on
the value, so two sketches merge by adding counts and a quantile read back from the merged
sketch is within `relative_accuracy` of the exact quantile of the union.
"""

from __future__ import annotations

import math

import numpy as np

from profiles.model import QuantileSketch

RELATIVE_ACCURACY = 0.01


def _log_gamma(alpha: float) -> float:
    return math.log((1 + alpha) / (1 - alpha))


def sketch_from_counts(
    values: np.ndarray, counts: np.ndarray, alpha: float = RELATIVE_ACCURACY
) -> QuantileSketch:
    """Sketch of a distribution given as distinct non-negative `values` with their `counts`."""
    values = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts > 0
    values, counts = values[keep], counts[keep]
    zero = int(counts[values == 0].sum())
    pos = values > 0
    if not pos.any():
        return QuantileSketch(relative_accuracy=alpha, zero_count=zero, key_offset=0, counts=[])
    keys = np.ceil(np.log(values[pos]) / _log_gamma(alpha) - 1e-9).astype(np.int64)
    lo = int(keys.min())
    dense = np.bincount(keys - lo, weights=counts[pos]).astype(np.int64)
    return QuantileSketch(
        relative_accuracy=alpha, zero_count=zero, key_offset=lo, counts=dense.tolist()
    )


def merge_sketches(sketches: list[QuantileSketch]) -> QuantileSketch:
    """The sketch of the union; ValueError if their accuracies differ."""
    alphas = {s.relative_accuracy for s in sketches}
    if len(alphas) != 1:
        raise ValueError(f"sketches of different accuracies: {sorted(alphas)}")
    filled = [s for s in sketches if s.counts]
    zero = sum(s.zero_count for s in sketches)
    if not filled:
        return QuantileSketch(
            relative_accuracy=alphas.pop(), zero_count=zero, key_offset=0, counts=[]
        )
    lo = min(s.key_offset for s in filled)
    hi = max(s.key_offset + len(s.counts) for s in filled)
    dense = np.zeros(hi - lo, dtype=np.int64)
    for s in filled:
        dense[s.key_offset - lo : s.key_offset - lo + len(s.counts)] += s.counts
    return QuantileSketch(
        relative_accuracy=alphas.pop(), zero_count=zero, key_offset=lo, counts=dense.tolist()
    )


def sketch_quantiles(s: QuantileSketch, qs: np.ndarray) -> np.ndarray:
    """Quantiles with numpy's linear interpolation between order statistics, each order
    statistic read back from its bucket (so each is within `relative_accuracy` of the exact)."""
    counts = np.concatenate(([s.zero_count], np.asarray(s.counts, dtype=np.int64)))
    n = int(counts.sum())
    if n == 0:
        return np.zeros(len(qs))
    gamma = math.exp(_log_gamma(s.relative_accuracy))
    keys = s.key_offset + np.arange(len(s.counts))
    reads = np.concatenate(([0.0], 2 * gamma ** keys.astype(np.float64) / (gamma + 1)))
    cum = np.cumsum(counts)
    pos = np.asarray(qs, dtype=np.float64) * (n - 1)
    lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
    vlo = reads[np.searchsorted(cum, lo + 1, side="left")]
    vhi = reads[np.searchsorted(cum, hi + 1, side="left")]
    return vlo + (vhi - vlo) * (pos - lo)
