"""The slot server behind the limit truth does what it claims: FIFO slots, service time
prefill + n x per-token, vLLM queue gauges, immediate 429s above N active requests."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from testkit.slot_server import SlotServer, start_slot_server

pytestmark = pytest.mark.integration


def _ask(url: str, max_tokens: int = 5) -> tuple[int, bytes]:
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    body["max_tokens"] = max_tokens
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(
        url + "/v1/chat/completions", json.dumps(body).encode(), headers
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _gauges(server: SlotServer) -> dict[str, float]:
    with urllib.request.urlopen(server.url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    found = re.findall(r"^(vllm:num_requests_\w+)\{[^}]*\} (\S+)$", text, re.M)
    return {name: float(value) for name, value in found}


def _wait_for(server: SlotServer, running: int, waiting: int, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        gauges = _gauges(server)
        if gauges == {"vllm:num_requests_running": running, "vllm:num_requests_waiting": waiting}:
            return
        time.sleep(0.01)
    raise AssertionError(f"gauges never reached {running} running / {waiting} waiting: {gauges}")


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(8) as executor:
        yield executor


def test_slots_serve_in_arrival_order_with_known_service(pool: ThreadPoolExecutor) -> None:
    server = start_slot_server(2, 0.05, 0.01, tokens="10")  # 0.05 + 10 x 0.01 = 0.15 s each
    try:
        futures: list[Future[tuple[int, bytes]]] = []
        for _ in range(5):
            futures.append(pool.submit(_ask, server.url, 3))
            # arrivals one after another, so their order is known
            end = time.monotonic() + 5
            while len(server.timings()) < len(futures) and time.monotonic() < end:
                time.sleep(0.005)
        _wait_for(server, running=2, waiting=3)
        answers = [f.result() for f in futures]
        timings = server.timings()
    finally:
        server.stop()
    assert all(status == 200 and body.count(b'"tok "') == 10 for status, body in answers)
    assert all(t.tokens == 10 and not t.refused and not t.cancelled for t in timings)
    starts = [t.slot_start_s for t in timings]
    assert starts == sorted(s for s in starts if s is not None)  # FIFO
    for t in timings:
        assert t.service_s == pytest.approx(0.15, abs=0.03)
        assert t.first_token_s == pytest.approx(0.05, abs=0.02)
    assert timings[2].slot_start_s == pytest.approx(timings[0].end_s, abs=0.02)  # waited


def test_refuses_above_n_active_at_once(pool: ThreadPoolExecutor) -> None:
    server = start_slot_server(2, 0.05, 0.05, tokens="20", refuse_above=2)  # 1.05 s each
    try:
        held = [pool.submit(_ask, server.url) for _ in range(2)]
        _wait_for(server, running=2, waiting=0)
        status, body = _ask(server.url)
        answers = [f.result() for f in held]
        timings = server.timings()
    finally:
        server.stop()
    assert status == 429
    assert json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    assert [s for s, _ in answers] == [200, 200]
    refused = [t for t in timings if t.refused]
    assert len(refused) == 1 and refused[0].slot_start_s is None and refused[0].end_s is None


def test_bad_token_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="LO:HI"):
        start_slot_server(1, 0.0, 0.0, tokens="9:3")
