"""Calibration: measured levels read from a limit.json, factors fitted back to a known engine."""

from __future__ import annotations

import pytest

from contracts.limit import LimitLevel, LimitResult
from planner.engine import EngineConfig, build_engine_config
from planner.fleet.calibration import calibrate, level_metrics, measured_levels
from tests.helpers.shared_data import azure_conv_profile

CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b")


def _measured_limit(truth: EngineConfig, loads: list[float], slo: str) -> LimitResult:
    """A limit.json 'measured' on an engine with other efficiency factors (another seed)."""
    profile = azure_conv_profile()
    levels = []
    for load in loads:
        m = level_metrics(profile, truth, load, "rate", 90.0, rng_seed=9)
        keep = {k: m[k] for k in ("ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s")}
        levels.append(
            LimitLevel(
                load=load,
                stage=f"r{load:g}",
                requests=1,
                completed=1,
                metrics=keep,
                constraints=[],
                verdict="pass",
                mean_e2e_s=m["e2e_mean_s"],
            )
        )
    return LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=loads[-2],
        infeasible_min=loads[-1],
        binding="tpot:p95",
        slo=slo,
        tolerance=0.1,
        levels=levels,
    )


def test_calibration_recovers_a_slower_engine() -> None:
    truth = CONFIG.model_copy(update={"mfu": 0.35, "mbu": 0.55, "step_overhead_s": 0.004})
    result = _measured_limit(truth, [2.0, 5.0, 8.0, 10.0], "tpot:p95<=40ms")
    fitted, cal = calibrate(azure_conv_profile(), CONFIG, result, duration_s=60.0, design_points=8)
    assert cal.levels == 4
    assert cal.default_mean_rel_error > 0.3  # the defaults are a faster engine
    assert cal.mean_rel_error < 0.15
    assert cal.mean_rel_error < cal.default_mean_rel_error / 2
    assert fitted.mbu == cal.mbu and "fitted" in fitted.calibration_source
    # Decode time per step (weights / bandwidth / mbu + overhead) is what TPOT pins down.
    weight_s = 8030261248 * 2 / 3350e9
    truth_step = weight_s / 0.55 + 0.004
    assert weight_s / cal.mbu + cal.step_overhead_s == pytest.approx(truth_step, rel=0.2)


def test_measured_levels_skip_overload_and_empty_metrics() -> None:
    levels = [
        LimitLevel(
            load=load,
            stage="s",
            requests=1,
            completed=1,
            metrics=metrics,
            constraints=[],
            verdict="pass",
        )
        for load, metrics in [
            (1.0, {"ttft_p95_s": 0.2}),
            (2.0, {"errors": 0.0}),
            (3.0, {"tpot_p95_s": 0.05}),
            (9.0, {"tpot_p95_s": 0.5}),
        ]
    ]
    result = LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=3.0,
        infeasible_min=4.0,
        binding=None,
        slo="tpot:p95<=60ms",
        tolerance=0.1,
        levels=levels,
    )
    assert [lv.load for lv in measured_levels(result)] == [1.0, 3.0]


def test_measured_levels_know_how_long_each_run_was_judged() -> None:
    level = LimitLevel(
        load=2.0,
        stage="s",
        requests=120,
        completed=120,
        metrics={"ttft_p95_s": 0.3},
        constraints=[],
        verdict="pass",
        repeats=2,
    )
    result = LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=2.0,
        infeasible_min=None,
        binding=None,
        slo="ttft:p95<=1s",
        tolerance=0.1,
        levels=[level],
    )
    (measured,) = measured_levels(result)
    assert measured.runs == 3
    assert measured.judged_s == pytest.approx(20.0)  # 120 requests / 3 runs / 2 req/s
