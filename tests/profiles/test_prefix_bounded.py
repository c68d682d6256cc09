"""Prefix statistics in bounded memory (profiles/prefix_bounded.py).

Truths: profiles.prefix's exact statistics, themselves checked against a block-by-block
simulated LRU prefix cache (tests/profiles/test_stats.py), and that simulation directly.
Where the fold samples, the exact values must lie inside the bounds it writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from profiles import prefix_bounded
from profiles.build import build_profile
from profiles.merge import merge_profiles
from profiles.prefix import prefix_stats
from profiles.prefix_bounded import LruFold
from testkit.logs import chained_workload
from tests.profiles.test_stats import _lru_brute

BT = 16
SIZES = [BT << k for k in range(0, 16)]
ODD = [7 * BT, 20 * BT, 21 * BT, 300 * BT]  # around the exact part's edge in the first test


def _fold(flat: np.ndarray, lengths: np.ndarray, ht: np.ndarray, run: int, **kw: int) -> LruFold:
    fold = LruFold(BT, SIZES + ODD, **kw)
    ends = np.concatenate(([0], np.cumsum(lengths)))
    for a in range(0, lengths.size, run):
        b = min(a + run, lengths.size)
        fold.add(flat[ends[a] : ends[b]], lengths[a:b], ht[a:b])
    return fold


def test_an_unthinned_fold_equals_the_exact_statistics_and_a_simulated_cache() -> None:
    """Windows of a few dozen blocks, an exact part up to 20 blocks and a sample that keeps
    every block: the same numbers as the exact statistics, and as a simulated LRU cache."""
    for seed in range(4):
        reqs, flat, lengths, ht = chained_workload(seed, 300)
        est = _fold(flat, lengths, ht, run=37, near_tokens=20 * BT, window_blocks=50).finish()
        exact = prefix_stats(flat, lengths, ht, BT, SIZES)
        assert est.sample_rate == 1.0
        assert est.ideal == pytest.approx((exact.ideal_hit_ratio,) * 3, abs=1e-12)
        for pt in exact.lru_hit_ratio:
            assert est.curve[pt.cache_tokens] == pytest.approx((pt.hit_ratio,) * 3, abs=1e-12)
        for size in [BT, *ODD]:
            truth = _lru_brute(reqs, BT, size // BT, ht)
            assert est.curve[size] == pytest.approx((truth,) * 3, abs=1e-12)
        assert est.distinct_blocks == np.unique(flat).size


@pytest.mark.parametrize("seed", range(3))
def test_a_thinned_sample_holds_the_exact_values_within_its_bounds(seed: int) -> None:
    """20 k requests (about 500 k block accesses) with at most 3000 distinct blocks sampled:
    the rate falls to 1/16 or below. Caches up to 512 blocks stay exact; beyond, the exact
    values lie inside the written bounds."""
    _, flat, lengths, ht = chained_workload(100 + seed, 20_000)
    est = _fold(
        flat, lengths, ht, run=2000, near_tokens=512 * BT, window_blocks=20_000, sample_blocks=3000
    ).finish()
    exact = prefix_stats(flat, lengths, ht, BT, SIZES)
    assert est.sample_rate <= 1 / 16
    ideal = exact.ideal_hit_ratio
    assert ideal is not None and est.ideal[1] <= ideal <= est.ideal[2]
    assert est.ideal[2] - est.ideal[1] < 0.05  # a bound that says something
    for pt in exact.lru_hit_ratio:
        value, low, high = est.curve[pt.cache_tokens]
        if pt.cache_tokens <= 512 * BT:
            assert value == low == high == pytest.approx(pt.hit_ratio, abs=1e-12)
        else:
            assert low <= pt.hit_ratio <= high, pt.cache_tokens
            if pt.cache_tokens // BT * est.sample_rate >= 100:  # 10 % sampled-distance error
                assert high - low < 0.1
    distinct = np.unique(flat).size
    assert est.distinct_blocks == pytest.approx(distinct, rel=0.25)


def test_a_log_past_the_exact_budget_is_profiled_with_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    """The published Mooncake trace (about 60 k block accesses of 512 tokens) read in chunks
    with room for 5000 block hashes: the top prefixes equal the in-memory profile's, the
    hit ratios of caches up to 64 blocks are exact, the rest lie within the bounds the
    profile records."""
    log = shared_data / "mooncake_synthetic_trace.jsonl"
    whole = build_profile([str(log)]).prefix
    monkeypatch.setattr(prefix_bounded, "EXACT_BLOCKS", 5000)
    monkeypatch.setattr(prefix_bounded, "NEAR_TOKENS", 64 * 512)
    monkeypatch.setattr(prefix_bounded, "SAMPLE_BLOCKS", 2000)
    monkeypatch.setattr(prefix_bounded, "WINDOW_BLOCKS", 8000)
    chunked = build_profile([str(log)], chunk_rows=500)
    info = chunked.source.read_in_chunks
    assert info is not None and "prefix" in info.estimated
    p = chunked.prefix
    assert p.top_prefixes == whole.top_prefixes
    assert p.top_prefixes_request_share == pytest.approx(whole.top_prefixes_request_share)
    assert p.top_prefixes_token_share == pytest.approx(whole.top_prefixes_token_share)
    assert (p.requests, p.hashed_tokens) == (whole.requests, whole.hashed_tokens)
    b = info.bounds["prefix.ideal_hit_ratio"]
    assert whole.ideal_hit_ratio is not None and b.low <= whole.ideal_hit_ratio <= b.high
    assert "SHARDS" in b.method
    exact = {pt.cache_tokens: pt.hit_ratio for pt in whole.lru_hit_ratio}
    for pt in p.lru_hit_ratio:
        key = f"prefix.lru_hit_ratio[{pt.cache_tokens}]"
        if pt.cache_tokens <= 64 * 512:
            assert key not in info.bounds
            assert pt.hit_ratio == pytest.approx(exact[pt.cache_tokens], abs=1e-12)
        elif pt.cache_tokens in exact:
            bound = info.bounds[key]
            assert bound.low <= exact[pt.cache_tokens] <= bound.high


def test_shards_past_the_budget_merge_within_their_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    """The published Mooncake trace split in two by time, each half profiled past a small
    exact budget (sampled), then merged: the whole log's exact ratios lie within the merged
    bounds, which take in the halves' own."""
    lines = (shared_data / "mooncake_synthetic_trace.jsonl").read_text().splitlines(True)
    halves = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    halves[0].write_text("".join(lines[: len(lines) // 2]))
    halves[1].write_text("".join(lines[len(lines) // 2 :]))
    whole = build_profile([str(shared_data / "mooncake_synthetic_trace.jsonl")])
    monkeypatch.setattr(prefix_bounded, "EXACT_BLOCKS", 3000)
    monkeypatch.setattr(prefix_bounded, "NEAR_TOKENS", 16 * 512)
    monkeypatch.setattr(prefix_bounded, "SAMPLE_BLOCKS", 1500)
    shards = [build_profile([str(h)], chunk_rows=400) for h in halves]
    assert all(s.source.read_in_chunks and s.source.read_in_chunks.bounds for s in shards)
    merged = merge_profiles(shards, [str(h) for h in halves])
    assert merged.merge is not None
    bounds = merged.merge.bounds
    assert "sampled shards' own bounds" in bounds["prefix.ideal_hit_ratio"].method
    exact = {
        f"prefix.lru_hit_ratio[{p.cache_tokens}]": p.hit_ratio for p in whole.prefix.lru_hit_ratio
    }
    exact["prefix.ideal_hit_ratio"] = whole.prefix.ideal_hit_ratio or 0.0
    checked = 0
    for key, bound in bounds.items():
        if key in exact:
            assert bound.low <= exact[key] <= bound.high, key
            checked += 1
    assert checked >= 10
