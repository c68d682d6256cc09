"""How fast can capplan's load generator send on schedule? Locust (1 process, 2 workers) vs asyncio.

For each client, the highest open-loop Poisson arrival rate it sustains with schedule lag
(actual send minus intended send) p99 <= 5 ms, against a zero-delay server that streams a
64-token answer (64 SSE chunks plus usage) to every request. The baseline is a plain asyncio +
aiohttp client built like vLLM's benchmark_serving (one task per request, sleeping until its
arrival, streaming the answer line by line), measured in the same run against the same
server. Prints the rates and the ratios capplan / baseline (goal: >= 1.0).

    .venv/bin/python bench/loadgen_capacity.py [--duration 6] [--max-rate 1600]

Figures depend on the machine and what else runs on it; ratios within one run are what to
read. The server runs in its own process; clients take turns at each rate, and each level's
p99 is the best of `--tries` runs, so a stall caused by another program does not decide it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_LAG_P99_MS = 5.0
OUTPUT_TOKENS = 64


# --- the zero-delay server (its own process) ------------------------------------------------


def _canned_response() -> bytes:
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"tok "}}]}\n\n'
    usage = (
        b'data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":'
        + str(OUTPUT_TOKENS).encode()
        + b"}}\n\n"
    )
    body = chunk * OUTPUT_TOKENS + usage + b"data: [DONE]\n\n"
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    return head + body


async def _serve(port: int) -> None:
    canned = _canned_response()
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("bench server did not start")


# --- the asyncio + aiohttp baseline (vLLM benchmark_serving style, its own process) --------


async def _aiohttp_client(url: str, rate_rps: float, duration_s: float, seed: int) -> list[float]:
    import aiohttp

    from locustfiles.arrivals import arrival_times

    times = arrival_times("poisson", rate_rps, duration_s, np.random.default_rng(seed))
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "kaka lolo mimi nene"}],
        "max_tokens": OUTPUT_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    lags: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(intended: float, start: float) -> None:
            lags.append(time.perf_counter() - start - intended)
            async with session.post(url + "/v1/chat/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: ") and line[6:].strip() != b"[DONE]":
                        json.loads(line[6:])

        start = time.perf_counter() + 0.2
        tasks = []
        for t in times:
            delay = start + t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(float(t), start)))
        await asyncio.gather(*tasks, return_exceptions=True)
    return lags


def aiohttp_lag_p99(url: str, rate_rps: float, duration_s: float) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [sys.executable, __file__, "--aiohttp", url, str(rate_rps), str(duration_s), out.name],
            check=True,
        )
        lags = json.loads(Path(out.name).read_text())
    return float(np.percentile(lags, 99)) if lags else float("inf")


# --- capplan (Locust) --------------------------------------------------------------------


def locust_lag_p99(url: str, rate_rps: float, duration_s: float, workers: int) -> float:
    from planner.loadtest import LoadTestConfig, run_loadtest
    from planner.run_schema import Stage, StagePlan
    from tests.helpers.profiles import make_profile

    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "profile.json"
        profile.write_text(make_profile([(16, OUTPUT_TOKENS)]).to_json())
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
    if summary.errors:
        return float("inf")
    p99 = summary.schedule_lag_s.p99
    return float("inf") if p99 is None else p99


# --- the search -----------------------------------------------------------------------------


def rate_grid(start_rps: float, max_rps: float) -> list[float]:
    """Rates rising by sqrt(2) from start_rps to max_rps."""
    out = [start_rps]
    while out[-1] * 2**0.5 <= max_rps * 1.0001:
        out.append(out[-1] * 2**0.5)
    return out


def search(
    clients: dict[str, Callable[[float], float]],
    rates: list[float],
    lag_p99_max_s: float,
    patience: int = 2,
) -> tuple[dict[str, float], dict[str, dict[float, float]]]:
    """The highest rate of `rates` at which each client's lag p99 passes.

    Clients take turns at each rate, so a busy moment of the machine hits them alike; a client
    leaves the search after `patience` failures in a row (one noisy level does not end it).
    Returns the best rates and every measured p99 (client -> rate -> seconds).
    """
    best = {name: 0.0 for name in clients}
    measured: dict[str, dict[float, float]] = {name: {} for name in clients}
    fails = {name: 0 for name in clients}
    for rate in rates:
        active = [n for n in clients if fails[n] < patience]
        if not active:
            break
        for name in active:
            p99 = clients[name](rate)
            measured[name][rate] = p99
            passed = p99 <= lag_p99_max_s
            print(
                f"  {name:<20} {rate:8.0f} req/s  lag p99 {p99 * 1000:8.2f} ms  "
                f"{'pass' if passed else 'FAIL'}",
                flush=True,
            )
            if passed:
                best[name] = rate
                fails[name] = 0
            else:
                fails[name] += 1
    return best, measured


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=float, default=6.0, help="seconds per level")
    ap.add_argument("--start-rate", type=float, default=50.0)
    ap.add_argument("--tries", type=int, default=2, help="best lag p99 of this many runs per level")
    ap.add_argument("--lag-p99-ms", type=float, default=DEFAULT_LAG_P99_MS, help="pass threshold")
    ap.add_argument("--max-rate", type=float, default=1600.0)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--aiohttp", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        asyncio.run(_serve(a.serve))
        return
    if a.aiohttp:
        url, rate, dur, out = a.aiohttp
        lags = asyncio.run(_aiohttp_client(url, float(rate), float(dur), 0))
        Path(out).write_text(json.dumps(lags))
        return

    print(
        f"loadgen capacity: Poisson arrivals, {OUTPUT_TOKENS}-token streamed answers, "
        f"zero-delay server, {a.duration:g} s per level, "
        f"pass = schedule lag p99 <= {a.lag_p99_ms:g} ms (best of {a.tries}); "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    proc, url = start_server()

    def best_of(measure: Callable[[float], float]) -> Callable[[float], float]:
        # Other programs on the machine stall a client now and then; the best of a few tries
        # shows what the client itself sustains (every client gets the same number of tries).
        return lambda r: min(measure(r) for _ in range(a.tries))

    clients: dict[str, Callable[[float], float]] = {
        "asyncio+aiohttp": best_of(lambda r: aiohttp_lag_p99(url, r, a.duration)),
        "capplan 1 process": best_of(lambda r: locust_lag_p99(url, r, a.duration, 0)),
        "capplan 2 workers": best_of(lambda r: locust_lag_p99(url, r, a.duration, 2)),
    }
    try:
        best, measured = search(clients, rate_grid(a.start_rate, a.max_rate), a.lag_p99_ms / 1000)
    finally:
        proc.kill()
        proc.wait()
    rates = sorted({r for by_rate in measured.values() for r in by_rate})
    print()
    print("schedule lag p99 (ms) by offered rate:")
    print(f"{'req/s':>8}" + "".join(f"{name:>22}" for name in clients))
    for r in rates:
        cells = [measured[name].get(r) for name in clients]
        print(
            f"{r:>8.0f}"
            + "".join(f"{'-':>22}" if c is None else f"{c * 1000:>22.2f}" for c in cells)
        )
    base = best["asyncio+aiohttp"]
    print()
    print(f"highest rate with schedule lag p99 <= {a.lag_p99_ms:g} ms:")
    print(f"{'client':<24}{'max rate (req/s)':>18}{'vs asyncio+aiohttp':>22}")
    for name, rate in best.items():
        ratio = rate / base if base else float("nan")
        print(f"{name:<24}{rate:>18.0f}{ratio:>22.2f}")


if __name__ == "__main__":
    main()
