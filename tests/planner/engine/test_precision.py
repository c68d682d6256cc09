"""Precision as deployed: weight and KV bytes, the tensor-core rate each format runs at, and
the refusals (a format the GPU cannot run, a model that does not fit), against figures worked
out by hand from the data sheets and the formats' definitions."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from planner.engine import build_engine_config, gpu_catalog, model_catalog
from planner.engine.precision import precision_overrides
from planner.engine.roofline import Roofline
from planner.engine.specs import EngineConfig, kv_bytes_per_token, weight_bytes

LLAMA_70B_PARAMS = 70_553_706_496  # meta-llama/Llama-3.1-70B safetensors total


def _bare(gpu: str, model: str, **fields: object) -> EngineConfig:
    """The catalog's specs with EngineConfig's own defaults: mfu 0.5, mbu 0.8, no fitted
    factors (so the hand figures below need nothing but the data sheet)."""
    return EngineConfig(gpu=gpu_catalog()[gpu], model=model_catalog()[model], **fields)


@pytest.mark.parametrize(
    ("quantization", "expected_bytes"),
    [
        ("none", 2 * LLAMA_70B_PARAMS),  # bf16
        ("fp8", LLAMA_70B_PARAMS),
        # int4 + one fp16 scale and one 4-bit zero per 128 weights: 0.51953125 = 133/256 bytes each
        ("awq", 36_654_855_328),
        ("gptq", 36_654_855_328),
        # 4 bits + one fp8 scale per 16 weights: 0.5625 bytes
        ("nvfp4", 39_686_459_904),
    ],
)
def test_weight_bytes_follow_the_format(quantization: str, expected_bytes: int) -> None:
    config = _bare("B200-180GB", "llama-3.1-70b", quantization=quantization)
    assert weight_bytes(config) == expected_bytes


def test_fp8_kv_cache_halves_the_bytes_per_token() -> None:
    # Llama-3.1-8B: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131072
    auto = _bare("H100-80GB", "llama-3.1-8b", **precision_overrides("fp8", "auto"))
    fp8 = _bare("H100-80GB", "llama-3.1-8b", **precision_overrides("fp8", "fp8"))
    assert kv_bytes_per_token(auto) == 131_072  # fp8 weights keep a bf16 KV cache (auto)
    assert kv_bytes_per_token(fp8) == 65_536


def _linear_s_per_token(config: EngineConfig) -> float:
    """Seconds per token of a compute-bound prefill: the step of 8192 prompt tokens without
    attention, less its fixed overhead, over 8192."""
    roofline = Roofline(config)
    step = roofline.step_time_s(8192, 0.0, 0, seqs=0)
    return (step - config.step_overhead_s) / 8192


@pytest.mark.parametrize(
    ("gpu", "quantization", "peak_flops"),
    [
        ("H100-80GB", "none", 989.4e12),  # bf16
        ("H100-80GB", "fp8", 1978.9e12),  # FP8 tensor cores
        ("A100-80GB", "fp8", 312.0e12),  # no FP8 cores: Marlin weight-only at bf16
        ("H100-80GB", "awq", 989.4e12),  # int4 dequantised into a bf16 GEMM
        ("H100-80GB", "mxfp4", 989.4e12),  # no FP4 cores: weight-only at bf16
        ("B200-180GB", "nvfp4", 9000.0e12),  # FP4 tensor cores
        ("B200-180GB", "fp8", 4500.0e12),
    ],
)
def test_the_compute_rate_is_the_formats_tensor_core_peak(
    gpu: str, quantization: str, peak_flops: float
) -> None:
    config = _bare(gpu, "llama-3.1-8b", quantization=quantization, max_model_len=8192)
    expected = 2 * 8_030_261_248 / (peak_flops * 0.5)  # 2 FLOPs per parameter, mfu 0.5
    assert _linear_s_per_token(config) == pytest.approx(expected, rel=1e-9)


def test_nvfp4_on_a_gpu_without_fp4_tensor_cores_is_refused_naming_those_that_have_them() -> None:
    with pytest.raises(ConfigError, match=r"nvfp4 on H100-80GB: needs FP4 tensor cores: B200"):
        build_engine_config("H100-80GB", "llama-3.1-8b", quantization="nvfp4")
    assert build_engine_config("B200-180GB", "llama-3.1-8b", quantization="nvfp4")


def test_a_model_that_does_not_fit_says_how_many_gb_short() -> None:
    # 70B at bf16 on one H200: 141.1 GB weights + 2.1 GB reserve against 0.9 x 150.75 GB
    with pytest.raises(ConfigError, match=r"quantization=none, tp=1, pp=1.* 7\.6 GB short"):
        build_engine_config("H200-141GB", "llama-3.1-70b")
    fits = build_engine_config("H200-141GB", "llama-3.1-70b", quantization="fp8")
    assert weight_bytes(fits) == LLAMA_70B_PARAMS


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known: none, fp8, awq, gptq, nvfp4, mxfp4"):
        precision_overrides("int3", "auto")
    with pytest.raises(ConfigError, match="known: auto, fp8"):
        precision_overrides("none", "fp4")
