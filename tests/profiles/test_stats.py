"""Arrival, length and prefix statistics on data whose answer is known."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from scipy import stats

from profiles.arrivals import arrival_stats
from profiles.lengths import length_stats_all
from profiles.prefix import prefix_stats, stack_distances


def test_poisson_arrivals_look_poisson() -> None:
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.exponential(1 / 20.0, size=100_000))
    t -= t[0]
    a = arrival_stats(t, None)
    assert a.mean_rate_rps == pytest.approx(20, rel=0.02)
    assert a.interarrival_cv == pytest.approx(1, abs=0.02)
    assert a.gamma_shape.moments == pytest.approx(1, abs=0.04)
    assert a.gamma_shape.mle == pytest.approx(1, abs=0.02)
    for w in ("1s", "10s", "60s"):
        assert a.fano[w] == pytest.approx(1, abs=0.25)
    assert a.bursts == []
    pct = a.window_rate_percentiles["10s"]
    assert pct == sorted(pct) and pct[100] == a.peak_rate_rps["10s"]


def test_smooth_arrivals_have_large_gamma_shape() -> None:
    t = np.arange(0, 1000, 0.5) + np.random.default_rng(1).uniform(0, 0.01, 2000)
    a = arrival_stats(np.sort(t), None)
    assert a.interarrival_cv is not None and a.interarrival_cv < 0.05
    assert a.gamma_shape.mle is not None and a.gamma_shape.mle > 100


def test_a_burst_is_found_where_it_is() -> None:
    rng = np.random.default_rng(2)
    base = np.cumsum(rng.exponential(1 / 5.0, size=9000))
    burst = 900 + rng.uniform(0, 30, size=1500)  # +50 req/s for 30 s at t=900
    t = np.sort(np.concatenate([base, burst]))
    t -= t[0]
    a = arrival_stats(t, None)
    assert len(a.bursts) >= 1
    top = a.bursts[0]
    assert 880 <= top.start_s <= 920 and 20 <= top.duration_s <= 50
    assert top.peak_rate_rps > 40


def test_hour_of_day_shape_over_two_days() -> None:
    rng = np.random.default_rng(3)
    # 2 req/s from 12:00 to 13:00 UTC, 0.5 req/s otherwise, over two full days.
    start = 1_700_006_400.0  # 2023-11-15 00:00:00 UTC
    t = np.sort(rng.uniform(0, 2 * 86400, size=2 * 86400 // 2))
    hour = ((t + start) % 86400) // 3600
    extra = t[hour == 12]
    t = np.sort(np.concatenate([t, extra, extra + 0.25, extra + 0.5]))
    a = arrival_stats(t - t[0], start + t[0])
    assert a.hour_of_day is not None and len(a.hour_of_day) == 24
    assert a.hour_of_day[12] == pytest.approx(2.0, rel=0.1)
    assert a.hour_of_day[3] == pytest.approx(0.5, rel=0.1)
    assert a.weekday is None  # two days do not make a week


def test_length_quantiles_histogram_and_rank_correlation() -> None:
    rng = np.random.default_rng(4)
    inp = rng.integers(0, 5000, size=20_000)
    out = (inp // 10 + rng.integers(0, 300, size=20_000)).astype(np.int64)
    ln = length_stats_all(inp, out, seed=9)
    q = np.percentile(inp, [50, 90, 95, 99])
    assert [ln.input.p50, ln.input.p90, ln.input.p95, ln.input.p99] == pytest.approx(list(q))
    assert ln.input.mean == pytest.approx(inp.mean())
    assert sum(ln.input.histogram.counts) == inp.size
    assert len(ln.input.histogram.edges) == len(ln.input.histogram.counts) + 1
    assert ln.io_rank_correlation == pytest.approx(stats.spearmanr(inp, out).statistic, abs=1e-9)
    assert sum(ln.classes.shares.values()) == pytest.approx(1)
    pairs = set(zip(inp.tolist(), out.tolist(), strict=True))
    assert len(ln.sampler.pairs) == 2000 and all(tuple(p) in pairs for p in ln.sampler.pairs)
    assert ln.sampler.pairs == length_stats_all(inp, out, seed=9).sampler.pairs
    assert ln.sampler.pairs != length_stats_all(inp, out, seed=10).sampler.pairs


def test_stack_distances_match_brute_force() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        items = rng.integers(0, int(rng.integers(1, 30)), size=int(rng.integers(1, 150)))
        d = stack_distances(items)
        for t in range(items.size):
            prev = [j for j in range(t) if items[j] == items[t]]
            expected = -1 if not prev else len(set(items[prev[-1] + 1 : t].tolist()))
            assert d[t] == expected


def _lru_brute(reqs: list[list[int]], bt: int, cap_blocks: int, hash_tokens: np.ndarray) -> float:
    """A prefix cache with LRU eviction, simulated block by block."""
    cache: OrderedDict[int, None] = OrderedDict()
    hit = 0
    for r, ht in zip(reqs, hash_tokens, strict=True):
        k = 0
        while k < len(r) and r[k] in cache:
            k += 1
        hit += sum(min(bt, int(ht) - i * bt) for i in range(k))
        for h in reversed(r):  # the request's tail blocks become the first to evict
            cache.pop(h, None)
            cache[h] = None
        while len(cache) > cap_blocks:
            cache.popitem(last=False)
    return hit / float(hash_tokens.sum())


def test_lru_curve_matches_a_simulated_prefix_cache() -> None:
    rng = np.random.default_rng(6)
    bt = 4
    for _ in range(20):
        reqs: list[list[int]] = []
        next_id = 0
        for _ in range(int(rng.integers(5, 60))):
            base = (
                reqs[int(rng.integers(len(reqs)))][: int(rng.integers(0, 6))]
                if reqs and rng.random() < 0.7
                else []
            )
            ext = list(range(next_id, next_id + int(rng.integers(1, 6))))
            next_id += len(ext)
            reqs.append(base + ext)
        ht = np.array([len(r) * bt - int(rng.integers(0, bt)) for r in reqs])
        flat = np.array([h for r in reqs for h in r], dtype=np.uint64)
        lens = np.array([len(r) for r in reqs])
        p = prefix_stats(flat, lens, ht, bt, [4, 8, 16, 40, 80, 400])
        for pt in p.lru_hit_ratio:
            assert pt.hit_ratio == pytest.approx(
                _lru_brute(reqs, bt, pt.cache_tokens // bt, ht), abs=1e-12
            )
        assert p.ideal_hit_ratio == pytest.approx(_lru_brute(reqs, bt, 10**9, ht), abs=1e-12)


@pytest.mark.parametrize("n", [0, 1, 7, 50_000])
def test_session_grouping_order_is_numpys_stable_argsort(n: int) -> None:
    """The sessions' grouping sort (by hash, turns in arrival order) against numpy's own
    stable argsort, on hashes with many ties (sessions of several turns)."""
    from profiles.sessions import _grouped_order

    rng = np.random.default_rng(n)
    ids = rng.integers(0, 2**58, size=max(n // 4, 1), dtype=np.uint64) << np.uint64(6)
    hs = ids[rng.integers(0, ids.size, size=n)]
    assert np.array_equal(_grouped_order(hs), np.argsort(hs, kind="stable"))
