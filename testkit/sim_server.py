"""A slot server in virtual time, written apart from capplan's models: the server whose
limit the fast search (planner.limit.fast) is checked against, and its truth.

c slots; a request first waits for a slot (or is refused when `refuse`), then prefills for
`prefill_s` of work and decodes `tokens` tokens of `per_token_s` each. Optional departures
from the plain slot server, to misspecify capplan's model:
- `slowdown`: with k requests in service each progresses at 1 / (1 + slowdown (k - 1)) of
  its solo speed (service that grows with load);
- `serial_prefill`: prefills share one unit: with m requests prefilling, each prefills at
  1 / m of its speed (prefill contention);
- `tokens_cv`: answer lengths lognormal with this coefficient of variation around the middle
  of `tokens` (service-time spread) instead of uniform over it;
- `open_loop_work`: a request sent open loop (a confirmation level, `arrive(open_loop=True)`)
  costs this many times its work in closed loop: a server that works slower under the load
  it is confirmed under than under the closed-loop steps that characterised it (issue 60:
  by the wall clock the 8-slot server worked 0.735 s a request open loop, 0.697 s closed);
- `work_cv`: each request's work times a lognormal factor of mean 1 and this coefficient
  of variation, drawn by the server (`SimServer(seed=)`) and unknown to the client: a real
  server's jitter, which the model's replay of the same requests cannot know.

The simulation steps from event to event and moves every request's remaining work by hand
(O(k) an event), unlike the model's work clock, so that the two share no code.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import polars as pl

INPUT_TOKENS = 100  # the prompts the driver sends (the server ignores their length)


@dataclass(frozen=True)
class ServerSpec:
    slots: int
    prefill_s: float
    per_token_s: float
    tokens: tuple[int, int]
    refuse: bool = False
    slowdown: float = 0.0
    serial_prefill: bool = False
    tokens_cv: float | None = None
    prefill_slows: bool = True  # False: only the decode slows as more share the server
    open_loop_work: float = 1.0  # an open-loop request's work over its closed-loop work
    work_cv: float = 0.0  # per-request jitter of the work, unknown to the client

    def draw_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        low, high = self.tokens
        if self.tokens_cv is None:
            return rng.integers(low, high + 1, n)
        mean = (low + high) / 2
        sigma = math.sqrt(math.log1p(self.tokens_cv**2))
        drawn = rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, n)
        return np.maximum(1, np.round(drawn)).astype(int)

    @property
    def capacity_rps(self) -> float:
        low, high = self.tokens
        return self.slots / (self.prefill_s + (low + high) / 2 * self.per_token_s)


class SimServer:
    """The server's state and clock; requests are added with `arrive` at the current time and
    time moves with `advance` (events in between are processed)."""

    def __init__(self, spec: ServerSpec, *, seed: int = 0) -> None:
        self.spec = spec
        self._jitter = np.random.default_rng([seed, 43])
        self.now = 0.0
        self.active: dict[int, list[float]] = {}  # id -> [prefill left, decode left]
        self.waiting: deque[int] = deque()
        self.tokens: dict[int, int] = {}
        self.sent: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.end: dict[int, float] = {}
        self.refused: set[int] = set()
        self.cancelled: set[int] = set()
        self.pace: dict[int, float] = {}  # id -> its work over the spec's (`open_loop_work`)

    def arrive(self, rid: int, tokens: int, *, open_loop: bool = False) -> None:
        self.sent[rid] = self.now
        self.tokens[rid] = tokens
        self.pace[rid] = self.spec.open_loop_work if open_loop else 1.0
        if self.spec.work_cv > 0:
            sigma = math.sqrt(math.log1p(self.spec.work_cv**2))
            self.pace[rid] *= float(self._jitter.lognormal(-(sigma**2) / 2, sigma))
        if len(self.active) < self.spec.slots:
            self._start(rid)
        elif self.spec.refuse:
            self.refused.add(rid)
            self.end[rid] = self.now
        else:
            self.waiting.append(rid)

    def _start(self, rid: int) -> None:
        pace = self.pace[rid]
        self.active[rid] = [
            pace * self.spec.prefill_s,
            pace * self.tokens[rid] * self.spec.per_token_s,
        ]

    def _speeds(self) -> tuple[float, float]:
        """(prefill speed, decode speed) of each active request."""
        k = len(self.active)
        speed = 1.0 / (1.0 + self.spec.slowdown * max(k - 1, 0))
        prefilling = sum(1 for left in self.active.values() if left[0] > 0)
        pre = speed if self.spec.prefill_slows else 1.0
        pre = pre / prefilling if self.spec.serial_prefill and prefilling else pre
        return pre, speed

    def advance(self, until: float, *, first_end: bool = False) -> list[int]:
        """Process events up to `until` (with `first_end`: up to the first request that
        ends, the clock then at its end); returns the requests that ended, in order."""
        ended: list[int] = []
        while self.active:
            pre, dec = self._speeds()
            step = min(
                left[0] / pre if left[0] > 0 else left[1] / dec for left in self.active.values()
            )
            if self.now + step > until:
                break
            self._move(step, pre, dec)
            self.now += step
            for rid in [r for r, left in self.active.items() if left[0] <= 1e-12]:
                left = self.active[rid]
                if rid not in self.first:
                    self.first[rid] = self.now
                left[0] = 0.0
                if left[1] <= 1e-12:
                    del self.active[rid]
                    self.end[rid] = self.now
                    ended.append(rid)
                    if self.waiting:
                        self._start(self.waiting.popleft())
            if ended and first_end:
                return ended
        if self.active:
            pre, dec = self._speeds()
            self._move(until - self.now, pre, dec)
        self.now = max(self.now, until)
        return ended

    def _move(self, dt: float, pre: float, dec: float) -> None:
        for left in self.active.values():
            if left[0] > 0:
                left[0] -= dt * pre
            else:
                left[1] -= dt * dec

    def cancel(self, ids: list[int]) -> None:
        """Cancel those of `ids` still waiting or running (a load test ending its stage):
        their slots go to the requests waiting."""
        for rid in ids:
            if rid in self.active or rid in self.waiting:
                self.active.pop(rid, None)
                if rid in self.waiting:
                    self.waiting.remove(rid)
                self.cancelled.add(rid)
                self.end[rid] = self.now
        while self.waiting and len(self.active) < self.spec.slots:
            self._start(self.waiting.popleft())

    def drain(self) -> None:
        while self.active or self.waiting:
            self.advance(self.now + 60.0)

    def records(self, ids: list[int]) -> pl.DataFrame:
        """Load-test style records of `ids` as known now (null `ok`: still running; a
        cancelled request failed with error class `cancelled`, as a load test records it)."""
        rows = []
        for rid in ids:
            sent = self.sent[rid]
            first = self.first.get(rid)
            end = self.end.get(rid)
            refused = rid in self.refused
            cancelled = rid in self.cancelled
            done = end is not None and not refused and not cancelled
            tokens = self.tokens[rid]
            rows.append(
                {
                    "sent_s": sent,
                    "ttft_s": None if first is None or refused else first - sent,
                    "e2e_s": end - sent if done else None,
                    "tpot_s": (end - first) / (tokens - 1) if done and first and tokens > 1
                    else None,
                    "end_s": end,
                    "ok": True if done else (False if refused or cancelled else None),
                    "error_class": "refused" if refused else ("cancelled" if cancelled else None),
                    "input_tokens": INPUT_TOKENS,
                    "output_tokens": tokens if done else None,
                }
            )  # fmt: skip
        schema = {
            "sent_s": pl.Float64, "ttft_s": pl.Float64, "e2e_s": pl.Float64,
            "tpot_s": pl.Float64, "end_s": pl.Float64, "ok": pl.Boolean,
            "error_class": pl.Utf8, "input_tokens": pl.Int64, "output_tokens": pl.Int64,
        }  # fmt: skip
        return pl.DataFrame(rows, schema=schema)


def serve_open(
    spec: ServerSpec, arrival_s: np.ndarray, tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, E2E) of each arrival (open loop) on a fresh server, every request to its end;
    NaN when refused."""
    server = SimServer(spec)
    for rid, (t, n) in enumerate(zip(arrival_s.tolist(), tokens.tolist(), strict=True)):
        server.advance(t)
        server.arrive(rid, int(n), open_loop=True)
    server.drain()
    ttft = np.full(arrival_s.size, np.nan)
    e2e = np.full(arrival_s.size, np.nan)
    for rid in range(arrival_s.size):
        if rid in server.refused:
            continue
        ttft[rid] = server.first[rid] - server.sent[rid]
        e2e[rid] = server.end[rid] - server.sent[rid]
    return ttft, e2e
