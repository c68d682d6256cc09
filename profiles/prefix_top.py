"""Top shared prefixes in bounded memory: a mergeable Misra-Gries summary of chain nodes.

`profiles.prefix._top_prefixes` needs every block hash of the log at once. `TopPrefixFold`
reads the log in runs of requests and keeps a table of at most `capacity` chain nodes (a node
is a distinct block hash; chained hashes make it a whole prefix), each with its request count
(accesses), its parent's hash, whether it starts a prompt, and the prompt tokens up to its end.

Each run's nodes are counted exactly (numpy unique) and added to the table. When the table
then holds more than `capacity` nodes, the mergeable Misra-Gries step (Agarwal et al.,
"Mergeable summaries", PODS 2012) subtracts the (capacity+1)-th largest count from every count
and drops the counts left <= 0; `count_error` adds up what was subtracted. So:

- a count in the table is a lower bound: true count in [count, count + count_error];
- a node not in the table was accessed at most count_error times;
- count_error <= N / (capacity + 1), N the accesses (blocks) folded: each step removes at
  least capacity+1 times what it subtracts, and no more than N is ever added.

A prefix's counts never exceed its ancestors' (each request with a node holds its ancestors),
and the step keeps that order, so the ancestors of every kept node are kept: the chain above a
top prefix can be walked through the table. While count_error is 0 (the table never overflowed)
`finish` gives exactly what `_top_prefixes` gives on the whole log, provided the hashes are
chained (a hash has one parent) and a node covers the same tokens in every request (true of
chained hashes: a partial last block of another length is another hash); otherwise a node takes
its last access's tokens, as `_top_prefixes` does for the prefixes it lists.

Memory: 29 bytes a node (hash and parent hash uint64, count int64 so a prefix seen in more
than 2**31 requests cannot wrap, tokens int32, the root flag bool), so 29 MiB at the default
capacity of 2**20 nodes, plus, while a run is added, the run's own distinct nodes and numpy's
unique over the run's blocks.
"""

from __future__ import annotations

import numpy as np

from contracts.errors import InputError
from profiles.model import SharedPrefix
from profiles.prefix import block_places, prefix_tokens, ranked_prefixes

_MAX_TOKENS = int(np.iinfo(np.int32).max)


class TopPrefixFold:
    """Misra-Gries (mergeable frequent-items) summary of chain nodes' request counts."""

    def __init__(self, capacity: int = 1 << 20) -> None:
        if capacity < 1:
            raise InputError(f"TopPrefixFold capacity must be at least 1 node (got {capacity})")
        self.capacity = capacity
        self.count_error = 0
        self.blocks = 0  # accesses folded: N of the bound count_error <= N / (capacity + 1)
        self._hash = np.zeros(0, dtype=np.uint64)  # sorted
        self._count = np.zeros(0, dtype=np.int64)
        self._tokens = np.zeros(0, dtype=np.int32)
        self._parent = np.zeros(0, dtype=np.uint64)
        self._root = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return int(self._hash.size)

    def add(
        self, flat: np.ndarray, lengths: np.ndarray, hash_tokens: np.ndarray, block_tokens: int
    ) -> None:
        """Fold a run of requests in arrival order: `flat` (uint64) every request's block hashes
        back to back, `lengths` (int64) blocks per request, `hash_tokens` (int64) prompt tokens
        each request's hashes cover (same meaning as profiles.prefix.prefix_stats' arguments).

        Raises InputError when the three arrays do not describe the same requests.
        """
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.size != np.size(hash_tokens) or int(lengths.sum()) != np.size(flat):
            raise InputError(
                f"TopPrefixFold.add: {np.size(flat)} block hashes, {lengths.size} requests "
                f"holding {int(lengths.sum())} blocks, {np.size(hash_tokens)} token counts"
            )
        if np.size(flat) == 0:
            return
        flat = np.asarray(flat, dtype=np.uint64)
        # Unique first, while nothing else of the run's size is held (its sort is the peak).
        uniq, inv, counts = np.unique(flat, return_inverse=True, return_counts=True)
        pos = block_places(lengths)
        cum = prefix_tokens(pos, lengths, hash_tokens, block_tokens)
        if int(cum.max()) > _MAX_TOKENS:
            raise InputError(f"a prompt's hashes cover {int(cum.max())} tokens (2**31 at most)")
        tokens = np.zeros(uniq.size, dtype=np.int32)
        tokens[inv] = cum  # the last access's, as _top_prefixes keeps it
        del cum
        root = np.zeros(uniq.size, dtype=bool)
        root[inv[pos == 0]] = True
        parent = np.zeros(uniq.size, dtype=np.uint64)
        child = pos > 0
        del pos
        parent[inv[child]] = flat[:-1][child[1:]]
        self.blocks += int(flat.size)
        self._merge(uniq, counts.astype(np.int64), tokens, parent, root)

    def counts(self, hashes: np.ndarray) -> np.ndarray:
        """The table's (lower-bound) request count of each hash; 0 for one it does not hold."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if self._hash.size == 0:
            return np.zeros(hashes.size, dtype=np.int64)
        at = np.minimum(np.searchsorted(self._hash, hashes), self._hash.size - 1)
        return np.where(self._hash[at] == hashes, self._count[at], 0)

    def merge(self, later: TopPrefixFold) -> None:
        """Fold in a summary of the requests that came after this one's (its tokens win)."""
        self.blocks += later.blocks
        self.count_error += later.count_error
        self._merge(later._hash, later._count, later._tokens, later._parent, later._root)

    def _merge(
        self,
        hashes: np.ndarray,
        counts: np.ndarray,
        tokens: np.ndarray,
        parent: np.ndarray,
        root: np.ndarray,
    ) -> None:
        """Add sorted distinct nodes to the table, then prune it back to `capacity`."""
        at = np.searchsorted(self._hash, hashes)
        found = at < self._hash.size
        found[found] = self._hash[at[found]] == hashes[found]
        old = at[found]
        self._count[old] += counts[found]
        self._tokens[old] = tokens[found]
        self._parent[old] = parent[found]
        self._root[old] = root[found]
        new = ~found
        if new.any():
            where = at[new]
            self._hash = np.insert(self._hash, where, hashes[new])
            self._count = np.insert(self._count, where, counts[new])
            self._tokens = np.insert(self._tokens, where, tokens[new])
            self._parent = np.insert(self._parent, where, parent[new])
            self._root = np.insert(self._root, where, root[new])
        if self._hash.size > self.capacity:
            self._prune()

    def _prune(self) -> None:
        """The Misra-Gries step: subtract the (capacity+1)-th largest count, drop counts <= 0."""
        kth = self._count.size - self.capacity - 1
        cut = np.partition(self._count, kth)[kth]
        keep = self._count > cut
        self._hash = self._hash[keep]
        self._count = self._count[keep] - cut
        self._tokens = self._tokens[keep]
        self._parent = self._parent[keep]
        self._root = self._root[keep]
        self.count_error += int(cut)

    def finish(
        self, n_req: int, total_tokens: float
    ) -> tuple[list[SharedPrefix], float, float, int]:
        """(top prefixes, top_prefixes_request_share, top_prefixes_token_share, count_error):
        count_error is the most any node's request count can be under-counted (0 while the
        summary never pruned).

        `n_req` counts every folded request (those without blocks too), `total_tokens` their
        hash_tokens. The shares come from the table alone: top nodes on one chain are nested and
        top nodes on different branches hold disjoint requests, so the requests behind the top
        are those of the top nodes with no top ancestor, and a request's deepest top node t
        covers tokens(t) for count(t) less the counts of the top nodes whose nearest top
        ancestor is t.
        """
        n = self._hash.size
        count = self._count
        up = np.minimum(np.searchsorted(self._hash, self._parent), max(n - 1, 0))
        linked = ~self._root & (self._hash[up] == self._parent) if n else np.zeros(0, dtype=bool)
        max_child = np.zeros(n, dtype=np.int64)
        np.maximum.at(max_child, up[linked], count[linked])
        node_tokens = self._tokens.astype(np.int64)
        best, top = ranked_prefixes(count, max_child, node_tokens, n_req, total_tokens)
        if best.size == 0:
            return [], 0.0, 0.0, self.count_error
        nearest = _nearest_top_ancestor(best, up, linked)
        inner = [int(count[i]) for i in best]  # requests whose deepest top node is best[k]
        for k, a in enumerate(nearest):
            if a >= 0:
                inner[a] -= int(count[best[k]])
        requests = sum(int(count[i]) for i, a in zip(best, nearest, strict=True) if a < 0)
        tokens = sum(int(node_tokens[i]) * max(c, 0) for i, c in zip(best, inner, strict=True))
        # At most 1: a hash repeated inside a prompt (not chained) counts twice in its request.
        shares = min(requests / n_req, 1.0), min(tokens / total_tokens, 1.0)
        return top, float(shares[0]), float(shares[1]), self.count_error


def _nearest_top_ancestor(best: np.ndarray, up: np.ndarray, linked: np.ndarray) -> list[int]:
    """For each top node, the index in `best` of its nearest top ancestor (-1: none), walking
    every chain up through the table (`up`: a node's parent's row where `linked`). Hashes that
    are not chained (a hash repeated inside a prompt) can link in a cycle: no walk takes more
    steps than the table has rows."""
    place = {int(node): k for k, node in enumerate(best)}
    nearest = np.full(best.size, -1, dtype=np.int64)
    cur = best.copy()
    active = linked[cur].copy()
    for _ in range(up.size):
        if not active.any():
            break
        cur[active] = up[cur[active]]
        for k in np.flatnonzero(active):
            if int(cur[k]) in place:
                nearest[k] = place[int(cur[k])] if cur[k] != best[k] else -1
                active[k] = False
        active &= linked[cur]
    return nearest.tolist()
