"""TopPrefixFold: exactly _top_prefixes while it never prunes, Misra-Gries bounds when it does."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from contracts.errors import InputError
from profiles.model import SharedPrefix
from profiles.prefix import TOP_PREFIXES, prefix_stats
from profiles.prefix_top import TopPrefixFold

Requests = list[list[int]]


def _arrays(reqs: Requests, hash_tokens: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    flat = np.array([h for r in reqs for h in r], dtype=np.uint64)
    return flat, np.array([len(r) for r in reqs], dtype=np.int64), np.array(hash_tokens)


def _fold(
    reqs: Requests, hash_tokens: list[int], bt: int, cuts: list[int], capacity: int = 1 << 20
) -> TopPrefixFold:
    """The fold fed the requests in runs split before each index in `cuts`."""
    fold = TopPrefixFold(capacity)
    bounds = [0, *sorted(cuts), len(reqs)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        fold.add(*_arrays(reqs[a:b], hash_tokens[a:b]), bt)
    return fold


def _whole(
    reqs: Requests, hash_tokens: list[int], bt: int
) -> tuple[list[SharedPrefix], float, float]:
    p = prefix_stats(*_arrays(reqs, hash_tokens), bt, [bt * 4])
    assert p.top_prefixes_request_share is not None and p.top_prefixes_token_share is not None
    return p.top_prefixes, p.top_prefixes_request_share, p.top_prefixes_token_share


def _brute(
    reqs: Requests, hash_tokens: list[int], bt: int
) -> tuple[list[tuple[int, int]], float, float]:
    """(tokens, count) of the top prefixes and the two shares, by dicts over the chains."""
    count: Counter[int] = Counter()
    tokens: dict[int, int] = {}
    max_child: Counter[int] = Counter()
    for r, ht in zip(reqs, hash_tokens, strict=True):
        for p, h in enumerate(r):
            count[h] += 1
            tokens[h] = min((p + 1) * bt, ht)
    for r in reqs:
        for a, b in zip(r[:-1], r[1:], strict=False):
            max_child[a] = max(max_child[a], count[b])
    maximal = [h for h in count if count[h] >= 2 and count[h] > max_child[h]]
    top = sorted(maximal, key=lambda h: (-count[h] * tokens[h], h))[:TOP_PREFIXES]
    behind = covered = 0
    for r, ht in zip(reqs, hash_tokens, strict=True):
        deepest = max((p for p, h in enumerate(r) if h in set(top)), default=-1)
        if deepest >= 0:
            behind += 1
            covered += min((deepest + 1) * bt, ht)
    return [(tokens[h], count[h]) for h in top], behind / len(reqs), covered / sum(hash_tokens)


def _workload(
    rng: np.random.Generator, n: int, bt: int, systems: int, tail_blocks: int = 4
) -> tuple[Requests, list[int]]:
    """Chained hashes of prompts: system prompts, sessions that extend their last prompt, random
    tails, repeated prompts, prompts shorter than a block; last blocks may be partial (a partial
    block is other content, so another hash)."""
    ids: dict[tuple[object, ...], int] = {}

    def chain(content: list[object]) -> list[int]:
        out = []
        for k in range(len(content)):
            key = tuple(content[: k + 1])
            if key not in ids:
                ids[key] = int(rng.integers(0, 2**64, dtype=np.uint64))
            out.append(ids[key])
        return out

    prompts = [[("sys", s, b) for b in range(int(rng.integers(1, 8)))] for s in range(systems)]
    sessions: list[list[object]] = []
    reqs: Requests = []
    hash_tokens: list[int] = []
    sym = 0
    for _ in range(n):
        u = rng.random()
        if u < 0.05:  # no full block
            reqs.append([])
            hash_tokens.append(int(rng.integers(0, bt)))
            continue
        if u < 0.1 and reqs:  # a repeated prompt
            i = int(rng.integers(len(reqs)))
            reqs.append(reqs[i])
            hash_tokens.append(hash_tokens[i])
            continue
        if u < 0.45 and sessions:
            content = sessions[int(rng.integers(len(sessions)))]
        else:
            content = list(prompts[int(rng.integers(systems))]) if rng.random() < 0.8 else []
            sessions.append(content)
        tail = int(rng.integers(0 if content else 1, tail_blocks + 1))
        content.extend(("tail", sym + k) for k in range(tail))
        sym += tail
        fill = int(rng.integers(1, bt + 1)) if rng.random() < 0.5 else bt
        last: list[object] = [("partial", sym, fill)] if fill < bt else []
        sym += 1
        reqs.append(chain(content + last))
        hash_tokens.append(len(content) * bt + (fill if last else 0))
    return reqs, hash_tokens


def _check_exact(reqs: Requests, hash_tokens: list[int], bt: int, cuts: list[int]) -> None:
    fold = _fold(reqs, hash_tokens, bt, cuts)
    top, req_share, tok_share, error = fold.finish(len(reqs), float(sum(hash_tokens)))
    assert error == 0
    assert (top, req_share, tok_share) == _whole(reqs, hash_tokens, bt)


@pytest.mark.parametrize("seed", range(12))
def test_unpruned_fold_is_top_prefixes_exactly_and_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    bt = int(rng.choice([4, 16]))
    reqs, ht = _workload(rng, int(rng.integers(30, 400)), bt, systems=int(rng.integers(1, 6)))
    cuts = sorted(set(rng.integers(0, len(reqs), size=int(rng.integers(0, 6))).tolist()))
    _check_exact(reqs, ht, bt, cuts)
    top, req_share, tok_share, _ = _fold(reqs, ht, bt, cuts).finish(len(reqs), float(sum(ht)))
    brute_top, brute_req, brute_tok = _brute(reqs, ht, bt)
    assert [(p.prefix_tokens, round(p.request_share * len(reqs))) for p in top] == brute_top
    assert (req_share, tok_share) == pytest.approx((brute_req, brute_tok), abs=1e-12)
    assert brute_top, "the workload shares no prefix: the test would prove nothing"


def test_ties_in_score_go_to_the_smaller_hash_across_runs_and_empty_requests() -> None:
    # With 4-token blocks, four maximal prefixes all score 24 tokens x requests: 8, 4 and 7
    # (2 blocks, 3 requests each) and 6 (3 blocks, 2 requests, nested under 7).
    reqs = [[9, 8], [], [5, 7, 6], [9, 8, 1], [3, 4, 2], [5, 7, 11], [9, 8], [3, 4, 10], []]
    reqs += [[5, 7, 6, 12], [3, 4]]
    ht = [8, 3, 12, 12, 12, 12, 8, 12, 0, 16, 8]
    brute_top, _, _ = _brute(reqs, ht, 4)
    assert brute_top == [(8, 3), (12, 2), (8, 3), (8, 3)]
    for cuts in ([], [1], [2, 3], [1, 4, 8], list(range(1, 11))):
        _check_exact(reqs, ht, 4, cuts)


def test_a_prefix_takes_its_last_access_tokens_as_top_prefixes_lists_it() -> None:
    # Hash 2 ends a full 8-token prompt and a partial 7-token one (not chained hashing: the
    # documented exception, where only the listed prefixes, not the shares, stay exact).
    reqs, ht = [[1, 2, 3], [1, 2], [1, 2, 3], [1, 2]], [12, 8, 12, 7]
    for cuts in ([], [2], [1, 3]):
        top = _fold(reqs, ht, 4, cuts).finish(len(reqs), float(sum(ht)))[0]
        assert [p.prefix_tokens for p in top] == [7, 12]
        assert top == _whole(reqs, ht, 4)[0]


def test_unpruned_fold_is_exact_on_the_mooncake_trace(shared_data: Path) -> None:
    reqs: Requests = []
    ht: list[int] = []
    with (shared_data / "mooncake_synthetic_trace.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            reqs.append(row["hash_ids"])
            ht.append(row["input_length"])
    cuts = list(range(1000, len(reqs), 7919))
    _check_exact(reqs, ht, 512, cuts)
    top, _, _, _ = _fold(reqs, ht, 512, cuts).finish(len(reqs), float(sum(ht)))
    assert len(top) == TOP_PREFIXES


def test_merged_folds_are_one_fold() -> None:
    rng = np.random.default_rng(40)
    reqs, ht = _workload(rng, 300, 4, systems=3)
    whole = _fold(reqs, ht, 4, [100, 200]).finish(len(reqs), float(sum(ht)))
    first, second = _fold(reqs[:150], ht[:150], 4, [70]), _fold(reqs[150:], ht[150:], 4, [])
    first.merge(second)
    assert first.finish(len(reqs), float(sum(ht))) == whole


def test_pruned_counts_stay_within_the_misra_gries_bound_and_heavy_prefixes_survive() -> None:
    rng = np.random.default_rng(7)
    bt, capacity = 16, 200
    reqs, ht = _workload(rng, 3000, bt, systems=4, tail_blocks=12)
    fold = _fold(reqs, ht, bt, list(range(250, 3000, 250)), capacity)
    top, _, _, error = fold.finish(len(reqs), float(sum(ht)))
    truth = Counter(h for r in reqs for h in r)
    assert len(truth) > 20 * capacity and len(fold) <= capacity
    assert 0 < error <= sum(truth.values()) / (capacity + 1)
    nodes = np.array(list(truth), dtype=np.uint64)
    est = fold.counts(nodes)
    true = np.array(list(truth.values()))
    assert (est <= true).all() and (true <= est + error).all()
    # The system prompts are the heaviest maximal prefixes: found with their exact lengths.
    exact_top, _, _ = _whole(reqs, ht, bt)
    heavy = [p for p in exact_top if p.request_share * len(reqs) > 3 * error]
    assert len(heavy) >= 3
    assert [p.prefix_tokens for p in top[: len(heavy)]] == [p.prefix_tokens for p in heavy]
    for got, want in zip(top, heavy, strict=False):
        assert want.request_share - error / len(reqs) <= got.request_share <= want.request_share
    # Two summaries merged keep the same bounds (Agarwal et al.'s mergeability).
    first = _fold(reqs[:1800], ht[:1800], bt, list(range(300, 1800, 300)), capacity)
    first.merge(_fold(reqs[1800:], ht[1800:], bt, [2400], capacity))
    merged_top, _, _, merged_error = first.finish(len(reqs), float(sum(ht)))
    assert len(first) <= capacity and 0 < merged_error <= sum(truth.values()) / (capacity + 1)
    est = first.counts(nodes)
    assert (est <= true).all() and (true <= est + merged_error).all()
    assert [p.prefix_tokens for p in merged_top[: len(heavy)]] == [p.prefix_tokens for p in heavy]


def test_hashes_that_repeat_inside_a_prompt_end_in_a_result() -> None:
    # Parents 1 -> 2 -> 1 ...: a cycle that holds no top prefix, above the top prefix 3.
    reqs, ht = [[5, 1, 2, 1, 2, 3]] * 3, [24] * 3
    top, req_share, tok_share, error = _fold(reqs, ht, 4, [1]).finish(len(reqs), 72.0)
    assert top and 0 < req_share <= 1 and 0 < tok_share <= 1 and error == 0
    assert TopPrefixFold().finish(0, 0.0) == ([], 0.0, 0.0, 0)


def test_mismatched_arrays_are_an_input_error() -> None:
    fold = TopPrefixFold(8)
    with pytest.raises(InputError, match="3 block hashes, 2 requests holding 4 blocks"):
        fold.add(np.arange(3, dtype=np.uint64), np.array([2, 2]), np.array([8, 8]), 4)
    with pytest.raises(InputError, match="capacity"):
        TopPrefixFold(0)
