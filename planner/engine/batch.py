"""The scheduler's working state: a live request (`LiveRequest`) and one step's batch (`StepBatch`).

Plain mutable holders with `__slots__`, kept apart from the scheduling rules
(`planner.engine.engine`) so each step's phases pass one batch along.
"""

from __future__ import annotations

from typing import NamedTuple

from planner.engine.kv import BlockHolding
from planner.engine.requests import EngineRequest, RequestTimeline, TokenEvent


class LiveRequest:
    """Scheduler state of one live request."""

    __slots__ = (
        "req",
        "tl",
        "computed",
        "tokens",
        "target",
        "holding",
        "preempted",
        "id",
        "cap",
        "prompt",
        "registering",
        "spec_credit",
    )

    def __init__(self, req: EngineRequest, tl: RequestTimeline, prefix_caching: bool) -> None:
        self.req = req
        self.id = req.request_id
        self.tl = tl
        self.computed = 0  # tokens whose KV is in the cache
        self.prompt = req.prompt_tokens
        self.tokens = req.prompt_tokens  # prompt + generated tokens known so far
        self.target = req.prompt_tokens + req.max_tokens
        self.holding = BlockHolding()
        self.cap = 0  # tokens the held blocks have room for
        self.preempted = False
        # Whether computed prompt blocks still have to be published to the prefix cache.
        self.registering = prefix_caching and bool(req.block_hashes)
        self.spec_credit = 0.0  # expected tokens from speculative steps not yet emitted

    def reset_for_recompute(self, prefix_caching: bool) -> None:
        """Forget the computed KV after a preemption (its blocks are freed by the pool)."""
        self.cap = 0
        self.computed = 0
        self.registering = prefix_caching and bool(self.req.block_hashes)
        self.preempted = True
        self.tl.preemptions += 1


class StepWork(NamedTuple):
    """The roofline's inputs for one step (see `planner.engine.roofline.Roofline`)."""

    tokens: int
    attn_pairs: float
    kv_read_tokens: int
    seqs: int  # sampled positions: one per request, k + 1 for a speculative decode
    drafts: int  # decodes verified speculatively
    prefill_tokens: int


class StepBatch:
    """What one step schedules, in order: (request, new tokens, verified positions, context
    tokens already in its KV cache, whether the new tokens count as prompt work); the token
    budget left; the step's events so far; whether it preempted."""

    __slots__ = ("scheduled", "events", "budget", "preempted")

    def __init__(self, budget_tokens: int) -> None:
        self.scheduled: list[tuple[LiveRequest, int, int, int, bool]] = []
        self.events: list[TokenEvent] = []
        self.budget = budget_tokens
        self.preempted = False

    def work(self) -> StepWork:
        """Sum the scheduled work; a speculative decode (verified > new) verifies k + 1
        positions over its context, every other entry attends its new tokens causally."""
        tokens = kv_read = prefill = drafts = sampled = 0
        attn = 0.0
        for _, q, v, c, is_prefill in self.scheduled:
            if v == 1:  # the common case, a decode: one query over its context, plus itself
                tokens += 1
                kv_read += c + 1
                attn += c + 1
                if is_prefill:
                    prefill += 1
                continue
            tokens += v
            kv_read += c + v
            attn += v * c + v * (v + 1) / 2
            if v > q:
                drafts += 1
                sampled += v - 1
            elif is_prefill:
                prefill += q
        return StepWork(tokens, attn, kv_read, len(self.scheduled) + sampled, drafts, prefill)
