"""Catalogs, name lookup, KV sizing and calibration loading of the engine model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from contracts.errors import ConfigError, InputError
from planner.engine import (
    build,
    build_engine_config,
    find_gpu,
    find_model,
    gpu_catalog,
    kv_bytes_per_token,
    kv_capacity_blocks,
    kv_capacity_tokens,
    model_catalog,
    weight_bytes,
)
from planner.engine.specs import DEFAULT_MFU


def test_builtin_catalog_has_the_required_entries() -> None:
    gpus = gpu_catalog()
    for name in ("A10-24GB", "L40S-48GB", "A100-80GB", "H100-80GB", "H200-141GB"):
        assert name in gpus
        assert gpus[name].memory_bytes > 20e9
        assert isinstance(gpus[name].bf16_flops, float)
    models = model_catalog()
    for name in ("llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-72b", "mistral-7b"):
        assert name in models


@pytest.mark.parametrize(
    ("gpu", "model"),
    [
        ("H100-80GB", "llama-3.1-8b"),
        ("h100", "Llama-3.1-8B"),
        ("H100_80GB", "meta-llama/Llama-3.1-8B-Instruct"),
    ],
)
def test_names_are_case_insensitive_and_forgiving(gpu: str, model: str) -> None:
    config = build_engine_config(gpu, model)
    assert config.gpu.name == "H100-80GB"
    assert config.model.name == "llama-3.1-8b"


MODELS_AS_PUBLISHED = [
    ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
    ("meta-llama/Meta-Llama-3.1-405B-Instruct-FP8", "llama-3.1-405b"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", "llama-3.1-70b"),
    ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b"),
    ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-30b-a3b"),
    ("Qwen/Qwen2.5-72B-Instruct-AWQ", "qwen2.5-72b"),
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
    ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-r1"),
    ("deepseek-ai/DeepSeek-Coder-V2-Instruct", None),  # not in the catalog: said so
    ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("Llama2-70B", "llama-2-70b"),  # as benchmark suites write it
    ("llama3.1-8b", "llama-3.1-8b"),
    ("llama2-70b-99.9", "llama-2-70b"),  # with the accuracy target a benchmark adds
    ("llama3.1-8b-99", "llama-3.1-8b"),
]
GPUS_AS_WRITTEN = [
    ("NVIDIA H100 80GB HBM3", "H100-80GB"),  # nvidia-smi's name
    ("H100-SXM5-80GB", "H100-80GB"),
    ("NVIDIA H200-SXM-141GB", "H200-141GB"),
    ("A100-SXM4-80GB", "A100-80GB"),
    ("B200-SXM-180GB", "B200-180GB"),
    ("AMD Instinct MI300X", "MI300X-192GB"),
    ("H100", "H100-80GB"),  # the chip alone: the SXM board, not a PCIe or NVL one
    ("NVIDIA H200", "H200-141GB"),  # nvidia-smi's name of the SXM H200
    ("A100", "A100-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIe-80GB"),  # other boards: their own figures
    ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    ("NVIDIA H200 NVL", "H200-NVL-141GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
    ("A100-PCIE-40GB", None),
    ("NVIDIA A100-SXM4-40GB", None),
    ("NVIDIA A10G", None),
]


@pytest.mark.parametrize(
    ("kind", "written", "key"),
    [("model", *m) for m in MODELS_AS_PUBLISHED] + [("GPU", *g) for g in GPUS_AS_WRITTEN],
)
def test_names_as_published_find_their_entry(kind: str, written: str, key: str | None) -> None:
    """A model as its card names it, with the release and precision tags vendors add; a GPU
    as vendors and nvidia-smi write it. None: not in the catalog, and the error says so."""
    find = find_model if kind == "model" else find_gpu
    if key is None:
        with pytest.raises(ConfigError, match=f"unknown {kind}"):
            find(written)
        return
    assert find(written).name == key


def test_deepseek_r1_has_v3s_shapes() -> None:
    r1, v3 = find_model("deepseek-r1"), find_model("deepseek-v3")
    assert dataclasses.replace(r1, name=v3.name) == v3


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="H200-141GB"):
        build_engine_config("B300", "llama-3.1-8b")
    with pytest.raises(ConfigError, match="qwen2.5-72b"):
        build_engine_config("h100", "gpt-5")


def test_llama_8b_on_one_h100_kv_capacity() -> None:
    config = build_engine_config("H100-80GB", "llama-3.1-8b")
    # 2 (K,V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes
    assert kv_bytes_per_token(config) == 131072
    assert weight_bytes(config) == 2 * 8030261248
    # (81559 MiB x 0.9 - 16.06 GB weights - 2 GiB reserve) / (16 x 128 KiB) = 28019 blocks.
    assert kv_capacity_blocks(config) == 28019
    assert kv_capacity_tokens(config) == 28019 * 16
    # vLLM logs about 0.45 M tokens of KV cache for this pair at gpu_memory_utilization 0.9.
    assert 400_000 < kv_capacity_tokens(config) < 500_000


def test_tensor_parallel_splits_weights_and_kv_heads() -> None:
    one = build_engine_config("H100-80GB", "llama-3.1-70b", tp=4)
    assert weight_bytes(one) == 2 * 70553706496 // 4
    assert kv_bytes_per_token(one) == 2 * 80 * 2 * 128 * 2
    # More GPUs than KV heads: heads are replicated, never fewer than one per GPU.
    sixteen = build_engine_config("H100-80GB", "llama-3.1-70b", tp=16)
    assert kv_bytes_per_token(sixteen) == 2 * 80 * 1 * 128 * 2


def test_model_that_does_not_fit_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="does not fit"):
        build_engine_config("A10", "llama-3.1-70b")


def test_overrides_and_invalid_fields() -> None:
    config = build_engine_config("h100", "llama-3.1-8b", max_num_seqs=8, mbu=0.6)
    assert config.max_num_seqs == 8
    assert config.mbu == 0.6
    with pytest.raises(ConfigError, match="queue_policy"):
        build_engine_config("h100", "llama-3.1-8b", queue_policy="lifo")
    with pytest.raises(ConfigError, match="max_num_batched_tokens"):
        build_engine_config("h100", "llama-3.1-8b", max_num_seqs=512, max_num_batched_tokens=256)


def test_user_catalog_extends_the_builtin_one(tmp_path: Path) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text(
        "gpus:\n  RTX-4090:\n    memory_bytes: 25757220864\n"
        "    hbm_bandwidth_bytes_per_s: 1008.0e+9\n    bf16_flops: 165.2e+12\n"
    )
    config = build_engine_config("rtx-4090", "llama-3.1-8b", catalog=path)
    assert config.gpu.hbm_bandwidth_bytes_per_s == 1008.0e9
    assert "H100-80GB" in gpu_catalog(path)


def test_bad_catalog_names_file_entry_and_field(tmp_path: Path) -> None:
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"gpus": {"X": {"memory_bytes": "lots"}}}))
    with pytest.raises(InputError, match=r"cat.json: gpus.X"):
        gpu_catalog(path)
    path.write_text(json.dumps({"models": {"m": {"params": 1, "layerz": 2}}}))
    with pytest.raises(InputError, match="models.m: missing field.*layers"):
        model_catalog(path)
    shape = dict(layers=2, hidden_size=8, attention_heads=2, kv_heads=1, head_dim=4, vocab_size=9)
    path.write_text(json.dumps({"models": {"m": {"params": 1, "layerz": 2, **shape}}}))
    with pytest.raises(InputError, match="models.m.layerz: unknown field"):
        model_catalog(path)


def test_calibration_file_sets_the_factors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "CALIBRATION_DIR", tmp_path)
    (tmp_path / "h100-80gb_llama-3.1-8b.json").write_text(
        json.dumps(
            {
                "gpu": "H100-80GB",
                "model": "llama-3.1-8b",
                "mfu": 0.42,
                "mbu": 0.71,
                "step_overhead_s": 0.003,
                "source": "test run",
            }
        )
    )
    config = build_engine_config("h100", "llama-3.1-8b")
    assert (config.mfu, config.mbu, config.step_overhead_s) == (0.42, 0.71, 0.003)
    assert "test run" in config.calibration_source
    # An explicit override still wins over the calibration.
    assert build_engine_config("h100", "llama-3.1-8b", mfu=0.3).mfu == 0.3
    # Other pairs keep theirs (no published fit for the A10: the defaults).
    assert build_engine_config("A10-24GB", "llama-3.1-8b").mfu == DEFAULT_MFU


def test_a_name_several_entries_hold_asks_for_one(tmp_path: Path) -> None:
    """With an A100 40GB added by a catalog file, the bare `A100` could be either SXM board:
    the error names both; nvidia-smi's `NVIDIA A100-SXM4-40GB` finds the new one. A model's
    family alone (`llama`) likewise lists its members."""
    path = tmp_path / "cat.yaml"
    path.write_text(
        "gpus:\n  A100-40GB:\n    memory_bytes: 42949672960\n"
        "    hbm_bandwidth_bytes_per_s: 1555.0e9\n    bf16_flops: 312.0e12\n"
    )
    with pytest.raises(ConfigError, match=r"could be any of A100-40GB, A100-80GB: name one"):
        find_gpu("A100", path)
    assert find_gpu("NVIDIA A100-SXM4-40GB", path).name == "A100-40GB"
    assert find_gpu("A100-80GB", path).name == "A100-80GB"
    with pytest.raises(ConfigError, match=r"'llama' could be any of llama-2-13b"):
        find_model("llama")
