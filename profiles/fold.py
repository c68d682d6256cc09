"""Profile statistics folded chunk by chunk, so a log of any length profiles in bounded memory.

Each fold takes consecutive chunks of the canonical table (arrival-sorted, arrival_s from the
log's first request) and keeps only what its statistics need: counts per second, per epoch
minute and per token count, sums of the inter-arrival gaps, a hash sample of sessions and a
bounded uniform sample of (input, output) pairs. They end in the same functions the in-memory
profiler uses, so every statistic equals the whole-log one (to float rounding) except the two
that `estimated` names: the rank correlation (from the pair sample, once the log has more
requests than the sample holds) and the sampler's pairs (another uniform draw).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from contracts.errors import InputError
from profiles.arrivals import (
    MLE_MAX_GAPS,
    SecondCounts,
    assemble_arrivals,
    day_minute_counts,
    gamma_of_sums,
    sorted_bin_counts,
)
from profiles.lengths import _BINCOUNT_MAX, SAMPLER_PAIRS, _Counts, lengths_of, spearman
from profiles.model import Arrivals, Lengths, Sessions
from profiles.readers.chunks import SESSION_HASH, SESSION_ZEROS
from profiles.readers.timeunits import MAX_SPAN_S
from profiles.sessions import SAMPLE_ABOVE_ROWS, sample_bits, sessions_of_sample
from profiles.vector import dot

# Pairs kept for the rank correlation: its standard error from a uniform sample of this many
# is about 1 / sqrt(2^18) = 0.002, far below the differences between workloads it tells apart.
RANK_SAMPLE_PAIRS = 1 << 18


def _add_at(acc: np.ndarray, start: int, counts: np.ndarray) -> np.ndarray:
    """`acc` (grown by doubling where needed) with `counts` added from index `start`."""
    end = start + counts.size
    if end > acc.size:
        grown = np.zeros(max(end, 2 * acc.size), dtype=np.int64)
        grown[: acc.size] = acc
        acc = grown
    acc[start:end] += counts
    return acc


class ArrivalFold:
    """Arrival statistics of consecutive sorted chunks of arrival times (s from the first)."""

    def __init__(self, start_epoch_s: float | None, expected_gaps: int | None) -> None:
        self.start_epoch_s = start_epoch_s
        # The in-memory profiler fits the gamma MLE to every k-th gap, k = gaps // MLE_MAX_GAPS;
        # with the row count known up front (Parquet's footer) the same gaps are taken here.
        self.stride = max(1, (expected_gaps or 0) // MLE_MAX_GAPS)
        self.n = 0
        self.first_s = self.last_s = 0.0
        self.sq_sum = 0.0
        self.pos = [0, 0.0, 0.0]  # count, sum and sum of logs of the positive gaps taken
        self.per_s = np.zeros(1 << 16, dtype=np.int64)
        self.minutes = np.zeros(1 << 10, dtype=np.int64)
        self.first_day = 0

    def add(self, t: np.ndarray) -> None:
        """Fold the next chunk; InputError when the span grows past MAX_SPAN_S."""
        if t.size == 0:
            return
        gaps = np.diff(t)
        g0 = self.n  # index (over the whole log) of this chunk's first inner gap
        if self.n == 0:
            self.first_s = float(t[0])
            if self.start_epoch_s is not None:
                self.first_day = math.floor((self.first_s + self.start_epoch_s) / 86400.0)
        else:
            join = float(t[0]) - self.last_s  # the gap from the previous chunk's last arrival
            self.sq_sum += join * join
            if (self.n - 1) % self.stride == 0 and join > 0:
                self.pos[0] += 1
                self.pos[1] += join
                self.pos[2] += math.log(join)
        if float(t[-1]) - self.first_s > MAX_SPAN_S:
            raise InputError(
                f"the requests span more than {MAX_SPAN_S / 86400:,.0f} days; check the "
                "timestamps' unit (--time-unit) or split the log"
            )
        self.sq_sum += dot(gaps, gaps)
        taken = gaps[(-g0) % self.stride :: self.stride]
        taken = taken[taken > 0]
        self.pos[0] += int(taken.size)
        self.pos[1] += float(taken.sum())
        self.pos[2] += float(np.log(taken).sum())
        # The in-memory profiler counts floor(t - t[0]) with t[0] = 0, the first arrival of
        # the log: whole seconds from it, t >= k exactly, as these bins are.
        base, per_s = sorted_bin_counts(t - self.first_s if self.first_s else t, 1.0, 0.0)
        self.per_s = _add_at(self.per_s, base, per_s)
        if self.start_epoch_s is not None:
            at, minutes = day_minute_counts(t, self.start_epoch_s, self.first_day)
            self.minutes = _add_at(self.minutes, at, minutes)
        self.n += int(t.size)
        self.last_s = float(t[-1])

    def finish(self) -> tuple[Arrivals, str | None]:
        """The arrival statistics, and a note when the gamma MLE took other gaps than the
        in-memory profiler would (the row count was not known up front)."""
        duration = self.last_s - self.first_s
        gaps = self.n - 1
        cv = None
        mean_gap = duration / gaps if gaps >= 2 else 0.0
        if mean_gap > 0:
            var = max(self.sq_sum / gaps - mean_gap * mean_gap, 0.0)
            cv = math.sqrt(var) / mean_gap
        count, total, logs = self.pos
        shape = gamma_of_sums(cv, int(count), float(total), float(logs))
        used = math.floor(duration) + 1 if self.n else 1  # seconds 0 .. floor(span)
        sc = SecondCounts.of_counts(self.per_s[:used], self.n, duration)
        minutes = self.minutes if self.start_epoch_s is not None else None
        arrivals = assemble_arrivals(sc, cv, shape, self.start_epoch_s, minutes, self.first_s)
        note = None
        if self.stride != max(1, gaps // MLE_MAX_GAPS):
            note = (
                f"the gamma MLE took every {self.stride}th of the {gaps:,} gaps (the in-memory "
                f"profiler takes every {max(1, gaps // MLE_MAX_GAPS)}th); both are unbiased"
            )
        return arrivals, note


class _ColumnFold:
    """Counts per value of a non-negative integer column, chunk by chunk."""

    def __init__(self) -> None:
        self.dense = np.zeros(1 << 12, dtype=np.int64)
        self.big: list[np.ndarray] = []  # values above _BINCOUNT_MAX, kept as they are (rare)
        self.big_total = 0  # sum of the values kept in `big`

    def add(self, v: np.ndarray) -> None:
        if v.size == 0:
            return
        if int(v.max()) > _BINCOUNT_MAX:
            big = v > _BINCOUNT_MAX
            self.big.append(v[big])
            self.big_total += int(v[big].sum())
            v = v[~big]
        self.dense = _add_at(self.dense, 0, np.bincount(v))

    def counts(self) -> _Counts:
        # The sum of the values from their counts (each below 2^24: exact in int64 up to
        # 5e11 requests of the largest).
        total = self.big_total + int(np.dot(np.arange(self.dense.size, dtype=np.int64), self.dense))
        if not self.big:
            return _Counts.of_counts(None, self.dense, total)
        keys, counts = np.unique(np.concatenate(self.big), return_counts=True)
        small = np.flatnonzero(self.dense)
        return _Counts.of_counts(
            np.concatenate((small, keys)), np.concatenate((self.dense[small], counts)), total
        )


def _bernoulli_positions(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
    """Indices below `n`, each taken with probability `p` independently of the others: the
    same law as `rng.random(n) < p`, drawn as geometric gaps in time proportional to the
    indices taken rather than to `n`."""
    out: list[np.ndarray] = []
    at = -1  # the last index taken
    while True:
        expect = (n - 1 - at) * p
        gaps = rng.geometric(p, int(expect + 6.0 * math.sqrt(expect) + 16.0))
        pos = at + np.cumsum(gaps)
        out.append(pos[pos < n])
        if pos[-1] >= n:
            return np.concatenate(out)
        at = int(pos[-1])


class LengthFold:
    """Length statistics of (input, output) token pairs, chunk by chunk.

    Every pair gets a uniform random key; the RANK_SAMPLE_PAIRS smallest keys are a uniform
    sample without replacement (bottom-k sampling), and its SAMPLER_PAIRS smallest the sampler.
    The fold keeps every pair with a key below `top` and draws keys only for the pairs that
    can fall below it: which ones is itself drawn, with the same law, so a chunk costs the
    pairs it adds, not a key per pair. The pairs kept are held in parts, one per chunk, and
    cut back to the k smallest only when they pass 2k: a chunk costs its own pairs, not the
    whole sample's.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.ins, self.outs = _ColumnFold(), _ColumnFold()
        self.top = 1.0
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # keys, ins, outs
        self.n = 0

    @property
    def kept(self) -> int:
        """Pairs in `parts`, every key below `top` (one part a chunk since the last cut)."""
        return sum(int(p[0].size) for p in self.parts)

    def add(self, inputs: np.ndarray, outputs: np.ndarray) -> None:
        self.ins.add(inputs)
        self.outs.add(outputs)
        n, top, k = int(inputs.size), self.top, RANK_SAMPLE_PAIRS
        self.n += n
        cut = top
        if self.kept + n * top > 2 * k:
            # Draw keys only below a lower cut, under which about k keys plus six standard
            # deviations are expected (the pairs kept and the new ones together).
            cut = min(top, (k + 6.0 * math.sqrt(k) + 16.0) / (self.kept / top + n))
        take = _bernoulli_positions(self.rng, n, cut) if cut < 1.0 else np.arange(n)
        keys = cut * self.rng.random(take.size)
        drawn_above = False  # keys drawn above `top` too: to be cut off
        if cut < top:
            below = sum(int(np.count_nonzero(p[0] < cut)) for p in self.parts)
            if below + take.size >= k:
                top = cut  # the other new pairs' keys lie above the cut, unknown
            else:  # a six-sigma shortfall: draw the other pairs' keys too, from the cut up
                rest = np.ones(n, dtype=bool)
                rest[take] = False
                at = np.flatnonzero(rest)
                more = cut + (1.0 - cut) * self.rng.random(at.size)
                take, keys = np.concatenate((take, at)), np.concatenate((keys, more))
                drawn_above = True
        self.parts.append((keys, inputs[take], outputs[take]))
        if top < self.top or drawn_above or self.kept > 2 * k:
            self.top = top
            self._compact()

    def _compact(self) -> None:
        """One part: the pairs with a key below `top`, the k smallest once there are more
        than 2k (`top` then the (k + 1)-th smallest key). Every kept key is below `top` after."""
        keys, ins, outs = self.pairs()
        keep = np.flatnonzero(keys < self.top)
        k = RANK_SAMPLE_PAIRS
        if keep.size > 2 * k:
            keep = keep[np.argpartition(keys[keep], k)[: k + 1]]
            self.top = float(keys[keep].max())  # the (k + 1)-th smallest: the k below it stay
            keep = keep[keys[keep] < self.top]
        self.parts = [(keys[keep], ins[keep], outs[keep])]

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The keys and (input, output) pairs kept, in one array each."""
        if len(self.parts) != 1:
            empty = np.zeros(0, dtype=np.int64)
            parts = self.parts or [(np.zeros(0), empty, empty)]
            self.parts = [tuple(np.concatenate(c) for c in zip(*parts, strict=True))]  # type: ignore[list-item]
        return self.parts[0]

    def finish(self) -> tuple[Lengths, str | None]:
        """Length statistics, and a note when the rank correlation is a sample's estimate."""
        ci, co = self.ins.counts(), self.outs.counts()
        keys, s_in, s_out = self.pairs()
        if keys.size > RANK_SAMPLE_PAIRS:
            bottom = np.argpartition(keys, RANK_SAMPLE_PAIRS - 1)[:RANK_SAMPLE_PAIRS]
            keys, s_in, s_out = keys[bottom], s_in[bottom], s_out[bottom]
        first = np.arange(keys.size)
        if keys.size > SAMPLER_PAIRS:
            first = np.argpartition(keys, SAMPLER_PAIRS - 1)[:SAMPLER_PAIRS]
        first = first[np.argsort(keys[first])]
        pairs = [(int(i), int(o)) for i, o in zip(s_in[first], s_out[first], strict=True)]
        rho = spearman(ci, co, (s_in, s_out)) if self.n else None
        lengths = lengths_of(ci, co, rho, pairs, self.seed).model_copy(update={"requests": self.n})
        note = None
        if s_in.size < self.n:
            se = 1 / math.sqrt(s_in.size)
            note = (
                f"ranks from the whole log's length counts, cross term from a uniform sample of "
                f"{s_in.size:,} of the {self.n:,} pairs (standard error about {se:.4f})"
            )
        return lengths, note


class SessionFold:
    """Session statistics from the hash sample of sessions, chunk by chunk.

    The in-memory profiler keeps the sessions whose id hash has its low k bits zero, k set by
    the number of requests with a session id; k only grows with that number, so keeping the
    current k's sample and thinning it when k grows ends with the same sample.
    """

    def __init__(self) -> None:
        self.k = 0
        self.n_valid = self.n_rows = 0
        self.seen = False
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.kept = 0

    def add(self, ids: pl.DataFrame | None, valid: int, t: np.ndarray, inputs: np.ndarray) -> None:
        """Fold a chunk: `ids`, its SESSION_HASH and SESSION_ZEROS columns (the hash of each
        row's session id and its trailing zero bits; null and -1 for a row without one; None:
        the log has no ids), how many of its rows have an id, their arrivals and input
        tokens."""
        self.n_rows += t.size
        if ids is None:
            return
        self.seen = True
        self.n_valid += valid
        k = sample_bits(self.n_valid)
        if k != self.k:
            self.k = k
            self.parts = [self._thin(*p) for p in self.parts]
        kept = ids.with_row_index("at").filter(pl.col(SESSION_ZEROS) >= k)
        idx = kept["at"].to_numpy()
        self.parts.append((kept[SESSION_HASH].to_numpy(), t[idx], inputs[idx]))
        self.kept = sum(p[0].size for p in self.parts)
        if self.kept > 4 * SAMPLE_ABOVE_ROWS:  # many chunks since k last grew: compact
            self.parts = [tuple(np.concatenate(c) for c in zip(*self.parts, strict=True))]  # type: ignore[list-item]

    def _thin(
        self, hs: np.ndarray, ts: np.ndarray, ins: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # Indices rather than the boolean mask: numpy gathers a few indices faster than it
        # compresses by a mask of them all.
        idx = np.flatnonzero((hs & np.uint64((1 << self.k) - 1)) == 0)
        return hs[idx], ts[idx], ins[idx]

    def finish(self) -> Sessions:
        if not self.seen or self.n_valid == 0:
            return Sessions(available=False)
        hs, ts, ins = (np.concatenate(c) for c in zip(*self.parts, strict=True))
        return sessions_of_sample(hs, ts, ins, self.k, self.n_valid, self.n_rows)
