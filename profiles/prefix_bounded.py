"""LRU and ideal prefix hit ratios of a log whose block hashes do not all fit in memory.

`LruFold` folds requests (their chained block hashes, as profiles.prefix takes them) in
windows, in memory bounded whatever the log's length:

- **Caches of up to `near_tokens`: exact.** Each window's accesses are preceded by the most
  recent distinct blocks before it, as many as such a cache holds, in recency order. An
  access whose block is among them gets its exact LRU stack distance (the blocks above it
  are exactly those touched since its last access); one whose block is not is further away
  than such a cache holds: a miss in every cache that small.
- **Larger caches and the ideal hit ratio: spatially hashed sampling** (SHARDS, Waldspurger et
  al., FAST 2015). Every access of a block whose mixed hash has its k low bits zero is kept
  (rate R = 2^-k). k is raised, and the sample thinned to the new rate, whenever R times the
  far accesses so far (those not near hits: at least the distinct blocks, so about the
  distinct blocks sampled) would exceed `sample_blocks`; what was already measured stays,
  weighted 1/R of its own time (Horvitz-Thompson sums over windows). The sample's stack
  distances over R estimate the stream's.
- **What is estimated is misses, not hits.** Every access but a block's first touch is an
  ideal hit, so the ideal hit ratio needs only the first touches' tokens: one a block, a
  uniform sample of the distinct blocks with a small, well-estimated variance. Hits in a
  cache of C blocks are those less the accesses touched before at distance C or more; near
  hits (the exact part) never are, so only far accesses are estimated. (Estimating hits
  directly weights each sampled block by its accesses: a rarely sampled hot prompt makes
  that estimate heavy-tailed and its error estimate too small.)
- **Bounds, written into the profile.** An access at true distance d has a sampled distance
  of about Binomial(d, R): each of the d distinct blocks in between is kept by its own hash.
  So d_s / R lies within d +- 3 s(d), s(d) = sqrt(d (1 - R) / R), for all but 0.3 % of
  accesses, and as d - 3 s(d) grows with d once d > 9 (1 - R) / (4 R), the misses of a cache
  of C blocks lie between the sample's at or beyond C + 3 s(C) and at or beyond C - 3 s(C).
  Each sum also carries sampling error: its standard error is read from G independent
  subsamples (the blocks' high hash bits), and each side widens by Z of them. An LRU
  cache's hit ratio grows with its size, so the exact ratio at `near_tokens` is a floor for
  every larger cache and for the ideal.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from profiles.assemble import hashed_arrays, prefix_of
from profiles.model import Bound, LruPoint, Prefix
from profiles.prefix import block_layout, default_cache_tokens, lru_distances, touch_order
from profiles.prefix_top import TopPrefixFold

EXACT_BLOCKS = 1 << 24  # hashes kept for the exact statistics (x 94 B at the end: 1.6 GB)
NEAR_TOKENS = 1 << 24  # caches up to 16 Mi tokens are measured exactly (KV caches are smaller)
WINDOW_BLOCKS = 1 << 21  # requests are folded about this many blocks at a time
SAMPLE_BLOCKS = 1 << 20  # far accesses sampled at most (so distinct blocks), beyond NEAR_TOKENS
GROUPS = 16  # independent subsamples by the top hash bits, for the sampling error
Z = 3.0  # standard deviations each bound is wide
_GROUP_SHIFT = np.uint64(64 - 4)  # 2**4 == GROUPS


def mix(hashes: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 whose every bit depends on every input bit
    (hash ids from a log may be small consecutive integers)."""
    z = hashes.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True, kw_only=True)
class LruEstimate:
    """A folded stream's hit ratios, each as (estimate, low, high); low == high when exact."""

    distinct_blocks: float  # estimated from the sample when it was thinned
    ideal: tuple[float, float, float]
    curve: dict[int, tuple[float, float, float]]  # cache tokens -> hit ratio
    sample_rate: float  # the lowest share of distinct blocks sampled (1: all, exact)


class _Stacks:
    """Stack distances of a request stream fed in windows, remembering the `keep` most
    recent distinct blocks (all of them when None) from one window to the next."""

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self.carry = np.zeros(0, dtype=np.uint64)  # least recent first

    def feed(self, items: np.ndarray, lengths: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Each access's stack distance; -1 when its block is not among those remembered."""
        c = self.carry.size
        items = np.concatenate((self.carry, items))
        lengths = np.concatenate((np.ones(c, dtype=lengths.dtype), lengths))
        pos = np.concatenate((np.zeros(c, dtype=pos.dtype), pos))
        dist = lru_distances(items, lengths, pos)[c:]
        latest_first = items[touch_order(lengths, pos)][::-1]
        del items
        last = np.sort(np.unique(latest_first, return_index=True)[1])
        self.carry = latest_first[last[: self.keep]][::-1].copy()
        return dist


class LruFold:
    """The LRU curve and ideal hit ratio of requests folded in order (see the module doc)."""

    def __init__(
        self,
        block_tokens: int,
        cache_tokens: list[int],
        near_tokens: int | None = None,
        window_blocks: int | None = None,
        sample_blocks: int | None = None,
    ) -> None:
        self.block_tokens = block_tokens
        self.sizes = sorted(set(cache_tokens))  # every size a curve may ask for
        self.window_blocks = window_blocks or WINDOW_BLOCKS
        self.sample_blocks = sample_blocks or SAMPLE_BLOCKS
        self.near = _Stacks(max(1, (near_tokens or NEAR_TOKENS) // block_tokens))
        self.near_hits = np.zeros(self.near.keep or 1, dtype=np.float64)  # tokens by distance
        self.hashed_tokens = 0.0  # the ratios' denominator, as profiles.prefix has it
        self.block_tokens_total = 0.0  # every block access's tokens
        self.zeros = 0  # k: sampled blocks have their k low mixed-hash bits zero
        self.far_accesses = 0  # accesses that were not near hits
        self.rate = 1.0  # the lowest rate any access was measured at (1: exact)
        self.sample = _Stacks(None)
        # Sampled accesses not yet measured: mixed hash, request number, tokens, near hit.
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending_blocks = 0
        self.runs = 0  # requests folded, numbering the sample's runs
        self.distinct = 0.0  # 1/R-weighted first touches: distinct blocks
        # Per subsample, 1/R-weighted token sums over the sampled accesses: first touches
        # (every other access is an ideal hit), and for each size, the far accesses touched
        # before at or beyond C - 3s, C, C + 3s (misses; columns 3i, 3i+1, 3i+2).
        self.cold = np.zeros(GROUPS)
        self.beyond = np.zeros((GROUPS, 3 * len(self.sizes)))

    def add(self, flat: np.ndarray, lengths: np.ndarray, hash_tokens: np.ndarray) -> None:
        """Fold requests in arrival order (arguments as profiles.prefix.prefix_stats takes)."""
        req, pos, tokens = block_layout(lengths, hash_tokens, self.block_tokens)
        self.hashed_tokens += float(hash_tokens.sum())
        self.block_tokens_total += float(tokens.sum())
        near_hit = np.zeros(flat.size, dtype=bool)  # a hit in every cache of the exact part
        for first, stop, start, end in request_runs(lengths, self.window_blocks):
            dist = self.near.feed(flat[start:end], lengths[first:stop], pos[start:end])
            near = (dist >= 0) & (dist < self.near_hits.size)
            near_hit[start:end] = near
            self.near_hits += np.bincount(
                dist[near], weights=tokens[start:end][near], minlength=self.near_hits.size
            )
        # The rate follows the far accesses so far (at least the distinct blocks: every first
        # touch is one), never the sample itself: a rate lowered by the sample's own size
        # makes its error larger than its subsamples show (bench/prefix_bounded.py --salts).
        self.far_accesses += int((~near_hit).sum())
        zeros = max(0, math.ceil(math.log2(max(self.far_accesses, 1) / self.sample_blocks)))
        if zeros > self.zeros:
            self._flush()  # what is pending was sampled at the rate before
            self.zeros = zeros
            self.sample.carry = self.sample.carry[(self.sample.carry & self._mask()) == 0]
        mixed = mix(flat)
        keep = (mixed & self._mask()) == 0
        runs = (req[keep] + self.runs).astype(np.int64)
        self.pending.append((mixed[keep], runs, tokens[keep], near_hit[keep]))
        self.pending_blocks += int(keep.sum())
        self.runs += lengths.size
        # Measured once as many as the sample's blocks are pending: each carry is fed twice.
        if self.pending_blocks >= max(self.sample.carry.size, self.sample_blocks // 16):
            self._flush()

    def _mask(self) -> np.uint64:
        return np.uint64((1 << self.zeros) - 1)

    def _flush(self) -> None:
        """Measure the pending sampled accesses."""
        if not self.pending:
            return
        mixed, runs, tokens, near_hit = (np.concatenate(c) for c in zip(*self.pending, strict=True))
        self.pending, self.pending_blocks = [], 0
        if mixed.size:
            starts = np.flatnonzero(np.diff(runs, prepend=runs[0] - 1))
            lengths = np.diff(np.append(starts, runs.size))
            pos = np.arange(runs.size) - np.repeat(starts, lengths)
            dist = self.sample.feed(mixed, lengths, pos)
            self._tally(mixed >> _GROUP_SHIFT, dist, tokens, near_hit)

    def _tally(
        self, group: np.ndarray, dist: np.ndarray, tokens: np.ndarray, near_hit: np.ndarray
    ) -> None:
        """Add the sampled accesses, over R, to the subsamples' sums. The misses estimated
        are first touches (one a block: a uniform sample of the distinct blocks) and far
        accesses beyond a cache (none of them near hits, which are counted exactly)."""
        rate = 2.0**-self.zeros
        self.rate = min(self.rate, rate)
        g = group.astype(np.int64)
        first = dist < 0
        self.distinct += float(first.sum()) / rate
        self.cold += np.bincount(g[first], weights=tokens[first] / rate, minlength=GROUPS)
        far = ~near_hit & ~first
        g, weight, scaled = g[far], tokens[far] / rate, dist[far] / rate
        for i, size in enumerate(self.sizes):
            for j, edge in enumerate(_edges(size / self.block_tokens, rate)):
                beyond = scaled >= edge
                self.beyond[:, 3 * i + j] += np.bincount(
                    g[beyond], weights=weight[beyond], minlength=GROUPS
                )

    def finish(self) -> LruEstimate:
        """The estimates, for every size asked for at the start."""
        self._flush()
        denom = max(self.hashed_tokens, 1.0)
        floor = float(self.near_hits.sum()) / denom  # the exact part's largest cache
        cold, cold_se = self._sum(self.cold)
        hits = self.block_tokens_total - cold  # ideal hits: every access but first touches
        low = max((hits - Z * cold_se) / denom, floor)
        high = max(min((hits + Z * cold_se) / denom, 1.0), low)
        ideal = (min(max(hits / denom, low), high), low, high)
        curve: dict[int, tuple[float, float, float]] = {}
        for i, size in enumerate(self.sizes):
            cap = size // self.block_tokens
            if cap <= self.near_hits.size:
                exact = float(self.near_hits[:cap].sum()) / denom
                curve[size] = (exact, exact, exact)
                continue
            (most, most_se), (mid, _), (least, least_se) = (
                self._sum(self.beyond[:, 3 * i + j]) for j in range(3)
            )
            low = max((hits - Z * cold_se - most - Z * most_se) / denom, floor)
            high = (hits + Z * cold_se - max(0.0, least - Z * least_se)) / denom
            high = max(min(high, ideal[2]), low)
            curve[size] = (min(max((hits - mid) / denom, low), high), low, high)
        return LruEstimate(
            distinct_blocks=self.distinct, ideal=ideal, curve=curve, sample_rate=self.rate
        )

    def _sum(self, groups: np.ndarray) -> tuple[float, float]:
        """A sampled sum and its standard error, from the spread of the G subsamples' sums
        (each G times its own is an estimate from an independent sample of rate R / G)."""
        total = float(groups.sum())
        if self.rate == 1.0:
            return total, 0.0  # every access measured: exact
        spread = ((GROUPS * groups - total) ** 2).sum() / (GROUPS * (GROUPS - 1))
        return total, float(np.sqrt(spread))


def request_runs(lengths: np.ndarray, blocks: int) -> Iterator[tuple[int, int, int, int]]:
    """Runs of whole requests of about `blocks` blocks each (a longer request is a run of its
    own): (first request, stop request, first block, stop block)."""
    ends = np.cumsum(lengths)
    first = start = 0
    while first < lengths.size:
        stop = max(first + 1, int(np.searchsorted(ends, start + blocks, "right")))
        end = int(ends[stop - 1])
        yield first, stop, start, end
        first, start = stop, end


def _edges(cap_blocks: float, rate: float) -> tuple[float, float, float]:
    """The sampled distance (over R) from which an access is a miss in a cache of
    `cap_blocks`: for the low bound (the most misses), the estimate, and the high bound."""
    if rate >= 1.0:
        return cap_blocks, cap_blocks, cap_blocks
    spread = Z * math.sqrt(cap_blocks * (1 - rate) / rate)
    low = cap_blocks - spread if cap_blocks > 2.25 * (1 - rate) / rate else -math.inf
    return low, cap_blocks, cap_blocks + spread


class PrefixFold:
    """A log's prefix statistics, folded chunk by chunk: exact (profiles.prefix) while its
    block hashes number at most EXACT_BLOCKS, then bounded (`LruFold` for the hit ratios,
    profiles.prefix_top's frequent-items summary for the top shared prefixes)."""

    def __init__(self, block_tokens: int, cache_tokens: list[int] | None) -> None:
        self.block_tokens = block_tokens
        self.cache_tokens = cache_tokens
        self.exact_blocks = EXACT_BLOCKS  # read here, so that a test can lower it
        self.kept: list[pl.DataFrame] = []  # block_hashes, hash_tokens: 8 bytes a block
        self.kept_blocks = 0
        self.lru: LruFold | None = None
        self.top = TopPrefixFold()
        self.requests = 0

    def add(self, frame: pl.DataFrame) -> None:
        """Fold a chunk's `block_hashes` and `hash_tokens` (requests in arrival order)."""
        if self.lru is None:
            self.kept.append(frame.select("block_hashes", "hash_tokens"))
            self.kept_blocks += int(frame["block_hashes"].list.len().sum())
            if self.kept_blocks <= self.exact_blocks:
                return
            sizes = self.cache_tokens or default_cache_tokens(self.block_tokens, 1 << 34)
            self.lru = LruFold(self.block_tokens, sizes)
            kept, self.kept = self.kept, []
            for part in kept:
                self._fold(part)
        else:
            self._fold(frame)

    def _fold(self, frame: pl.DataFrame) -> None:
        assert self.lru is not None
        flat, lengths, hash_tokens = hashed_arrays(frame)
        for first, stop, start, end in request_runs(lengths, self.lru.window_blocks):
            run = flat[start:end], lengths[first:stop], hash_tokens[first:stop]
            self.lru.add(*run)
            self.top.add(*run, self.block_tokens)
        self.requests += lengths.size

    def finish(self, hashes_from: str) -> tuple[Prefix, dict[str, str], dict[str, Bound]]:
        """The statistics, what in them is estimated (key -> how), and their bounds."""
        if self.lru is None:
            hashed = pl.concat(self.kept, rechunk=False)
            return prefix_of(hashed, self.block_tokens, self.cache_tokens, hashes_from), {}, {}
        lru = self.lru.finish()
        total = self.lru.hashed_tokens
        near = self.lru.near_hits.size * self.block_tokens
        sizes = self.cache_tokens or default_cache_tokens(
            self.block_tokens, int(lru.distinct_blocks) * self.block_tokens
        )
        bounds: dict[str, Bound] = {}
        estimated: dict[str, str] = {}
        if lru.sample_rate < 1.0:
            method = (
                f"SHARDS sample of {lru.sample_rate:.3g} of the distinct blocks: +-{Z:g} "
                f"standard deviations of the sampled stack distance and of the sampling error "
                f"(profiles/prefix_bounded.py)"
            )
            bounds["prefix.ideal_hit_ratio"] = Bound(
                low=lru.ideal[1], high=lru.ideal[2], method=method
            )
            for size in sizes:
                _, low, high = lru.curve[size]
                if size // self.block_tokens > self.lru.near_hits.size:
                    bounds[f"prefix.lru_hit_ratio[{size}]"] = Bound(
                        low=low, high=high, method=method
                    )
            estimated["prefix"] = (
                f"more than {self.exact_blocks} block hashes: LRU hit ratios exact for caches "
                f"up to {near} tokens; larger caches and the ideal hit ratio from a sample "
                f"(see bounds)"
            )
        top, req_share, tok_share, count_error = self.top.finish(self.requests, total)
        if count_error:
            estimated["prefix.top_prefixes"] = (
                f"frequent-items summary: a prefix's request count is under by at most "
                f"{count_error} requests"
            )
        prefix = Prefix(
            available=True,
            block_tokens=self.block_tokens,
            ideal_hit_ratio=lru.ideal[0],
            lru_hit_ratio=[LruPoint(cache_tokens=s, hit_ratio=lru.curve[s][0]) for s in sizes],
            top_prefixes=top,
            top_prefixes_request_share=req_share,
            top_prefixes_token_share=tok_share,
            hashes_from=hashes_from,
            requests=self.requests,
            hashed_tokens=int(total),
        )
        return prefix, estimated, bounds
