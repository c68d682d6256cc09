"""`capplan whatif` on the shipped presets: the lessons the engine model shows, with numbers.

Short virtual-time levels (30 s) keep each search to a second or two of wall time.
"""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from planner.engine import build_engine_config
from planner.slo.spec import parse_slo
from planner.whatif.knobs import parse_vary
from planner.whatif.lessons import RANKING_MARGIN
from planner.whatif.options import WhatifOptions
from planner.whatif.run import run_whatif
from planner.whatif.virtual import split_at
from profiles.presets import preset_profile
from reports.i18n.findings import lesson_figure
from reports.i18n.words import Words

LEVEL_S = 30.0


def _whatif(name: str, slo: str, vary: str, gpus: tuple[str, ...] = ("H100-80GB",)):  # type: ignore[no-untyped-def]
    options = WhatifOptions(
        profile_path=name, slo=parse_slo(slo), gpus=gpus, vary=parse_vary(vary), level_s=LEVEL_S
    )
    return run_whatif(preset_profile(name), options)


def test_prefix_caching_pays_on_agent_far_more_than_on_batch() -> None:
    agent = _whatif("agent", "ttft:p95<=2s,tpot:p95<=100ms", "prefix_caching")
    batch = _whatif("batch", "ttft:p95<=10s,tpot:p95<=100ms", "prefix_caching")
    (a,) = agent.lessons
    (b,) = batch.lessons
    assert a.limit_change is not None and b.limit_change is not None
    # agent: 90 % of prompt tokens in shared blocks, prefill-heavy (6.7k in, 150 out)
    assert a.limit_change > 1.0
    # batch: 31 % shared and decode-heavy (1.7k in, 1.1k out): a modest gain at most
    assert b.limit_change < 0.4
    assert a.limit_change > 4 * max(b.limit_change, 0.0)
    assert "90% of prompt tokens are in shared blocks" in a.figure


def test_static_reservation_cuts_the_limit_and_long_contexts_fit_few_sequences() -> None:
    rag = _whatif("rag", "ttft:p95<=10s", "kv_reservation")
    chat = _whatif("chat", "ttft:p95<=2s,tpot:p95<=100ms", "kv_reservation")
    (r,) = rag.lessons
    (c,) = chat.lessons
    # Both lose (the search's 5 % tolerance and the levels' noise allow a few points).
    assert r.limit_change is not None and r.limit_change < -0.1
    assert c.limit_change is not None and c.limit_change < -0.1
    # rag's longest request needs the model's whole 131k context: 3 sequences fit on H100
    assert "at most 3 sequences fit" in r.figure
    assert "at most 62 sequences fit" in c.figure


def test_shortest_first_with_aging_cuts_short_prompt_p99_on_a_mixed_workload() -> None:
    profile = preset_profile("rag")
    fcfs = build_engine_config("H100-80GB", "llama-3.1-8b", queue_policy="fcfs")
    spf = build_engine_config("H100-80GB", "llama-3.1-8b", queue_policy="spf")
    rate = 1.2  # below the FCFS limit of one H100 at ttft:p95<=10s (1.7 req/s)
    slo = parse_slo("ttft:p95<=10s")
    before = split_at(profile, fcfs, slo, rate, level_s=60.0)  # short P99 TTFT 6.6 s, long 7.4 s
    after = split_at(profile, spf, slo, rate, level_s=60.0)  # short 2.1 s, long 9.7 s
    assert before.short_ttft_p99_s is not None and after.short_ttft_p99_s is not None
    assert after.short_ttft_p99_s < 0.6 * before.short_ttft_p99_s
    # long prompts pay for it, but aging bounds what they pay
    assert before.long_ttft_p99_s is not None and after.long_ttft_p99_s is not None
    assert after.long_ttft_p99_s >= before.long_ttft_p99_s * 0.9


def test_vary_rejects_unknown_knobs_and_values() -> None:
    with pytest.raises(ConfigError, match="known: engine, prefix_caching"):
        parse_vary("prefix_cache")
    with pytest.raises(ConfigError, match="unknown value 'int4'"):
        parse_vary("kv_dtype=fp16:int4")
    assert parse_vary("max_num_seqs=64:256") == {"max_num_seqs": ("64", "256")}
    # a count of requests or tokens is whole: int("1.5") crashed with a traceback
    for knob in ("max_num_seqs", "max_num_batched_tokens"):
        with pytest.raises(ConfigError, match=f"--vary {knob}: '1.5' is not a whole number"):
            parse_vary(f"{knob}=1.5:4096")
        with pytest.raises(ConfigError, match="is not a whole number"):
            parse_vary(f"{knob}=inf:4096")
    assert parse_vary("gpu_memory_utilization=0.8:0.9")["gpu_memory_utilization"] == ("0.8", "0.9")


def test_engines_compared_on_long_prompts_say_where_their_order_changes() -> None:
    """rag (long prompts, up to the model's whole context) on two GPUs under TensorRT-LLM and
    vLLM: each candidate is built from its engine's profile, the engine lesson names both
    engines' KV rules and CPU costs, and any configuration where a different engine ranks
    first gets its own sentence. Fails if the engine knob does not reach the config."""
    options = WhatifOptions(
        profile_path="rag", slo=parse_slo("ttft:p95<=3s"), gpus=("H100-80GB", "A100-80GB"),
        vary=parse_vary("engine=trtllm:vllm"), level_s=LEVEL_S,
    )  # fmt: skip
    result = run_whatif(preset_profile("rag"), options)
    assert {c.settings["engine"] for c in result.candidates} == {"trtllm", "vllm"}
    (engine,) = [lesson for lesson in result.lessons if lesson.knob == "engine"]
    assert "reserves prompt + output KV" in engine.figure and "pages its KV" in engine.figure
    limits = {(c.gpu, c.settings["engine"]): c.limit_rps for c in result.candidates}
    assert all(limits.values())
    ranking = [lesson for lesson in result.lessons if lesson.knob == "engine ranking"]
    winners = {}  # where one engine leads the other by more than the ranking margin
    for gpu in ("H100-80GB", "A100-80GB"):
        high, low = sorted((limits[(gpu, e)] or 0.0, e) for e in ("trtllm", "vllm"))[::-1]
        if high[0] > (1.0 + RANKING_MARGIN) * low[0]:
            winners[gpu] = high[1]
    if len(set(winners.values())) > 1:
        assert len(ranking) == 2, limits
        assert all(lesson.sentence.startswith("on ") for lesson in ranking)
    else:
        assert ranking == [], limits


def test_the_engine_lesson_says_sglang_holds_kv_back_for_running_requests() -> None:
    """SGLang's admission reserve is named in the engine lesson, in both languages; vLLM's
    side of the same lesson does not claim it."""
    options = WhatifOptions(
        profile_path="chat", slo=parse_slo("ttft:p95<=2s"), gpus=("H100-80GB",),
        vary=parse_vary("engine=vllm:sglang"), level_s=LEVEL_S,
    )  # fmt: skip
    result = run_whatif(preset_profile("chat"), options)
    (engine,) = [lesson for lesson in result.lessons if lesson.knob == "engine"]
    assert engine.figure.count("admits a request only while its prompt and output fit") == 1
    assert "sglang@0.4 admits a request only while" in engine.figure
    zh = lesson_figure(Words("zh"), engine)
    assert zh.count("仅当请求的提示与输出装得下") == 1
