"""Calibration leaves out levels the load generator could not offer (invalid)."""

from __future__ import annotations

from contracts.limit import LimitLevel, LimitResult
from planner.fleet.calibration import measured_levels


def _level(load: float, verdict: str, invalid: str | None = None) -> LimitLevel:
    return LimitLevel(
        load=load,
        stage="s",
        requests=30,
        completed=30,
        metrics={"e2e_p95_s": 1.0},
        constraints=[],
        verdict=verdict,  # type: ignore[arg-type]
        invalid=invalid,
    )


def test_invalid_levels_teach_the_engine_nothing() -> None:
    lag = "the load generator fell behind its schedule: lag p99 1636 ms"
    result = LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=4.0,
        infeasible_min=8.0,
        binding="e2e:p95",
        slo="e2e:p95<=4s",
        tolerance=0.05,
        levels=[_level(2.0, "pass"), _level(4.0, "pass"), _level(4.3, "invalid", lag)],
    )
    assert [lv.load for lv in measured_levels(result)] == [2.0, 4.0]
