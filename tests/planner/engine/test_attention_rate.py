"""A catalog entry's `attention_flops`: attention priced at its own rate (a CPU's llama.cpp)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts.errors import InputError
from planner.engine import Engine, build_engine_config


def _catalog(tmp_path: Path, **gpu: float) -> Path:
    path = tmp_path / "catalog.yaml"
    entry = {"memory_bytes": 80e9, "hbm_bandwidth_bytes_per_s": 2e12, "bf16_flops": 1e15, **gpu}
    path.write_text(yaml.safe_dump({"gpus": {"chip": entry}}))
    return path


def _attention_s(engine: Engine, pairs: float) -> float:
    """Seconds a compute-bound step spends on `pairs` attention pairs beyond its GEMMs."""
    return engine.step_time_s(4096, pairs, 0) - engine.step_time_s(4096, 0.0, 0)


def test_attention_rate_prices_attention_pairs_only(tmp_path: Path) -> None:
    same = build_engine_config("chip", "llama-3.1-8b", catalog=_catalog(tmp_path))
    stated = build_engine_config(
        "chip", "llama-3.1-8b", catalog=_catalog(tmp_path, attention_flops=1e15)
    )
    slow = build_engine_config(
        "chip", "llama-3.1-8b", catalog=_catalog(tmp_path, attention_flops=2.5e14)
    )
    pairs = 4096 * 4097 / 2
    base, equal, quarter = (Engine(c) for c in (same, stated, slow))
    # Stating the bf16 rate changes nothing; a quarter of it makes attention 4x dearer and
    # leaves the matrix multiplies as they were.
    assert equal.step_time_s(4096, pairs, 4096) == base.step_time_s(4096, pairs, 4096)
    assert _attention_s(quarter, pairs) == pytest.approx(4 * _attention_s(base, pairs))
    assert quarter.step_time_s(4096, 0.0, 0) == base.step_time_s(4096, 0.0, 0)


def test_attention_rate_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="attention_flops: must be > 0"):
        build_engine_config("chip", "llama-3.1-8b", catalog=_catalog(tmp_path, attention_flops=0))
