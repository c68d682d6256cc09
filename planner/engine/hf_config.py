"""A model's shape from its Hugging Face `config.json` file: no hub access, no weights.

Reads the fields transformers' configs name (Llama, Mistral, Mixtral, Qwen2/2.5/3 and their
MoE variants, DeepSeek-V2/V3, gpt-oss) and counts the parameters from the shapes, since a
config.json does not state them:

- embeddings `vocab x hidden`, and as many again for an untied LM head;
- attention per layer: grouped-query `hidden x (heads + 2 kv_heads) x head_dim` plus the
  output projection `heads x head_dim x hidden` (and the q/k/v biases where the config says
  so: `attention_bias`, or Qwen2's always-on ones); multi-head latent attention (DeepSeek,
  `kv_lora_rank` set) as its low-rank projections;
- the MLP per layer: a gated MLP is 3 x hidden x intermediate; a mixture of experts has
  `experts` of them at the expert width, a router `hidden x experts`, and its shared experts;
  DeepSeek's first `first_k_dense_replace` layers are dense;
- RMSNorm weights (2 per layer and a final one).

`active_params` is the total less the routed experts a token does not run through.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from contracts.errors import InputError
from planner.engine.specs import ModelSpec, model_shape_problem

_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")


def _int(
    config: dict[str, Any], path: Path, *keys: str, default: int | None = None, least: int = 1
) -> int:
    """The first of `keys` the config has, as a whole number of at least `least` (a count of
    optional parts may be 0); `default` when none is there."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value != int(value)
            or value < least
        ):
            raise InputError(f"{path}: {key}: expected a whole number >= {least}, got {value!r}")
        return int(value)
    if default is None:
        raise InputError(f"{path}: missing field {' or '.join(keys)}")
    return default


def _attention_params(c: dict[str, Any], path: Path, hidden: int, heads: int) -> int:
    """Parameters of one attention layer (projections and biases)."""
    if c.get("kv_lora_rank"):
        kv_rank = _int(c, path, "kv_lora_rank")
        q_rank = _int(c, path, "q_lora_rank", default=0, least=0)
        rope = _int(c, path, "qk_rope_head_dim")
        nope = _int(c, path, "qk_nope_head_dim")
        v_dim = _int(c, path, "v_head_dim")
        q_dim = heads * (nope + rope)
        q = hidden * q_rank + q_rank + q_rank * q_dim if q_rank else hidden * q_dim
        kv = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v_dim)
        return q + kv + heads * v_dim * hidden
    head_dim = _int(c, path, "head_dim", default=hidden // heads)
    kv_heads = _int(c, path, "num_key_value_heads", default=heads)
    qkv = hidden * (heads + 2 * kv_heads) * head_dim
    out = heads * head_dim * hidden
    bias = c.get("attention_bias") or c.get("model_type") == "qwen2"
    biases = (heads + 2 * kv_heads) * head_dim if bias else 0
    if c.get("attention_bias") and c.get("model_type") == "gpt_oss":
        biases += hidden  # gpt-oss biases its output projection too
    return qkv + out + biases


def _experts(c: dict[str, Any], path: Path) -> tuple[int, int]:
    """(routed experts, experts per token); (0, 0) for a dense model."""
    experts = _int(
        c, path, "n_routed_experts", "num_local_experts", "num_experts", default=0, least=0
    )
    if not experts:
        return 0, 0
    return experts, _int(c, path, "num_experts_per_tok", "experts_per_token")


def _mlp_params(c: dict[str, Any], path: Path, hidden: int, layers: int) -> tuple[int, int]:
    """(all MLP parameters over every layer, those of routed experts a token skips)."""
    experts, active = _experts(c, path)
    inter = _int(c, path, "intermediate_size")
    if not experts:
        return layers * 3 * hidden * inter, 0
    width = _int(c, path, "moe_intermediate_size", default=inter)
    dense_layers = _int(c, path, "first_k_dense_replace", default=0, least=0)
    moe_layers = layers - dense_layers
    shared = _int(c, path, "n_shared_experts", default=0, least=0) * 3 * hidden * width
    shared += 3 * hidden * _int(c, path, "shared_expert_intermediate_size", default=0, least=0)
    per_moe_layer = experts * 3 * hidden * width + hidden * experts + shared
    total = dense_layers * 3 * hidden * inter + moe_layers * per_moe_layer
    skipped = moe_layers * (experts - active) * 3 * hidden * width
    return total, skipped


def model_from_hf_config(path: Path) -> ModelSpec:
    """The ModelSpec of the Hugging Face config.json at `path`, named after its folder.

    Raises InputError for an unreadable file, a missing or mistyped field.
    """
    try:
        c = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a readable config.json ({err})") from err
    if not isinstance(c, dict):
        raise InputError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    missing = [k for k in _REQUIRED if k not in c]
    if missing:
        raise InputError(f"{path}: missing field(s) {', '.join(missing)} of a config.json")
    layers = _int(c, path, "num_hidden_layers")
    hidden = _int(c, path, "hidden_size")
    heads = _int(c, path, "num_attention_heads")
    vocab = _int(c, path, "vocab_size")
    embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
    mlp, skipped = _mlp_params(c, path, hidden, layers)
    total = embeddings + layers * _attention_params(c, path, hidden, heads) + mlp
    total += (2 * layers + 1) * hidden
    experts, active = _experts(c, path)
    mla = c.get("kv_lora_rank")
    head_dim = (
        _int(c, path, "v_head_dim") if mla else _int(c, path, "head_dim", default=hidden // heads)
    )
    spec = ModelSpec(
        name=path.parent.name or path.stem,
        params=total,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=heads if mla else _int(c, path, "num_key_value_heads", default=heads),
        head_dim=head_dim,
        vocab_size=vocab,
        max_context_tokens=_int(c, path, "max_position_embeddings", default=131072),
        experts=experts,
        active_experts=active,
        active_params=total - skipped if experts else None,
        mla_kv_dim=_int(c, path, "kv_lora_rank") + _int(c, path, "qk_rope_head_dim") if mla else 0,
    )
    problem = model_shape_problem(spec)
    if problem is not None:
        raise InputError(f"{path}: {problem}")
    return spec
