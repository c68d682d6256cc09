"""How fast can capplan's load generator send on schedule? capplan (1 process, 2 workers), asyncio.

For each client, the highest open-loop Poisson arrival rate it sustains with schedule lag
(actual send minus intended send) p99 <= 5 ms, against a zero-delay server that streams a
`--tokens`-token answer (one SSE chunk per token plus usage) to every request. The baseline is
a plain asyncio + aiohttp client built like vLLM's `bench serve` (one task per request,
sleeping until its arrival, streaming the answer line by line, json.loads per chunk). The
clients are interleaved in one run: each round, every client still searching measures its own
next level, so a busy moment of the machine hits them alike. Each client's search doubles
from `--start-rate` until a level fails, then bisects until the highest passing and lowest
failing rates are within `--tolerance` (5 %). A level's p99 is the best of `--tries` runs.

Then a timing check against a server with known timing (testkit/stream_server.py, TTFT
50 ms): each client's TTFT p50 minus the server's own, at `--ttft-rate` req/s.

Prints the rates, the ratios capplan / asyncio (goal: >= 1.0) and the TTFT errors.
`--save` caches capplan's 1-process rate for `--workers auto` (planner/loadtest/workers.py).

    .venv/bin/python bench/loadgen_capacity.py [--duration 10] [--tokens 16] [--save]

Figures depend on the machine and what else runs on it; ratios within one run are what to
read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit.bisection import Bisection, search  # noqa: E402

DEFAULT_LAG_P99_MS = 5.0
OUTPUT_TOKENS = 16  # the bench server's answer length (--tokens)


# --- the zero-delay server (its own process) ------------------------------------------------


def _canned_response(tokens: int) -> bytes:
    """One whole answer: `tokens` content chunks, usage and [DONE], written at once."""
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"tok "}}]}\n\n'
    usage = (
        b'data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":'
        + str(tokens).encode()
        + b"}}\n\n"
    )
    body = chunk * tokens + usage + b"data: [DONE]\n\n"
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


async def _serve(port: int, tokens: int) -> None:
    canned = _canned_response(tokens)
    metrics = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(metrics if head.startswith(b"GET") else canned)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def start_server(tokens: int) -> tuple[subprocess.Popen[bytes], str]:
    from planner.loadtest.netutil import free_port

    port = free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--tokens", str(tokens)]
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("bench server did not start")


# --- the asyncio + aiohttp baseline (vLLM bench serve style, its own process) ---------------


@dataclass(frozen=True)
class Level:
    """One client's measurement at one rate (seconds)."""

    lag_p99_s: float
    ttft_p50_s: float | None
    requests: int = 0
    cpu_s: float = 0.0  # CPU (user + system) of the client's processes, startup included


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _aiohttp_client(
    url: str, rate_rps: float, duration_s: float, tokens: int, seed: int
) -> tuple[list[float], list[float]]:
    """Schedule lags and TTFTs (first content chunk minus send) of one open-loop run."""
    import aiohttp

    from locustfiles.arrivals import arrival_times

    times = arrival_times("poisson", rate_rps, duration_s, np.random.default_rng(seed))
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "kaka lolo mimi nene"}],
        "max_tokens": tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    lags: list[float] = []
    ttfts: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(intended: float, start: float) -> None:
            sent = time.perf_counter()
            lags.append(sent - start - intended)
            first = None
            async with session.post(url + "/v1/chat/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: ") and line[6:].strip() != b"[DONE]":
                        chunk = json.loads(line[6:])
                        choices = chunk.get("choices") or [{}]
                        if first is None and choices[0].get("delta", {}).get("content"):
                            first = time.perf_counter()
            if first is not None:
                ttfts.append(first - sent)

        start = time.perf_counter() + 0.2
        tasks = []
        for t in times:
            delay = start + t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(float(t), start)))
        await asyncio.gather(*tasks, return_exceptions=True)
    return lags, ttfts


def aiohttp_level(url: str, rate_rps: float, duration_s: float, tokens: int) -> Level:
    cpu0 = _children_cpu_s()
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [sys.executable, __file__, "--aiohttp", url, str(rate_rps), str(duration_s)]
        subprocess.run([*cmd, str(tokens), out.name], check=True)
        lags, ttfts = json.loads(Path(out.name).read_text())
    cpu_s = _children_cpu_s() - cpu0
    if not lags:
        return Level(float("inf"), None, 0, cpu_s)
    ttft = float(np.median(ttfts)) if ttfts else None
    return Level(float(np.percentile(lags, 99)), ttft, len(lags), cpu_s)


# --- capplan (Locust) --------------------------------------------------------------------


def capplan_level(url: str, rate_rps: float, duration_s: float, tokens: int, workers: int) -> Level:
    from contracts.run import Stage, StagePlan
    from planner.loadtest.run import LoadTestConfig, run_loadtest
    from testkit.profiles import make_profile

    cpu0 = _children_cpu_s()
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "profile.json"
        profile.write_text(make_profile([(16, tokens)]).to_json())
        config = LoadTestConfig(
            host=url,
            model="m",
            profile_path=str(profile),
            workers=workers,
            scrape_metrics=False,
            drain_s=10,
        )
        plan = StagePlan(stages=[Stage(name="bench", duration_s=duration_s, rate_rps=rate_rps)])
        (summary,) = run_loadtest(config, plan, Path(tmp) / "run")
    cpu_s = _children_cpu_s() - cpu0
    p99 = summary.schedule_lag_s.p99
    if summary.errors or p99 is None:
        return Level(float("inf"), None, summary.scheduled, cpu_s)
    return Level(p99, summary.ttft_s.p50, summary.scheduled, cpu_s)


# --- the search -----------------------------------------------------------------------------


def ttft_check(rate_rps: float, duration_s: float, tokens: int) -> dict[str, tuple[float, float]]:
    """Each client's TTFT p50 and the server's own p50 at `rate_rps`, against a server whose
    first chunk leaves 50 ms after the request arrives (it stamps its own timings)."""
    from testkit.stream_server import start_server as start_timed_server

    server = start_timed_server(ttft_s=0.05, itl_s=0.005, max_out=tokens)
    out: dict[str, tuple[float, float]] = {}
    try:
        runs: dict[str, Callable[[], Level]] = {
            "asyncio+aiohttp": lambda: aiohttp_level(server.url, rate_rps, duration_s, tokens),
            "capplan 1 process": lambda: capplan_level(server.url, rate_rps, duration_s, tokens, 0),
        }
        for name, run in runs.items():
            before = len(server.timings())
            level = run()
            own = server.timings()[before:]
            own_p50 = float(np.median([t["ttft_s"] for t in own]))
            out[name] = (float("nan") if level.ttft_p50_s is None else level.ttft_p50_s, own_p50)
    finally:
        server.stop()
    return out


def cpu_per_request(
    clients: dict[str, Callable[[float], Level]], rate_rps: float
) -> dict[str, float]:
    """Each client's CPU seconds per request: a run at `rate_rps` less a run at 1 req/s (which
    holds the process startup), over the difference in requests. Less sensitive to other
    programs on the machine than schedule lag."""
    out: dict[str, float] = {}
    for name, run in clients.items():
        idle, busy = run(1.0), run(rate_rps)
        out[name] = (busy.cpu_s - idle.cpu_s) / max(busy.requests - idle.requests, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per level")
    ap.add_argument("--tokens", type=int, default=OUTPUT_TOKENS, help="tokens per answer")
    ap.add_argument("--start-rate", type=float, default=200.0)
    ap.add_argument("--max-rate", type=float, default=4000.0)
    ap.add_argument("--tolerance", type=float, default=0.05, help="bisect to this share")
    ap.add_argument("--tries", type=int, default=2, help="best lag p99 of this many runs per level")
    ap.add_argument("--lag-p99-ms", type=float, default=DEFAULT_LAG_P99_MS, help="pass threshold")
    ap.add_argument("--ttft-rate", type=float, default=100.0, help="rate of the TTFT check")
    ap.add_argument("--cpu-rate", type=float, default=300.0, help="rate of the CPU check")
    ap.add_argument("--no-workers", action="store_true", help="skip capplan --workers 2")
    ap.add_argument("--save", action="store_true", help="cache capplan's 1-process rate")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--aiohttp", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        asyncio.run(_serve(a.serve, a.tokens))
        return
    if a.aiohttp:
        url, rate, dur, tokens, out = a.aiohttp
        result = asyncio.run(_aiohttp_client(url, float(rate), float(dur), int(tokens), 0))
        Path(out).write_text(json.dumps(result))
        return

    print(
        f"loadgen capacity: Poisson arrivals, {a.tokens}-token streamed answers, "
        f"zero-delay server, {a.duration:g} s per level, "
        f"pass = schedule lag p99 <= {a.lag_p99_ms:g} ms (best of {a.tries}), "
        f"bisection to {a.tolerance * 100:g} %; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    proc, url = start_server(a.tokens)

    def best_of(measure: Callable[[float], Level]) -> Callable[[float], float]:
        # Other programs on the machine stall a client now and then; the best of a few tries
        # shows what the client itself sustains (every client gets the same number of tries).
        return lambda r: min(measure(r).lag_p99_s for _ in range(a.tries))

    levels: dict[str, Callable[[float], Level]] = {
        "asyncio+aiohttp": lambda r: aiohttp_level(url, r, a.duration, a.tokens),
        "capplan 1 process": lambda r: capplan_level(url, r, a.duration, a.tokens, 0),
    }
    if not a.no_workers:
        levels["capplan 2 workers"] = lambda r: capplan_level(url, r, a.duration, a.tokens, 2)
    clients = {name: best_of(level) for name, level in levels.items()}
    try:
        searches = search(
            clients,
            lambda: Bisection(a.start_rate, a.max_rate, a.tolerance),
            a.lag_p99_ms / 1000,
        )
        one_process = {k: v for k, v in levels.items() if k != "capplan 2 workers"}
        cpu = cpu_per_request(one_process, a.cpu_rate)
    finally:
        proc.kill()
        proc.wait()
    print()
    print("schedule lag p99 (ms) by offered rate:")
    rates = sorted({r for b in searches.values() for r in b.measured})
    print(f"{'req/s':>8}" + "".join(f"{name:>22}" for name in clients))
    for r in rates:
        cells = [searches[name].measured.get(r) for name in clients]
        print(
            f"{r:>8.0f}"
            + "".join(f"{'-':>22}" if c is None else f"{c * 1000:>22.2f}" for c in cells)
        )
    base = searches["asyncio+aiohttp"].passed_rps or 0.0
    print()
    print(f"highest rate with schedule lag p99 <= {a.lag_p99_ms:g} ms (lowest failing):")
    print(f"{'client':<24}{'max rate (req/s)':>18}{'fails at':>10}{'vs asyncio+aiohttp':>22}")
    for name, b in searches.items():
        rate = b.passed_rps or 0.0
        ratio = rate / base if base else float("nan")
        fails = "-" if b.failed_rps is None else f"{b.failed_rps:.0f}"
        print(f"{name:<24}{rate:>18.0f}{fails:>10}{ratio:>22.2f}")
    print()
    print(f"CPU per request at {a.cpu_rate:g} req/s (less a 1 req/s run):")
    for name, cpu_s in cpu.items():
        print(f"  {name:<20} {cpu_s * 1e6:7.0f} us")
    print()
    print(f"TTFT p50 against a server with a known 50 ms TTFT, at {a.ttft_rate:g} req/s:")
    checks = ttft_check(a.ttft_rate, a.duration, a.tokens)
    for name, (client, own) in checks.items():
        print(
            f"  {name:<20} client {client * 1000:7.2f} ms  server's own {own * 1000:7.2f} ms  "
            f"error {(client - own) * 1000:+6.2f} ms"
        )
    if len(checks) == 2:
        (c1, o1), (c2, o2) = checks.values()
        print(f"  capplan's error minus asyncio's: {((c2 - o2) - (c1 - o1)) * 1000:+.2f} ms")
    one = searches["capplan 1 process"].passed_rps
    if a.save and one:
        from planner.loadtest.workers import ProcessCapacity, save_capacity

        path = save_capacity(
            ProcessCapacity(
                rate_rps=one,
                lag_p99_s=a.lag_p99_ms / 1000,
                cpus=os.cpu_count() or 1,
                source=f"bench/loadgen_capacity.py, {a.tokens}-token answers, "
                f"{time.strftime('%Y-%m-%d')}",
            )
        )
        print(f"saved one process's {one:.0f} req/s to {path}")


if __name__ == "__main__":
    main()
