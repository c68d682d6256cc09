"""The server as the fast limit search models it: c slots, each request's own work, and a
slowdown of every running request when more share the server.

A request's work is what it costs alone: a first token after `first_s(input tokens)` and
the rest of its answer after `decode_s(output tokens)` more. When k requests are in service,
every one of them progresses at 1 / slowdown(k) of its solo speed (continuous batching
shares each step; a slot server has slowdown 1 throughout). Arrivals beyond `slots` wait
first come first served, or are refused at once when the server refuses (HTTP 429).

The simulation keeps one work clock W that advances at 1 / slowdown(k) seconds of work per
second: because every request in service progresses at the same rate, a request's first
token and end are fixed points on W when it starts, and only the conversion from W to time
changes with k. That makes each event O(log n).

`Model` is what the search asks of any model: this one, characterised in closed loop, or
the engine model of a calibrated server (planner.limit.fast.engine_model).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Model(Protocol):
    """A server model the fast search can predict with and replay requests through."""

    @property
    def slots(self) -> int:
        """Requests the server serves at once."""
        ...

    @property
    def refuses(self) -> bool:
        """Refuses (HTTP 429) rather than queues beyond its slots."""
        ...

    @property
    def max_slowdown(self) -> float | None:
        """How much slower a request runs on a full server than alone (None: not a slot
        model)."""
        ...

    @property
    def grid_step(self) -> float | None:
        """None: the miss curve's root is bisected to 0.3 %; a ratio (0.02): the model is
        costly to run, and the root is interpolated between rates on a geometric grid of
        that step, which every root shares (planner.limit.fast.misses.MissCurve)."""
        ...

    def serve(
        self, arrival_s: np.ndarray, input_tokens: np.ndarray, output_tokens: np.ndarray
    ) -> Served:
        """Per request, what the model does with these arrivals (seconds, ascending)."""
        ...

    def mean_work_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> float:
        """A request's mean time alone on the server (seconds)."""
        ...

    def capacity_rps(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> float:
        """The most requests a second the model completes with these sizes."""
        ...

    def in_service(self, rate: float, mean_work_s: float) -> int:
        """Requests in service at `rate` (the warm start's burst)."""
        ...

    def describe(self) -> str:
        """The model in a clause for the progress lines."""
        ...


@dataclass(frozen=True)
class ServerModel:
    """A characterised server (see the module). Costs are seconds of solo work:
    first token `first_s[0] + first_s[1] * input_tokens`; the rest of the answer
    `decode_s[0] + decode_s[1] * (output_tokens - 1)`. `slowdown[k - 1]` is the slowdown with
    k requests in service, k = 1..slots."""

    slots: int
    first_s: tuple[float, float]
    decode_s: tuple[float, float]
    slowdown: tuple[float, ...]
    refuses: bool = False

    def __post_init__(self) -> None:
        if self.slots < 1 or len(self.slowdown) != self.slots:
            raise ValueError("a model needs >= 1 slot and one slowdown per slot count")

    def work(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> tuple[np.ndarray, ...]:
        """(first-token work, total work) of each request, seconds when alone."""
        first = np.maximum(self.first_s[0] + self.first_s[1] * input_tokens, 0.0)
        rest = self.decode_s[0] + self.decode_s[1] * np.maximum(output_tokens - 1, 0)
        return first, first + np.maximum(rest, 0.0)

    @property
    def mean_slowdown(self) -> float:
        return float(np.mean(self.slowdown))

    @property
    def max_slowdown(self) -> float | None:
        return self.slowdown[-1]

    @property
    def grid_step(self) -> float | None:
        return None

    def serve(
        self, arrival_s: np.ndarray, input_tokens: np.ndarray, output_tokens: np.ndarray
    ) -> Served:
        return serve(self, arrival_s, input_tokens, output_tokens)

    def mean_work_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> float:
        return float(self.work(input_tokens, output_tokens)[1].mean())

    def capacity_rps(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> float:
        """Slots over the mean work at the full-server slowdown: no queue is stable above."""
        return self.slots / (self.mean_work_s(input_tokens, output_tokens) * self.slowdown[-1])

    def in_service(self, rate: float, mean_work_s: float) -> int:
        """Requests in service at `rate` by Little's law, at most the slots."""
        level = rate * mean_work_s * self.mean_slowdown
        return int(min(self.slots, math.floor(level + 0.5)))

    def describe(self) -> str:
        refuses = " (refuses beyond)" if self.refuses else ""
        return f"{self.slots} slots{refuses}, slowdown {self.slowdown[-1]:.2f} when full"


@dataclass(frozen=True, kw_only=True)
class Served:
    """Per request, in arrival order: TTFT, E2E and TPOT in seconds (NaN when refused or
    without a second token) and whether the server refused it."""

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    tpot_s: np.ndarray
    refused: np.ndarray


def serve(
    model: ServerModel,
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
) -> Served:
    """Run the model over arrivals (seconds, ascending) of requests of the given sizes,
    starting empty, until every admitted request ends."""
    return run_slots(model, input_tokens, output_tokens, arrival_s=arrival_s)[1]


def run_slots(
    model: ServerModel,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    *,
    arrival_s: np.ndarray | None = None,
    users: int = 0,
    retry_s: float = 0.0,
) -> tuple[np.ndarray, Served]:
    """The model's event loop, starting empty, until every admitted request ends: open
    loop over `arrival_s` (ascending), or without it, `users` closed-loop clients that
    start together and send again as soon as their answer ends (`retry_s` after a
    refusal), the k-th request sent taking the k-th sizes. Returns each request's send
    time and what the model did with it, in send order."""
    first_work, total_work = model.work(input_tokens, output_tokens)
    n = input_tokens.size
    closed = arrival_s is None
    ttft = np.full(n, np.nan)
    e2e = np.full(n, np.nan)
    refused = np.zeros(n, dtype=bool)
    slow = (1.0, *model.slowdown)  # slow[k]: k requests in service
    inf = float("inf")
    # each request's send time; open: the arrivals, then inf for "none left"
    sent = [math.nan] * n if arrival_s is None else [*arrival_s.tolist(), inf]
    sends: list[float] = [0.0] * min(users, n) if closed else []  # closed: a heap
    first_list = first_work.tolist()
    total_list = total_work.tolist()
    firsts: list[tuple[float, int]] = []  # (W of the first token, request)
    ends: list[tuple[float, int]] = []  # (W of the end, request)
    waiting: deque[int] = deque()
    now = 0.0
    w = 0.0
    k = 0
    i = 0
    while True:
        arrive = (sends[0] if sends and i < n else inf) if closed else sent[i]
        if arrive == inf and not k:
            break
        next_w = min(firsts[0][0] if firsts else inf, ends[0][0] if ends else inf)
        internal_t = now + (next_w - w) * slow[k] if k else inf
        if arrive <= internal_t:
            t = heapq.heappop(sends) if closed else arrive
            if k:
                w += (t - now) / slow[k]
            now = t
            if closed:
                sent[i] = t
            if k < model.slots:
                heapq.heappush(firsts, (w + first_list[i], i))
                heapq.heappush(ends, (w + total_list[i], i))
                k += 1
            elif model.refuses:
                refused[i] = True
                if closed:
                    heapq.heappush(sends, t + retry_s)
            else:
                waiting.append(i)
            i += 1
            continue
        w, now = next_w, internal_t
        if firsts and firsts[0][0] <= next_w:
            _, j = heapq.heappop(firsts)
            ttft[j] = now - sent[j]
            continue
        _, j = heapq.heappop(ends)
        e2e[j] = now - sent[j]
        if closed:
            heapq.heappush(sends, now)  # its user sends again at once
        if waiting:
            nxt = waiting.popleft()
            heapq.heappush(firsts, (w + first_list[nxt], nxt))
            heapq.heappush(ends, (w + total_list[nxt], nxt))
        else:
            k -= 1
    gaps = np.maximum(output_tokens - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(gaps > 0, (e2e - ttft) / gaps, np.nan)
    return np.array(sent[:n]), Served(ttft_s=ttft, e2e_s=e2e, tpot_s=tpot, refused=refused)


@dataclass(frozen=True)
class Offset:
    """`inner` with every first token `ttft_s` later and every end `e2e_s` later: what the
    client, the network and the server's front end add to a request that `inner` (an engine
    model) times from the scheduler's side, measured on requests sent one at a time."""

    inner: Model
    ttft_s: float
    e2e_s: float

    @property
    def slots(self) -> int:
        return self.inner.slots

    @property
    def refuses(self) -> bool:
        return self.inner.refuses

    @property
    def max_slowdown(self) -> float | None:
        return self.inner.max_slowdown

    @property
    def grid_step(self) -> float | None:
        return self.inner.grid_step

    def serve(
        self, arrival_s: np.ndarray, input_tokens: np.ndarray, output_tokens: np.ndarray
    ) -> Served:
        served = self.inner.serve(arrival_s, input_tokens, output_tokens)
        gaps = np.maximum(output_tokens - 1, 1)
        return Served(
            ttft_s=served.ttft_s + self.ttft_s,
            e2e_s=served.e2e_s + self.e2e_s,
            tpot_s=served.tpot_s + (self.e2e_s - self.ttft_s) / gaps,
            refused=served.refused,
        )

    def mean_work_s(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> float:
        return self.inner.mean_work_s(input_tokens, output_tokens) + self.e2e_s

    def capacity_rps(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> float:
        return self.inner.capacity_rps(input_tokens, output_tokens)

    def in_service(self, rate: float, mean_work_s: float) -> int:
        return self.inner.in_service(rate, mean_work_s)

    def describe(self) -> str:
        return (
            f"{self.inner.describe()}, plus {self.ttft_s * 1e3:+.0f} ms to the first token and "
            f"{self.e2e_s * 1e3:+.0f} ms to the end measured one request at a time"
        )
