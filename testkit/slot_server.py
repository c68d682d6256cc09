"""An OpenAI-style streaming test server with `c` request slots and known service times.

A request holds one of `slots` slots while it is served; requests beyond that wait in
arrival order (FIFO). Once it holds a slot, a request streams `n` content chunks, the first
`prefill_s` later and then one every `per_token_s`, and ends `per_token_s` after the last:
its service time is `prefill_s + n * per_token_s`. `n` is the request's `max_tokens`, or the
server's own choice (`--tokens N` or `--tokens LO:HI`, uniform, seeded) so that service
times have a known distribution whatever the client asks. With `--refuse-above N` a request
that arrives while N requests are active is answered at once with HTTP 429 and an OpenAI
error body. With `--slowdown S` a request's tokens come S x k / slots slower when k requests
hold slots as it takes its own (counting itself): S more at full load, a server whose work
per request grows with concurrency (the prefill is not slowed). With `--late-cancel` the
server writes nothing before a request's first token, so it learns that a client went away
only then, as llama.cpp does: a request cancelled while it waited still holds its slot for
the prefill. GET /timings lists per request its arrival, slot start, first chunk, end
(seconds on the server's perf_counter clock), tokens and flags; GET /metrics has vLLM's
`vllm:num_requests_running` and `vllm:num_requests_waiting` gauges.
Chunk format and process launch come from testkit.stream_server:
`python -m testkit.slot_server --port P --slots 8 ...` (`--host ADDR` to listen elsewhere
than 127.0.0.1, as in a test's own network namespace), or `start_slot_server()`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import urllib.request
from collections import deque
from dataclasses import asdict, dataclass

from aiohttp import web

from profiles.tokenize import ApproxTokenizer
from testkit.server_app import Sample, server_app
from testkit.stream_server import ServerProcess, launch, stream_tokens

_TOKENIZER = ApproxTokenizer()


@dataclass
class SlotTiming:
    """One request as the server saw it (seconds on the server's perf_counter clock)."""

    arrival_s: float
    slot_start_s: float | None = None  # None: refused, or cancelled while waiting
    first_chunk_s: float | None = None
    end_s: float | None = None  # None: not finished (refused, cancelled, in flight)
    tokens: int = 0
    refused: bool = False
    cancelled: bool = False  # the client went away before the end
    slowdown: float = 1.0  # its per-token time over the nominal one (--slowdown)

    @property
    def service_s(self) -> float | None:
        """Slot start to end of a finished request."""
        if self.slot_start_s is None or self.end_s is None:
            return None
        return self.end_s - self.slot_start_s

    @property
    def first_token_s(self) -> float | None:
        """Slot start to first chunk of a finished request."""
        if self.slot_start_s is None or self.first_chunk_s is None or self.end_s is None:
            return None
        return self.first_chunk_s - self.slot_start_s


class FifoSlots:
    """`count` slots handed out in arrival order; a waiter that is cancelled leaves the line
    (or passes on a slot it was handed at that moment)."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for w in self.waiters if not w.done())

    async def acquire(self) -> None:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot just as we were cancelled
            else:
                self.waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes straight to the next in line
                return
        self.free += 1


@dataclass(frozen=True)
class TokenChoice:
    """How many chunks an answer has: the request's max_tokens (`low == 0`), or uniform on
    [low, high] from the server's seeded generator."""

    low: int = 0
    high: int = 0

    @classmethod
    def parse(cls, text: str) -> TokenChoice:
        """'' (the request's max_tokens), 'N' or 'LO:HI'."""
        if not text:
            return cls()
        low, _, high = text.partition(":")
        lo, hi = int(low), int(high or low)
        if not 1 <= lo <= hi:
            raise ValueError(f"--tokens {text!r}: expected N or LO:HI with 1 <= LO <= HI")
        return cls(lo, hi)

    def draw(self, requested: int, rng: random.Random) -> int:
        if self.low == 0:
            return max(1, requested)
        return rng.randint(self.low, self.high)


def make_app(
    slots: int,
    prefill_s: float,
    per_token_s: float,
    *,
    tokens: TokenChoice = TokenChoice(),
    refuse_above: int = 0,
    seed: int = 0,
    late_cancel: bool = False,
    slowdown: float = 0.0,
) -> web.Application:
    """The app: `slots` FIFO slots; `refuse_above` > 0 refuses when that many are active;
    `late_cancel`: nothing written before the first token; `slowdown`: tokens slower by that
    share with every slot held (see the module)."""
    line = FifoSlots(slots)
    timings: list[SlotTiming] = []
    rng = random.Random(seed)
    state = {"active": 0, "running": 0}
    clock = time.perf_counter

    async def generate(request: web.Request, endpoint: str) -> web.StreamResponse:
        timing = SlotTiming(arrival_s=clock())
        timings.append(timing)
        body = await request.json()
        if refuse_above and state["active"] >= refuse_above:
            timing.refused = True
            error = {
                "error": {
                    "message": f"server busy: {refuse_above} requests active",
                    "type": "rate_limit_error",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
            return web.json_response(error, status=429)
        n = tokens.draw(int(body.get("max_tokens", 16)), rng)
        prompt = body.get("prompt") or " ".join(m["content"] for m in body.get("messages", []))
        state["active"] += 1
        held = False
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await line.acquire()
            held = True
            state["running"] += 1
            timing.slot_start_s = clock()
            timing.tokens = n
            timing.slowdown = 1.0 + slowdown * state["running"] / slots
            itl_s = per_token_s * timing.slowdown
            if late_cancel:
                await asyncio.sleep(prefill_s)
            await resp.prepare(request)
            if endpoint == "chat":  # role-only first chunk, as chat servers send
                role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
                await resp.write(b"data: " + json.dumps(role).encode() + b"\n\n")
            start = timing.slot_start_s
            first_s, _ = await stream_tokens(
                resp,
                endpoint,
                n,
                prefill_s - (clock() - start),
                itl_s,
                prompt_tokens=_TOKENIZER.count(prompt),
                tail_s=itl_s,
            )
            timing.first_chunk_s = first_s
            timing.end_s = clock()
            return resp
        except ConnectionResetError:  # the client went away: nothing left to answer
            timing.cancelled = True
            return resp
        except asyncio.CancelledError:
            timing.cancelled = True
            raise
        finally:
            state["active"] -= 1
            if held:
                state["running"] -= 1
                line.release()

    def metrics() -> list[Sample]:
        return [
            Sample(
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                "gauge",
                state["running"],
                '{model_name="x"}',
            ),
            Sample(
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                "gauge",
                line.waiting,
                '{model_name="x"}',
            ),
        ]

    return server_app(generate, metrics, {"timings": lambda: [asdict(t) for t in timings]})


@dataclass
class SlotServer:
    """A running slot server subprocess."""

    process: ServerProcess

    @property
    def url(self) -> str:
        return self.process.url

    def timings(self) -> list[SlotTiming]:
        with urllib.request.urlopen(self.url + "/timings", timeout=30) as resp:
            return [SlotTiming(**row) for row in json.loads(resp.read())]

    def stop(self) -> None:
        self.process.stop()


def start_slot_server(
    slots: int,
    prefill_s: float,
    per_token_s: float,
    *,
    tokens: str = "",
    refuse_above: int = 0,
    seed: int = 0,
    late_cancel: bool = False,
    slowdown: float = 0.0,
    deadline_s: float = 15.0,
) -> SlotServer:
    """Start the server in a subprocess and poll until it answers (or raise RuntimeError)."""
    TokenChoice.parse(tokens)  # a bad spec fails here, not in the child
    args = ["--slots", str(slots), "--prefill", str(prefill_s), "--per-token", str(per_token_s)]
    args += ["--tokens", tokens, "--refuse-above", str(refuse_above), "--seed", str(seed)]
    args += ["--late-cancel"] if late_cancel else []
    args += ["--slowdown", str(slowdown)] if slowdown else []
    return SlotServer(launch("testkit.slot_server", args, deadline_s=deadline_s))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on")
    ap.add_argument("--slots", type=int, default=8, help="requests served at once")
    ap.add_argument("--prefill", type=float, default=0.05, help="slot start to first chunk, s")
    ap.add_argument("--per-token", type=float, default=0.005, help="seconds per chunk")
    ap.add_argument("--tokens", default="", help="N or LO:HI chunks per answer ('' max_tokens)")
    ap.add_argument("--refuse-above", type=int, default=0, help="429 when N active (0: never)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--late-cancel", action="store_true", help="nothing sent before 1st token")
    ap.add_argument("--slowdown", type=float, default=0.0, help="token slowdown when full")
    a = ap.parse_args()
    if a.slots < 1:
        ap.error("--slots must be >= 1")
    try:
        tokens = TokenChoice.parse(a.tokens)
    except ValueError as err:
        ap.error(str(err))
    web.run_app(
        make_app(
            a.slots,
            a.prefill,
            a.per_token,
            tokens=tokens,
            refuse_above=a.refuse_above,
            seed=a.seed,
            late_cancel=a.late_cancel,
            slowdown=a.slowdown,
        ),
        host=a.host,
        port=a.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
