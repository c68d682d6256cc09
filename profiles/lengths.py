"""Length statistics: quantiles, log histograms, short/medium/long shares, rank correlation,
and a seeded sample of real (input, output) pairs for the load generator.

Token counts are whole numbers, so quantiles, histograms and ranks come from one
`np.bincount` per column: exact and linear in the number of requests.
"""

from __future__ import annotations

import numpy as np

from profiles.model import Histogram, LengthClasses, Lengths, LengthStats, Sampler
from profiles.sketch import sketch_from_counts
from profiles.vector import dot

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
    """Distribution of non-negative integers as a count per value.

    Dense (index = value, from bincount) up to _BINCOUNT_MAX, else distinct values with their
    counts. Built from the values themselves, or from counts folded chunk by chunk
    (`of_counts`), so the streaming profiler reads the same statistics as the in-memory one.
    """

    def __init__(self, values: np.ndarray) -> None:
        self.values: np.ndarray | None = values
        top = int(values.max()) if values.size else 0
        if top <= _BINCOUNT_MAX:
            self._set(None, np.bincount(values, minlength=top + 1), int(values.sum()))
        else:
            self._set(*np.unique(values, return_counts=True), int(values.sum()))

    @classmethod
    def of_counts(cls, keys: np.ndarray | None, counts: np.ndarray, total: int) -> _Counts:
        """From counts per value: `keys` None means dense (counts[v] is the count of v);
        `total` is the sum of all values (for the mean)."""
        c = cls.__new__(cls)
        c.values = None
        c._set(keys, counts, total)
        return c

    def _set(self, keys: np.ndarray | None, counts: np.ndarray, total: int) -> None:
        self.dense = keys is None
        self.keys = np.zeros(0, dtype=np.int64) if keys is None else keys
        self.cum = np.cumsum(counts.astype(np.int64))
        self.n = int(self.cum[-1]) if self.cum.size else 0
        self.total = total
        if keys is None:
            nonzero = np.flatnonzero(counts)
            self.max = int(nonzero[-1]) if nonzero.size else 0
        else:
            self.max = int(keys[-1]) if keys.size else 0

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    def kth(self, k: np.ndarray) -> np.ndarray:
        """k-th smallest values (0-based)."""
        idx = np.searchsorted(self.cum, k + 1, side="left")
        if self.dense:
            return idx.astype(np.float64)
        return self.keys[idx].astype(np.float64)

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
            out = np.where(idx < 0, 0, self.cum[np.clip(idx, 0, self.cum.size - 1)])
            return out.astype(np.int64)
        pos = np.searchsorted(self.keys, edges, side="left")
        return np.concatenate(([0], self.cum))[pos].astype(np.int64)

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct values and their counts."""
        counts = np.diff(np.concatenate(([0], self.cum)))
        if self.dense:
            return np.arange(counts.size), counts
        return self.keys, counts

    def rank_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Mid-rank (1-based, ties averaged) of each distinct value (each value 0..max when
        dense), and each one's count."""
        below = np.concatenate(([0], self.cum[:-1]))
        counts = self.cum - below
        return below + (counts + 1) / 2.0, counts

    def ranks_of(self, table: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The mid-ranks (from `rank_table`) of `values`, which must occur in the distribution."""
        if self.dense:
            return table[values]
        return table[np.searchsorted(self.keys, values)]


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
        mean=c.mean,
        p50=float(q[1]),
        p90=float(q[2]),
        p95=float(q[3]),
        p99=float(q[4]),
        max=float(q[5]),
        min=float(q[0]),
        histogram=Histogram(edges=[round(float(e), 4) for e in edges], counts=counts.tolist()),
        sketch=sketch_from_counts(*c.distinct()),
    )


def spearman(
    a: _Counts, b: _Counts, pairs: tuple[np.ndarray, np.ndarray] | None = None
) -> float | None:
    """Spearman rank correlation (ties averaged) of two paired columns.

    Pearson correlation of mid-ranks, with each column's rank mean ((n+1)/2) and variance
    taken from its value counts, so only the cross term touches the pairs: every request's
    (a.values, b.values) by default, or a uniform sample of them (`pairs`), whose mean cross
    term estimates the whole log's.
    """
    if a.n < 3:
        return None
    (ta, ca), (tb, cb) = a.rank_table(), b.rank_table()
    n = a.n
    mean = (n + 1) / 2.0
    var_a = float((ca * ta * ta).sum() / n - mean * mean)
    var_b = float((cb * tb * tb).sum() / n - mean * mean)
    if var_a <= 1e-12 or var_b <= 1e-12:
        return None
    if pairs is None:
        if a.values is None or b.values is None:
            raise ValueError("spearman of folded counts needs the sampled pairs")
        pairs = (a.values, b.values)
    xa, xb = pairs
    cross = dot(a.ranks_of(ta, xa), b.ranks_of(tb, xb)) / xa.size - mean * mean
    return cross / (var_a * var_b) ** 0.5


def length_stats_all(inputs: np.ndarray, outputs: np.ndarray, seed: int) -> Lengths:
    """Length statistics of paired token counts (one entry per successful request)."""
    ci, co = _Counts(inputs), _Counts(outputs)
    n = ci.n
    rng = np.random.default_rng(seed)
    k = min(n, SAMPLER_PAIRS)
    idx = rng.choice(n, size=k, replace=False) if k < n else rng.permutation(n)
    pairs = [(int(i), int(o)) for i, o in zip(inputs[idx], outputs[idx], strict=True)]
    return lengths_of(ci, co, spearman(ci, co), pairs, seed)


def lengths_of(
    ci: _Counts, co: _Counts, rho: float | None, pairs: list[tuple[int, int]], seed: int
) -> Lengths:
    """Length statistics from the input and output distributions, their rank correlation and
    the sampler's pairs."""
    n = ci.n
    short, below_long = ci.count_below(np.array([SHORT_MAX_TOKENS + 1, LONG_MIN_TOKENS]))
    shares = {
        "short": float(short / n),
        "medium": float((below_long - short) / n),
        "long": float((n - below_long) / n),
    }
    return Lengths(
        input=length_stats(ci),
        output=length_stats(co),
        classes=LengthClasses(
            basis="input_tokens",
            short_max_tokens=SHORT_MAX_TOKENS,
            long_min_tokens=LONG_MIN_TOKENS,
            shares=shares,
        ),
        io_rank_correlation=rho,
        sampler=Sampler(seed=seed, why=SAMPLER_WHY, pairs=pairs),
    )
