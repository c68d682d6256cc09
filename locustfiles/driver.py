"""Runs a stage plan inside one Locust process: open-loop dispatch and closed-loop users.

One `PlanDriver` per load-generating process. For an open stage it computes the stage's
whole arrival schedule up front (the same on every process: seeded by the run seed and the
stage number), keeps the arrivals whose global number is `slot.index` modulo `slot.count`,
and sleeps until each one is due, then spawns one greenlet per request: sends never wait
for completions (open loop). For a closed stage it starts its share of N loops that send
back to back. Stage switches happen at exact times on the driver's own clock, not on Locust's
once-a-second shape tick, and nothing ramps up.

A stage can be ended early (`end_stage`, used when a limit level has reached steady state or
a recovery stage has recovered): its sends stop and the next stage starts at once; the end
times are kept in `stage_ends_s`.

Every request scheduled gets exactly one row, in flight ones included: at the end of the
plan the driver waits up to `drain_s` for requests to finish, then cancels the rest
(`error_class="cancelled"`); a request past `request_timeout_s` ends as `timeout`. An HTTP
answer with an error status keeps its status and gets a class by status (`refused`,
`client_error`, `server_error`), never a connection class, and the message of its error body.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import gevent.lock
import numpy as np
import orjson
from gevent import GreenletExit

from contracts.run import Stage, StagePlan
from locustfiles.arrivals import replay_times, stage_times
from locustfiles.http_client import StreamClient, line_reader
from locustfiles.openai_stream import (
    PATHS,
    Endpoint,
    StreamResult,
    error_body_message,
    http_error_class,
    read_stream,
    request_body,
    safe_message,
)
from profiles.workload import RequestShape, WorkloadStream, render_messages, replay_shape

Row = tuple[Any, ...]

ERROR_BODY_BYTES = 65_536  # read at most this much of an error answer's body


class RunClock:
    """Seconds since the run's start (a Unix time), read through perf_counter for precision.

    With `time_scale` S the clock runs S times faster than wall time: the endpoint's own
    time when it is an emulator at `--time-scale S`. Every schedule and every record of the run
    is then in the endpoint's time; `wall_s` turns a span of it into wall seconds to sleep.
    """

    def __init__(self, start_epoch_s: float, time_scale: float = 1.0) -> None:
        self.start_epoch_s = start_epoch_s
        self.time_scale = time_scale
        self._perf_at_start = time.perf_counter() - (time.time() - start_epoch_s)

    def now(self) -> float:
        return (time.perf_counter() - self._perf_at_start) * self.time_scale

    def wall_s(self, span_s: float) -> float:
        return span_s / self.time_scale


@dataclass(frozen=True)
class Slot:
    """This process's share of the load: arrivals with number % count == index."""

    index: int = 0
    count: int = 1


@dataclass(frozen=True)
class DriverOptions:
    endpoint: Endpoint
    model: str
    seed: int
    ignore_eos: bool = True
    request_timeout_s: float = 300.0
    max_concurrency: int | None = None
    drain_s: float = 30.0
    api_key: str | None = None


@dataclass(frozen=True)
class ReplayLog:
    """A log slice for replay stages: arrival seconds and the log's own lengths."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    speed: float = 1.0
    origin_s: float = 0.0  # the log second that maps to the stage start


class _Timeout(Exception):
    """The request ran past request_timeout_s."""


class _ShapeCursor:
    """Walks a WorkloadStream forward to the requested (ascending) request numbers."""

    def __init__(self, stream: WorkloadStream) -> None:
        self._stream = stream
        self._last: RequestShape | None = None

    def get(self, index: int) -> RequestShape:
        while self._last is None or self._last.index < index:
            self._last = next(self._stream)
        return self._last


class PlanDriver:
    """Dispatches a plan's requests through `client` (a StreamClient) and emits rows.

    `emit(row)` receives one tuple in RECORD_COLUMNS order per scheduled request.
    """

    def __init__(
        self,
        plan: StagePlan,
        make_stream: Callable[[int], WorkloadStream],
        options: DriverOptions,
        client: StreamClient,
        emit: Callable[[Row], None],
        clock: RunClock,
        slot: Slot,
        replay: ReplayLog | None = None,
    ) -> None:
        self.plan = plan
        self._make_stream = make_stream
        self.options = options
        self._client = client
        self._emit = emit
        self._clock = clock
        self.slot = slot
        self._replay = replay
        self._in_flight: set[gevent.Greenlet] = set()
        self._cap = (
            gevent.lock.BoundedSemaphore(options.max_concurrency)
            if options.max_concurrency
            else None
        )
        self.scheduled = 0
        self.finished = 0
        self._headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if options.api_key:
            self._headers["Authorization"] = f"Bearer {options.api_key}"
        self._stopping = False
        self._stage_over = False
        self._stop_event = gevent.event.Event()  # wakes the dispatcher: a stop or a stage end
        self.current_stage: str | None = None
        self.stage_ends_s: dict[str, float] = {}

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def open_requests(self) -> list[tuple[str, str, float]]:
        """(stage, request_id, intended_send_s) of every request in flight (see `_spawn`)."""
        return [(g.args[0], g.args[1], g.args[3]) for g in self._in_flight]

    # --- the plan -------------------------------------------------------------------------

    def run(self, start_s: float) -> None:
        """Run every stage from `start_s` (run clock), drain, cancel what is left."""
        open_cursor = _ShapeCursor(self._make_stream(self.options.seed))
        next_open_index = 0
        stage_start = start_s
        try:
            for i, stage in enumerate(self.plan.stages):
                if self._stopping:
                    break
                self._stage_over = False
                self._stop_event.clear()
                self.current_stage = stage.name
                if stage.kind == "closed":
                    self._run_closed(i, stage, stage_start)
                elif stage.arrival == "replay":
                    self._run_replay(stage, stage_start)
                else:
                    next_open_index = self._run_open(
                        i, stage, stage_start, open_cursor, next_open_index
                    )
                if self._stage_over:
                    stage_start = self.stage_ends_s[stage.name]
                else:
                    stage_start += stage.duration_s
            self.current_stage = None
            self._drain()
        finally:
            self.cancel_all()

    def stop(self) -> None:
        """Stop dispatching; the caller then cancels what is in flight."""
        self._stopping = True
        self._stop_event.set()

    def end_stage(self, name: str) -> bool:
        """End stage `name` now if it is the one running: its sends stop, in-flight requests
        go on, and the plan moves to the next stage (or drains). True when it was running."""
        if self.current_stage != name or self._stage_over or self._stopping:
            return False
        self.stage_ends_s[name] = self._clock.now()
        self._stage_over = True
        self._stop_event.set()
        return True

    @property
    def _halted(self) -> bool:
        return self._stopping or self._stage_over

    def _sleep_until(self, t_s: float) -> None:
        delay = self._clock.wall_s(t_s - self._clock.now())
        if delay > 0:
            self._stop_event.wait(delay)  # a stop wakes the dispatcher at once

    def _run_open(
        self, i: int, stage: Stage, stage_start: float, cursor: _ShapeCursor, base: int
    ) -> int:
        rng = np.random.default_rng([self.options.seed, 1, i])
        times = stage_times(stage, rng)
        for j in range(self.slot.index, len(times), self.slot.count):
            if self._halted:
                break
            intended = stage_start + float(times[j])
            shape = cursor.get(base + j)
            body = self._body(shape)  # built before the send time, not on its critical path
            self._sleep_until(intended)
            if self._halted:
                break
            self._spawn(stage.name, f"{stage.name}/{j}", shape, intended, body)
        self._sleep_until(stage_start + stage.duration_s)
        return base + len(times)

    def _run_replay(self, stage: Stage, stage_start: float) -> None:
        if self._replay is None:
            raise RuntimeError(f"stage {stage.name!r} replays a log but no log was given")
        log = self._replay
        skip = int(np.searchsorted(log.arrival_s, log.origin_s, side="left"))
        times = replay_times(log.arrival_s[skip:], log.speed, stage.duration_s, log.origin_s)
        for j in range(self.slot.index, len(times), self.slot.count):
            if self._halted:
                break
            intended = stage_start + float(times[j])
            n_in, n_out = int(log.input_tokens[skip + j]), int(log.output_tokens[skip + j])
            shape = replay_shape(j, n_in, n_out)
            body = self._body(shape)
            self._sleep_until(intended)
            if self._halted:
                break
            self._spawn(stage.name, f"{stage.name}/{j}", shape, intended, body)
        self._sleep_until(stage_start + stage.duration_s)

    def _run_closed(self, i: int, stage: Stage, stage_start: float) -> None:
        assert stage.users is not None
        users = range(self.slot.index, stage.users, self.slot.count)
        stream = self._make_stream(self.options.seed * 1_000_003 + 7919 * (i + 1))
        cursor = _ShapeCursor(stream)
        counter = [0]
        lock = gevent.lock.Semaphore()
        stage_end = stage_start + stage.duration_s
        self._sleep_until(stage_start)

        def next_index() -> int:
            # Each process owns request numbers slot.index + k * slot.count of the stage.
            with lock:
                k = counter[0]
                counter[0] += 1
            return self.slot.index + k * self.slot.count

        def loop() -> None:
            while not self._halted and self._clock.now() < stage_end:
                j = next_index()
                shape = cursor.get(j)
                body = self._body(shape)
                g = self._spawn(stage.name, f"{stage.name}/{j}", shape, self._clock.now(), body)
                g.join()

        # User u starts at u / spawn rate into the stage (Locust's -r), on every process alike.
        rate = stage.spawn_rate_users_per_s
        loops = [gevent.spawn_later(u / rate if rate else 0.0, loop) for u in users]
        self._sleep_until(stage_end)
        gevent.joinall(loops, timeout=0)  # loops exit on their own once their request ends

    def _drain(self) -> None:
        deadline = self._clock.now() + self.options.drain_s
        while self._in_flight and self._clock.now() < deadline and not self._stopping:
            gevent.sleep(0.05)

    def cancel_all(self) -> None:
        """Cancel every request still in flight; each writes its `cancelled` row."""
        pending = list(self._in_flight)
        gevent.killall(pending, block=True, timeout=5)

    # --- one request --------------------------------------------------------------------

    def _body(self, shape: RequestShape) -> bytes:
        """The encoded request body of `shape` (prompt text lives only in this buffer)."""
        opts = self.options
        spec = render_messages(shape, opts.seed)
        body = request_body(spec, opts.endpoint, opts.model, ignore_eos=opts.ignore_eos)
        return orjson.dumps(body)

    def _spawn(
        self, stage: str, request_id: str, shape: RequestShape, intended_s: float, body: bytes
    ) -> gevent.Greenlet:
        self.scheduled += 1
        g = gevent.spawn(self._request, stage, request_id, shape, intended_s, body)
        self._in_flight.add(g)
        g.link(self._in_flight.discard)
        return g

    def _request(
        self, stage: str, request_id: str, shape: RequestShape, intended_s: float, body: bytes
    ) -> None:
        opts = self.options
        clock = self._clock.now
        sent_s: float | None = None
        status = 0
        result = None
        partial: StreamResult | None = None
        error_class: str | None = None
        message = ""
        acquired = False
        answered = False  # the status line and headers arrived
        name = f"{stage} [{opts.endpoint}]"
        path = PATHS[opts.endpoint]
        try:
            with gevent.Timeout(self._clock.wall_s(opts.request_timeout_s), _Timeout):
                if self._cap is not None:
                    self._cap.acquire()
                    acquired = True
                sent_s = clock()
                try:
                    raw = self._client.post(path, body, self._headers)
                except Exception as err:  # no answer: refused, unreachable, reset, closed
                    error_class = _connect_error_class(err)
                    message = _exception_text(err)
                    return
                answered = True
                status = int(raw.status_code)
                try:
                    if status >= 300:  # an error answer: its status decides its class
                        error_class = http_error_class(status)
                        message = error_body_message(raw.read(ERROR_BODY_BYTES))
                    else:
                        partial = StreamResult()
                        result = read_stream(line_reader(raw), clock, opts.endpoint, partial)
                        error_class, message = result.error_class, result.error_message
                finally:
                    raw.release()
        except _Timeout:
            error_class = "timeout"
            message = (
                f"no complete answer within the request timeout ({opts.request_timeout_s:g} s)"
            )
        except GreenletExit:
            error_class = "cancelled"
            message = "still in flight when the load test stopped"
        except Exception as err:  # network and HTTP-parser errors end the request
            error_class = _exception_class(err, sent=answered)
            message = _exception_text(err)
        finally:
            if acquired and self._cap is not None:
                self._cap.release()
            said = safe_message(message, body) if message else None  # never prompt text
            if sent_s is not None:
                last = result.last_token_t if result is not None else None
                took_s = (last if last is not None else clock()) - sent_s
                failed = f"{error_class}: {said}" if error_class is not None else None
                self._client.report(name, path, took_s, 0, failed)
            if result is None and partial is not None and partial.first_token_t is not None:
                # Cut off (cancelled, timed out, disconnected) after its first token: keep the
                # TTFT it showed; the row stays a failure with no e2e.
                partial.end_t = None
                result = partial
            self.finished += 1
            self._emit(
                _row(
                    stage,
                    request_id,
                    shape,
                    intended_s,
                    sent_s,
                    status,
                    result,
                    error_class,
                    said,
                    clock(),
                )
            )


def _exception_class(err: Exception, *, sent: bool) -> str:
    """disconnect (the connection broke after the answer began), a connect class before it,
    or client_<Name>."""
    name = type(err).__name__
    if isinstance(err, OSError | ConnectionError) or "Closed" in name or "ParseError" in name:
        return "disconnect" if sent else _connect_error_class(err)
    return f"client_{name}"


def _exception_text(err: object) -> str:
    """`Type: text` of a client-side error; its request (prompt included) is never named."""
    return f"{type(err).__name__}: {err}" if err is not None else "no answer"


def _connect_error_class(err: object) -> str:
    text = f"{type(err).__name__} {err}".lower()
    if "refused" in text:
        return "connect_refused"
    if "timed out" in text or "timeout" in text:
        return "timeout"
    if "reset" in text or "closed" in text:
        return "disconnect"
    return "connect"


def _row(
    stage: str,
    request_id: str,
    shape: RequestShape,
    intended_s: float,
    sent_s: float | None,
    status: int,
    result: Any,
    error_class: str | None,
    error_message: str | None,
    now_s: float,
) -> Row:
    first = last = None
    gaps: Sequence[float] = []
    out_tokens: int | None = None
    in_tokens = shape.input_tokens
    estimated = True
    end_s = now_s
    if result is not None:
        first, last, gaps = result.first_token_t, result.last_token_t, result.gaps_s
        end_s = result.end_t if result.end_t is not None else now_s
        if result.completion_tokens is not None:
            out_tokens, estimated = result.completion_tokens, False
        elif result.content_chunks:
            out_tokens = result.content_chunks
        if result.prompt_tokens is not None:
            in_tokens = result.prompt_tokens
    ttft = first - sent_s if first is not None and sent_s is not None else None
    e2e = last - sent_s if last is not None and sent_s is not None else None
    if result is not None and result.end_t is None:
        e2e = None  # the stream was cut off: its last chunk is not the end of the answer
    tpot = None
    if ttft is not None and e2e is not None and out_tokens is not None and out_tokens > 1:
        tpot = (e2e - ttft) / (out_tokens - 1)
    ok = error_class is None and status == 200
    return (
        stage,
        request_id,
        intended_s,
        sent_s,
        first,
        end_s,
        sent_s - intended_s if sent_s is not None else None,
        ttft,
        tpot,
        math.fsum(gaps) / len(gaps) if gaps else None,  # not numpy: 10 us a row here
        max(gaps) if gaps else None,
        e2e,
        in_tokens,
        out_tokens,
        estimated,
        ok,
        status,
        None if ok else (error_class or f"http_{status}"),
        None if ok else error_message,
        list(gaps),
    )
