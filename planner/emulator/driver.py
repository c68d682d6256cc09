"""The emulator's engine driver: the engine model run in real time, its tokens written to streams.

The loop takes a step, sleeps until the step's end in wall time (engine time / speed), then
writes every token of that step straight to its stream's socket; steps run back to back in
engine time, so a late wake-up delays a chunk but never stretches the engine's clock (a lag
of up to RESYNC_AFTER_S is caught up by skipping the sleeps; a longer one resyncs the clock
and is counted, for /metrics). A client that disconnects has its request aborted and its KV
blocks freed. The HTTP side (planner.emulator.server) registers a `Stream` per request and
awaits its `done` future.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from planner.emulator.protocol import ChunkWriter, ParsedRequest
from planner.engine import Engine, RequestTimeline

RESYNC_AFTER_S = 0.25  # wall seconds behind schedule before the engine clock is resynced


class Stream:
    """A live request on the server side."""

    __slots__ = (
        "rid",
        "parsed",
        "transport",
        "writer",
        "sent",
        "target",
        "finished",
        "done",
        "cut_at",
        "cut_kind",
        "offset",
    )

    def __init__(self, rid: str, parsed: ParsedRequest, target: int, done: asyncio.Future[str]):
        self.rid = rid
        self.parsed = parsed
        self.transport: asyncio.Transport | None = None
        self.writer: ChunkWriter | None = None
        self.sent = 0
        self.target = target
        self.finished = False
        self.done = done
        self.cut_at = 0  # token count after which a drop/stall fault fires (0: never)
        self.cut_kind = ""
        self.offset = 0


def _frame(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-transfer frame."""
    return b"%x\r\n%b\r\n" % (len(data), data)


class EngineDriver:
    """Steps `engine` in real time (`speed` engine seconds per wall second of `clock`) and
    delivers each step's tokens to the registered streams, `stream_interval` at a time;
    `on_first_token` sees the timeline of each stream's first token (for /metrics)."""

    def __init__(
        self,
        engine: Engine,
        *,
        speed: float,
        stream_interval: int,
        clock: Callable[[], float],
        on_first_token: Callable[[RequestTimeline], None],
    ) -> None:
        self.engine = engine
        self._on_first_token = on_first_token
        self.speed = speed
        self.stream_interval = stream_interval
        self.streams: dict[str, Stream] = {}
        self.behind_s = 0.0  # engine seconds lost because this process fell behind
        self.resyncs = 0
        self._next_start_s: float | None = None
        self._clock = clock
        self._t0 = clock()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def engine_now(self) -> float:
        """Engine seconds since the driver started."""
        return (self._clock() - self._t0) * self.speed

    def join_time_s(self) -> float:
        """The engine time a request arriving now joins at: now, or the engine's own clock
        when the loop runs late, so no engine timing can come out before its arrival."""
        now = self.engine_now()
        if self._next_start_s is not None and self._next_start_s < now:
            return self._next_start_s
        return now

    def start(self) -> None:
        """Reset the clock and start the loop (inside the running event loop)."""
        self._t0 = self._clock()
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def wake(self) -> None:
        """Tell an idle loop that there is work."""
        assert self._wake is not None
        self._wake.set()

    async def _loop(self) -> None:
        assert self._wake is not None
        engine = self.engine
        streams = self.streams
        on_first_token = self._on_first_token
        speed = self.speed
        clock = self._clock
        next_start: float | None = None  # engine time of the next step while busy
        while True:
            if not engine.has_work():
                next_start = self._next_start_s = None
                self._wake.clear()
                await self._wake.wait()
                continue
            now = self.engine_now()
            if next_start is not None:
                if now - next_start < RESYNC_AFTER_S * speed:
                    now = next_start  # back to back in engine time
                else:
                    # This process fell behind the engine (CPU-bound): the lost time shows
                    # up as a slower engine, and is counted so a load test can tell.
                    self.behind_s += now - next_start
                    self.resyncs += 1
            result = engine.step(now)
            next_start = self._next_start_s = result.end_s
            delay = self._t0 + result.end_s / speed - clock()
            await asyncio.sleep(delay if delay > 0 else 0)
            touched: dict[str, Stream] = {}
            for event in result.events:
                s = streams.get(event.request_id)
                if s is None:
                    continue
                kind = event.kind
                if kind == "first_token" or kind == "token":
                    s.sent += event.n_tokens
                    touched[s.rid] = s
                    if kind == "first_token":
                        on_first_token(engine.timeline(s.rid))
                elif kind == "finished":
                    s.finished = True
                    touched[s.rid] = s
            for s in touched.values():
                self._deliver(s)

    def _deliver(self, s: Stream) -> None:
        """Write the step's tokens of `s` to its socket; fire faults; resolve it when done."""
        if s.done.done():
            return
        new = s.sent - s.offset
        cut = bool(s.cut_at) and s.sent >= s.cut_at
        if cut:
            new -= s.sent - s.cut_at
            s.sent = s.cut_at
        if 0 < new < self.stream_interval and s.offset > 0 and not (s.finished or cut):
            return  # hold tokens until a full interval (the first token goes at once)
        if s.transport is not None and s.writer is not None and new > 0:
            if s.transport.is_closing():
                self._abort(s, "disconnected")
                return
            chunk = s.writer.tokens(new) if self.stream_interval == 1 else s.writer.joined(new)
            s.transport.write(_frame(chunk))
        s.offset = s.sent
        if s.cut_at and s.sent >= s.cut_at:
            self._abort(s, s.cut_kind)
            if s.cut_kind == "drop" and s.transport is not None:
                s.transport.abort()
            return
        if s.finished:
            s.done.set_result("finished")

    def _abort(self, s: Stream, reason: str) -> None:
        self.engine.abort(s.rid, self.engine_now())
        if reason != "stall" and not s.done.done():
            s.done.set_result(reason)
