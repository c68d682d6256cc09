"""Models by architecture: Hugging Face config.json files read without the hub, mixtures of
experts (active parameters for compute, all of them for bytes), latent-attention KV, and the
catalog's checks, against the model cards' published figures and hand arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import InputError
from planner.engine import build_engine_config, gpu_catalog, model_catalog
from planner.engine.catalog import find_model
from planner.engine.hf_config import model_from_hf_config
from planner.engine.roofline import Roofline
from planner.engine.specs import EngineConfig, kv_bytes_per_token, weight_bytes

HF = Path(__file__).resolve().parents[2] / "fixtures" / "hf"


@pytest.mark.parametrize(
    ("folder", "published_total", "published_active", "active_rel"),
    [
        # safetensors totals on the hub; active counts from the model cards
        ("Llama-3.1-8B", 8_030_261_248, None, 0.0),
        ("Mixtral-8x7B-v0.1", 46_702_792_704, 12.9e9, 0.01),
        ("DeepSeek-V3", 671e9, 37e9, 0.02),  # without the 14B multi-token-prediction module
        ("Qwen3-30B-A3B", 30_532_122_624, 3.3e9, 0.02),
        ("gpt-oss-120b", 116.83e9, None, 0.0),  # its 5.1B active excludes the embedding
    ],
)
def test_config_json_gives_the_published_parameter_counts(
    folder: str, published_total: float, published_active: float | None, active_rel: float
) -> None:
    model = model_from_hf_config(HF / folder / "config.json")
    assert model.params == pytest.approx(published_total, rel=1e-3)
    if published_active is not None:
        assert model.active_params == pytest.approx(published_active, rel=active_rel)


def test_a_config_json_path_is_a_model_name_everywhere() -> None:
    config = build_engine_config("H100-80GB", str(HF / "Llama-3.1-8B"), max_model_len=8192)
    assert config.model.params == model_catalog()["llama-3.1-8b"].params
    assert find_model(str(HF / "Mixtral-8x7B-v0.1" / "config.json")).experts == 8


def test_a_broken_config_json_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 32000}')
    with pytest.raises(InputError, match="missing field.*num_attention_heads"):
        model_from_hf_config(path)
    path.write_text(
        '{"num_hidden_layers": "32", "hidden_size": 4096, "vocab_size": 32000, '
        '"num_attention_heads": 32, "intermediate_size": 11008}'
    )
    with pytest.raises(InputError, match="num_hidden_layers: expected a whole number"):
        model_from_hf_config(path)


def test_moe_experts_are_counted_from_the_architecture() -> None:
    mixtral = model_catalog()["mixtral-8x7b"]
    # 32 layers x 8 experts x 3 matrices x 4096 x 14336
    assert mixtral.expert_params == 32 * 8 * 3 * 4096 * 14336


def _bare(gpu: str, model: str, **fields: object) -> EngineConfig:
    return EngineConfig(gpu=gpu_catalog()[gpu], model=model_catalog()[model], **fields)


def test_moe_computes_with_active_parameters_and_reads_the_experts_tokens_pick() -> None:
    config = _bare("H200-141GB", "mixtral-8x7b", max_model_len=8192)
    roofline = Roofline(config)
    bandwidth = 4800e9 * 0.8  # mbu 0.8
    dense_bytes = (46_702_792_704 - 45_097_156_608) * 2  # bf16
    expert_bytes = 45_097_156_608 * 2
    # one token picks 2 of 8 experts per layer: a quarter of the expert weights
    assert roofline.weight_read_s(1) == pytest.approx(
        (dense_bytes + 0.25 * expert_bytes) / bandwidth, rel=1e-6
    )
    # 64 tokens leave (6/8)^64 of the experts unread: practically all are read
    assert roofline.weight_read_s(64) == pytest.approx(
        (dense_bytes + (1 - 0.75**64) * expert_bytes) / bandwidth, rel=1e-6
    )
    # memory holds every expert
    assert weight_bytes(config) == 2 * 46_702_792_704
    # compute: 2 FLOPs per active parameter at 0.5 x 989.4 TFLOP/s
    step = roofline.step_time_s(8192, 0.0, 0, seqs=0) - config.step_overhead_s
    assert step / 8192 == pytest.approx(2 * 12_879_925_248 / (989.4e12 * 0.5), rel=1e-9)


def test_latent_attention_caches_one_latent_per_layer_on_every_gpu() -> None:
    # DeepSeek-V3: 61 layers x (512 + 64) x 2 bytes, the same at tp 8 (replicated)
    tp8 = build_engine_config("H200-141GB", "deepseek-v3", tp=8, quantization="fp8")
    assert kv_bytes_per_token(tp8) == 61 * 576 * 2
    fp8_kv = build_engine_config(
        "H200-141GB", "deepseek-v3", tp=8, quantization="fp8", kv_dtype_bytes=1
    )
    assert kv_bytes_per_token(fp8_kv) == 61 * 576
    # grouped-query attention splits heads over tp: Llama-3.1-70B at tp 8 holds 1 of 8
    llama = build_engine_config("H200-141GB", "llama-3.1-70b", tp=8)
    assert kv_bytes_per_token(llama) == 2 * 80 * 1 * 128 * 2


MOE = "params: 7.0e9\n    layers: 32\n    experts: 8\n    active_experts: "


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("params: 7.0e9", r"missing field\(s\) layers"),
        ("params: 7.0e9\n    layers: thirty-two", "layers: expected a number"),
        ("params: 7.0e9\n    layers: 32.5", "layers: expected a whole number"),
        ("params: 7.0e9\n    layers: 32\n    layerz: 32", "layerz: unknown field"),
        # Found by a bug hunt: each of these gave a limit (or a traceback) before.
        ("params: 7.0e9\n    layers: true", "layers: expected a number, got True"),
        ("params: .nan\n    layers: 32", "params: expected a finite number"),
        ("params: .inf\n    layers: 32", "params: expected a finite number"),
        (f"{MOE}8", "active_experts: a mixture of 8"),
        (f"{MOE}16", "active_experts: a mixture of 8"),
        ("params: 7.0e9\n    layers: 32\n    active_experts: 2", "given without experts"),
        (f"{MOE}2\n    active_params: 9.0e9", "active_params: 9,000,000,000 is more than"),
    ],
)
def test_a_catalog_file_names_the_entry_and_field(tmp_path: Path, entry: str, message: str) -> None:
    rest = (
        "\n    hidden_size: 4096\n    attention_heads: 32\n    kv_heads: 8\n    head_dim: 128"
        "\n    vocab_size: 32000"
    )
    path = tmp_path / "cat.yaml"
    path.write_text(f"models:\n  mine:\n    {entry}{rest}\n")
    with pytest.raises(InputError, match=f"cat.yaml: models.mine.*{message}"):
        model_catalog(path)


def test_a_catalog_checks_heads_sections_and_memory_units(tmp_path: Path) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text(
        "models:\n  mine:\n    params: 7.0e9\n    layers: 32\n    hidden_size: 4096\n"
        "    attention_heads: 32\n    kv_heads: 64\n    head_dim: 128\n    vocab_size: 32000\n"
    )
    with pytest.raises(InputError, match="models.mine.kv_heads: 64 KV heads do not group 32"):
        model_catalog(path)
    path.write_text("gpu:\n  mine:\n    memory_bytes: 8.0e10\n")
    with pytest.raises(InputError, match=r"unknown section\(s\) gpu"):
        gpu_catalog(path)
    path.write_text(
        "gpus:\n  mine:\n    memory_bytes: 80\n    hbm_bandwidth_bytes_per_s: 3.35e12\n"
        "    bf16_flops: 9.89e14\n"
    )
    with pytest.raises(InputError, match=r"memory_bytes: expected bytes \(80 GB is"):
        gpu_catalog(path)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_attention_heads", "0", "num_attention_heads: expected a whole number >= 1, got 0"),
        ("num_key_value_heads", "0", "num_key_value_heads: expected a whole number >= 1"),
        ("num_key_value_heads", "-8", "num_key_value_heads: expected a whole number >= 1"),
        ("num_key_value_heads", "5", "kv_heads: 5 KV heads do not group 32 attention heads"),
        ("intermediate_size", "-1", "intermediate_size: expected a whole number >= 1"),
        ("num_hidden_layers", "-4", "num_hidden_layers: expected a whole number >= 1"),
        ("max_position_embeddings", "0", "max_position_embeddings: expected a whole number >= 1"),
        ("num_local_experts", '8, "num_experts_per_tok": 8', "active_experts: a mixture of 8"),
    ],
)
def test_a_config_json_with_impossible_numbers_names_the_field(
    tmp_path: Path, field: str, value: str, message: str
) -> None:
    """Each of these crashed with a ZeroDivisionError or gave a limit before (a bug hunt)."""
    base = {
        "num_hidden_layers": "32", "hidden_size": "4096", "num_attention_heads": "32",
        "num_key_value_heads": "8", "vocab_size": "128256", "intermediate_size": "14336",
    }  # fmt: skip
    base[field] = value
    path = tmp_path / "config.json"
    path.write_text("{" + ", ".join(f'"{k}": {v}' for k, v in base.items()) + "}")
    with pytest.raises(InputError, match=message):
        model_from_hf_config(path)


def test_a_model_path_that_does_not_exist_says_so(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such config.json"):
        find_model(str(tmp_path / "nope" / "config.json"))
    with pytest.raises(InputError, match="the folder holds no config.json"):
        find_model(str(tmp_path))
    assert find_model("llama-3.1-8b").name == "llama-3.1-8b"
