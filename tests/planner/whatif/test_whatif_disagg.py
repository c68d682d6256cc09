"""Prefill/decode disaggregation in whatif: the physics of the KV hand-off, and where it pays.

Llama-3.1-8B keeps 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072 bytes of
KV per token (bf16), from its config.json, not from the code under test.
"""

from __future__ import annotations

import math

import pytest

from contracts.errors import ConfigError
from planner.engine import EngineRequest, build_engine_config
from planner.fleet.sim import FleetSimulation, simulate_fleet
from planner.slo.spec import parse_slo
from planner.whatif.disagg import Disagg, DisaggProbe, simulate_disaggregated
from planner.whatif.knobs import parse_vary
from planner.whatif.options import WhatifOptions
from planner.whatif.run import run_whatif
from profiles.presets import preset_profile

KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2
CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b", max_model_len=32768)


def test_kv_transfer_time_shows_up_in_ttft() -> None:
    prompt = 6000
    alone = [EngineRequest("a", prompt, 100, 0.0)]
    fast, slow = (
        simulate_disaggregated(
            alone,
            CONFIG,
            Disagg(prefill=1, decode=1, link_bandwidth_bytes_per_s=bw, link_latency_s=0.0),
        )
        for bw in (50e9, 5e9)
    )
    # Only the hand-off differs: TTFT grows by the KV bytes over the slower link, the
    # stream after the first token does not change.
    expected = prompt * KV_BYTES_PER_TOKEN * (1 / 5e9 - 1 / 50e9)  # 0.142 s
    assert slow.ttft_s[0] - fast.ttft_s[0] == pytest.approx(expected, rel=1e-9)
    assert slow.tpot_s[0] == pytest.approx(fast.tpot_s[0], rel=1e-12)
    assert slow.output_tokens[0] == fast.output_tokens[0] == 100
    # fp8 KV moves half the bytes
    fp8 = CONFIG.model_copy(update={"kv_dtype_bytes": 1})
    f_fast, f_slow = (
        simulate_disaggregated(
            alone,
            fp8,
            Disagg(prefill=1, decode=1, link_bandwidth_bytes_per_s=bw, link_latency_s=0.0),
        )
        for bw in (50e9, 5e9)
    )
    assert f_slow.ttft_s[0] - f_fast.ttft_s[0] == pytest.approx(expected / 2, rel=1e-9)
    # Against one aggregated instance: the same prefill, then the transfer and one decode
    # step more before the first token reaches the client.
    agg = simulate_fleet(alone, CONFIG, 1)
    assert slow.ttft_s[0] > agg.ttft_s[0] + prompt * KV_BYTES_PER_TOKEN / 5e9


def test_decodes_never_wait_behind_a_prefill_in_the_decode_pool() -> None:
    running = EngineRequest("chat", 100, 400, 0.0)
    long_prompt = EngineRequest("rag", 16000, 4, 0.5)  # two 8192-token prefill chunks
    lone = simulate_fleet([running], CONFIG, 1).tpot_s[0]
    agg = simulate_fleet([running, long_prompt], CONFIG, 1)
    pd = simulate_disaggregated([running, long_prompt], CONFIG, Disagg(prefill=1, decode=1))
    # Aggregated, the chat stream stalls for the rag prompt's prefill chunks (~0.3 s);
    # disaggregated, it shares only the rag request's few decode steps.
    assert (agg.tpot_s[0] - lone) * 399 > 0.2
    assert (pd.tpot_s[0] - lone) * 399 < 0.02


def _whatif(name: str, slo: str, level_s: float):  # type: ignore[no-untyped-def]
    options = WhatifOptions(
        profile_path=name,
        slo=parse_slo(slo),
        vary=parse_vary("disaggregation=off:1p1d"),
        level_s=level_s,
    )
    return run_whatif(preset_profile(name), options)


def test_disaggregation_frees_decode_from_prefill_and_hurts_chat() -> None:
    # rag: 15k-token prompts, 150-token answers. Aggregated, a decode that shares a step
    # with an 8192-token prefill chunk waits for it; the decode pool never runs a prefill,
    # so at its limit TPOT p95 is lower than the aggregated instance's. Whether that pays
    # per GPU depends on which constraint binds the aggregated instance for the sample
    # drawn (at ~0.2 req/s a 240 s level holds ~50 requests), so it is not asserted here.
    rag = _whatif("rag", "ttft:p95<=6s,tpot:p95<=40ms", 240.0)
    off, pd = sorted(rag.candidates, key=lambda c: c.settings["disaggregation"] != "off")
    assert off.tpot_p95_s is not None and pd.tpot_p95_s is not None
    assert pd.tpot_p95_s < off.tpot_p95_s
    (lesson,) = rag.lessons
    assert lesson.limit_change is not None and "KV in" in lesson.figure
    # chat: 1.2k-token prompts, TPOT p95 <= 100 ms: prefill chunks are short, TTFT binds
    # the aggregated instance, and splitting it gives prefill half the GPUs of a pair.
    chat = _whatif("chat", "ttft:p95<=2s,tpot:p95<=100ms", 30.0)
    (lesson,) = chat.lessons
    assert lesson.limit_change is not None and lesson.limit_change < -0.05
    assert "KV in" in lesson.figure


def test_disaggregated_candidates_are_planned_in_units_of_both_pools() -> None:
    rag = _whatif("rag", "ttft:p95<=6s,tpot:p95<=40ms", 60.0)
    pd = next(c for c in rag.candidates if c.settings["disaggregation"] == "1p1d")
    assert pd.limit_rps is not None and pd.instances is not None
    units = math.ceil(rag.peak_rps * 1.2 / pd.limit_rps - 1e-9) + 1  # headroom, N+1
    assert pd.instances == 2 * units and pd.gpus == 2 * units
    assert pd.monthly_cost_usd == pytest.approx(pd.gpus * pd.gpu_hour_price_usd * 730)


def test_disaggregation_values_are_checked() -> None:
    assert parse_vary("disaggregation=off:1p3d") == {"disaggregation": ("off", "1p3d")}
    for bad in ("1p0d", "2x2", "on"):
        with pytest.raises(ConfigError, match="<prefill>p<decode>d"):
            parse_vary(f"disaggregation=off:{bad}")


def test_an_aggregated_candidate_pauses_one_run_per_level() -> None:
    # Without a split the what-if probe advances one pausable run per level (as EngineProbe),
    # rather than simulating each doubled span again from its start; a split unit cannot
    # pause.
    requests = [EngineRequest(str(i), 500, 50, 0.1 * i) for i in range(5)]
    chat, slo = preset_profile("chat"), parse_slo("ttft:p99<=2s")
    aggregated = DisaggProbe(profile=chat, config=CONFIG, rules=None, slo=slo)
    assert isinstance(aggregated._simulation(requests), FleetSimulation)
    split = DisaggProbe(
        profile=chat, config=CONFIG, rules=None, slo=slo, disagg=Disagg(prefill=1, decode=1)
    )
    assert split._simulation(requests) is None
