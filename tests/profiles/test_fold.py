"""The folds' pair sample: a uniform sample without replacement, whatever the chunking."""

from __future__ import annotations

import numpy as np
import pytest

import profiles.fold as fold
from profiles.fold import LengthFold, _bernoulli_positions


def test_bernoulli_positions_take_each_index_with_the_asked_probability() -> None:
    rng = np.random.default_rng(4)
    hits = np.zeros(500)
    draws = 4000
    for _ in range(draws):
        taken = _bernoulli_positions(rng, 500, 0.05)
        assert np.all(np.diff(taken) > 0) and taken[-1] < 500  # distinct, in order, in range
        hits[taken] += 1
    share = hits / draws
    se = (0.05 * 0.95 / draws) ** 0.5
    assert abs(share.mean() - 0.05) < 4 * se / 500**0.5
    assert share.std() == pytest.approx(se, rel=0.15)  # binomial spread: no index favoured


def test_pair_sample_is_uniform_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pair of three chunks enters a 50-pair sample of 300 with probability 1/6."""
    monkeypatch.setattr(fold, "RANK_SAMPLE_PAIRS", 50)
    hits = np.zeros(300)
    runs = 3000
    for seed in range(runs):
        f = LengthFold(seed)
        for c in range(3):
            ids = np.arange(c * 100, (c + 1) * 100)
            f.add(ids, ids)
        keys, ins, _ = f.pairs()
        bottom = np.argsort(keys)[:50]
        assert len(set(ins[bottom].tolist())) == 50
        hits[ins[bottom]] += 1
    note = f.finish()[1]
    assert note is not None and "50 of the 300 pairs" in note
    share = hits / runs
    se = (1 / 6 * 5 / 6 / runs) ** 0.5
    for c in range(3):  # no chunk favoured
        assert abs(share[c * 100 : (c + 1) * 100].mean() - 1 / 6) < 4 * se / 10
    assert share.std() == pytest.approx(se, rel=0.15)


def test_pair_sample_holds_every_pair_of_a_small_log() -> None:
    f = LengthFold(0)
    for c in range(4):
        ids = np.arange(c * 1000, (c + 1) * 1000)
        f.add(ids, ids + 1)
    _, ins, outs = f.pairs()
    assert sorted(ins.tolist()) == list(range(4000))
    assert np.array_equal(outs, ins + 1)
    assert f.finish()[1] is None  # the rank correlation is exact


def test_column_counts_add_up_across_chunks_with_values_past_the_dense_range() -> None:
    from profiles.fold import _ColumnFold
    from profiles.lengths import _BINCOUNT_MAX, _Counts

    chunks = [np.array([0, 3, 3, 7]), np.array([_BINCOUNT_MAX + 5, 2, 3]), np.array([9])]
    fold = _ColumnFold()
    for c in chunks:
        fold.add(c)
    got, want = fold.counts(), _Counts(np.concatenate(chunks))
    assert (
        (got.n, got.total, got.max)
        == (want.n, want.total, want.max)
        == (8, 27 + _BINCOUNT_MAX + 5, _BINCOUNT_MAX + 5)
    )
    assert fold.counts().total == got.total  # reading the counts twice changes nothing
    ks = np.arange(8)
    assert got.kth(ks).tolist() == want.kth(ks).tolist() == sorted(np.concatenate(chunks).tolist())


def test_a_shortfall_below_the_cut_draws_the_other_keys_and_keeps_those_below_the_top(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When fewer than k keys fall below the lowered cut (a six-sigma event, forced here by a
    draw that takes no pair), the other pairs' keys are drawn above the cut and the sample
    keeps exactly the pairs below its top."""
    monkeypatch.setattr(fold, "RANK_SAMPLE_PAIRS", 50)
    f = LengthFold(0)
    f.add(np.arange(60), np.arange(60))  # every pair kept (fewer than 2k); the cut below
    # is then about 0.68, with about 41 of these keys under it
    monkeypatch.setattr(fold, "_bernoulli_positions", lambda rng, n, p: np.zeros(0, np.int64))
    ids = np.arange(100, 200)
    f.add(ids, ids)
    keys, ins, _ = f.pairs()
    assert f.top < 1.0 and np.all(keys < f.top) and keys.size == 50
    assert len(set(ins.tolist())) == 50 and ins.max() >= 100  # the second chunk is in the draw
