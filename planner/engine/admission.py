"""Admission, phase 2 of an engine step: waiting requests join the running batch.

The queue policy picks who goes next (`pick_waiting`); a request joins when a seat, the
step's token budget and its KV blocks allow, reusing the prompt blocks the prefix cache
holds (or the KV handed over with it, under prefill/decode disaggregation) and reserving
fresh blocks for its first chunk (or max_model_len of them under static reservation).
Under `whole_prompts` (vLLM V0 without chunked prefill) a prompt that does not fit what is
left of the step's budget is not cut: admission stops there, as V0's `_schedule_prefills`
does.

SGLang's admission reserve (`admission_reserve`): a waiting request joins only while its
uncached prompt plus its tokens still to come fit the free KV (free and evictable) less a
share, `new_token_ratio`, of every running request's tokens still to come, each of those
counts clipped at CLIP_NEW_TOKENS (python/sglang/srt/managers/schedule_policy.py,
PrefillAdder.add_one_req and _get_running_request_total_token_offset). The share starts at
INIT_NEW_TOKEN_RATIO, falls by (init - min) / DECAY_STEPS each decode step to the minimum
(init x MIN_RATIO_FACTOR), is set after a preemption to (tokens decoded + RETRACT_STEPS per
running request) / (their max_tokens), at most 1, and goes back to the start when the engine
idles (scheduler.py update_running_batch and on_idle; schedule_batch.py retract_decode;
environ.py's defaults).
"""

from __future__ import annotations

from collections import deque

from planner.engine.batch import LiveRequest, StepBatch
from planner.engine.decodes import Decodes
from planner.engine.kv import BlockPool
from planner.engine.specs import EngineConfig, QueuePolicy

# SGLang's defaults for its admission reserve (environ.py: SGLANG_INIT_NEW_TOKEN_RATIO,
# SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS,
# SGLANG_RETRACT_DECODE_STEPS, SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION).
INIT_NEW_TOKEN_RATIO = 0.7
MIN_RATIO_FACTOR = 0.14
DECAY_STEPS = 600
RETRACT_STEPS = 20
CLIP_NEW_TOKENS = 4096


def pick_waiting(
    waiting: deque[LiveRequest], policy: QueuePolicy, aging_s: float, now_s: float
) -> LiveRequest:
    """The waiting request to admit next: the head under FCFS; under SPF the shortest prompt,
    except that preempted requests and those waiting `aging_s` or longer go first (FCFS)."""
    if policy == "fcfs" or len(waiting) == 1:
        return waiting[0]

    def key(r: LiveRequest) -> tuple[int, float, float]:
        arrival = r.req.arrival_s
        if r.preempted or now_s - arrival >= aging_s:
            return (0, arrival, 0.0)
        return (1, float(r.req.prompt_tokens), arrival)

    return min(waiting, key=key)


class Admission:
    """Admits from `waiting` into `running` (the engine's own queue and running requests in
    admission order, shared) over `pool`, also into `others` (the engine's running requests
    outside its decodes' aggregate, planner.engine.decodes), numbering them in order of
    admission; counts the prefix cache's queried and hit prompt tokens."""

    def __init__(
        self,
        config: EngineConfig,
        pool: BlockPool,
        waiting: deque[LiveRequest],
        running: dict[LiveRequest, None],
        others: dict[LiveRequest, None],
        decodes: Decodes,
    ) -> None:
        self._config = config
        self._pool = pool
        self._waiting = waiting
        self._running = running
        self._others = others
        self._decodes = decodes
        self._seq = 0
        self._bt = config.block_tokens
        # Static reservation: blocks held by every admitted sequence, whatever its length;
        # request reservation: its prompt + max_tokens, held from admission.
        self._static_blocks = (
            -(-config.effective_max_model_len // self._bt)
            if config.kv_reservation == "static"
            else 0
        )
        self._whole_request = config.kv_reservation == "request"
        self.queries_tokens = 0
        self.hits_tokens = 0
        # SGLang's admission reserve (the module's docstring): the share at the decode step
        # `_ratio_step`, and the KV tokens left to admit into during one `admit`.
        self._reserve = config.admission_reserve
        self._ratio = INIT_NEW_TOKEN_RATIO
        self._ratio_step = 0
        self._room = 0.0

    def new_token_ratio(self, decode_steps: int) -> float:
        """The reserve's share after `decode_steps` decode steps of the engine."""
        low = INIT_NEW_TOKEN_RATIO * MIN_RATIO_FACTOR
        fall = (decode_steps - self._ratio_step) * (INIT_NEW_TOKEN_RATIO - low) / DECAY_STEPS
        if fall <= 0:
            return self._ratio
        return max(self._ratio - fall, low)

    def idle(self, decode_steps: int) -> None:
        """The engine has nothing to run: the share starts again."""
        self._ratio = INIT_NEW_TOKEN_RATIO
        self._ratio_step = decode_steps

    def preempted(self, decode_steps: int) -> None:
        """Running requests were preempted in the step that makes `decode_steps`: the share
        is what the requests still running have decoded, plus RETRACT_STEPS each, of their
        max_tokens (all of them up to date: a step that preempts schedules each on its own)."""
        decoded = wanted = 0
        for r in self._running:
            decoded += r.tokens - r.prompt + RETRACT_STEPS
            wanted += r.target - r.prompt
        self._ratio = min(1.0, decoded / (wanted + 1))
        self._ratio_step = decode_steps

    def admit(self, batch: StepBatch, now_s: float, decode_steps: int = 0) -> None:
        """Waiting requests in queue-policy order join while seats, budget and blocks
        allow; the first that does not fit stops admission (head-of-line). Under the
        admission reserve, against its share after `decode_steps` decode steps."""
        waiting = self._waiting
        running = self._running
        max_seqs = self._config.max_num_seqs
        if self._reserve:
            coming = self._decodes.remaining_tokens()  # the running requests' tokens to come
            for r in self._others:
                coming += min(r.target - r.tokens, CLIP_NEW_TOKENS)
            free = self._pool.free_blocks * self._bt
            self._room = free - self.new_token_ratio(decode_steps) * coming
        while waiting and len(running) < max_seqs and batch.budget > 0:
            r = pick_waiting(waiting, self._config.queue_policy, self._config.spf_aging_s, now_s)
            if not self._admit(r, batch, now_s):
                break
            if waiting[0] is r:
                waiting.popleft()
            else:
                waiting.remove(r)
            self._seq += 1
            r.seq = self._seq
            running[r] = None
            self._others[r] = None

    def _admit(self, r: LiveRequest, batch: StepBatch, now_s: float) -> bool:
        """Give `r` its prompt's cached blocks and fresh ones for its first chunk, and
        schedule the chunk; False (nothing taken) when the blocks do not fit."""
        bt = self._bt
        pool = self._pool
        hashes = r.req.block_hashes
        cached_blocks = pool.cached_prefix(hashes, (r.tokens - 1) // bt) if hashes else 0
        cached = cached_blocks * bt
        start = cached
        ready = r.req.kv_ready_tokens
        if ready > cached and not r.preempted:
            start = min(ready, r.tokens - 1)  # KV transferred with the request
        q = r.tokens - start
        if q > batch.budget:
            if self._config.whole_prompts and batch.tokens:
                return False  # vLLM V0 waits to schedule it whole; alone in a step, it is cut
            q = batch.budget
        need = -(-(start + q) // bt) - cached_blocks
        if self._static_blocks:
            need = self._static_blocks - cached_blocks
        elif self._whole_request:
            need = -(-r.target // bt) - cached_blocks
        reused_free = pool.evictable_among(hashes, cached_blocks) if cached_blocks else 0
        if need + reused_free > pool.free_blocks:
            return False
        if self._reserve:
            total = r.tokens - cached + min(r.target - r.tokens, CLIP_NEW_TOKENS)
            if total >= self._room:
                return False
            self._room -= total
        if cached_blocks:
            pool.take_cached(r.holding, hashes, cached_blocks)
        pool.allocate(r.holding, need)
        r.cap = r.holding.blocks * bt
        r.computed = start
        if self._config.prefix_caching:
            self.queries_tokens += r.tokens
            self.hits_tokens += cached
        if r.tl.scheduled_s is None:
            r.tl.scheduled_s = now_s
            r.tl.cached_tokens = cached
        batch.add_chunk(r, q, start)
        return True
