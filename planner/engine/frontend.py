"""The engine's front end: what a request goes through before the scheduler sees it.

One API-server thread works requests in arrival order: a CPU cost per request (parsing,
chat template, sampling parameters) and per prompt token (tokenisation). When the work is
handed to the scheduler depends on the server (`frontend_handover`):
- `each`: as soon as the request's own work is done;
- `round`: an event loop that wakes takes every request waiting at that moment, works them
  one after another and hands them over together when the round ends (the hand-over
  messages queue behind the round's work). vLLM 0.6's API server behaves so: in Lambda's
  160-requests-at-once runs no request got its first token before 0.57 s (H100) or 0.91 s
  (A100), and the first tokens then came in clusters one prefill step apart.
The rest of the front end's time (HTTP, hand-over to the engine) is a delay every request
pays in parallel. All of it comes from the engine profile (`frontend_s_per_request`,
`frontend_s_per_prompt_token`, `frontend_handover`, `frontend_s`).
"""

from __future__ import annotations

from collections import deque

from planner.engine.batch import LiveRequest
from planner.engine.specs import EngineConfig


class FrontEnd:
    """Requests on their way to the scheduler, each with the time it leaves (FIFO, so they
    leave in arrival order)."""

    def __init__(self, config: EngineConfig) -> None:
        self._config = config
        self._delay_s = config.frontend_s
        self._rounds = config.frontend_handover == "round"
        self._inside: deque[tuple[float, LiveRequest]] = deque()
        self._free_s = 0.0  # when the API-server thread is next free
        self._round: list[LiveRequest] = []  # the round being worked (round hand-over)
        self._round_start_s = 0.0

    @staticmethod
    def costs_time(config: EngineConfig) -> bool:
        """Whether `config`'s front end takes any time at all."""
        c = config
        return c.frontend_s > 0 or c.frontend_s_per_prompt_token > 0 or c.frontend_s_per_request > 0

    @staticmethod
    def work_s(config: EngineConfig, prompt_tokens: int) -> float:
        """The API-server thread's work on one request of `prompt_tokens`."""
        return config.frontend_s_per_request + config.frontend_s_per_prompt_token * prompt_tokens

    def enter(self, r: LiveRequest) -> None:
        """Queue `r` from its arrival (requests enter in arrival order); its timeline gets
        the front end's time once its hand-over time is known."""
        arrival = r.req.arrival_s
        cost = self.work_s(self._config, r.req.prompt_tokens)
        if self._rounds and self._round and arrival <= self._round_start_s:
            self._round.append(r)  # waiting when the round began: worked in it
            self._free_s += cost
            return
        self._close_round()
        start = max(arrival, self._free_s)
        self._free_s = start + cost
        if self._rounds:
            self._round, self._round_start_s = [r], start
        else:
            self._hand_over([r])

    def _hand_over(self, requests: list[LiveRequest]) -> None:
        ready = self._free_s + self._delay_s
        for r in requests:
            r.tl.frontend_s = ready - r.req.arrival_s
            self._inside.append((ready, r))

    def _close_round(self) -> None:
        if self._round:
            self._hand_over(self._round)
            self._round = []

    def leave(self, now_s: float, waiting: deque[LiveRequest]) -> None:
        """Move every request ready by `now_s` to the scheduler's `waiting` queue."""
        if self._round and self._free_s + self._delay_s <= now_s:
            self._close_round()
        inside = self._inside
        while inside and inside[0][0] <= now_s:
            waiting.append(inside.popleft()[1])

    def next_ready_s(self) -> float | None:
        """When the next request leaves (None: none inside)."""
        if self._inside:
            return self._inside[0][0]
        return self._free_s + self._delay_s if self._round else None

    def drop(self, r: LiveRequest) -> None:
        """Forget `r` (aborted before it reached the scheduler)."""
        if r in self._round:
            self._round.remove(r)
        self._inside = deque(x for x in self._inside if x[1] is not r)
