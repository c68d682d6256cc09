"""The emulator's HTTP server: the engine model behind an OpenAI-compatible API in real time.

One asyncio loop runs both the aiohttp handlers (here) and the engine driver
(planner.emulator.driver), which steps the engine in real time and writes each step's tokens
to the streams the handlers register; /metrics comes from planner.emulator.metrics.

Output lengths: with `ignore_eos` a request generates `max_tokens`; otherwise it stops at a
natural length drawn (seeded) from a lognormal fitted to the Azure LLM conversation trace
(median 129, mean 211 output tokens), never below `min_tokens`, as vLLM honours them.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import InputError
from planner.emulator.driver import EngineDriver, Stream
from planner.emulator.frontend import FrontEndThread
from planner.emulator.metrics import EmulatorMetrics
from planner.emulator.protocol import (
    ChunkWriter,
    Kind,
    ParsedRequest,
    RequestRejected,
    completion_body,
    filler_text,
    parse_request,
    usage_body,
)
from planner.engine import Engine, EngineConfig, EngineRequest

NATURAL_OUTPUT_MEDIAN_TOKENS = 129.0
NATURAL_OUTPUT_SIGMA = 0.99  # lognormal sigma giving mean/median = 211/129
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions


# the bounds in the type, so that a reader of EmulateOptions' nested fields sees them
Share = Annotated[float, Field(ge=0.0, le=1.0)]


class Faults(BaseModel):
    """Fault injection for reliability tests; rates are per-request probabilities."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    error_rate: Share = Field(default=0.0, description="answer HTTP 500")
    reject_when_waiting: Annotated[int | None, Field(ge=0)] = Field(
        default=None, description="answer HTTP 429 while this many requests wait"
    )
    drop_rate: Share = Field(default=0.0, description="cut the connection mid-stream")
    stall_rate: Share = Field(default=0.0, description="stop sending mid-stream")


class EmulatorServer:
    """An OpenAI-compatible server whose latencies come from the engine model.

    `speed` runs engine time that many times faster than wall time (reported timings are
    engine time). `stream_interval` tokens go out in one chunk after the first (as vLLM's
    `--stream-interval`): fewer chunks for a sped-up emulator to write and a client to
    parse, the same TTFT, TPOT and token counts. `keep_timelines` keeps every finished
    request's engine timeline (for tests; a long-running server drops them). `clock` is the
    monotonic wall clock (seconds) and `wall_clock` the epoch clock for `created` fields;
    both are injectable.
    """

    def __init__(
        self,
        config: EngineConfig,
        *,
        speed: float = 1.0,
        seed: int = 0,
        faults: Faults | None = None,
        model_name: str | None = None,
        keep_timelines: bool = False,
        stream_interval: int = 1,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not speed > 0:
            raise InputError(f"speed must be > 0, got {speed}")
        if stream_interval < 1:
            raise InputError(f"stream interval must be >= 1 token, got {stream_interval}")
        self.config = config
        self.speed = speed
        self.stream_interval = stream_interval
        self.faults = faults or Faults()
        self.model_name = model_name or config.model.name
        self.keep_timelines = keep_timelines
        # The front end's time is waited out for real before a request reaches the engine.
        self.engine = Engine(config, charge_frontend=False)
        self._front = FrontEndThread(config, speed)
        self.driver = EngineDriver(
            self.engine,
            speed=speed,
            stream_interval=stream_interval,
            clock=clock,
            on_first_token=lambda tl: self.metrics.first_token(tl),
        )
        self.metrics = EmulatorMetrics(
            self.engine.gauges,
            self.model_name,
            lambda: (self.driver.behind_s, self.driver.resyncs),
            block_tokens=config.block_tokens,
            identity={
                "runtime": config.engine,
                "gpu": config.gpu.name,
                "model": config.model.name,
                "tp": str(config.tp),
                "pp": str(config.pp),
                "quantization": config.quantization,
                "kv_cache_dtype": "fp8" if config.kv_dtype_bytes == 1 else "auto",
            },  # fmt: skip
        )
        self._rng = np.random.default_rng(seed)
        self._wall_clock = wall_clock
        self._counter = 0
        self._runner: web.AppRunner | None = None
        self.app = web.Application(client_max_size=64 * 1024**2)
        self.app.router.add_post("/v1/completions", self._completions)
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/metrics", self._metrics)

    # ------------------------------------------------------------------ lifecycle

    def engine_now(self) -> float:
        """Engine seconds since the server started."""
        return self.driver.engine_now()

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> int:
        """Start serving; returns the bound port (pass 0 for a free one)."""
        self.driver.start()
        self._runner = web.AppRunner(
            self.app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=4096, reuse_address=True)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        """Stop the engine loop and the HTTP server (open streams are cancelled)."""
        await self.driver.stop()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ handlers

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completion")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def _models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": int(self._wall_clock()),
            "owned_by": "capplan-emulator",
            "root": self.config.model.name,
            "max_model_len": self.config.effective_max_model_len,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    @staticmethod
    def _error(err: RequestRejected) -> web.Response:
        return web.json_response(err.body(), status=err.status)

    def _output_length(self, parsed: ParsedRequest) -> tuple[int, str]:
        room = self.config.effective_max_model_len - parsed.prompt_tokens
        if parsed.max_tokens is not None:
            max_tokens = parsed.max_tokens
        elif parsed.kind == "completion":
            max_tokens = COMPLETIONS_DEFAULT_MAX_TOKENS
        else:
            max_tokens = max(1, room)
        if parsed.prompt_tokens + max_tokens > self.config.effective_max_model_len:
            raise RequestRejected(
                f"This model's maximum context length is {self.config.effective_max_model_len} "
                f"tokens. However, you requested {parsed.prompt_tokens + max_tokens} tokens "
                f"({parsed.prompt_tokens} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
                param="max_tokens",
            )
        natural = int(
            math.ceil(
                self._rng.lognormal(math.log(NATURAL_OUTPUT_MEDIAN_TOKENS), NATURAL_OUTPUT_SIGMA)
            )
        )
        if parsed.ignore_eos or natural >= max_tokens:
            return max_tokens, "length"
        return min(max_tokens, max(natural, parsed.min_tokens, 1)), "stop"

    async def _generate(self, request: web.Request, kind: Kind) -> web.StreamResponse:
        # The request arrives when its handler starts, as vLLM stamps arrival in its API
        # server: reading, parsing and tokenizing the body count towards its TTFT.
        received_s = self.engine_now()
        try:
            parsed, target, finish_reason = await self._parse(request, kind)
            self._injected_rejection()
            await self._front.pass_through(parsed.prompt_tokens)
            s = self._enqueue(kind, parsed, target, received_s)
        except RequestRejected as err:
            return self._error(err)
        created = int(self._wall_clock())
        offset = self._counter * 7
        try:
            if parsed.stream:
                return await self._stream_reply(request, s, kind, finish_reason, created, offset)
            self.driver.wake()
            outcome = await s.done
            if outcome != "finished":
                raise ConnectionResetError(outcome)
            tl = self.engine.timeline(s.rid)
            self.metrics.finished(tl, finish_reason)
            text = filler_text(offset, tl.output_tokens)
            usage = self._usage(s.rid)
            return web.json_response(
                completion_body(kind, s.rid, created, self.model_name, text, finish_reason, usage)
            )
        finally:
            if not s.finished:
                self.engine.abort(s.rid, self.engine_now())
            elif parsed.stream:
                self.metrics.finished(self.engine.timeline(s.rid), finish_reason)
            self.driver.streams.pop(s.rid, None)
            if not self.keep_timelines:
                self.engine.forget(s.rid)

    async def _parse(self, request: web.Request, kind: Kind) -> tuple[ParsedRequest, int, str]:
        """The request, its output length and finish reason; RequestRejected when invalid."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RequestRejected("request body is not valid JSON") from err
        parsed = parse_request(body, kind, self.config.block_tokens)
        if parsed.model is not None and parsed.model != self.model_name:
            raise RequestRejected(
                f"The model `{parsed.model}` does not exist.",
                status=404,
                error_type="NotFoundError",
                param="model",
                code="model_not_found",
            )
        target, finish_reason = self._output_length(parsed)
        return parsed, target, finish_reason

    def _injected_rejection(self) -> None:
        """Raise the HTTP 500 or 429 a fault injection answers this request with, if any."""
        faults = self.faults
        if faults.error_rate and self._rng.random() < faults.error_rate:
            raise RequestRejected("injected fault: internal error", 500, "InternalServerError")
        if (
            faults.reject_when_waiting is not None
            and self.engine.gauges().waiting >= faults.reject_when_waiting
        ):
            raise RequestRejected(
                "injected fault: too many requests waiting", 429, "RateLimitError"
            )

    def _enqueue(self, kind: Kind, parsed: ParsedRequest, target: int, received_s: float) -> Stream:
        """Add the request to the engine and its stream to the driver (with a drop or stall
        cut drawn by the faults); RequestRejected when the engine refuses it."""
        self._counter += 1
        prefix = "chatcmpl" if kind == "chat" else "cmpl"
        rid = f"{prefix}-{self._counter:010d}"
        now = self.driver.join_time_s()
        arrival_s = min(received_s, now)
        engine_request = EngineRequest(
            rid, parsed.prompt_tokens, target, arrival_s, parsed.block_hashes, parsed.min_tokens
        )
        try:
            self.engine.add_request(engine_request, now)
        except InputError as err:
            raise RequestRejected(str(err)) from err
        s = Stream(rid, parsed, target, asyncio.get_running_loop().create_future())
        faults = self.faults
        if parsed.stream and target > 1:
            if faults.drop_rate and self._rng.random() < faults.drop_rate:
                s.cut_at, s.cut_kind = int(self._rng.integers(1, target)), "drop"
            elif faults.stall_rate and self._rng.random() < faults.stall_rate:
                s.cut_at, s.cut_kind = int(self._rng.integers(1, target)), "stall"
        self.driver.streams[rid] = s
        return s

    async def _stream_reply(
        self,
        request: web.Request,
        s: Stream,
        kind: Kind,
        finish_reason: str,
        created: int,
        offset: int,
    ) -> web.StreamResponse:
        """Open the event stream, let the driver write the tokens, then close it with the
        finish reason, the usage chunk (when asked) and [DONE]."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        writer = ChunkWriter(kind, s.rid, created, self.model_name, offset)
        first = writer.first()
        if first:
            await response.write(first)
        s.writer = writer
        s.transport = request.transport
        self.driver.wake()
        if await s.done != "finished":
            return response
        tail = writer.finish(finish_reason)
        if s.parsed.include_usage:
            tail += writer.usage(self._usage(s.rid))
        await response.write(tail + writer.done())
        await response.write_eof()
        return response

    def _usage(self, rid: str) -> dict[str, Any]:
        tl = self.engine.timeline(rid)
        return usage_body(tl.prompt_tokens, tl.output_tokens, tl.cached_tokens)
