"""Phase 1 of an engine step (planner.engine.engine): the running requests, in admission
order, get their next tokens within the step's budget, preempting the newest when KV blocks
run short (recompute: back to the front of the waiting queue).

Kept apart from the engine as admission (phase 2, planner.engine.admission) is: it reads and
writes the engine's running requests, waiting queue, block pool and decodes' aggregate, which
the engine hands it once.
"""

from __future__ import annotations

from collections import deque

from planner.engine.batch import LiveRequest, StepBatch
from planner.engine.decodes import Decodes
from planner.engine.kv import BlockPool
from planner.engine.requests import TokenEvent
from planner.engine.specs import EngineConfig


class RunningPhase:
    """Schedules an engine's running requests each step; counts its preemptions."""

    def __init__(
        self,
        config: EngineConfig,
        pool: BlockPool,
        waiting: deque[LiveRequest],
        running: dict[LiveRequest, None],
        others: dict[LiveRequest, None],
        decodes: Decodes,
    ) -> None:
        self._pool = pool
        self._waiting = waiting
        self._running = running
        self._others = others
        self._decodes = decodes
        self._bt = config.block_tokens
        self._spec_k = config.spec_draft_tokens
        self._prefix_caching = config.prefix_caching
        self.preemptions = 0

    def schedule(
        self, batch: StepBatch, now_s: float, only: list[LiveRequest] | None = None
    ) -> None:
        """Phase 1: running requests in admission order get their next tokens (a decode,
        k + 1 verified positions under speculative decoding, or a prefill chunk), counted
        into the batch's roofline inputs here, in the loop, as this is the hottest path.
        `only`: these running requests (none in the aggregate) and no others.

        The members of the decodes' aggregate (planner.engine.decodes) take one token each
        at once when every running request fits the step's budget and free blocks, so no
        order can matter; otherwise the aggregate dissolves and each request goes on its own
        (the sums are of whole numbers, exact in any order)."""
        decodes = self._decodes
        m = 0 if only is not None else decodes.count
        if m:
            need = decodes.step_needs()
            if self._all_fit(batch.budget - m, need):
                self._pool.take(need)
                kv = decodes.context_tokens() + m  # each: one query over its context and itself
                batch.decodes = m
                batch.budget -= m
                batch.tokens += m
                batch.kv_read_tokens += kv
                batch.attn_pairs += kv
                batch.decode_pairs += kv
            else:
                self.dissolve()
        running = self._running
        # All running requests unless members went at once.
        order = list(self._others) if only is None else only
        scheduled = batch.scheduled
        spec_k = self._spec_k
        budget = batch.budget
        tokens = kv_read = prefill = drafts = sampled = 0
        attn = decode_attn = 0.0
        i = 0
        while i < len(order) and budget > 0:
            r = order[i]
            if batch.preempted and r not in running:
                break  # preempted by one before it, as all after it
            c = r.computed
            q = r.tokens - c
            if q > budget:
                q = budget
            # A decode verifies k draft tokens too: k + 1 positions, as many KV slots.
            v = q
            if spec_k and q == 1 and r.tokens > r.prompt:
                v = min(spec_k + 1, budget, r.target - c)
            if c + v > r.cap and not self._grow(r, c + v, batch, now_s):
                break
            scheduled.append((r, q, v))
            budget -= v
            tokens += v
            kv_read += c + v
            if v > q:
                drafts += 1
                sampled += v - 1
                attn += v * c + v * (v + 1) / 2
            elif q == 1 and r.tokens - c == 1:
                attn += c + 1  # a decode: one query over its context and itself
                decode_attn += c + 1
            else:
                attn += q * c + q * (q + 1) / 2
                prefill += q
            i += 1
        batch.budget = budget
        batch.tokens += tokens
        batch.attn_pairs += attn
        batch.decode_pairs += decode_attn
        batch.kv_read_tokens += kv_read
        batch.prefill_tokens += prefill
        batch.drafts += drafts
        batch.sampled += sampled

    def _all_fit(self, budget: int, free: int) -> bool:
        """Whether every running request outside the aggregate fits the step whole: its
        tokens within `budget` and its fresh blocks within the pool's free blocks less
        `free` (the members' own)."""
        free = self._pool.free_blocks - free
        if budget < 0 or free < 0:
            return False
        bt = self._bt
        for r in self._others:
            c = r.computed
            q = r.tokens - c
            budget -= q
            if budget < 0:
                return False
            if c + q > r.cap:
                free -= -(-(c + q) // bt) - r.holding.blocks
                if free < 0:
                    return False
        return True

    def dissolve(self) -> None:
        """End the decodes' aggregate: every running request is scheduled on its own."""
        if self._decodes.count:
            self._decodes.dissolve(self._running)
            self._others.clear()
            self._others.update(self._running)  # in admission order

    def _grow(self, r: LiveRequest, tokens: int, batch: StepBatch, now_s: float) -> bool:
        """Give `r` blocks for `tokens`, preempting the newest running requests while they
        are short; False when `r` itself had to go."""
        need = -(-tokens // self._bt) - r.holding.blocks
        while not self._pool.allocate(r.holding, need):
            if self._decodes.count:  # members that did not step (`only`) go on their own
                self.dissolve()
            victim, _ = self._running.popitem()  # the newest (none in the aggregate now)
            del self._others[victim]
            self._preempt(victim, now_s, batch.events)
            batch.preempted = True
            if victim is r:
                return False
        r.cap = r.holding.blocks * self._bt
        return True

    def _preempt(self, r: LiveRequest, now_s: float, events: list[TokenEvent]) -> None:
        self._pool.free(r.holding)
        r.reset_for_recompute(self._prefix_caching)
        self.preemptions += 1
        self._waiting.appendleft(r)
        events.append(TokenEvent(r.id, "preempted", now_s, 0))
