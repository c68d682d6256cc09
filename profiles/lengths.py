"""Length statistics: quantiles, log histograms, short/medium/long shares, rank correlation,
and a seeded sample of real (input, output) pairs for the load generator.

Token counts are whole numbers, so quantiles, histograms and ranks come from one
`np.bincount` per column: exact and linear in the number of requests.
"""

from __future__ import annotations

import numpy as np

from profiles.model import Histogram, LengthClasses, Lengths, LengthStats, Sampler
from profiles.sketch import sketch_from_counts

SHORT_MAX_TOKENS = 512
LONG_MIN_TOKENS = 8192
SAMPLER_PAIRS = 2000
BINS_PER_OCTAVE = 4
_BINCOUNT_MAX = 1 << 24  # above this largest value, fall back to sorting
SAMPLER_WHY = (
    "a uniform random sample (seeded) of real (input, output) pairs: it keeps the joint shape "
    "of the log - correlation, heavy tails, spikes at popular lengths - without assuming a "
    "parametric form, and 2000 pairs bound the profile's size"
)


class _Counts:
    """Distribution of non-negative integers, from bincount (or a sorted copy if too wide)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.n = int(values.size)
        self.max = int(values.max()) if self.n else 0
        self.dense = self.max <= _BINCOUNT_MAX
        if self.dense:
            self.cum = np.cumsum(np.bincount(values, minlength=self.max + 1))
        else:
            self.sorted = np.sort(values)

    def kth(self, k: np.ndarray) -> np.ndarray:
        """k-th smallest values (0-based)."""
        if self.dense:
            return np.searchsorted(self.cum, k + 1, side="left").astype(np.float64)
        return self.sorted[k].astype(np.float64)

    def quantiles(self, qs: np.ndarray) -> np.ndarray:
        """Quantiles with linear interpolation (numpy's default method)."""
        pos = qs * (self.n - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        vlo, vhi = self.kth(lo), self.kth(hi)
        return vlo + (vhi - vlo) * (pos - lo)

    def count_below(self, edges: np.ndarray) -> np.ndarray:
        """Number of values strictly below each edge."""
        if self.dense:
            idx = np.ceil(edges).astype(np.int64) - 1
            out = np.where(idx < 0, 0, self.cum[np.clip(idx, 0, self.max)])
            return out.astype(np.int64)
        return np.searchsorted(self.sorted, edges, side="left").astype(np.int64)

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct values and their counts."""
        if self.dense:
            counts = np.diff(np.concatenate(([0], self.cum)))
            return np.arange(counts.size), counts
        return np.unique(self.sorted, return_counts=True)

    def rank_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Mid-rank (1-based, ties averaged) of each value 0..max, and each value's count."""
        below = np.concatenate(([0], self.cum[:-1]))
        counts = self.cum - below
        return below + (counts + 1) / 2.0, counts


def log_edges(max_value: int) -> np.ndarray:
    """Edges 0, 1, then BINS_PER_OCTAVE per doubling, up to past `max_value`."""
    octaves = max(1, int(np.ceil(np.log2(max_value + 1))) + 1)
    return np.concatenate(
        ([0.0], 2.0 ** (np.arange(octaves * BINS_PER_OCTAVE + 1) / BINS_PER_OCTAVE))
    )


def length_stats(c: _Counts) -> LengthStats:
    q = c.quantiles(np.array([0.0, 0.5, 0.9, 0.95, 0.99, 1.0]))
    edges = log_edges(c.max)
    edges = edges[: int(np.searchsorted(edges, c.max, side="right")) + 1]
    below = c.count_below(edges)
    counts = np.diff(below)
    counts[-1] += c.n - below[-1]  # values equal to the last edge
    return LengthStats(
        mean=float(c.values.mean()),
        p50=float(q[1]),
        p90=float(q[2]),
        p95=float(q[3]),
        p99=float(q[4]),
        max=float(q[5]),
        min=float(q[0]),
        histogram=Histogram(edges=[round(float(e), 4) for e in edges], counts=counts.tolist()),
        sketch=sketch_from_counts(*c.distinct()),
    )


def spearman(a: _Counts, b: _Counts) -> float | None:
    """Spearman rank correlation (ties averaged) of two paired columns.

    Pearson correlation of mid-ranks, with each column's rank mean ((n+1)/2) and variance
    taken from its value counts, so only the cross term touches every request.
    """
    if a.n < 3:
        return None
    if not (a.dense and b.dense):
        from scipy.stats import spearmanr

        if np.ptp(a.values) == 0 or np.ptp(b.values) == 0:
            return None  # a constant column: no correlation (scipy would warn on stderr)

        r = spearmanr(a.values, b.values).statistic
        return None if not np.isfinite(r) else float(r)
    (ta, ca), (tb, cb) = a.rank_table(), b.rank_table()
    n = a.n
    mean = (n + 1) / 2.0
    var_a = float((ca * ta * ta).sum() / n - mean * mean)
    var_b = float((cb * tb * tb).sum() / n - mean * mean)
    if var_a <= 1e-12 or var_b <= 1e-12:
        return None
    cross = float(np.dot(ta[a.values], tb[b.values]) / n - mean * mean)
    return cross / (var_a * var_b) ** 0.5


def length_stats_all(inputs: np.ndarray, outputs: np.ndarray, seed: int) -> Lengths:
    """Length statistics of paired token counts (one entry per successful request)."""
    ci, co = _Counts(inputs), _Counts(outputs)
    n = ci.n
    short, below_long = ci.count_below(np.array([SHORT_MAX_TOKENS + 1, LONG_MIN_TOKENS]))
    shares = {
        "short": float(short / n),
        "medium": float((below_long - short) / n),
        "long": float((n - below_long) / n),
    }
    rng = np.random.default_rng(seed)
    k = min(n, SAMPLER_PAIRS)
    idx = rng.choice(n, size=k, replace=False) if k < n else rng.permutation(n)
    pairs = [(int(i), int(o)) for i, o in zip(inputs[idx], outputs[idx], strict=True)]
    return Lengths(
        input=length_stats(ci),
        output=length_stats(co),
        classes=LengthClasses(
            basis="input_tokens",
            short_max_tokens=SHORT_MAX_TOKENS,
            long_min_tokens=LONG_MIN_TOKENS,
            shares=shares,
        ),
        io_rank_correlation=spearman(ci, co),
        sampler=Sampler(seed=seed, why=SAMPLER_WHY, pairs=pairs),
    )
