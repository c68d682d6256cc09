"""The engine model: a vLLM-like batching scheduler over a finite KV cache, timed by a roofline.

`Engine` never reads a clock: the caller passes `now_s` to every call, so the same engine runs
under a real-time clock (the emulator) and in virtual time (`simulate`, the fleet simulator).

One `step(now_s)` does what one vLLM V1 scheduler step does:
1. Running requests in admission order (so running decodes come first) each get their next
   tokens (1 for a decode, a chunk of the remaining prompt for a chunked prefill) within the
   token budget `max_num_batched_tokens`. When a request needs a KV block and none is free,
   the newest running request is preempted (recompute: its blocks are freed and it goes back
   to the front of the waiting queue), until the block fits or the request itself was the one
   preempted.
2. If nothing was preempted, waiting requests are admitted in queue-policy order (FCFS, or
   shortest prompt first with aging) while `max_num_seqs` and the budget allow and their
   blocks fit; the first that does not fit stops admission (head-of-line, as in vLLM).
   Prompt blocks found in the prefix cache are not computed again.
3. The step's duration is the roofline of its work (see `step_time_s`); every request whose
   computed tokens reach its known tokens emits one new token at the step's end.

Requests generate exactly `max_tokens` tokens: the caller decides where a stream stops
(the emulator models EOS before calling `add_request`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from contracts.errors import InputError
from planner.engine.kv import BlockHolding, BlockPool
from planner.engine.requests import (
    EngineGauges,
    EngineRequest,
    RequestTimeline,
    StepResult,
    TokenEvent,
)
from planner.engine.specs import EngineConfig, kv_bytes_per_token, kv_capacity_blocks, weight_bytes


class _Req:
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


class Engine:
    """One serving-engine instance driven step by step in the caller's clock.

    `token_events=False` leaves per-token "token" events out of StepResult (first tokens,
    finishes and preemptions still come), for simulations that only read timelines.
    """

    def __init__(self, config: EngineConfig, token_events: bool = True) -> None:
        self.config = config
        self._token_events = token_events
        self._record = config.record_token_times
        self._pool = BlockPool(kv_capacity_blocks(config), config.prefix_caching)
        self._bt = config.block_tokens
        self._max_len = config.effective_max_model_len
        self._running: list[_Req] = []
        self._waiting: deque[_Req] = deque()
        self._live: dict[str, _Req] = {}
        self._timelines: dict[str, RequestTimeline] = {}
        self._queries = 0
        self._hits = 0
        self._preemptions = 0
        self._finished = 0
        self._prompt_total = 0
        self._generation_total = 0
        m = config.model
        per_gpu_flops = config.gpu.bf16_flops * config.mfu * config.tp
        attn = config.gpu.attention_flops
        attn_flops = per_gpu_flops if attn is None else attn * config.mfu * config.tp
        self._s_per_linear_token = 2.0 * m.params / per_gpu_flops
        self._s_per_attn_pair = 4.0 * m.layers * m.attention_heads * m.head_dim / attn_flops
        bandwidth = config.gpu.hbm_bandwidth_bytes_per_s * config.mbu
        self._weight_s = weight_bytes(config) / bandwidth
        self._s_per_kv_token = kv_bytes_per_token(config) / bandwidth
        self._overhead_s = config.step_overhead_s
        self._seq_overhead_s = config.seq_overhead_s
        # Static reservation: blocks held by every admitted sequence, whatever its length.
        self._static_blocks = (
            -(-self._max_len // self._bt) if config.kv_reservation == "static" else 0
        )
        # Speculative decoding: draft tokens k, expected tokens per step, draft roofline.
        self._spec_k = config.spec_draft_tokens
        self._spec_gain = config.spec_tokens_per_step
        draft = config.spec_draft_params
        self._draft_weight_s = draft * config.dtype_bytes / config.tp / bandwidth
        self._draft_s_per_token = 2.0 * draft / per_gpu_flops
        # Tensor parallelism: two all-reduces per layer of each token's hidden state; a ring
        # all-reduce moves 2 (tp - 1) / tp of the message through each GPU's link.
        link = config.tp_link_bandwidth_bytes_per_s
        if config.tp > 1 and link is not None:
            ring = 2.0 * (config.tp - 1) / config.tp
            calls = 2 * m.layers
            self._comm_s_per_token = calls * ring * m.hidden_size * config.dtype_bytes / link
            self._comm_fixed_s = calls * config.tp_allreduce_latency_s
        else:
            self._comm_s_per_token = 0.0
            self._comm_fixed_s = 0.0

    # ------------------------------------------------------------------ requests in and out

    def add_request(self, request: EngineRequest, now_s: float) -> None:
        """Queue `request` (it may have arrived before `now_s`).

        Raises InputError for a duplicate id, non-positive lengths, min_tokens > max_tokens,
        or prompt + max_tokens beyond the engine's max model length.
        """
        rid = request.request_id
        if rid in self._timelines:
            raise InputError(f"request id {rid!r} already used")
        if request.prompt_tokens < 1 or request.max_tokens < 1:
            raise InputError(
                f"request {rid!r}: prompt_tokens and max_tokens must be >= 1 "
                f"(got {request.prompt_tokens}, {request.max_tokens})"
            )
        if request.min_tokens > request.max_tokens:
            raise InputError(
                f"request {rid!r}: min_tokens ({request.min_tokens}) > max_tokens "
                f"({request.max_tokens})"
            )
        total = request.prompt_tokens + request.max_tokens
        if total > self._max_len:
            raise InputError(
                f"request {rid!r}: prompt ({request.prompt_tokens}) + max_tokens "
                f"({request.max_tokens}) = {total} tokens exceeds the engine's maximum "
                f"model length of {self._max_len} tokens"
            )
        tl = RequestTimeline(rid, request.arrival_s, request.prompt_tokens)
        r = _Req(request, tl, self.config.prefix_caching)
        self._timelines[rid] = tl
        self._live[rid] = r
        self._waiting.append(r)

    def abort(self, request_id: str, now_s: float) -> None:
        """Cancel a live request and free its blocks (unknown or finished ids are ignored)."""
        r = self._live.pop(request_id, None)
        if r is None:
            return
        if r in self._waiting:
            self._waiting.remove(r)
        else:
            self._running.remove(r)
        self._pool.free(r.holding)
        r.tl.finished_s = now_s
        r.tl.aborted = True

    def has_work(self) -> bool:
        return bool(self._live)

    def timeline(self, request_id: str) -> RequestTimeline:
        """The timeline of a request ever added. Raises KeyError for an unknown id."""
        return self._timelines[request_id]

    def timelines(self) -> dict[str, RequestTimeline]:
        """Every request's timeline, by id, in order of addition."""
        return self._timelines

    def forget(self, request_id: str) -> None:
        """Drop a finished or aborted request's timeline (long runs keep memory flat)."""
        if request_id not in self._live:
            self._timelines.pop(request_id, None)

    def gauges(self) -> EngineGauges:
        pool = self._pool
        total = pool.num_blocks
        used = pool.used_blocks
        return EngineGauges(
            running=len(self._running),
            waiting=len(self._waiting),
            kv_usage_perc=used / total if total else 0.0,
            kv_used_blocks=used,
            kv_total_blocks=total,
            prefix_cache_queries_tokens=self._queries,
            prefix_cache_hits_tokens=self._hits,
            num_preemptions=self._preemptions,
            finished=self._finished,
            prompt_tokens_total=self._prompt_total,
            generation_tokens_total=self._generation_total,
        )

    # ------------------------------------------------------------------ the step

    def step_time_s(
        self, tokens: int, attn_pairs: float, kv_tokens_read: int, seqs: int = 1, drafts: int = 0
    ) -> float:
        """Roofline time of one step: max(compute, memory) + overhead + communication + drafts.

        compute = (2 x params x tokens / bf16 FLOP/s + 4 x layers x heads x head_dim x
                   attention pairs / attention FLOP/s) / (tp x mfu), attention FLOP/s being
                  the GPU's bf16 FLOP/s unless its spec states another
        memory  = (weight bytes + KV bytes of every context token read) / (bandwidth x mbu),
        overhead = step_overhead_s + seq_overhead_s x sampled positions (one per scheduled
                   request; k + 1 for a speculatively verified decode),
        per GPU under tensor parallelism. `attn_pairs` counts (query, key) token pairs.
        communication (tp > 1 with a stated link) = 2 x layers x (ring share x tokens x
        hidden x dtype / link bandwidth + all-reduce latency), not overlapped with compute.
        drafts (speculative decoding) = k sequential draft forwards over `drafts` sequences,
        each max(draft weights / bandwidth, 2 x draft params x drafts / FLOP/s).
        """
        compute = tokens * self._s_per_linear_token + attn_pairs * self._s_per_attn_pair
        memory = self._weight_s + kv_tokens_read * self._s_per_kv_token
        roofline = compute if compute > memory else memory
        total = roofline + self._overhead_s + seqs * self._seq_overhead_s
        if self._comm_fixed_s or self._comm_s_per_token:
            total += self._comm_fixed_s + tokens * self._comm_s_per_token
        if drafts and self._draft_weight_s:
            draft = max(self._draft_weight_s, drafts * self._draft_s_per_token)
            total += self._spec_k * draft
        return total

    def _pick_waiting(self, now_s: float) -> _Req:
        w = self._waiting
        if self.config.queue_policy == "fcfs" or len(w) == 1:
            return w[0]
        aging = self.config.spf_aging_s

        def key(r: _Req) -> tuple[int, float, float]:
            arrival = r.req.arrival_s
            if r.preempted or now_s - arrival >= aging:
                return (0, arrival, 0.0)
            return (1, float(r.req.prompt_tokens), arrival)

        return min(w, key=key)

    def _preempt(self, r: _Req, now_s: float, events: list[TokenEvent]) -> None:
        self._pool.free(r.holding)
        r.cap = 0
        r.computed = 0
        r.registering = self.config.prefix_caching and bool(r.req.block_hashes)
        r.preempted = True
        r.tl.preemptions += 1
        self._preemptions += 1
        self._waiting.appendleft(r)
        events.append(TokenEvent(r.id, "preempted", now_s, 0))

    def step(self, now_s: float) -> StepResult:
        """Run one scheduler step starting at `now_s`; events are stamped with the step's end."""
        bt = self._bt
        pool = self._pool
        budget = self.config.max_num_batched_tokens
        running = self._running
        sched: list[tuple[_Req, int, int]] = []  # request, new tokens, verified
        events: list[TokenEvent] = []
        preempted = False
        n_tokens = 0
        attn = 0.0
        kv_read = 0
        prefill = 0
        spec_k = self._spec_k
        drafts = 0
        sampled = 0  # extra positions sampled (speculative verification)

        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            c = r.computed
            q = r.tokens - c
            if q > budget:
                q = budget
            # A decode verifies k draft tokens too: k + 1 positions, as many KV slots.
            v = q
            if spec_k and q == 1 and r.tokens > r.prompt:
                v = min(spec_k + 1, budget, r.target - c)
            if c + v > r.cap:
                need = -(-(c + v) // bt) - r.holding.blocks
                ok = True
                while not pool.allocate(r.holding, need):
                    victim = running.pop()
                    self._preempt(victim, now_s, events)
                    preempted = True
                    if victim is r:
                        ok = False
                        break
                if not ok:
                    break
                r.cap = r.holding.blocks * bt
            sched.append((r, q, v))
            if v > q:
                drafts += 1
                sampled += v - 1
                budget -= v
                n_tokens += v
                kv_read += c + v
                attn += v * c + v * (v + 1) / 2
                i += 1
                continue
            budget -= q
            n_tokens += q
            kv_read += c + q
            if q == 1 and r.tokens - c == 1:
                attn += c + 1
            else:
                attn += q * c + q * (q + 1) / 2
                prefill += q
            i += 1

        if not preempted:
            waiting = self._waiting
            max_seqs = self.config.max_num_seqs
            while waiting and len(running) < max_seqs and budget > 0:
                r = self._pick_waiting(now_s)
                hashes = r.req.block_hashes
                cached_blocks = pool.cached_prefix(hashes, (r.tokens - 1) // bt) if hashes else 0
                cached = cached_blocks * bt
                start = cached
                ready = r.req.kv_ready_tokens
                if ready > cached and not r.preempted:
                    start = min(ready, r.tokens - 1)  # KV transferred with the request
                q = r.tokens - start
                if q > budget:
                    q = budget
                need = -(-(start + q) // bt) - cached_blocks
                if self._static_blocks:
                    need = self._static_blocks - cached_blocks
                reused_free = pool.evictable_among(hashes, cached_blocks) if cached_blocks else 0
                if need + reused_free > pool.free_blocks:
                    break
                if cached_blocks:
                    pool.take_cached(r.holding, hashes, cached_blocks)
                pool.allocate(r.holding, need)
                r.cap = r.holding.blocks * bt
                r.computed = start
                if self.config.prefix_caching:
                    self._queries += r.tokens
                    self._hits += cached
                if r.tl.scheduled_s is None:
                    r.tl.scheduled_s = now_s
                    r.tl.cached_tokens = cached
                if waiting[0] is r:
                    waiting.popleft()
                else:
                    waiting.remove(r)
                running.append(r)
                sched.append((r, q, q))
                budget -= q
                n_tokens += q
                kv_read += start + q
                attn += q * start + q * (q + 1) / 2
                prefill += q

        if not sched:
            return StepResult(now_s, 0.0, now_s, tuple(events))

        duration = self.step_time_s(n_tokens, attn, kv_read, len(sched) + sampled, drafts)
        end = now_s + duration

        token_events = self._token_events
        record = self._record
        finished_any = False
        prompt_total = 0
        generated = 0
        for r, q, v in sched:
            computed = r.computed + q
            r.computed = computed
            if r.registering:
                holding = r.holding
                hashes = r.req.block_hashes
                pool.register(holding, hashes, min(computed, r.prompt) // bt)
                r.registering = holding.registered_upto < len(hashes)
            if computed < r.tokens:
                continue  # a prefill chunk that does not reach the end of the prompt
            tl = r.tl
            if r.tokens == r.prompt:
                prompt_total += r.prompt
            n = 1
            if v > q:
                # Accepted drafts plus the target's token, in expectation: the fractional
                # part carries to the next step so the mean rate is exact.
                credit = r.spec_credit + self._spec_gain
                n = min(int(credit), v, r.target - r.tokens)
                r.spec_credit = credit - int(credit)
                r.computed = computed + n - 1
            r.tokens += n
            generated += n
            tl.output_tokens += n
            tl.last_token_s = end
            if record:
                tl.token_times_s.extend([end] * n)
            if tl.first_token_s is None:
                tl.first_token_s = end
                events.append(TokenEvent(r.id, "first_token", end, 1))
            elif token_events:
                events.append(TokenEvent(r.id, "token", end, n))
            if r.tokens >= r.target:
                finished_any = True
                tl.finished_s = end
                pool.free(r.holding)
                del self._live[r.id]
                self._finished += 1
                events.append(TokenEvent(r.id, "finished", end, 0))
        if finished_any:
            self._running = [r for r in running if r.tokens < r.target]
        self._prompt_total += prompt_total
        self._generation_total += generated
        return StepResult(
            now_s, duration, end, tuple(events), prefill, n_tokens - prefill, len(sched)
        )


def simulate(requests: Sequence[EngineRequest], config: EngineConfig) -> list[RequestTimeline]:
    """Run `requests` through one engine in virtual time; timelines in the order given.

    An event loop over arrivals and steps, no wall clock: a request arriving during a step
    joins at the next step, as it would in a real engine.
    """
    engine = Engine(config, token_events=False)
    order = sorted(range(len(requests)), key=lambda k: requests[k].arrival_s)
    now = 0.0
    k = 0
    n = len(order)
    while k < n or engine.has_work():
        if not engine.has_work() and k < n:
            now = max(now, requests[order[k]].arrival_s)
        while k < n and requests[order[k]].arrival_s <= now:
            engine.add_request(requests[order[k]], now)
            k += 1
        result = engine.step(now)
        now = result.end_s
    return [engine.timeline(r.request_id) for r in requests]
