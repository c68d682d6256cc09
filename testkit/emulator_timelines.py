"""The emulator with its own per-request timings: the server side of a client's TTFT.

`python -m testkit.emulator_timelines --port P --gpu A10-24GB --model llama-3.1-8b` serves
planner.emulator's EmulatorServer (keeping every request's engine timeline) and adds
GET /timelines: per request its arrival (the handler's start) and first token, in wall
seconds on the host's time.monotonic clock (the engine's seconds at speed 1, mapped through
the driver's start), its prompt and output tokens, with the driver's lag (`behind_s`,
`resyncs`). A client's TTFT less
this one is what the client, the proxy and the process scheduling added.
`start_timeline_emulator()` launches it (testkit.stream_server.launch).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import urllib.request
from dataclasses import dataclass

from aiohttp import web

from planner.emulator.server import EmulatorServer
from planner.engine import build_engine_config
from testkit.stream_server import ServerProcess, launch


@dataclass(frozen=True)
class ServerTimeline:
    """One request as the emulator saw it (time.monotonic seconds)."""

    arrival_s: float
    first_token_s: float | None
    prompt_tokens: int
    output_tokens: int

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s


def timelines_route(server: EmulatorServer) -> web.RouteDef:
    async def handler(request: web.Request) -> web.Response:
        driver = server.driver
        t0, speed = driver._t0, driver.speed  # the engine's clock origin and rate
        rows = [
            {
                "arrival_s": t0 + tl.arrival_s / speed,
                "first_token_s": (
                    None if tl.first_token_s is None else t0 + tl.first_token_s / speed
                ),
                "prompt_tokens": tl.prompt_tokens,
                "output_tokens": tl.output_tokens,
            }
            for tl in server.engine.timelines().values()
        ]  # fmt: skip
        body = {"behind_s": driver.behind_s, "resyncs": driver.resyncs, "requests": rows}
        return web.json_response(body)

    return web.get("/timelines", handler)


async def _serve(args: argparse.Namespace) -> None:
    config = build_engine_config(args.gpu, args.model)
    server = EmulatorServer(
        config, speed=1.0, seed=args.seed, model_name=args.served_model_name,
        keep_timelines=True, stream_interval=args.stream_interval,
    )  # fmt: skip
    server.app.router.add_routes([timelines_route(server)])
    await server.start("127.0.0.1", args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


@dataclass
class TimelineEmulator:
    process: ServerProcess

    @property
    def url(self) -> str:
        return self.process.url

    def timelines(self) -> tuple[list[ServerTimeline], float, int]:
        """Every request's timeline, and the driver's lag: engine seconds lost, resyncs."""
        with urllib.request.urlopen(self.url + "/timelines", timeout=30) as resp:
            body = json.loads(resp.read())
        rows = [ServerTimeline(**row) for row in body["requests"]]
        return rows, float(body["behind_s"]), int(body["resyncs"])

    def stop(self) -> None:
        self.process.stop()


def start_timeline_emulator(
    gpu: str, model: str, *, seed: int = 0, model_name: str = "m", stream_interval: int = 8
) -> TimelineEmulator:
    args = ["--gpu", gpu, "--model", model, "--seed", str(seed)]
    args += ["--served-model-name", model_name, "--stream-interval", str(stream_interval)]
    return TimelineEmulator(launch("testkit.emulator_timelines", args, deadline_s=60.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gpu", default="A10-24GB")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--served-model-name", default="m")
    parser.add_argument("--stream-interval", type=int, default=8)
    asyncio.run(_serve(parser.parse_args()))


if __name__ == "__main__":
    main()
