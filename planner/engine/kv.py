"""The KV-cache block pool of one engine: free blocks, per-request holdings and the prefix cache.

Blocks are counted, not materialised: a request holds `hashed` blocks (prompt blocks whose
chained hash is registered in the prefix cache, shareable) and `unhashed` ones (private).
A hashed block whose last holder lets go stays cached and evictable in LRU order until a new
allocation needs it, as in vLLM's prefix caching.
"""

from __future__ import annotations

from collections import OrderedDict


class BlockHolding:
    """The blocks one request holds."""

    __slots__ = ("hashed", "unhashed", "registered_upto")

    def __init__(self) -> None:
        self.hashed: list[int] = []
        self.unhashed = 0
        # Index of the next prompt block to consider for registration in the prefix cache.
        self.registered_upto = 0

    @property
    def blocks(self) -> int:
        return len(self.hashed) + self.unhashed


class BlockPool:
    """A fixed number of KV blocks with an optional LRU prefix cache over chained block hashes."""

    def __init__(self, num_blocks: int, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.prefix_caching = prefix_caching
        self._free_plain = num_blocks
        self._refs: dict[int, int] = {}  # cached hash -> number of requests holding it
        self._evictable: OrderedDict[int, None] = OrderedDict()  # cached, unheld; oldest first

    @property
    def free_blocks(self) -> int:
        """Blocks an allocation may take (free plus cached-but-unheld)."""
        return self._free_plain + len(self._evictable)

    @property
    def used_blocks(self) -> int:
        return self.num_blocks - self.free_blocks

    def cached_prefix(self, block_hashes: tuple[int, ...], max_blocks: int) -> int:
        """How many leading blocks of `block_hashes` (at most `max_blocks`) are in the cache."""
        if not self.prefix_caching:
            return 0
        n = 0
        refs = self._refs
        for h in block_hashes[:max_blocks]:
            if h not in refs:
                break
            n += 1
        return n

    def evictable_among(self, block_hashes: tuple[int, ...], n: int) -> int:
        """How many of the first `n` hashes are cached but unheld (taking them uses free space)."""
        ev = self._evictable
        return sum(1 for h in block_hashes[:n] if h in ev)

    def take_cached(self, holding: BlockHolding, block_hashes: tuple[int, ...], n: int) -> None:
        """Add the first `n` (cached) blocks of `block_hashes` to `holding`."""
        refs = self._refs
        ev = self._evictable
        for h in block_hashes[:n]:
            if refs[h] == 0:
                del ev[h]
            refs[h] += 1
            holding.hashed.append(h)
        holding.registered_upto = n

    def allocate(self, holding: BlockHolding, n: int) -> bool:
        """Give `holding` `n` fresh blocks, evicting LRU cached blocks if needed; False if short."""
        if not self.take(n):
            return False
        if n > 0:
            holding.unhashed += n
        return True

    def take(self, n: int) -> bool:
        """Take `n` fresh blocks for holders that count them themselves (the running decodes'
        aggregate, planner.engine.decodes), evicting LRU cached blocks if needed; False (none
        taken) if short. Taking blocks for several holders at once leaves the pool as taking
        them one holder after another does."""
        if n <= 0:
            return True
        if n > self._free_plain + len(self._evictable):
            return False
        plain = min(n, self._free_plain)
        self._free_plain -= plain
        for _ in range(n - plain):
            h, _ = self._evictable.popitem(last=False)
            del self._refs[h]
        return True

    def register(
        self, holding: BlockHolding, block_hashes: tuple[int, ...], full_blocks: int
    ) -> None:
        """Publish the holding's computed prompt blocks up to `full_blocks` in the prefix cache.

        A block whose hash is already cached (computed by another request meanwhile) stays
        private, as vLLM keeps the duplicate out of the cache.
        """
        if not self.prefix_caching:
            return
        upto = min(full_blocks, len(block_hashes))
        refs = self._refs
        for i in range(holding.registered_upto, upto):
            h = block_hashes[i]
            if h in refs or holding.unhashed == 0:
                continue
            refs[h] = 1
            holding.unhashed -= 1
            holding.hashed.append(h)
        if upto > holding.registered_upto:
            holding.registered_upto = upto

    def free(self, holding: BlockHolding) -> None:
        """Return every block of `holding`; its cached blocks stay cached (tail evicted first)."""
        self._free_plain += holding.unhashed
        refs = self._refs
        ev = self._evictable
        # Freed in reverse so a prompt's tail blocks are evicted before its shared head.
        for h in reversed(holding.hashed):
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                ev[h] = None
        holding.hashed = []
        holding.unhashed = 0
        holding.registered_upto = 0
