"""Engine profiles and the physics they bring: KV reservation and sizing, the front-end
queue, prefill-first and multi-step scheduling, FP8 compute, tensor-parallel links."""

from __future__ import annotations

import re
from typing import Any

import pytest

from contracts.errors import ConfigError
from planner.engine import (
    Engine,
    EngineConfig,
    EngineRequest,
    build_engine_config,
    engine_profile,
    kv_capacity_tokens,
    simulate,
    weight_bytes,
)
from testkit.engine_configs import NO_FRONT_END


def _cfg(gpu: str = "H100-80GB", engine: str = "vllm", **kw: Any) -> EngineConfig:
    return build_engine_config(gpu, kw.pop("model", "llama-3.1-8b"), engine=engine, **kw)


def _reqs(n: int, prompt: int, out: int, gap_s: float = 0.0) -> list[EngineRequest]:
    return [EngineRequest(f"r{i}", prompt, out, i * gap_s) for i in range(n)]


def test_engine_names_resolve_and_unknown_ones_list_the_known() -> None:
    assert engine_profile("TensorRT-LLM").name == engine_profile("trtllm").name
    assert engine_profile("vllm@0.6").prefill_first
    assert not engine_profile("vllm").prefill_first
    with pytest.raises(ConfigError, match="known engines: vllm, trtllm"):
        engine_profile("deepspeed")


def test_every_profile_builds_and_names_its_sources() -> None:
    from planner.engine import ENGINE_PROFILES

    for name, profile in ENGINE_PROFILES.items():
        assert profile.sources, name
        gpu = "H100-80GB"
        config = _cfg(gpu, name, max_model_len=4096)
        assert config.engine == name
        assert f"engine {name}" in config.calibration_source


def test_request_reservation_never_preempts_where_paged_does() -> None:
    """Long answers on a small KV cache: vLLM's paged blocks run out mid-generation and
    preempt; TensorRT-LLM's prompt + output reservation admits fewer and never preempts.
    Fails if reservation is not enforced at admission (both would preempt)."""
    reqs = _reqs(40, 1500, 1500)
    gauges = {}
    for engine in ("vllm", "trtllm"):
        config = _cfg("A10-24GB", engine, max_model_len=4096, **NO_FRONT_END)
        eng = Engine(config, token_events=False)
        for r in reqs:
            eng.add_request(r, 0.0)
        now = 0.0
        while eng.has_work():
            now = eng.step(now).end_s
        gauges[engine] = eng.gauges()
    assert gauges["vllm"].num_preemptions > 0
    assert gauges["trtllm"].num_preemptions == 0
    assert gauges["trtllm"].finished == gauges["vllm"].finished == 40


def test_tensorrt_llm_sizes_kv_from_the_memory_left_after_weights() -> None:
    """80 GiB board, 16 GB of weights, 2 GiB reserve: vLLM keeps 0.9 of the board minus
    weights; TensorRT-LLM 0.9 of what is left (more KV on the same board)."""
    vllm = _cfg(engine="vllm", gpu_memory_utilization=0.9)
    trt = _cfg(engine="trtllm")
    board = vllm.gpu.memory_bytes
    left = board - weight_bytes(vllm) - vllm.activation_reserve_bytes
    assert kv_capacity_tokens(vllm) == pytest.approx((left - 0.1 * board) / 131072, rel=1e-3)
    assert kv_capacity_tokens(trt) == pytest.approx(0.9 * left / 131072, rel=1e-3)
    assert kv_capacity_tokens(trt) > kv_capacity_tokens(vllm)


def test_front_end_queues_tokenisation_and_delays_every_request() -> None:
    """Ten 100-token prompts at once: tokenising at 100 us a token (10 ms a prompt) is one
    queue, so the k-th leaves it after k x 10 ms, then pays the 5 ms delay every request
    pays in parallel. Fails if tokenisation does not queue, or if the delay does."""
    config = _cfg(frontend_s=0.005, frontend_s_per_prompt_token=1e-4)
    tls = simulate(_reqs(10, 100, 4), config)
    for k, tl in enumerate(tls, 1):
        assert tl.frontend_s == pytest.approx(k * 0.010 + 0.005)
        assert tl.ttft_s is not None and tl.ttft_s > tl.frontend_s
    delay = _cfg(frontend_s=0.005, frontend_s_per_prompt_token=0)
    assert {round(tl.frontend_s, 9) for tl in simulate(_reqs(10, 100, 4), delay)} == {0.005}
    alone = simulate(_reqs(1, 100, 4), _cfg(**NO_FRONT_END))[0].ttft_s
    delayed = simulate(_reqs(1, 100, 4), delay)[0].ttft_s
    assert alone is not None and delayed == pytest.approx(alone + 0.005, rel=1e-6)


def test_round_hand_over_releases_a_burst_together_and_a_trickle_one_by_one() -> None:
    """An API server that works requests in event-loop rounds (vLLM 0.6): ten requests at
    once are worked one after another (10 ms each) and handed over together at 100 ms;
    with hand-over `each` the k-th leaves at k x 10 ms. Requests 50 ms apart leave after
    their own 10 ms in both. A request arriving while a round is worked waits for the next
    round, which takes everyone waiting when it starts. Fails if a round hands over before
    its end, or if `each` waits for the burst."""
    front = {
        "frontend_s": 0.005,
        "frontend_s_per_prompt_token": 0.0,
        "frontend_s_per_request": 0.01,
    }
    rounds = _cfg(engine="vllm@0.6", **front)
    assert rounds.frontend_handover == "round"
    each = rounds.model_copy(update={"frontend_handover": "each"})
    burst = _reqs(10, 100, 4)
    assert [round(t.frontend_s, 9) for t in simulate(burst, rounds)] == [0.105] * 10
    assert [round(t.frontend_s, 9) for t in simulate(burst, each)] == [
        round(k * 0.01 + 0.005, 9) for k in range(1, 11)
    ]
    for config in (rounds, each):
        trickle = simulate(_reqs(5, 100, 4, gap_s=0.05), config)
        assert [round(t.frontend_s, 9) for t in trickle] == [0.015] * 5
    # r0 starts a round alone (0-10 ms); r1 (1 ms) and r2 (2 ms) wait for the next round,
    # which starts at 10 ms and ends at 30 ms.
    late = [EngineRequest(f"r{i}", 100, 4, i * 0.001) for i in range(3)]
    got = [round(t.frontend_s, 9) for t in simulate(late, rounds)]
    assert got == [0.015, round(0.035 - 0.001, 9), round(0.035 - 0.002, 9)]


def test_prefill_first_stops_decodes_for_a_new_prompt() -> None:
    """vLLM 0.6 (no chunked prefill) and SGLang (its scheduler's 'Run prefill first if
    possible', mixed chunks off by default) run a newcomer's prefill in a step of its own;
    vLLM V1 and TensorRT-LLM mix it into the running decodes."""
    cases = (("vllm@0.6", 0), ("sglang", 0), ("vllm", 4), ("trtllm", 4))
    for engine, decodes_in_prefill_step in cases:
        eng = Engine(_cfg(engine=engine, **NO_FRONT_END), token_events=False)
        for r in _reqs(4, 64, 50):
            eng.add_request(r, 0.0)
        now = 0.0
        for _ in range(5):
            now = eng.step(now).end_s
        eng.add_request(EngineRequest("new", 2000, 5, now), now)
        res = eng.step(now)
        assert res.prefill_tokens > 0
        assert res.decode_tokens == decodes_in_prefill_step, engine


def test_vllm_v0_token_budget_follows_the_context_length_without_chunked_prefill() -> None:
    # vLLM 0.5/0.6 without chunked prefill: max(max_model_len, 2048) tokens a step.
    assert _cfg(engine="vllm@0.6", max_model_len=2048).max_num_batched_tokens == 2048
    assert _cfg(engine="vllm@0.6", max_model_len=1024).max_num_batched_tokens == 2048
    assert _cfg(engine="vllm@0.5", max_model_len=4096).max_num_batched_tokens == 4096
    # Past 32K tokens vLLM chunks prefills by itself; the profile keeps a fixed budget.
    assert _cfg(engine="vllm@0.6").max_num_batched_tokens == 8192
    # An explicit budget wins; V1 and the other engines keep their fixed one.
    assert (
        _cfg(
            engine="vllm@0.6", max_model_len=2048, max_num_batched_tokens=512
        ).max_num_batched_tokens
        == 512
    )
    assert _cfg(engine="vllm", max_model_len=2048).max_num_batched_tokens == 8192


def test_vllm_v0_schedules_a_prompt_whole_or_waits() -> None:
    """vLLM 0.6 without chunked prefill (vllm/core/scheduler.py `_schedule_prefills`): prompts
    of 1,500, 1,500 and 400 tokens arrive together under a 2,048-token budget. The first takes
    1,500; the second needs 1,500 where 548 are left, so admission stops there (V0 does not
    look past it to the third); the next step takes the second and the third, 1,900. Past 32K
    tokens of context vLLM chunks prefills by itself and the profile keeps 8,192 tokens a
    step: all three in one. A chunking engine under the same 2,048 cuts the second."""
    reqs = [EngineRequest("a", 1500, 3, 0.0), EngineRequest("b", 1500, 3, 0.0)]
    reqs.append(EngineRequest("c", 400, 3, 0.0))
    for max_model_len, steps in ((2048, [1500, 1900]), (65536, [3400])):
        cfg = _cfg(engine="vllm@0.6", max_model_len=max_model_len, **NO_FRONT_END)
        assert cfg.whole_prompts == (max_model_len == 2048)
        eng = Engine(cfg, token_events=False)
        for r in reqs:
            eng.add_request(r, 0.0)
        now, prefills = 0.0, []
        while sum(prefills) < 3400:
            res = eng.step(now)
            now = res.end_s
            if res.prefill_tokens:
                prefills.append(res.prefill_tokens)
        assert prefills == steps, (max_model_len, prefills)
    # vLLM 0.5 with chunked prefill turned on mixes and cuts prompts like V1.
    assert not _cfg(engine="vllm@0.5", max_model_len=2048, prefill_first=False).whole_prompts
    v1 = Engine(_cfg(engine="vllm", max_num_batched_tokens=2048, **NO_FRONT_END))
    for r in reqs:
        v1.add_request(r, 0.0)
    assert v1.step(0.0).prefill_tokens == 2048


def test_a_2048_token_budget_splits_a_burst_of_prompts_into_prefill_steps() -> None:
    # 8 prompts of 1000 tokens: one prefill step under an 8192 budget, four under 2048,
    # so the last first token comes later and the first one sooner.
    reqs = _reqs(8, 1000, 4)
    wide = simulate(reqs, _cfg(engine="vllm@0.6", max_num_batched_tokens=8192, **NO_FRONT_END))
    v0 = simulate(reqs, _cfg(engine="vllm@0.6", max_model_len=2048, **NO_FRONT_END))
    assert len({t.first_token_s for t in wide}) == 1
    assert len({t.first_token_s for t in v0}) == 4
    assert min(t.first_token_s for t in v0) < wide[0].first_token_s  # type: ignore[operator]


def test_multi_step_finishes_at_the_end_of_its_group() -> None:
    """With 10 scheduler steps per group, a request of 3 tokens ends with its group (its
    extra steps are computed and thrown away); one step per group ends it after 3."""
    out = {}
    for steps in (1, 10):
        config = _cfg(engine="vllm@0.6", scheduler_steps=steps, **NO_FRONT_END)
        eng = Engine(config, token_events=False)
        eng.add_request(EngineRequest("long", 64, 40, 0.0), 0.0)
        eng.add_request(EngineRequest("short", 64, 3, 0.0), 0.0)
        now, n = 0.0, 0
        while eng.has_work():
            now = eng.step(now).end_s
            n += 1
            if eng.timeline("short").finished_s is not None and "short" not in out:
                out[steps] = n
                break
        assert eng.timeline("short").output_tokens == 3
    assert out[1] == 3  # prefill (first token) + 2 decode steps
    assert out[10] == 11  # prefill + a group of 10 decode steps


def test_fp8_weights_use_the_fp8_rate_where_the_board_has_one() -> None:
    """A prefill of 8k tokens is compute-bound: FP8 on an H100 halves its linear part
    (scaled by the fitted FP8 efficiency); an A100 has no FP8 tensor cores."""
    for gpu, fp8_rate in (("H100-80GB", True), ("A100-80GB", False)):
        bf16 = Engine(_cfg(gpu, dtype_bytes=2, **NO_FRONT_END))
        fp8 = Engine(_cfg(gpu, dtype_bytes=1, **NO_FRONT_END))
        n = 8192
        ratio = fp8.step_time_s(n, 0.0, n) / bf16.step_time_s(n, 0.0, n)
        eff = fp8.config.fp8_efficiency
        if fp8_rate:
            assert ratio == pytest.approx(1 / (2 * eff), rel=0.05)
        else:
            assert ratio == pytest.approx(1 / eff, rel=0.05)


def test_tensor_parallel_pays_an_all_reduce_that_grows_with_the_gpu_count() -> None:
    """The all-reduces of a 70B decode step (160 per step): their fixed part grows with the
    GPU count (NCCL's LL ring: 3.6 us + 2 (tp - 1) hops of 0.47 us on NVLink, 1 us on PCIe),
    and a PCIe board (L40S) pays more than an NVLink one. Fails if the communication term
    stops depending on tp or on the board's link."""

    def comm_s(gpu: str, tp: int, tokens: int) -> float:
        kw = dict(model="llama-3.1-70b", tp=tp, dtype_bytes=1, **NO_FRONT_END)
        linked = Engine(_cfg(gpu, **kw)).step_time_s(tokens, 1024.0 * tokens, 1024 * tokens)
        free = Engine(
            _cfg(gpu, tp_link_bandwidth_bytes_per_s=1e30, tp_allreduce_latency_s=0.0, **kw)
        ).step_time_s(tokens, 1024.0 * tokens, 1024 * tokens)
        return linked - free

    for gpu in ("H100-80GB", "L40S-48GB"):
        fixed = [comm_s(gpu, tp, 1) for tp in (2, 4, 8)]
        assert fixed[0] < fixed[1] < fixed[2]
    # One token's 16 KB is next to nothing on NVLink: 14 hops against 2, after NCCL's base.
    nvlink = comm_s("H100-80GB", 8, 1) / comm_s("H100-80GB", 2, 1)
    assert nvlink == pytest.approx((3.6 + 14 * 0.47) / (3.6 + 2 * 0.47), rel=0.05)
    assert comm_s("L40S-48GB", 4, 256) > comm_s("H100-80GB", 4, 256)


@pytest.mark.parametrize(
    ("gpu", "kw", "context"),
    [
        ("A100-80GB", {}, 131072),  # 437,792 tokens / 131,072 x 512 = 1,710: the floor, 2048
        ("H100-80GB", {"max_model_len": 65536}, 65536),  # 435,248 / 65,536 x 512 = 3,400
        ("H100-80GB", {"max_model_len": 4096}, 4096),  # far above: the ceiling, 4096
        ("L4-24GB", {"gpu_memory_utilization": 0.77}, 131072),  # 2,960 tokens: KV // 2
    ],
)
def test_sglang_runs_as_many_requests_as_its_own_rule_allows(
    gpu: str, kw: dict[str, Any], context: int
) -> None:
    """SGLang without --max-running-requests runs min(KV tokens // 2, int(KV tokens /
    context_len x 512) clamped to [2048, 4096]) requests at once (its model_runner.py and
    scheduler.py), not a fixed 1024."""
    c = _cfg(gpu, "sglang", **kw)
    kv = kv_capacity_tokens(c)
    written_out = min(min(max(int(kv / context * 512), 2048), 4096), kv // 2)
    assert c.max_num_seqs == written_out
    assert _cfg(gpu, "sglang", max_num_seqs=64, **kw).max_num_seqs == 64  # the user's wins
    assert _cfg(gpu, "trtllm", **kw).max_num_seqs == 2048  # other engines keep their number


@pytest.mark.parametrize(
    ("gpu", "tp", "share", "chunk"),
    [
        # SGLang's server_args.py: mem_fraction_static = (MiB - reserved) / MiB, reserved
        # (2.8 + tp / 10) GiB below 35 GiB, (9.5 + tp / 2) below 90, (12 + tp / 2) below 160,
        # else 32 GiB; chunked_prefill_size 2048 below 35 GiB, 8192 below 160, else 16384.
        ("H100-80GB", 1, (81559 - 10 * 1024) / 81559, 8192),
        ("H100-80GB", 4, (81559 - 11.5 * 1024) / 81559, 8192),
        ("L40S-48GB", 1, (46068 - 10 * 1024) / 46068, 8192),
        ("H200-141GB", 1, (143771 - 12.5 * 1024) / 143771, 8192),
        ("B200-180GB", 1, (183359 - 32 * 1024) / 183359, 16384),
        ("L4-24GB", 1, (23034 - 2.9 * 1024) / 23034, 2048),
    ],
)
def test_sglang_sizes_its_memory_share_and_chunk_by_the_board(
    gpu: str, tp: int, share: float, chunk: int
) -> None:
    model = "llama-3.1-70b" if tp > 1 else "llama-3.1-8b"
    c = _cfg(gpu, "sglang", model=model, tp=tp)
    assert c.gpu_memory_utilization == pytest.approx(share, abs=5e-4)
    assert c.max_num_batched_tokens == chunk
    # The share holds weights and KV cache; the rest is SGLang's reserve, not taken twice.
    assert c.activation_reserve_bytes == 0
    mine = _cfg(gpu, "sglang", model=model, tp=tp, gpu_memory_utilization=0.8)
    assert mine.gpu_memory_utilization == 0.8
    assert _cfg(gpu, "vllm", model=model, tp=tp).activation_reserve_bytes > 0


@pytest.mark.parametrize(
    ("gpu", "seqs", "tokens"),
    [
        # `vllm serve` (vllm/engine/arg_utils.py get_batch_defaults): boards with at least
        # 70 GiB that are not A100s get 1024 and 8192; the rest 256 and 2048.
        ("H100-80GB", 1024, 8192),
        ("H200-141GB", 1024, 8192),
        ("H100-PCIe-80GB", 1024, 8192),
        ("H20-96GB", 1024, 8192),
        ("B200-180GB", 1024, 8192),
        ("MI300X-192GB", 1024, 8192),
        ("A100-80GB", 256, 2048),
        ("A100-PCIe-80GB", 256, 2048),
        ("L40S-48GB", 256, 2048),
        ("L4-24GB", 256, 2048),
        ("A10-24GB", 256, 2048),
    ],
)
def test_vllm_takes_the_scheduler_limits_vllm_serve_gives_the_board(
    gpu: str, seqs: int, tokens: int
) -> None:
    c = _cfg(gpu, "vllm", max_model_len=4096)
    assert (c.max_num_seqs, c.max_num_batched_tokens) == (seqs, tokens)
    # The user's limits win; a default running cap stays within the user's budget, as
    # vLLM's own min(max_num_seqs, max_num_batched_tokens).
    mine = _cfg(gpu, "vllm", max_model_len=4096, max_num_seqs=64, max_num_batched_tokens=4096)
    assert (mine.max_num_seqs, mine.max_num_batched_tokens) == (64, 4096)
    assert _cfg(gpu, "vllm", max_model_len=4096, max_num_batched_tokens=512).max_num_seqs == min(
        seqs, 512
    )
    # vLLM 0.6 (V0) has one default whatever the board.
    assert _cfg(gpu, "vllm@0.6", max_model_len=4096).max_num_seqs == 256


def test_sglang_on_a_board_smaller_than_its_reserve_asks_for_a_share(tmp_path: Any) -> None:
    """SGLang's rule reserves 2.9 GiB on a small board: on a 2 GiB one its default share
    would be negative; the error says so and how to give one, and a given share is used."""
    catalog = tmp_path / "tiny.yaml"
    catalog.write_text(
        "gpus:\n  Tiny-2GB:\n    memory_bytes: 2147483648\n"
        "    hbm_bandwidth_bytes_per_s: 1.0e11\n    bf16_flops: 1.0e13\nmodels: {}\n"
    )
    with pytest.raises(ConfigError, match=r"reserve of 2\.9 GiB on 2\.0 GiB; give a share"):
        build_engine_config("Tiny-2GB", "llama-3.2-3b", catalog=catalog, engine="sglang")
    # Past the share: the model's size, with no activation reserve (SGLang keeps it outside).
    with pytest.raises(ConfigError, match=r"pp=1: weights need 6\.4 GB per GPU, 1\.9 GB usable"):
        build_engine_config(
            "Tiny-2GB", "llama-3.2-3b", catalog=catalog, engine="sglang", gpu_memory_utilization=0.9
        )
    # TensorRT-LLM sizes KV from what is left of the whole board: all of it is usable.
    with pytest.raises(ConfigError, match=r"weights \+ activation reserve need .* 2\.1 GB usable"):
        build_engine_config("Tiny-2GB", "llama-3.2-3b", catalog=catalog, engine="trtllm")


@pytest.mark.parametrize(
    ("engine", "gpu", "kw", "message"),
    [
        ("trtllm", "MI300X-192GB", {}, "runs on NVIDIA GPUs only, and MI300X-192GB is AMD's"),
        ("vllm@0.6", "H100-80GB", {"quantization": "mxfp4"}, "serves none, fp8, awq, gptq"),
        ("vllm@0.5", "B200-180GB", {"quantization": "nvfp4"}, "serves none, fp8, awq, gptq"),
        ("tgi", "B200-180GB", {"quantization": "nvfp4"}, "serves none, fp8, awq, gptq"),
        ("llamacpp", "H100-80GB", {"quantization": "fp8"}, "serves none, mxfp4"),
        ("llamacpp", "H100-80GB", {"kv_dtype_bytes": 1}, "keeps its KV cache as auto"),
        # TensorRT-LLM's FP8 needs FP8 tensor cores (its support matrix: Ampere has none);
        # a bug hunt got A100 limits, one on the Pareto front
        ("trtllm", "A100-80GB", {"quantization": "fp8"}, "runs FP8 (weights) on FP8 tensor"),
        ("trtllm", "A100-80GB", {"kv_dtype_bytes": 1}, "runs FP8 (KV cache) on FP8 tensor"),
    ],
)
def test_an_engine_refuses_a_board_or_format_it_does_not_serve(
    engine: str, gpu: str, kw: dict[str, Any], message: str
) -> None:
    """A bug hunt got limits for TensorRT-LLM on an MI300X, llama.cpp serving fp8 and vLLM 0.6
    serving mxfp4; each engine names what it runs on and serves (runtimes.py's sources)."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_engine_config(gpu, "llama-3.1-8b", engine=engine, **kw)
    # the same boards and formats under an engine that serves them
    build_engine_config(gpu, "llama-3.1-8b", engine="sglang", **kw)
