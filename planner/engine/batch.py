"""The scheduler's working state: a live request (`LiveRequest`) and one step's batch (`StepBatch`).

Plain mutable holders with `__slots__`, kept apart from the scheduling rules
(`planner.engine.engine`) so each step's phases pass one batch along.
"""

from __future__ import annotations

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
        "riding",
        "seq",
        "joined",
        "later",
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
        self.riding = False  # done inside a multi-step group, computed until the group ends
        self.seq = 0  # the order of its admission among the running (planner.engine.admission)
        # Under the running decodes' aggregate (planner.engine.decodes): the aggregate's steps
        # when this member's fields were last brought up to date (-1: not a member), and
        # whether its first block need still waits in the aggregate's later heap.
        self.joined = -1
        self.later = False

    def reset_for_recompute(self, prefix_caching: bool) -> None:
        """Forget the computed KV after a preemption (its blocks are freed by the pool)."""
        self.cap = 0
        self.computed = 0
        self.registering = prefix_caching and bool(self.req.block_hashes)
        self.preempted = True
        self.tl.preemptions += 1


class StepBatch:
    """What one step schedules, in order: (request, new tokens, verified positions: more than
    new for a speculative decode); the token budget left; the roofline's inputs (tokens,
    attention pairs and those of single-query decodes among them, KV tokens read,
    speculative decodes and their extra sampled positions, prompt tokens); the step's events
    so far; whether it preempted; how many running decodes it schedules in aggregate
    (planner.engine.decodes), not listed in `scheduled`."""

    __slots__ = (
        "scheduled",
        "events",
        "budget",
        "preempted",
        "tokens",
        "attn_pairs",
        "decode_pairs",
        "kv_read_tokens",
        "drafts",
        "sampled",
        "prefill_tokens",
        "decodes",
    )

    def __init__(self, budget_tokens: int) -> None:
        self.scheduled: list[tuple[LiveRequest, int, int]] = []
        self.events: list[TokenEvent] = []
        self.budget = budget_tokens
        self.preempted = False
        self.attn_pairs = self.decode_pairs = 0.0
        self.tokens = self.kv_read_tokens = self.drafts = self.sampled = self.prefill_tokens = 0
        self.decodes = 0

    @property
    def size(self) -> int:
        """The requests the step schedules."""
        return len(self.scheduled) + self.decodes

    def add_chunk(self, r: LiveRequest, new: int, context: int) -> None:
        """Schedule a prompt chunk of `new` tokens of `r` after `context` tokens already in
        its KV cache; each new token attends the context and the new tokens before it."""
        self.scheduled.append((r, new, new))
        self.budget -= new
        self.tokens += new
        self.kv_read_tokens += context + new
        self.attn_pairs += new * context + new * (new + 1) / 2
        self.prefill_tokens += new
