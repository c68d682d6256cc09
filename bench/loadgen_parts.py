"""CPU per request of the load generator's parts, before and after the issue-19 changes.

Each pair runs the earlier way and the current way of one step a load process takes per
request, in one process patched by gevent as Locust's is, and prints the CPU microseconds per
call (best of `--rounds` rounds, time.process_time):
- prompt text of one message: `synthetic_text` with a numpy generator seeded per message
  (earlier) against `keyed_text` (a slice of a precomputed word pool);
- request shapes: numpy scalar draws, each taking the generator's lock, which gevent's
  patched RLock makes slow (earlier), against `WorkloadStream`'s block of uniforms;
- one streamed POST and its lines against the zero-delay server of
  bench/loadgen_capacity.py (16-token answers): `HTTPClient.request` and
  `readline(b"\\n")` (earlier) against `StreamClient.post` (cached request head) and
  `line_reader`.

    .venv/bin/python bench/loadgen_parts.py [--calls 3000] [--rounds 5]

Absolute figures depend on the machine and what else runs on it; read each pair's ratio.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - after the patch, as in a Locust process
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from geventhttpclient.client import HTTPClient  # noqa: E402
from geventhttpclient.url import URL  # noqa: E402

from locustfiles.http_client import StreamClient, line_reader  # noqa: E402
from locustfiles.openai_stream import read_stream  # noqa: E402
from profiles.tokenize import keyed_text, synthetic_text  # noqa: E402

HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
BODY = b'{"model":"m","messages":[{"role":"user","content":"kaka lolo mimi nene"}],"stream":true}'


def cpu_us(call: Callable[[int], object], calls: int, rounds: int) -> float:
    """Best CPU microseconds per call over `rounds` rounds of `calls` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for i in range(calls):
            call(i)
        best = min(best, (time.process_time() - start) / calls)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()

    rows: list[tuple[str, float, float]] = []
    for tokens in (16, 1000):
        earlier = cpu_us(
            lambda i, n=tokens: synthetic_text(n, np.random.default_rng([0, 2, i])),
            a.calls,
            a.rounds,
        )
        now = cpu_us(lambda i, n=tokens: keyed_text(n, (0, 2, i)), a.calls, a.rounds)
        rows.append((f"prompt text, {tokens} tokens", earlier, now))

    rng = np.random.default_rng(1)
    block = iter(np.random.default_rng(1).random(a.calls * a.rounds * 3).tolist())
    rows.append(
        (
            "3 uniform draws of a shape",
            cpu_us(lambda i: (rng.random(), rng.random(), rng.random()), a.calls, a.rounds),
            cpu_us(lambda i: (next(block), next(block), next(block)), a.calls, a.rounds),
        )
    )

    from loadgen_capacity import start_server

    proc, url = start_server(16)
    try:
        library = HTTPClient.from_url(URL(url), concurrency=100)
        ours = StreamClient(url, connection_timeout_s=10, network_timeout_s=60)

        def earlier_request(_: int) -> None:
            raw = library.request("POST", "/v1/chat/completions", BODY, HEADERS)
            read_stream(lambda: raw.readline(b"\n"), time.perf_counter, "chat")
            raw.release()

        def current_request(_: int) -> None:
            raw = ours.post("/v1/chat/completions", BODY, HEADERS)
            read_stream(line_reader(raw), time.perf_counter, "chat")
            raw.release()

        rows.append(
            (
                "streamed POST, 16 chunks",
                cpu_us(earlier_request, a.calls, a.rounds),
                cpu_us(current_request, a.calls, a.rounds),
            )
        )
        library.close()
        ours.close()
    finally:
        proc.kill()
        proc.wait()

    print(f"CPU per call, best of {a.rounds} rounds of {a.calls} calls (gevent-patched process):")
    print(f"{'step':<30}{'earlier (us)':>14}{'now (us)':>10}{'ratio':>8}")
    for name, earlier, now in rows:
        print(f"{name:<30}{earlier:>14.1f}{now:>10.1f}{earlier / now:>8.1f}")


if __name__ == "__main__":
    main()
