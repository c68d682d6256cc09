"""How many concurrent streams one emulator process sustains with client ITL within 5 % of intended.

Starts `capplan emulate` in its own process (one Python thread: one core) for each level,
and reports its CPU use (CPU seconds per wall second) next to the result, so a machine busy
with other work shows up as a server below 100 % CPU that still falls behind.
opens N streaming /v1/completions at once from a lean asyncio client in this process, and
times every content chunk as it arrives. The engine's intended inter-token latency for the
same requests comes from `simulate` (virtual time) over the send times the client recorded.
A level passes when the clients' mean ITL (per-request TPOT) is within 5 % of intended.
The 1-stream level is the baseline of the same run.

    .venv/bin/python bench/emulator_scale.py [--levels 1,250,500,1000,1500,2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlparse

import numpy as np

from planner.emulator import EmulatorProcess
from planner.engine import EngineConfig, EngineRequest, build_engine_config, simulate
from profiles.tokenize import ApproxTokenizer, chained_block_hashes, synthetic_text

TOKEN_MARK = b'"finish_reason": null'  # one per content chunk (the final chunk names a reason)


@dataclass
class _Stream:
    sent_s: float = 0.0
    first_s: float = 0.0
    last_s: float = 0.0
    tokens: int = 0
    gaps_s: list[float] = field(default_factory=list)


class _StreamProtocol(asyncio.Protocol):
    """A bare HTTP/1.1 client for one streamed completion: timestamps chunks, parses nothing."""

    def __init__(self, request: bytes, record: _Stream, done: asyncio.Future[None]) -> None:
        self._request = request
        self._record = record
        self._done = done
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._record.sent_s = time.monotonic()
        transport.write(self._request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        k = data.count(TOKEN_MARK)
        if k:
            r = self._record
            if r.tokens == 0:
                r.first_s = now
            else:
                r.gaps_s.append(now - r.last_s)
                r.gaps_s.extend([0.0] * (k - 1))
            r.last_s = now
            r.tokens += k
        finished = b"[DONE]" in data or b"[DONE]" in self._tail + data[:8]
        if finished and not self._done.done():
            self._done.set_result(None)
        self._tail = data[-8:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_exception(ConnectionError(f"stream cut: {exc}"))


async def _run_clients(url: str, prompts: list[str], max_tokens: int) -> list[_Stream]:
    loop = asyncio.get_running_loop()
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    records = [_Stream() for _ in prompts]
    futures = []
    for prompt, record in zip(prompts, records, strict=True):
        body = json.dumps(
            {
                "model": "llama-3.1-8b",
                "prompt": prompt,
                "max_tokens": max_tokens,
                "stream": True,
                "ignore_eos": True,
            }
        ).encode()
        request = (
            f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body
        done: asyncio.Future[None] = loop.create_future()
        futures.append(done)
        await loop.create_connection(
            lambda r=request, rec=record, d=done: _StreamProtocol(r, rec, d), host, port
        )
    await asyncio.gather(*futures)
    return records


def _scrape(url: str, name: str) -> float:
    """One counter's value from the emulator's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class LevelResult:
    streams: int
    client_itl_s: float
    intended_itl_s: float
    client_itl_p99_s: float
    intended_itl_p99_s: float
    ttft_ratio: float
    send_spread_s: float
    server_cpu_share: float
    server_behind_s: float

    @property
    def itl_ratio(self) -> float:
        return self.client_itl_s / self.intended_itl_s


def run_level(
    config: EngineConfig, streams: int, prompt_tokens: int, max_tokens: int
) -> LevelResult:
    rng = np.random.default_rng(streams)
    prompts = [synthetic_text(prompt_tokens, rng) for _ in range(streams)]
    server = EmulatorProcess(config, speed=1.0)
    url = server.start()
    try:
        asyncio.run(_run_clients(url, prompts[:1], 2))  # warm-up
        cpu0, wall0 = _cpu_s(server.pid), time.monotonic()
        records = asyncio.run(_run_clients(url, prompts, max_tokens))
        server_cpu = (_cpu_s(server.pid) - cpu0) / (time.monotonic() - wall0)
        behind_s = _scrape(url, "capplan_emulator_behind_seconds_total")
    finally:
        server.stop()
    t0 = min(r.sent_s for r in records)
    tok = ApproxTokenizer()
    requests = [
        EngineRequest(
            f"r{i}",
            tok.count(p),
            max_tokens,
            r.sent_s - t0,
            tuple(chained_block_hashes(tok.encode(p), config.block_tokens)),
        )
        for i, (p, r) in enumerate(zip(prompts, records, strict=True))
    ]
    timelines = simulate(requests, config.model_copy(update={"record_token_times": True}))
    client_tpot = [(r.last_s - r.first_s) / (r.tokens - 1) for r in records]
    intended_tpot = [tl.tpot_s or 0.0 for tl in timelines]
    gaps = np.concatenate([np.asarray(r.gaps_s) for r in records])
    client_ttft = np.mean([r.first_s - r.sent_s for r in records])
    intended_ttft = np.mean([tl.ttft_s or 0.0 for tl in timelines])
    return LevelResult(
        streams=streams,
        client_itl_s=float(np.mean(client_tpot)),
        intended_itl_s=float(np.mean(intended_tpot)),
        client_itl_p99_s=float(np.percentile(gaps, 99)),
        intended_itl_p99_s=float(np.percentile([g for tl in timelines for g in tl.itl_s], 99)),
        ttft_ratio=float(client_ttft / intended_ttft),
        send_spread_s=float(max(r.sent_s for r in records) - t0),
        server_cpu_share=server_cpu,
        server_behind_s=behind_s,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,250,500,1000,1500,2000")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--gpu", default="H200-141GB")
    parser.add_argument("--model", default="llama-3.1-8b")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    config = build_engine_config(
        args.gpu,
        args.model,
        max_num_seqs=max(levels),
        max_num_batched_tokens=max(8192, max(levels)),
        record_token_times=False,
    )
    print(
        f"emulator scale: {config.model.name} on {config.gpu.name}, prompt "
        f"{args.prompt_tokens} tokens, {args.max_tokens} output tokens per stream, speed 1"
    )
    header = (
        "streams  client ITL ms  intended ITL ms  ratio  p99 gap ms (intended)  TTFT ratio  "
        "send spread s  server CPU  server behind s"
    )
    print(header)
    sustained = 0
    baseline: LevelResult | None = None
    for n in levels:
        res = run_level(config, n, args.prompt_tokens, args.max_tokens)
        baseline = baseline or res
        ok = res.itl_ratio <= 1.05
        if ok:
            sustained = max(sustained, n)
        print(
            f"{n:7d}  {res.client_itl_s * 1e3:12.2f}  {res.intended_itl_s * 1e3:15.2f}  "
            f"{res.itl_ratio:5.3f}  {res.client_itl_p99_s * 1e3:10.2f} "
            f"({res.intended_itl_p99_s * 1e3:8.2f})  {res.ttft_ratio:10.3f}  "
            f"{res.send_spread_s:13.2f}  {res.server_cpu_share:9.0%}  "
            f"{res.server_behind_s:15.2f}  {'ok' if ok else 'OVER 5%'}"
        )
    assert baseline is not None
    print(
        f"baseline ({baseline.streams} stream) ITL ratio {baseline.itl_ratio:.3f}; "
        f"largest level within 5 % of intended ITL: {sustained} concurrent streams "
        f"(goal >= 1000)"
    )


if __name__ == "__main__":
    main()
