"""Pipeline parallelism in the roofline: each stage holds its layers' weights and KV, a step's
batch runs as one microbatch per stage (fewer when fewer requests run: the bubble), and each
microbatch's hidden states cross pp - 1 stage boundaries. Hand-computed cases from the data
sheet (H100 SXM: 3350 GB/s, 1978.9 TFLOP/s fp8; NVLink bus bandwidth 360 GB/s, 1.5 us)."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from planner.engine import build_engine_config, gpu_catalog, model_catalog
from planner.engine.roofline import Roofline
from planner.engine.specs import EngineConfig, kv_bytes_per_token, weight_bytes

PARAMS = 70_553_706_496  # Llama-3.1-70B
OVERHEAD_S = 0.001 + 40e-6  # step overhead + one request's CPU time (EngineConfig defaults)


def _config(pp: int, tp: int = 1) -> EngineConfig:
    return EngineConfig(
        gpu=gpu_catalog()["H100-80GB"], model=model_catalog()["llama-3.1-70b"], tp=tp, pp=pp,
        quantization="fp8", max_model_len=8192,
    )  # fmt: skip


def _send_s(tokens: float) -> float:
    """One stage-to-stage send of `tokens` hidden states (8192 x 2 bytes each)."""
    return 1.5e-6 + tokens * 8192 * 2 / 360e9


def test_each_stage_holds_its_share_of_weights_and_kv() -> None:
    config = _config(pp=2)
    assert weight_bytes(config) == PARAMS // 2  # fp8: one byte per weight, half on each GPU
    assert kv_bytes_per_token(config) == 2 * 40 * 8 * 128 * 2  # 40 of the 80 layers


def test_a_lone_decode_waits_for_every_stage_and_one_send() -> None:
    # one sequence: one microbatch crosses both stages, each reading its half of the weights
    step = Roofline(_config(pp=2)).step_time_s(1, 0.0, 0, seqs=1)
    expected = PARAMS / (3350e9 * 0.8) + _send_s(1) + OVERHEAD_S
    assert step == pytest.approx(expected, rel=1e-9)


def test_a_full_pipeline_splits_a_compute_bound_batch_over_its_stages() -> None:
    # 8192 prompt tokens of 4 requests: 2 microbatches of 4096, each 2 x params FLOPs per token
    step = Roofline(_config(pp=2)).step_time_s(8192, 0.0, 0, seqs=4)
    linear = 4096 * 2 * PARAMS / (1978.9e12 * 0.5)
    expected = linear + _send_s(4096) + 0.001 + 4 * 40e-6
    assert step == pytest.approx(expected, rel=1e-9)
    single = Roofline(_config(pp=1)).step_time_s(8192, 0.0, 0, seqs=4)
    assert step < 0.55 * single  # twice the GPUs: about half the time per step


def test_pipeline_stages_must_not_outnumber_layers() -> None:
    with pytest.raises(ConfigError, match="pp=40 stages for 32 layers"):
        build_engine_config("H100-80GB", "llama-3.1-8b", pp=40)


def test_pp_makes_room_where_one_gpu_is_short() -> None:
    # bf16: 141.1 GB of weights; two stages hold 70.6 GB each
    with pytest.raises(ConfigError, match="tp=1, pp=1.*GB short"):
        build_engine_config("H100-80GB", "llama-3.1-70b")
    assert build_engine_config("H100-80GB", "llama-3.1-70b", pp=2)
