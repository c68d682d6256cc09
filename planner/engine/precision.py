"""Precision as deployed: the weight formats an engine serves (vLLM's `--quantization`) and the
KV cache's (`--kv-cache-dtype`), with what each costs in bytes and which tensor-core rate its
matrix multiplies run at on a given GPU.

`QUANTIZATIONS` is the registry, by vLLM's spelling:

- `none`: the checkpoint's own dtype (`EngineConfig.dtype_bytes`, 2 for bf16/fp16), computed
  at the bf16 rate;
- `fp8`: 1-byte weights (per-tensor or per-channel scales, negligible), computed at the
  board's FP8 tensor-core peak; a board without FP8 tensor cores (A100, A10) runs them
  weight-only at the bf16 rate, as vLLM does (Marlin FP8);
- `awq`, `gptq`: 4-bit integer weights with one fp16 scale and one 4-bit zero point per group
  of 128 weights (0.5 + 2/128 + 0.5/128 bytes per weight), dequantised to bf16 inside the
  GEMM (Marlin): bf16 rate on every board;
- `nvfp4`: 4-bit floats with one FP8 scale per 16 weights (0.5 + 1/16 bytes), FP4 tensor
  cores only (Blackwell): refused elsewhere;
- `mxfp4`: 4-bit floats with one 8-bit power-of-two scale per 32 weights (0.5 + 1/32 bytes),
  FP4 tensor cores where the board has them; elsewhere weight-only at the bf16 rate, as vLLM
  serves gpt-oss on Hopper and Ampere (Marlin/Triton MXFP4).

All of a model's parameters are taken at the format's bytes (engines keep the embedding and
the LM head in bf16: a 1-6 % under-count of the weight bytes for the models in the catalog).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from contracts.errors import ConfigError

ComputeFormat = Literal["bf16", "fp8", "fp4"]
KvCacheDtype = Literal["auto", "fp8"]
KV_CACHE_DTYPES: tuple[KvCacheDtype, ...] = ("auto", "fp8")


@dataclass(frozen=True, kw_only=True)
class Quantization:
    """One weight format: bytes per weight (scales included), the tensor-core format its
    matrix multiplies use where the board has it, and whether it runs weight-only (at the
    bf16 rate) on a board without that format."""

    name: str
    bytes_per_weight: float | None  # None: the checkpoint's dtype_bytes
    compute: ComputeFormat
    weight_only_fallback: bool
    description: str


QUANTIZATIONS: dict[str, Quantization] = {
    q.name: q
    for q in (
        Quantization(name="none", bytes_per_weight=None, compute="bf16",
                     weight_only_fallback=True, description="the checkpoint's dtype (bf16)"),
        Quantization(name="fp8", bytes_per_weight=1.0, compute="fp8", weight_only_fallback=True,
                     description="FP8 weights; weight-only at the bf16 rate without FP8 cores"),
        Quantization(name="awq", bytes_per_weight=0.5 + 2 / 128 + 0.5 / 128, compute="bf16",
                     weight_only_fallback=True, description="int4 weight-only, group 128"),
        Quantization(name="gptq", bytes_per_weight=0.5 + 2 / 128 + 0.5 / 128, compute="bf16",
                     weight_only_fallback=True, description="int4 weight-only, group 128"),
        Quantization(name="nvfp4", bytes_per_weight=0.5 + 1 / 16, compute="fp4",
                     weight_only_fallback=False, description="FP4, FP4 tensor cores only"),
        Quantization(name="mxfp4", bytes_per_weight=0.5 + 1 / 32, compute="fp4",
                     weight_only_fallback=True,
                     description="MXFP4; weight-only at the bf16 rate without FP4 cores"),
    )
}  # fmt: skip
QUANTIZATION_NAMES = tuple(QUANTIZATIONS)


def quantization(name: str) -> Quantization:
    """The registered format called `name` (vLLM's spelling), or ConfigError listing them."""
    found = QUANTIZATIONS.get(name.strip().lower())
    if found is None:
        raise ConfigError(
            f"--quantization: unknown {name!r}; known: {', '.join(QUANTIZATION_NAMES)}"
        )
    return found


def kv_cache_overrides(kv_cache_dtype: str) -> dict[str, int | None]:
    """EngineConfig fields of vLLM's `--kv-cache-dtype`: auto (the model's dtype) or fp8 (one
    byte per element). Raises ConfigError for another value."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ConfigError(
            f"--kv-cache-dtype: unknown {kv_cache_dtype!r}; known: {', '.join(KV_CACHE_DTYPES)}"
        )
    return {"kv_dtype_bytes": 1 if kv_cache_dtype == "fp8" else None}


def precision_overrides(quantization_name: str, kv_cache_dtype: str) -> dict[str, Any]:
    """build_engine_config overrides of `--quantization` and `--kv-cache-dtype` (validated)."""
    return {
        "quantization": quantization(quantization_name).name,
        **kv_cache_overrides(kv_cache_dtype),
    }


def peak_flops(
    *, bf16_flops: float, fp8_flops: float | None, fp4_flops: float | None, fmt: Quantization
) -> float | None:
    """The dense tensor-core peak `fmt`'s matrix multiplies run at on a board with these
    peaks: its own format's, else bf16 where it falls back to weight-only; None where the
    board cannot run it at all (nvfp4 without FP4 tensor cores)."""
    own = {"bf16": bf16_flops, "fp8": fp8_flops, "fp4": fp4_flops}[fmt.compute]
    if own is not None:
        return own
    return bf16_flops if fmt.weight_only_fallback else None
