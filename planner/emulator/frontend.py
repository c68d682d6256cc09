"""The emulator's front end, spent in real time as the engine model charges it
(planner.engine.frontend): one thread's work per request, then a delay every request pays.

`FrontEndThread` is that thread. Hand-over `each`: a request leaves as soon as its own work
is done (a lock around the work). Hand-over `round`: the first request to arrive at an idle
thread starts a round; every request waiting when a round starts is worked in it, one after
another, and all of them leave together when it ends, as an event loop's ready callbacks
run after the handlers queued before them.
"""

from __future__ import annotations

import asyncio

from planner.engine import EngineConfig
from planner.engine.frontend import FrontEnd


class FrontEndThread:
    def __init__(self, config: EngineConfig, speed: float) -> None:
        self._config = config
        self._speed = speed
        self._lock = asyncio.Lock()
        self._waiting: list[tuple[float, asyncio.Future[None]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def pass_through(self, prompt_tokens: int) -> None:
        """Wait out a request's time in the front end."""
        c = self._config
        work_s = FrontEnd.work_s(c, prompt_tokens) / self._speed
        if work_s > 0:
            if c.frontend_handover == "round":
                await self._in_round(work_s)
            else:
                async with self._lock:
                    await asyncio.sleep(work_s)
        if c.frontend_s > 0:
            await asyncio.sleep(c.frontend_s / self._speed)

    async def _in_round(self, work_s: float) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((work_s, done))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._rounds())
        await done

    async def _rounds(self) -> None:
        while self._waiting:
            taken, self._waiting = self._waiting, []
            await asyncio.sleep(sum(w for w, _ in taken))
            for _, done in taken:
                if not done.done():  # its client may have gone
                    done.set_result(None)
