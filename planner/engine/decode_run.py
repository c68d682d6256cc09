"""Decode runs of one engine: plain decode steps of an unchanged batch in O(1) each.

After an ordinary step (planner.engine.engine), when every running request is decoding,
nothing waits (queue or front end), no request finishes before the last of the coming
steps and the blocks those steps grow into are free, the next steps are sure to be
decode-only steps of the same batch. `DecodeRuns` takes them without touching the requests:
each reads the batch's computed tokens plus one per request and step, so its time is the
roofline's for that batch. Every running request is then a member of the engine's decodes'
aggregate (planner.engine.decodes); the steps and the blocks they grew into are applied to
it once (`settle`), when anything next looks at them: a request comes or goes, a timeline
or the gauges are read, or an ordinary step follows.

A caller driving many engines (planner.fleet.sim) takes a whole run at once (`take`) and
gives back the steps after the one in flight when a request reaches the engine (`cut`).
Only an engine that emits no per-token events, records no token times and runs neither
speculative decoding nor multi-step groups uses them (`Engine._runs_on`). The steps, their
times and every request's timeline are those of stepping one step at a time, to the bit
(tests/planner/engine/test_engine.py, tests/planner/fleet/test_fleet.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from planner.engine.batch import LiveRequest
from planner.engine.decodes import Decodes
from planner.engine.frontend import FrontEnd
from planner.engine.kv import BlockPool
from planner.engine.requests import StepResult
from planner.engine.specs import EngineConfig


class _Engine(Protocol):
    """What a run reads and writes of its engine (planner.engine.engine.Engine)."""

    _generation_total: int
    _decode_streak: int
    _decode_steps: int

    @property
    def config(self) -> EngineConfig: ...
    @property
    def step_time_s(self) -> Callable[..., float]: ...
    @property
    def _running(self) -> dict[LiveRequest, None]: ...
    @property
    def _others(self) -> dict[LiveRequest, None]: ...
    @property
    def _decodes(self) -> Decodes: ...
    @property
    def _waiting(self) -> deque[LiveRequest]: ...
    @property
    def _frontend(self) -> FrontEnd | None: ...
    @property
    def _pool(self) -> BlockPool: ...


class DecodeRuns:
    """The decode run of `engine` (see the module); reads and writes the engine's batch,
    block pool and counters as its own steps would."""

    def __init__(self, engine: _Engine) -> None:
        self._engine = engine
        self.left = 0  # decode-only steps the run may still take in O(1)
        self.done = 0  # steps taken in the run, not yet applied to the requests
        self._batch = 0  # the run's batch size
        self._kv0 = 0  # the batch's computed tokens when the run began
        self._end_s = 0.0  # the end of the run's last step
        self._taken: list[float] = []  # the step ends the last `take` returned

    def start(self) -> None:
        """After a step: let the next steps run as a decode run when they are sure to be
        decode-only steps of the running batch (nothing waiting or in the front end, every
        running request past its first token and computed up to its last, none finishing
        before the last of them, and the blocks they grow into free)."""
        e = self._engine
        # Every running request a plain decode: all in the decodes' aggregate.
        if e._waiting or not e._running or e._others:
            return
        if e._frontend is not None and e._frontend.next_ready_s() is not None:
            return
        decodes = e._decodes
        m = decodes.count
        if m > e.config.max_num_batched_tokens:
            return
        # The step where a request reaches its target finishes it: a step like any other.
        left = decodes.next_finish() - decodes.steps
        if left < 1:
            return
        if decodes.needs_over(left) > e._pool.free_blocks:
            return
        self.left = left
        self._batch = m
        self._kv0 = decodes.context_tokens()

    def take(self, now_s: float) -> list[float]:
        """Take every step left in the run, the first starting at `now_s`, each at the end
        of the one before; the ends of those steps (empty when not in a run).

        Their results are what `Engine.step` returns for them one by one (no events). A
        caller that learns of a request arriving during one of them keeps the steps up to it
        (`cut`) before adding the request."""
        e = self._engine
        left = self.left
        m = self._batch
        fm = float(m)
        kv = self._kv0 + m * self.done
        step_time = e.step_time_s
        ends: list[float] = []
        end = now_s
        for _ in range(left):
            kv += m
            end = end + step_time(m, float(kv), kv, fm, 0, decode_pairs=float(kv))
            ends.append(end)
        self.left = 0
        if ends:
            self.done += left
            self._end_s = end
            e._generation_total += m * left
            e._decode_streak += left
            e._decode_steps += left
        self._taken = ends
        return ends

    def cut(self, steps: int) -> None:
        """Keep only the first `steps` (>= 1) of the steps the last `take` took (before
        anything reads the requests or gauges)."""
        taken = self._taken
        dropped = len(taken) - steps
        if dropped <= 0 or steps < 1:
            return
        e = self._engine
        self.done -= dropped
        self._end_s = taken[steps - 1]
        e._generation_total -= self._batch * dropped
        e._decode_streak -= dropped
        e._decode_steps -= dropped
        self._taken = taken[:steps]

    def end(self) -> None:
        """Settle the run and end it: a request comes or goes."""
        self.settle()
        self.left = 0

    def step(self, now_s: float) -> StepResult:
        """One step of the run: what `Engine.step` computes for it, without the requests.

        Each request decodes one token over its context, so the step reads (and its
        attention pairs number) the batch's computed tokens plus one per request and step.
        """
        e = self._engine
        self.left -= 1
        self.done += 1
        m = self._batch
        kv = self._kv0 + m * self.done
        e._decode_streak += 1
        e._decode_steps += 1
        duration = e.step_time_s(m, float(kv), kv, float(m), 0, decode_pairs=float(kv))
        end = now_s + duration
        self._end_s = end
        e._generation_total += m
        return StepResult(
            start_s=now_s, duration_s=duration, end_s=end, events=(), decode_tokens=m, batch_size=m
        )

    def settle(self) -> None:
        """Apply the run's steps taken so far to the decodes' aggregate (its members' fields
        follow when read) and take the blocks they grew into from the pool (free when the
        run began, and counted for all its steps). The run goes on from there."""
        k = self.done
        if not k:
            return
        e = self._engine
        self.done = 0
        self._kv0 += self._batch * k
        if k > 0:
            e._pool.take(e._decodes.take_steps(k, self._end_s))
        else:  # cut back after it was applied: its steps go back, its blocks stay taken
            e._decodes.rewind(-k, self._end_s, e._running)
