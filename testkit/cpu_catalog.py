"""An engine catalog for llama.cpp on this CPU: nominal `this-cpu` figures and `tiny-llama`.

`capplan calibrate --catalog` needs a GPU and a model entry for a server that no built-in
catalog names. The CPU's figures here are nominal upper bounds, not measurements (50 GFLOP/s
for the matrix multiplies and for attention, 50 GB/s): the calibration fits the share of
them this server reaches (mfu, mbu, and its own attention rate). Memory is sized so that
the KV cache the server allocates (n_ctx tokens) fits beside the weights and the engine
model's default activation reserve.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from testkit.real_engine import LlamaShape

NOMINAL_FLOPS = 50e9
NOMINAL_BANDWIDTH_BYTES_PER_S = 50e9
ACTIVATION_RESERVE_BYTES = 2 * 1024**3  # planner.engine.specs.DEFAULT_ACTIVATION_RESERVE_BYTES


def model_params(shape: LlamaShape) -> int:
    """Parameters of the GGUF that build_random_llama writes (embeddings and head included)."""
    h, f, v = shape.hidden, shape.ffn, shape.vocab
    kv = shape.kv_heads * (h // shape.heads)
    per_layer = 2 * h * h + 2 * kv * h + 3 * f * h + 2 * h
    return 2 * v * h + shape.layers * per_layer + h


def write_cpu_catalog(
    path: Path,
    shape: LlamaShape,
    n_ctx: int,
    slots: int,
    *,
    flops: float = NOMINAL_FLOPS,
    attention_flops: float = NOMINAL_FLOPS,
    bandwidth_bytes_per_s: float = NOMINAL_BANDWIDTH_BYTES_PER_S,
    reserve_bytes: int = ACTIVATION_RESERVE_BYTES,
) -> Path:
    """Write the catalog (`gpus: this-cpu`, `models: tiny-llama`) to `path`; returns it.

    The figures default to the nominal ones; memory holds the weights, n_ctx tokens of KV
    cache and `reserve_bytes` (the engine config's activation reserve).
    """
    params = model_params(shape)
    head_dim = shape.hidden // shape.heads
    kv_bytes = 2 * shape.layers * shape.kv_heads * head_dim * 2  # f16 K and V
    catalog = {
        "gpus": {
            "this-cpu": {
                "memory_bytes": params * 2 + n_ctx * kv_bytes + reserve_bytes,
                "hbm_bandwidth_bytes_per_s": bandwidth_bytes_per_s,
                "bf16_flops": flops,
                "attention_flops": attention_flops,
            }
        },
        "models": {
            "tiny-llama": {
                "params": params,
                "layers": shape.layers,
                "hidden_size": shape.hidden,
                "attention_heads": shape.heads,
                "kv_heads": shape.kv_heads,
                "head_dim": head_dim,
                "vocab_size": shape.vocab,
                "max_context_tokens": n_ctx // slots,
            }
        },
    }
    path.write_text(yaml.safe_dump(catalog, sort_keys=False))
    return path
