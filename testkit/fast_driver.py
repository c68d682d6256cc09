"""Runs the fast limit search (planner.limit.fast) against a simulated server
(testkit/sim_server.py) in virtual time, counting every second the server was under load
or drained, as a live run would spend it."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from planner.limit.fast.characterise import build_model
from planner.limit.fast.search import Characterise, fast_search
from planner.limit.fast.steps import Asked, Closed, FastConfig, FastResult, Open, Taken
from testkit.sim_server import INPUT_TOKENS, ServerSpec, SimServer

RETRY_S = 0.1


@dataclass
class Driver:
    """Holds the server, the request ids and the open chain between steps."""

    spec: ServerSpec
    seed: int
    drain_s: float = 0.0  # after a closed step, in-flight requests may end this long

    def __post_init__(self) -> None:
        self.server = SimServer(self.spec, seed=self.seed)
        self.rng = np.random.default_rng([self.seed, 3])
        self.next_id = 0
        self.chain: list[int] = []
        self.schedule_end = 0.0

    def _send(self, *, open_loop: bool = False) -> int:
        rid = self.next_id
        self.next_id += 1
        tokens = int(self.spec.draw_tokens(self.rng, 1)[0])
        self.server.arrive(rid, tokens, open_loop=open_loop)
        return rid

    def closed(self, step: Closed) -> Taken:
        """Closed loop: each user sends again as soon as its answer ends, or `retry_s` after
        a refusal (a client backing off from HTTP 429)."""
        start = self.server.now
        first_round = [self._send() for _ in range(step.users)]
        ids = list(first_round)
        retries: list[float] = []
        for rid in first_round:
            if rid in self.server.refused:
                heapq.heappush(retries, start + RETRY_S)
        mine = set(ids)
        ended_after_first = 0
        while True:
            elapsed = self.server.now - start
            if elapsed >= step.max_s or (
                ended_after_first >= step.requests and elapsed >= step.min_s
            ):
                break
            horizon = min(start + step.max_s, self.server.now + 1.0, *retries[:1])
            ended = self.server.advance(horizon, first_end=True)
            due = 0
            while retries and retries[0] <= self.server.now:
                heapq.heappop(retries)
                due += 1
            for rid in ended:
                if rid in mine:
                    ended_after_first += rid not in first_round
                    due += 1
            for _ in range(due):
                new = self._send()
                mine.add(new)
                ids.append(new)
                if new in self.server.refused:
                    heapq.heappush(retries, self.server.now + RETRY_S)
        # the load test drains a stage up to `drain_s` and cancels what is still in flight
        # (planner.limit.fast.live): left running, an answer of the heavy tail held a slot
        # through the next step, which then saw one slot fewer
        end = self.server.now
        deadline = end + self.drain_s
        while self.server.now < deadline and any(r in self.server.active for r in ids):
            self.server.advance(deadline, first_end=True)
        self.server.cancel(ids)
        return Taken(records=self.server.records(ids), start_s=start, end_s=end)

    def open(self, step: Open) -> Taken:
        if step.fresh:
            self.server.drain()
            self.chain = []
            self.schedule_end = self.server.now
        start = self.schedule_end
        self.server.advance(start)
        for _ in range(step.burst):
            self.chain.append(self._send(open_loop=True))
        t = start
        end = start + step.duration_s
        while True:
            t += self.rng.exponential(1.0 / step.rate)
            if t >= end:
                break
            self.server.advance(t)
            self.chain.append(self._send(open_loop=True))
        self.server.advance(end)
        self.schedule_end = end
        return Taken(records=self.server.records(self.chain), start_s=start, end_s=end)


def run_fast(
    spec: ServerSpec,
    config: FastConfig,
    *,
    seed: int = 0,
    characterise: Characterise = build_model,
    asked: Asked | None = None,
) -> tuple[FastResult, float]:
    """(the fast search's result on `spec`, the virtual seconds it took); `asked`: the sizes
    the driver draws, as a load test knows its profile's (None: the model sizes requests by
    the answers the server returns)."""
    driver = Driver(spec, seed, drain_s=(config.slo.longest_wait_s or 10.0) + 1.0)
    search = fast_search(config, characterise=characterise, asked=asked)
    try:
        step = next(search)
        while True:
            taken = driver.closed(step) if isinstance(step, Closed) else driver.open(step)
            step = search.send(taken)
    except StopIteration as stop:
        result: FastResult = stop.value
    return result, driver.server.now


def asked_of(spec: ServerSpec, *, seed: int, n: int = 60_000) -> Asked:
    """`n` sizes drawn as the driver draws them (its own random numbers)."""
    outputs = spec.draw_tokens(np.random.default_rng([seed, 29]), n).astype(float)
    return Asked(input_tokens=np.full(n, float(INPUT_TOKENS)), output_tokens=outputs)
