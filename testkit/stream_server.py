"""A minimal independent OpenAI-style streaming server with known timings, for load-test tests.

It answers /v1/chat/completions and /v1/completions with `max_tokens` content chunks: the
first after `ttft_s`, then one every `itl_s` (sleeps scheduled on absolute deadlines), then
a usage chunk and `[DONE]`. It keeps its own timings per request (first chunk written minus
request received, and the mean gap between chunks, with the max_tokens asked and the prompt's
tokens) at GET /timings, and serves a Prometheus
/metrics page. Run as a subprocess: `python -m testkit.stream_server --port P ...`;
`start_server()` does that and waits until it answers.

With `faults` (e.g. `ok,429,500,503,cut,400`) the n-th request received gets the
(n mod len)-th action: `ok` answers normally; a status answers with that HTTP status and an
error body (OpenAI's shape with the message `test fault <status>`; a 503 answers plain text,
a 400 quotes the prompt as some servers do); `cut` sends two chunks and aborts the
connection. GET /faults lists the actions taken, in order of receipt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from planner.loadtest.netutil import free_port
from profiles.tokenize import ApproxTokenizer
from testkit.server_app import Sample, server_app

ROOT = Path(__file__).resolve().parents[1]
_TOKENIZER = ApproxTokenizer()


def _chunk(endpoint: str, text: str) -> bytes:
    if endpoint == "chat":
        obj = {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}}],
        }
    else:
        obj = {"object": "text_completion", "choices": [{"index": 0, "text": text}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def stream_tokens(
    resp: web.StreamResponse,
    endpoint: str,
    n: int,
    ttft_s: float,
    itl_s: float,
    *,
    prompt_tokens: int,
    usage: bool = True,
    tail_s: float = 0.0,
) -> tuple[float, float]:
    """Write `n` content chunks on a prepared response, the first `ttft_s` from now and then
    one every `itl_s` (absolute deadlines, so delays do not add up), wait `tail_s` after the
    last, then the usage chunk (when `usage`) and `[DONE]`. Returns the perf_counter times of
    the first and last content chunks."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    first = last = 0.0
    for i in range(n):
        delay = start + ttft_s + i * itl_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await resp.write(_chunk(endpoint, "tok "))
        now = time.perf_counter()
        if i == 0:
            first = now
        last = now
    if tail_s > 0:
        delay = start + ttft_s + (n - 1) * itl_s + tail_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
    if usage:
        u = {
            "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n},
        }
        await resp.write(b"data: " + json.dumps(u).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return first, last


def fault_message(status: int) -> str:
    """The error message the server sends with `status` (a 400 also quotes the prompt)."""
    return f"test fault {status}"


def _fault_answer(status: int, prompt: str) -> web.Response:
    if status == 503:
        return web.Response(status=503, text=f"{fault_message(503)}: service unavailable")
    message = fault_message(status)
    if status == 400:
        message += f": cannot parse {prompt[:120]!r}"
    error = {"message": message, "type": "TestFault", "param": None, "code": status}
    return web.json_response({"error": error}, status=status)


def make_app(
    ttft_s: float,
    itl_s: float,
    usage: bool = True,
    max_out: int = 0,
    faults: tuple[str, ...] = (),
) -> web.Application:
    timings: list[dict[str, float]] = []
    taken: list[str] = []
    state = {"running": 0, "total": 0}

    async def generate(request: web.Request, endpoint: str) -> web.StreamResponse:
        t0 = time.perf_counter()
        body = await request.json()
        n = int(body.get("max_tokens", 16))
        prompt = body.get("prompt") or " ".join(m["content"] for m in body.get("messages", []))
        prompt_tokens = _TOKENIZER.count(prompt)
        if max_out:
            n = min(n, max_out)  # a cheap target for tests about timing, not about lengths
        action = faults[len(taken) % len(faults)] if faults else "ok"
        if faults:
            taken.append(action)
        if action not in ("ok", "cut"):
            return _fault_answer(int(action), prompt)
        state["running"] += 1
        state["total"] += 1
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            if endpoint == "chat":  # role-only first chunk, as chat servers send
                role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
                await resp.write(b"data: " + json.dumps(role).encode() + b"\n\n")
            if action == "cut":  # two chunks, then the connection breaks mid-answer
                await asyncio.sleep(ttft_s)
                for _ in range(2):
                    await resp.write(_chunk(endpoint, "tok "))
                assert request.transport is not None
                request.transport.abort()
                return resp
            first, last = await stream_tokens(
                resp, endpoint, n, ttft_s, itl_s, prompt_tokens=prompt_tokens, usage=usage
            )
            timings.append(
                {
                    "ttft_s": first - t0,
                    "tpot_s": (last - first) / (n - 1) if n > 1 else 0.0,
                    "n": n,
                    "max_tokens": int(body.get("max_tokens", 0)),
                    "prompt_tokens": prompt_tokens,
                }
            )
        finally:
            state["running"] -= 1
        return resp

    def metrics() -> list[Sample]:
        return [
            Sample("test_requests_running", "Requests in progress.", "gauge", state["running"]),
            Sample("test_requests_total", "Requests received.", "counter", state["total"]),
        ]

    return server_app(generate, metrics, {"timings": lambda: timings, "faults": lambda: taken})


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def timings(self) -> list[dict[str, float]]:
        """The server's per-request log (GET /timings)."""
        with urllib.request.urlopen(self.url + "/timings", timeout=5) as resp:
            return list(json.loads(resp.read()))

    def faults(self) -> list[str]:
        """The fault actions taken so far, in order of receipt."""
        with urllib.request.urlopen(self.url + "/faults", timeout=5) as resp:
            return list(json.loads(resp.read()))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def launch(module: str, args: list[str], *, deadline_s: float = 15.0) -> ServerProcess:
    """Run `python -m module --port P *args` on a free port and poll its /metrics until it
    answers. Raises RuntimeError when it exits or does not answer within `deadline_s`."""
    port = free_port()
    cmd = [sys.executable, "-m", module, "--port", str(port), *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    server = ServerProcess(proc, port)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"test server {module} exited")
        try:
            urllib.request.urlopen(server.url + "/metrics", timeout=1).read()
            return server
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"test server {module} did not start")


def start_server(
    ttft_s: float,
    itl_s: float,
    *,
    usage: bool = True,
    max_out: int = 0,
    faults: tuple[str, ...] = (),
    deadline_s: float = 15.0,
) -> ServerProcess:
    """Start the server in a subprocess and poll until it answers (or raise)."""
    args = ["--ttft", str(ttft_s), "--itl", str(itl_s)]
    if not usage:
        args.append("--no-usage")
    if max_out:
        args += ["--max-out", str(max_out)]
    if faults:
        args += ["--faults", ",".join(faults)]
    return launch("testkit.stream_server", args, deadline_s=deadline_s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ttft", type=float, default=0.05)
    ap.add_argument("--itl", type=float, default=0.01)
    ap.add_argument("--no-usage", action="store_true")
    ap.add_argument("--max-out", type=int, default=0, help="cap on tokens per answer (0: none)")
    ap.add_argument(
        "--faults", default="", help="actions cycled by request: ok, cut or an HTTP status"
    )
    a = ap.parse_args()
    faults = tuple(f for f in a.faults.split(",") if f)
    for f in faults:
        if f not in ("ok", "cut") and not (f.isdigit() and 400 <= int(f) < 600):
            ap.error(f"--faults: {f!r} is not ok, cut or an HTTP status 400-599")
    web.run_app(
        make_app(a.ttft, a.itl, not a.no_usage, a.max_out, faults),
        host="127.0.0.1",
        port=a.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
