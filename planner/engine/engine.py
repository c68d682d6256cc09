"""The engine model: a vLLM-like batching scheduler over a finite KV cache, timed by a roofline.

`Engine` never reads a clock: the caller passes `now_s` to every call, so the same engine runs
under a real-time clock (the emulator) and in virtual time (`simulate`, the fleet simulator).

One `step(now_s)` does what one vLLM V1 scheduler step does:
1. `RunningPhase.schedule` (planner.engine.running): running requests in admission order
   (so running decodes come first) each get their next tokens (1 for a decode, a chunk of
   the remaining prompt for a chunked prefill) within the token budget
   `max_num_batched_tokens`. When a request needs a KV block and none is free, the newest
   running request is preempted (recompute: its blocks are freed and it goes back to the
   front of the waiting queue), until the block fits or the request itself was the one
   preempted.
2. `Admission` (planner.engine.admission): if nothing was preempted, waiting requests are
   admitted in queue-policy order (FCFS, or shortest prompt first with aging) while `max_num_seqs`
   and the budget allow and their blocks fit; the first that does not fit stops admission
   (head-of-line, as in vLLM).
   Prompt blocks found in the prefix cache are not computed again.
3. The step's duration is the roofline (planner.engine.roofline) of the work the batch counted.
4. `_advance`: at the step's end computed prompt blocks are published to the prefix cache and
   every request whose computed tokens reach its known tokens emits one new token (more
   after a speculative step); those at their target finish and free their blocks.

Requests generate exactly `max_tokens` tokens: the caller decides where a stream stops
(the emulator models EOS before calling `add_request`).

Running decodes in aggregate: in an engine that emits no per-token events and records no
token times (the fleet simulator's), the running requests that decode one token a step are
kept as counts and sums (planner.engine.decodes), so a step costs O(requests that change)
rather than O(running); a step where order could matter (a budget or block shortage)
schedules each request on its own, as always.

Decode runs: after a step, when every running request is decoding, nothing waits and no
request would finish or need a block that is not free, the next steps are known to be plain
decode steps of the same batch. An engine that emits no per-token events and records no
token times (the fleet simulator's) then runs them in O(1) each and applies the tokens to
the requests once, when anything next looks at them (`Engine.runs`,
planner.engine.decode_run). The steps, their times and every request's timeline are the
same as step by step, to the bit (tests/planner/engine/test_engine.py,
tests/planner/fleet/test_fleet.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from contracts.errors import InputError
from planner.engine.admission import CLIP_NEW_TOKENS, Admission
from planner.engine.batch import LiveRequest, StepBatch
from planner.engine.decode_run import DecodeRuns
from planner.engine.decodes import Decodes
from planner.engine.frontend import FrontEnd
from planner.engine.kv import BlockPool
from planner.engine.requests import (
    EngineGauges,
    EngineRequest,
    RequestTimeline,
    StepResult,
    TokenEvent,
    check_request,
)
from planner.engine.roofline import Roofline
from planner.engine.running import RunningPhase
from planner.engine.specs import EngineConfig, kv_capacity_blocks


class Engine:
    """One serving-engine instance driven step by step in the caller's clock.

    `token_events=False` leaves per-token "token" events out of StepResult (first tokens,
    finishes and preemptions still come), for simulations that only read timelines.
    """

    def __init__(
        self, config: EngineConfig, token_events: bool = True, charge_frontend: bool = True
    ) -> None:
        self.config = config
        self._token_events = token_events
        # The front end, unless the caller spends it for real (the emulator waits it out).
        charged = charge_frontend and FrontEnd.costs_time(config)
        self._frontend = FrontEnd(config) if charged else None
        self._prefill_first = config.prefill_first
        self._group = config.scheduler_steps
        self._decode_streak = 0  # decode-only steps since the last step with a prefill
        self._decode_steps = 0  # decode-only steps in all
        # Under prefill_first: requests whose prompt chunks were not all computed by the
        # last step; their next chunks go first, alone with any new prefills.
        self._chunked: list[LiveRequest] = []
        self._reserve = config.admission_reserve
        # When the engine last ran out of work, at a step's end or in a step without any
        # (None: it has work since): a step starting later idled in between, and the
        # admission reserve's share starts again.
        self._empty_s: float | None = None
        self._record = config.record_token_times
        self._pool = BlockPool(kv_capacity_blocks(config), config.prefix_caching)
        self._roofline = Roofline(config)
        # The roofline time of one step of some work (`Roofline.step_time_s`).
        self.step_time_s = self._roofline.step_time_s
        self._bt = config.block_tokens
        self._max_len = config.effective_max_model_len
        # The running requests in admission order (a dict: O(1) to drop one), and those of
        # them outside the running decodes' aggregate (planner.engine.decodes).
        self._running: dict[LiveRequest, None] = {}
        self._others: dict[LiveRequest, None] = {}
        self._decodes = Decodes(self._bt, CLIP_NEW_TOKENS if config.admission_reserve else 0)
        self._waiting: deque[LiveRequest] = deque()
        self._admission = Admission(
            config, self._pool, self._waiting, self._running, self._others, self._decodes
        )
        self._phase = RunningPhase(
            config, self._pool, self._waiting, self._running, self._others, self._decodes
        )
        self._live: dict[str, LiveRequest] = {}
        self._timelines: dict[str, RequestTimeline] = {}
        self._finished = 0
        self._prompt_total = 0
        self._generation_total = 0
        # Speculative decoding: draft tokens k and expected tokens per step.
        self._spec_k = config.spec_draft_tokens
        self._spec_gain = config.spec_tokens_per_step
        # Decode runs (the module's docstring): only where no caller sees per-step state.
        self.runs = DecodeRuns(self)
        self._runs_on = not (token_events or self._record or self._spec_k or self._group != 1)
        # The aggregate too: its members emit no per-token events, record no token times.
        self._aggregate = self._runs_on

    # ------------------------------------------------------------------ requests in and out

    def add_request(self, request: EngineRequest, now_s: float) -> None:
        """Queue `request` (it may have arrived before `now_s`).

        Raises InputError for a duplicate id, non-positive lengths, min_tokens > max_tokens,
        or prompt + max_tokens beyond the engine's max model length.
        """
        self.runs.end()
        rid = request.request_id
        if rid in self._timelines:
            raise InputError(f"request id {rid!r} already used")
        check_request(request, self._max_len)
        tl = _timeline(rid, request)
        r = LiveRequest(request, tl, self.config.prefix_caching)
        self._timelines[rid] = tl
        self._live[rid] = r
        if self._frontend is not None:
            self._frontend.enter(r)
        else:
            self._waiting.append(r)

    def abort(self, request_id: str, now_s: float) -> None:
        """Cancel a live request and free its blocks (unknown or finished ids are ignored)."""
        self.runs.end()
        r = self._live.pop(request_id, None)
        if r is None:
            return
        if r in self._waiting:
            self._waiting.remove(r)
        elif r in self._running:
            self._phase.dissolve()
            del self._running[r]
            del self._others[r]
        elif self._frontend is not None:
            self._frontend.drop(r)
        self._pool.free(r.holding)
        r.tl.finished_s = now_s
        r.tl.aborted = True

    def has_work(self) -> bool:
        return bool(self._live)

    def timeline(self, request_id: str) -> RequestTimeline:
        """The timeline of a request ever added. Raises KeyError for an unknown id."""
        if self.runs.done:
            self.runs.settle()
        r = self._live.get(request_id)
        if r is not None and r.joined >= 0:
            self._decodes.sync(r)
        return self._timelines[request_id]

    def timelines(self) -> dict[str, RequestTimeline]:
        """Every request's timeline, by id, in order of addition."""
        self.runs.settle()
        decodes = self._decodes
        for r in self._running:
            if r.joined >= 0:
                decodes.sync(r)
        return self._timelines

    def forget(self, request_id: str) -> None:
        """Drop a finished or aborted request's timeline (long runs keep memory flat)."""
        if request_id not in self._live:
            self._timelines.pop(request_id, None)

    def gauges(self) -> EngineGauges:
        self.runs.settle()
        pool = self._pool
        total = pool.num_blocks
        used = pool.used_blocks
        return EngineGauges(
            running=len(self._running),
            waiting=len(self._waiting),
            kv_usage_perc=used / total if total else 0.0,
            kv_used_blocks=used,
            kv_total_blocks=total,
            prefix_cache_queries_tokens=self._admission.queries_tokens,
            prefix_cache_hits_tokens=self._admission.hits_tokens,
            num_preemptions=self._phase.preemptions,
            finished=self._finished,
            prompt_tokens_total=self._prompt_total,
            generation_tokens_total=self._generation_total,
        )

    # ------------------------------------------------------------------ the step

    def step(self, now_s: float) -> StepResult:
        """Run one scheduler step starting at `now_s`; events are stamped with the step's end.

        Under `prefill_first` a step that can admit waiting requests, or has a prompt's
        chunks left from the step before, runs those prefills alone (the chunks first);
        under multi-step scheduling (`scheduler_steps` N) waiting requests join only
        between groups of N decode-only steps, and a decode-only step pays the per-request
        CPU cost over N (it is spent once a group)."""
        if self.runs.left:
            return self.runs.step(now_s)
        if self.runs.done:
            self.runs.settle()
        if self._frontend is not None:
            self._frontend.leave(now_s, self._waiting)
        if self._empty_s is not None:
            if now_s > self._empty_s:
                self._admission.idle(self._decode_steps)
            self._empty_s = None
        batch = StepBatch(self.config.max_num_batched_tokens)
        may_admit = not self._running or self._decode_streak % self._group == 0
        if self._prefill_first and may_admit:
            if self._chunked:
                chunked = [r for r in self._chunked if r in self._running]
                self._chunked = []
                self._phase.schedule(batch, now_s, only=chunked)
            if self._waiting and not batch.preempted:
                self._admission.admit(batch, now_s, self._decode_steps)
        if not batch.size:
            if self._running:
                self._phase.schedule(batch, now_s)
            if self._waiting and not batch.preempted and may_admit and not self._prefill_first:
                self._admission.admit(batch, now_s, self._decode_steps)
        if batch.preempted and self._reserve:
            self._admission.preempted(self._decode_steps + (not batch.prefill_tokens))
        if not batch.size:
            if self._reserve and not self._running and not self._waiting:
                self._empty_s = now_s
            # Idle until the next request leaves the front end (callers see a step without
            # work that lasts until then), or no step at all.
            ready = self._frontend.next_ready_s() if self._frontend is not None else None
            end = now_s if ready is None else ready
            return StepResult(
                start_s=now_s, duration_s=end - now_s, end_s=end, events=tuple(batch.events)
            )
        # CPU time goes to every running request each step (the scheduler walks them all and
        # the API server streams their outputs), also in a step that prefills others.
        seqs: float = max(len(self._running), batch.size) + batch.sampled
        if batch.prefill_tokens:
            self._decode_streak = 0
        else:
            self._decode_streak += 1
            self._decode_steps += 1
            seqs /= self._group
        duration = self._roofline.batch_time_s(batch, seqs)
        end = now_s + duration
        group_end = self._group == 1 or self._decode_streak % self._group == 0
        self._advance(batch, end, group_end)
        if self._runs_on and not batch.preempted:
            self.runs.start()
        if self._reserve and not self._running and not self._waiting:
            self._empty_s = end
        prefill = batch.prefill_tokens
        return StepResult(
            start_s=now_s,
            duration_s=duration,
            end_s=end,
            events=tuple(batch.events),
            prefill_tokens=prefill,
            decode_tokens=batch.tokens - prefill,
            batch_size=batch.size,
        )

    # ------------------------------------------------------------------ the step's phases

    def _advance(self, batch: StepBatch, end_s: float, group_end: bool = True) -> None:
        """Phase 3, at the step's end: scheduled tokens are computed (full prompt blocks go
        to the prefix cache), requests that reached their known tokens emit, some finish.

        Under multi-step scheduling a request that reaches its target inside a group rides
        along (computed, its tokens thrown away) and finishes at the group's end, when the
        engine next looks at its outputs.

        The aggregate's members each emit one token; those reaching their target finish in
        admission order among the others (so blocks go back to the pool in the same order),
        and the others that now decode plainly join it."""
        pool = self._pool
        bt = self._bt
        events = batch.events
        record = self._record
        token_events = self._token_events
        prompt_total = 0
        generated = 0
        todo = batch.scheduled
        decodes = self._decodes
        if batch.decodes:
            generated = batch.decodes
            done = decodes.step_taken(end_s)  # brought up to date, out of the aggregate
            if done:
                todo = sorted(todo + [(r, 0, -1) for r in done], key=lambda x: x[0].seq)
        for r, q, v in todo:
            if v < 0:
                self._finish(r, end_s, events)
                continue
            if r.riding:
                r.computed = r.tokens - 1
                if group_end:
                    r.tl.last_token_s = end_s
                    self._finish(r, end_s, events)
                continue
            computed = r.computed + q
            r.computed = computed
            if r.registering:
                holding = r.holding
                hashes = r.req.block_hashes
                pool.register(holding, hashes, min(computed, r.prompt) // bt)
                r.registering = holding.registered_upto < len(hashes)
            if computed < r.tokens:
                if self._prefill_first:
                    self._chunked.append(r)
                continue  # a prefill chunk that does not reach the end of the prompt
            if r.tokens == r.prompt:
                prompt_total += r.prompt
            n = 1 if v == q else _accepted(r, v, self._spec_gain)
            r.tokens += n
            generated += n
            tl = r.tl
            tl.output_tokens += n
            tl.last_token_s = end_s
            if record:
                tl.token_times_s.extend([end_s] * n)
            if tl.first_token_s is None:
                tl.first_token_s = end_s
                events.append(TokenEvent(r.id, "first_token", end_s, 1))
            elif token_events:
                events.append(TokenEvent(r.id, "token", end_s, n))
            if r.tokens >= r.target:
                if not group_end:
                    r.riding = True
                    r.computed = r.tokens - 1
                    continue
                self._finish(r, end_s, events)
        if self._aggregate:
            others = self._others
            for r, _, _ in batch.scheduled:
                if r in others and decodes.qualifies(r):
                    del others[r]
                    decodes.join(r)
        self._prompt_total += prompt_total
        self._generation_total += generated

    def _finish(self, r: LiveRequest, end_s: float, events: list[TokenEvent]) -> None:
        r.tl.finished_s = end_s
        self._pool.free(r.holding)
        del self._running[r]
        self._others.pop(r, None)
        del self._live[r.id]
        self._finished += 1
        events.append(TokenEvent(r.id, "finished", end_s, 0))


def _accepted(r: LiveRequest, verified: int, spec_gain: float) -> int:
    """Tokens a speculative decode of `r` emits: accepted drafts plus the target's token, in
    expectation; the fractional part carries to the next step so the mean rate is exact."""
    credit = r.spec_credit + spec_gain
    n = min(int(credit), verified, r.target - r.tokens)
    r.spec_credit = credit - int(credit)
    r.computed += n - 1
    return n


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
        if result.duration_s == 0:  # nothing schedulable: wait for the next arrival
            if k == n:
                break  # nothing can be scheduled, ever: leave those requests unfinished
            now = max(now, requests[order[k]].arrival_s)
    return [engine.timeline(r.request_id) for r in requests]


def _timeline(rid: str, request: EngineRequest) -> RequestTimeline:
    """The empty timeline of a request just added."""
    return RequestTimeline(
        request_id=rid, arrival_s=request.arrival_s, prompt_tokens=request.prompt_tokens
    )
