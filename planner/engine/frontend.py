"""The engine's front end: what a request goes through before the scheduler sees it.

Tokenisation queues (one API-server thread, in arrival order); the rest of the front end's
time (HTTP, hand-over to the engine) is a delay every request pays in parallel. Both come
from the engine profile (`frontend_s_per_prompt_token`, `frontend_s`).
"""

from __future__ import annotations

from collections import deque

from planner.engine.batch import LiveRequest
from planner.engine.specs import EngineConfig


class FrontEnd:
    """Requests on their way to the scheduler, each with the time it leaves (FIFO, so they
    leave in arrival order)."""

    def __init__(self, config: EngineConfig) -> None:
        self._per_token_s = config.frontend_s_per_prompt_token
        self._delay_s = config.frontend_s
        self._inside: deque[tuple[float, LiveRequest]] = deque()
        self._free_s = 0.0  # when the tokeniser is next free

    def enter(self, r: LiveRequest) -> None:
        """Queue `r` for tokenisation from its arrival; its timeline gets the front end's time."""
        arrival = r.req.arrival_s
        tokenised = max(arrival, self._free_s) + self._per_token_s * r.req.prompt_tokens
        self._free_s = tokenised
        ready = tokenised + self._delay_s
        r.tl.frontend_s = ready - arrival
        self._inside.append((ready, r))

    def leave(self, now_s: float, waiting: deque[LiveRequest]) -> None:
        """Move every request ready by `now_s` to the scheduler's `waiting` queue."""
        inside = self._inside
        while inside and inside[0][0] <= now_s:
            waiting.append(inside.popleft()[1])

    def next_ready_s(self) -> float | None:
        """When the next request leaves (None: none inside)."""
        return self._inside[0][0] if self._inside else None

    def drop(self, r: LiveRequest) -> None:
        """Forget `r` (aborted before it reached the scheduler)."""
        self._inside = deque(x for x in self._inside if x[1] is not r)
