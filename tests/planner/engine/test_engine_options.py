"""Engine-model options behind `capplan whatif`: KV dtype, static reservation, speculative
decoding and the tensor-parallel communication term, each against a figure worked by hand."""

from __future__ import annotations

from typing import Any

import pytest

from planner.engine import (
    Engine,
    EngineConfig,
    EngineRequest,
    build_engine_config,
    kv_bytes_per_token,
    kv_capacity_blocks,
    simulate,
)
from testkit.engine_configs import NO_FRONT_END


def _h100(**overrides: Any) -> EngineConfig:
    # The scheduler's options alone: no front end in front of it.
    return build_engine_config("H100-80GB", "llama-3.1-8b", **{**NO_FRONT_END, **overrides})


def _reqs(n: int, prompt: int, out: int) -> list[EngineRequest]:
    return [EngineRequest(f"r{i}", prompt, out, 0.0) for i in range(n)]


def test_fp8_kv_halves_bytes_per_token_and_doubles_the_cache() -> None:
    fp16, fp8 = _h100(), _h100(kv_dtype_bytes=1)
    # Llama-3.1-8B: 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 131,072.
    assert kv_bytes_per_token(fp16) == 131_072
    assert kv_bytes_per_token(fp8) == 65_536
    ratio = kv_capacity_blocks(fp8) / kv_capacity_blocks(fp16)
    assert ratio == pytest.approx(2.0, rel=1e-4)


def test_static_reservation_caps_running_sequences_at_cache_over_max_model_len() -> None:
    config = _h100(kv_reservation="static", max_model_len=32768)
    bound = kv_capacity_blocks(config) // (32768 // 16)  # 28,019 blocks // 2,048 = 13
    assert bound == 13
    engine = Engine(config)
    for r in _reqs(250, 16, 64):
        engine.add_request(r, 0.0)
    engine.step(0.0)
    assert engine.gauges().running == bound
    paged = Engine(_h100(max_model_len=32768))
    for r in _reqs(250, 16, 64):
        paged.add_request(r, 0.0)
    paged.step(0.0)
    assert paged.gauges().running == 250


def test_speculative_decoding_emits_the_expected_tokens_per_step() -> None:
    config = _h100(spec_draft_tokens=4, spec_acceptance_rate=0.8)
    # (1 - 0.8^5) / (1 - 0.8) = 3.3616 tokens per decode step.
    assert config.spec_tokens_per_step == pytest.approx(3.3616)
    engine = Engine(config)
    engine.add_request(EngineRequest("a", 100, 1001, 0.0), 0.0)
    now, steps = 0.0, 0
    while engine.has_work():
        now = engine.step(now).end_s
        steps += 1
    tl = engine.timeline("a")
    assert tl.output_tokens == 1001
    # one prefill step for the first token, then 1000 tokens at 3.3616 per step
    assert steps - 1 == pytest.approx(1000 / 3.3616, abs=2)


def test_speculative_decoding_helps_one_stream_and_hurts_a_full_batch() -> None:
    draft = {
        "spec_draft_tokens": 4,
        "spec_acceptance_rate": 0.7,
        "spec_draft_params": 1_000_000_000,
    }
    one_off = simulate(_reqs(1, 512, 256), _h100())[0]
    one_on = simulate(_reqs(1, 512, 256), _h100(**draft))[0]
    assert one_on.e2e_s is not None and one_off.e2e_s is not None
    assert one_on.e2e_s < 0.6 * one_off.e2e_s  # memory-bound: verification is nearly free
    many_off = simulate(_reqs(256, 512, 256), _h100())
    many_on = simulate(_reqs(256, 512, 256), _h100(**draft))
    end_off = max(t.e2e_s or 0.0 for t in many_off)
    end_on = max(t.e2e_s or 0.0 for t in many_on)
    assert end_on > end_off  # compute-bound: 5 positions verified per 2.8 tokens kept


def test_tp_communication_term_matches_the_ring_all_reduce_by_hand() -> None:
    base = dict(tp=2, spec_draft_tokens=0)
    none = Engine(_h100(tp_link_bandwidth_bytes_per_s=1e30, tp_allreduce_latency_s=0.0, **base))
    pcie = Engine(_h100(tp_link_bandwidth_bytes_per_s=32e9, tp_allreduce_latency_s=25e-6, **base))
    # 2 all-reduces x 32 layers, each 2 (tp-1)/tp = 1 x 1000 tokens x 4096 x 2 bytes / 32 GB/s
    # = 256 us, plus 25 us latency: 64 x 281 us = 17.984 ms.
    extra = pcie.step_time_s(1000, 0.0, 0) - none.step_time_s(1000, 0.0, 0)
    assert extra == pytest.approx(64 * (1000 * 4096 * 2 / 32e9 + 25e-6), rel=1e-9)
    tp1 = Engine(_h100(tp_link_bandwidth_bytes_per_s=32e9, tp_allreduce_latency_s=25e-6))
    assert tp1.step_time_s(1000, 0.0, 0) == Engine(_h100()).step_time_s(1000, 0.0, 0)
