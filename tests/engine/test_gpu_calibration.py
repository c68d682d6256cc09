"""The shipped H200/H100 calibration reproduces the GPU measurements kept in bench/results."""

from __future__ import annotations

import json
from pathlib import Path

from planner.engine import Engine, build_engine_config

MEASURED = Path(__file__).resolve().parents[2] / "bench/results/h200_llama-3.1-8b_calibration.json"


def test_calibrated_engine_reproduces_measured_decode_and_prefill() -> None:
    data = json.loads(MEASURED.read_text())
    cfg = build_engine_config("H200-141GB", "llama-3.1-8b")
    assert "calibration" in cfg.calibration_source or ".json" in cfg.calibration_source
    engine = Engine(cfg.model_copy(update={"seq_overhead_s": 0.0}))  # GPU time only
    errors = []
    for p in data["prefill"]:
        n = p["prompt_tokens"]
        if n >= 1024:  # shorter eager prefills are launch-bound (see bench/fit_calibration.py)
            errors.append(engine.step_time_s(n, n * (n + 1) / 2, n) / p["time_s"] - 1)
    for d in data["decode"]:
        b, ctx = d["batch"], d["context_tokens"]
        errors.append(engine.step_time_s(b, b * ctx, b * ctx) / d["time_s"] - 1)
    assert len(errors) >= 10
    mean_abs = sum(abs(e) for e in errors) / len(errors)
    assert mean_abs < 0.10, f"mean |error| {mean_abs:.1%}"
    assert max(abs(e) for e in errors) < 0.25


def test_h100_uses_the_transferred_factors() -> None:
    h100 = build_engine_config("H100-80GB", "llama-3.1-8b")
    h200 = build_engine_config("H200-141GB", "llama-3.1-8b")
    assert (h100.mfu, h100.mbu, h100.step_overhead_s) == (h200.mfu, h200.mbu, h200.step_overhead_s)
