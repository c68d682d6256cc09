"""Prefix-reuse statistics from chained block hashes: ideal and LRU hit ratios, top prefixes.

A request's prompt is a chain of block hashes (a block's hash covers its parent's), so a hash
seen before means the whole prefix up to that block was seen before. All of it is vectorised
over the flattened (request, block) accesses:

- ideal hit ratio: share of prompt tokens in blocks some earlier request already had;
- LRU hit ratio per cache size, from LRU stack distances (Mattson et al.): one pass gives
  the hit ratio for every size. Blocks of one request are touched last block first, so a
  parent is always more recent than its children and an LRU cache stays prefix-closed, as
  vLLM's eviction order (tail blocks first) keeps it;
- top shared prefixes: chain nodes shared by at least two requests and cut where the number
  of requests sharing them drops, ranked by the tokens they cover.
"""

from __future__ import annotations

import numpy as np

from profiles.model import LruPoint, Prefix, SharedPrefix

TOP_PREFIXES = 10


def default_cache_tokens(block_tokens: int, distinct_tokens: int) -> list[int]:
    """Powers of two from 4 Ki tokens up to the first size that holds every distinct block."""
    sizes = []
    size = max(4096, block_tokens)
    while True:
        sizes.append(size)
        if size >= distinct_tokens or size >= 1 << 34:
            return sizes
        size *= 2


def _index_dtype(n: int) -> type[np.signedinteger]:
    """int32 for indices below n (and n itself) where they fit: half the memory of int64."""
    return np.int32 if n < np.iinfo(np.int32).max else np.int64


def _prefix_counts_below(y: np.ndarray, prefix_len: np.ndarray, thresh: np.ndarray) -> np.ndarray:
    """For each query q: #{j < prefix_len[q] : y[j] > thresh[q]} (offline, merge-sort levels).

    A prefix [0, m) splits into aligned power-of-two blocks (the bits of m); each level keeps
    y sorted within its blocks, so each block's count is one binary search. Three arrays of
    len(y) int64 live at once (positions, this level's sorted values, a work buffer for the
    keys), plus the sort's own.
    """
    n = y.size
    out = np.zeros(prefix_len.size, dtype=np.int64)
    if n == 0:
        return out
    big = np.int64(int(y.max()) + 2)
    pos = np.arange(n, dtype=np.int64)
    work = np.empty(n, dtype=np.int64)
    level_sorted = y.astype(np.int64)

    def block_offsets(size: int) -> np.ndarray:  # (j // size) * big for every j, into `work`
        np.floor_divide(pos, size, out=work)
        np.multiply(work, big, out=work)
        return work

    size = 1
    while size <= n:
        keys = block_offsets(size)
        keys += level_sorted  # sorted: blocks in order, y sorted inside each
        has = (prefix_len & size) != 0
        if has.any():
            m = prefix_len[has]
            block_id = (m // (2 * size)) * 2
            start = block_id * size
            idx = np.searchsorted(keys, block_id * big + thresh[has], side="right")
            out[has] += (start + size) - idx
        # Next level: merge pairs of sorted runs (timsort on two runs is a linear merge).
        size *= 2
        merged = block_offsets(size)
        merged += level_sorted
        level_sorted = np.sort(merged, kind="stable")
        level_sorted -= block_offsets(size)
    return out


def stack_distances(items: np.ndarray) -> np.ndarray:
    """LRU stack distance of each access (distinct items since its last access); -1 if first."""
    n = items.size
    ix = _index_dtype(n)
    order = np.argsort(items, kind="stable").astype(ix)
    ranked = items[order]
    same = ranked[1:] == ranked[:-1]
    del ranked
    prev = np.full(n, -1, dtype=ix)
    prev[order[1:][same]] = order[:-1][same]
    nxt = np.full(n, n, dtype=ix)  # n stands for "never again"
    nxt[order[:-1][same]] = order[1:][same]
    del order, same
    first = prev < 0
    distinct_before = np.cumsum(first, dtype=ix) - first  # first accesses before each t
    seen = np.flatnonzero(~first).astype(ix)
    del first
    # Distinct items in (p, t) = #{j < t: next(j) > t} - #{j <= p: next(j) > t}.
    a = distinct_before[seen] - 1
    del distinct_before
    b = _prefix_counts_below(nxt, prev[seen] + 1, seen)
    dist = np.full(n, -1, dtype=np.int64)
    dist[seen] = a - b
    return dist


def block_places(lengths: np.ndarray) -> np.ndarray:
    """Each block's place in its request (0 for its first), for requests of `lengths` blocks."""
    n = int(lengths.sum())
    ix = _index_dtype(n)
    starts = (np.cumsum(lengths) - lengths).astype(ix)
    return np.arange(n, dtype=ix) - np.repeat(starts, lengths)


def prefix_tokens(
    pos: np.ndarray, lengths: np.ndarray, hash_tokens: np.ndarray, block_tokens: int
) -> np.ndarray:
    """The prompt tokens up to each block's end (a request's last block may be partial)."""
    return np.minimum((pos + 1) * np.int64(block_tokens), np.repeat(hash_tokens, lengths))


def block_layout(
    lengths: np.ndarray, hash_tokens: np.ndarray, block_tokens: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each block's request, place in its request, and prompt tokens (a request's last block
    may be partial), for requests of `lengths` blocks covering `hash_tokens` tokens."""
    pos = block_places(lengths)
    req = np.repeat(np.arange(lengths.size, dtype=pos.dtype), lengths)
    own_tokens = np.repeat(hash_tokens, lengths)
    tokens = np.clip(np.minimum(block_tokens, own_tokens - pos * np.int64(block_tokens)), 0, None)
    return req, pos, tokens


def _own_before(lengths: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The blocks of each block's request touched before it, last block first: L - 1 - p."""
    return np.repeat(lengths.astype(pos.dtype), lengths) - 1 - pos


def touch_order(lengths: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Where each touch comes from when each request's blocks are touched last block first.

    Block k, the p-th of a request of L blocks, is touched (L - 1 - 2p) places from k: the
    order is its own inverse (touched = items[order], and items = touched[order]).
    """
    return np.arange(pos.size, dtype=pos.dtype) + _own_before(lengths, pos) - pos


def lru_distances(items: np.ndarray, lengths: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """LRU stack distance of each block access of requests in order; -1 for a first touch.

    Each request's blocks are touched last first, so a parent is always more recent than its
    children and an LRU cache stays prefix-closed. Then each distance is corrected for the
    request's own blocks touched just before: they cannot have been touched since this
    block's last access, and a server allocates them with it.
    """
    rev = touch_order(lengths, pos)
    dist = stack_distances(items[rev])[rev]
    del rev
    seen = dist >= 0
    np.subtract(dist, _own_before(lengths, pos), out=dist, where=seen)
    np.maximum(dist, 0, out=dist, where=seen)
    return dist


def prefix_stats(
    flat: np.ndarray,
    lengths: np.ndarray,
    hash_tokens: np.ndarray,
    block_tokens: int,
    cache_tokens: list[int] | None,
    cached_tokens: np.ndarray | None = None,
    input_tokens: np.ndarray | None = None,
) -> Prefix:
    """Prefix statistics of requests in arrival order.

    `flat` holds every request's block hashes back to back, `lengths` the number of blocks per
    request and `hash_tokens` the prompt tokens each request's hashes cover. `cached_tokens`
    (usage.prompt_tokens_details.cached_tokens, null as -1) gives the server-reported ratio.
    """
    reported = None
    if cached_tokens is not None and input_tokens is not None:
        has = cached_tokens >= 0
        if has.any() and input_tokens[has].sum() > 0:
            reported = float(cached_tokens[has].sum() / input_tokens[has].sum())
    total_tokens = float(hash_tokens.sum())
    if flat.size == 0 or total_tokens <= 0:
        return Prefix(
            available=flat.size > 0,
            block_tokens=block_tokens,
            ideal_hit_ratio=0.0 if flat.size else None,
            reported_cached_token_ratio=reported,
        )
    n_req = lengths.size
    ix = _index_dtype(flat.size)
    req, pos, tokens = block_layout(lengths, hash_tokens, block_tokens)
    uniq, first_idx, inv, counts = np.unique(
        flat, return_index=True, return_inverse=True, return_counts=True
    )
    distinct = int(uniq.size)
    del uniq
    inv = inv.astype(ix)
    hit = req[first_idx][inv] < req
    ideal = float(tokens[hit].sum() / total_tokens)
    del hit, first_idx
    dist = lru_distances(inv, lengths, pos)
    sizes = cache_tokens or default_cache_tokens(block_tokens, distinct * block_tokens)
    curve = []
    for size in sorted(set(sizes)):
        cap_blocks = size // block_tokens
        ok = (dist >= 0) & (dist < cap_blocks)
        curve.append(
            LruPoint(cache_tokens=int(size), hit_ratio=float(tokens[ok].sum() / total_tokens))
        )
    del dist, tokens

    cum_tokens = prefix_tokens(pos, lengths, hash_tokens, block_tokens)
    top, req_share, tok_share = _top_prefixes(
        inv, req, pos, counts, cum_tokens, n_req, total_tokens
    )
    return Prefix(
        available=True,
        block_tokens=block_tokens,
        ideal_hit_ratio=ideal,
        lru_hit_ratio=curve,
        top_prefixes=top,
        top_prefixes_request_share=req_share,
        top_prefixes_token_share=tok_share,
        reported_cached_token_ratio=reported,
    )


def _top_prefixes(
    inv: np.ndarray,
    req: np.ndarray,
    pos: np.ndarray,
    counts: np.ndarray,
    cum_tokens: np.ndarray,
    n_req: int,
    total_tokens: float,
) -> tuple[list[SharedPrefix], float, float]:
    n_items = counts.size
    node_tokens = np.zeros(n_items, dtype=np.int64)
    node_tokens[inv] = cum_tokens
    max_child = np.zeros(n_items, dtype=np.int64)
    child = np.flatnonzero(pos > 0)
    np.maximum.at(max_child, inv[child - 1], counts[inv[child]])
    best, top = ranked_prefixes(counts, max_child, node_tokens, n_req, total_tokens)
    if best.size == 0:
        return [], 0.0, 0.0
    is_top = np.zeros(n_items, dtype=bool)
    is_top[best] = True
    deepest = np.zeros(n_req, dtype=np.int64)
    mark = is_top[inv]
    np.maximum.at(deepest, req[mark], cum_tokens[mark])
    return top, float((deepest > 0).sum() / n_req), float(deepest.sum() / total_tokens)


def ranked_prefixes(
    counts: np.ndarray,
    max_child: np.ndarray,
    node_tokens: np.ndarray,
    n_req: int,
    total_tokens: float,
) -> tuple[np.ndarray, list[SharedPrefix]]:
    """The top chain nodes (indices, and as SharedPrefix): shared by 2+ requests and more
    than any child (where the sharing drops), ranked by the tokens they cover in all; ties
    in the nodes' order."""
    maximal = np.flatnonzero((counts >= 2) & (counts > max_child))
    score = counts[maximal] * node_tokens[maximal]
    best = maximal[np.argsort(-score, kind="stable")[:TOP_PREFIXES]]
    top = [
        SharedPrefix(
            prefix_tokens=int(node_tokens[i]),
            request_share=float(counts[i] / n_req),
            token_share=float(counts[i] * node_tokens[i] / total_tokens),
        )
        for i in best
    ]
    return best, top
