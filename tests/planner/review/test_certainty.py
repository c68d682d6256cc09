"""The interval on the instance count covers the truth on synthetic demand and a fake limit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contracts.limit import IntervalSource, LimitResult, PredictedInterval
from planner.capacity.arithmetic import instances_for_load
from planner.review.certainty import (
    block_bootstrap_quantile,
    count_interval,
    limit_range,
    limit_span,
)

MU, SIGMA = math.log(10.0), 0.3  # window rates: lognormal around 10 req/s
Z99 = 2.3263478740408408  # standard normal 0.99 quantile
TRUE_LIMIT, TOLERANCE = 4.0, 0.1
HEADROOM, REDUNDANCY = 0.2, 1


def _fake_limit(rng: np.random.Generator) -> LimitResult:
    """A search result that brackets the true limit: feasible max below it, the next level
    (one tolerance step up) above it, where exactly is the measurement's noise."""
    feasible = TRUE_LIMIT / (1 + TOLERANCE) ** rng.uniform()
    level = {"stage": "s", "requests": 100, "completed": 100, "metrics": {}, "constraints": []}
    return LimitResult.model_validate(
        {
            "schema": "capplan.limit/1",
            "dimension": "rate",
            "unit": "rps",
            "feasible_max": feasible,
            "infeasible_min": feasible * (1 + TOLERANCE),
            "binding": "ttft:p95",
            "slo": "ttft:p95<=2s",
            "tolerance": TOLERANCE,
            "levels": [
                {**level, "load": feasible * 0.8, "verdict": "pass"},
                {**level, "load": feasible, "verdict": "pass"},
                {**level, "load": feasible * (1 + TOLERANCE), "verdict": "fail"},
            ],
        }
    )


def test_limit_range_drops_to_last_certain_pass() -> None:
    result = _fake_limit(np.random.default_rng(0))
    assert limit_range(result) == (result.feasible_max, result.infeasible_min)
    levels = [lv.model_copy() for lv in result.levels]
    levels[1] = levels[1].model_copy(update={"certain": False})
    uncertain = result.model_copy(update={"levels": levels})
    assert limit_range(uncertain) == (pytest.approx(levels[0].load), result.infeasible_min)


def test_ninety_percent_interval_covers_true_count() -> None:
    true_peak = math.exp(MU + SIGMA * Z99)
    truth = instances_for_load(true_peak, TRUE_LIMIT, HEADROOM) + REDUNDANCY
    covered, widths = 0, []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        rates = np.exp(MU + SIGMA * rng.standard_normal(1440))  # a day of 60 s windows
        limit = _fake_limit(rng)
        assert limit.feasible_max is not None
        peak = float(np.quantile(rates, 0.99))
        point = instances_for_load(peak, limit.feasible_max, HEADROOM) + REDUNDANCY
        reps, block = block_bootstrap_quantile(rates, 0.99, rng, replicates=400)
        iv = count_interval(
            instances=point,
            peak_replicates=reps,
            peak_rps=peak,
            limit=limit.feasible_max,
            limit_span=limit_range(limit),
            per_rps=1.0,
            growth=1.0,
            headroom=HEADROOM,
            redundancy=REDUNDANCY,
            level=0.9,
            rng=rng,
            block_windows=block,
        )
        covered += iv.low <= truth <= iv.high
        widths.append(iv.high - iv.low)
    print(f"coverage {covered}/100, mean width {np.mean(widths):.2f}, truth {truth}")
    assert covered >= 85, (covered, truth)
    assert np.mean(widths) <= 3  # an interval that covers by being huge would prove nothing


def test_which_source_dominates() -> None:
    rng = np.random.default_rng(1)
    steady = 10 + 0.01 * rng.standard_normal(1440)
    reps, _ = block_bootstrap_quantile(steady, 0.99, rng, replicates=200)
    kwargs = dict(instances=4, peak_rps=10.0, limit=4.0, per_rps=1.0, growth=1.0)
    common = dict(headroom=0.2, redundancy=1, level=0.9, rng=rng)
    wide_limit = count_interval(
        peak_replicates=reps,
        limit_span=(3.0, 5.0),
        **kwargs,
        **common,  # type: ignore[arg-type]
    )
    assert wide_limit.dominant == "limit"
    fixed_limit = count_interval(
        peak_replicates=reps,
        limit_span=None,
        **kwargs,
        **common,  # type: ignore[arg-type]
    )
    assert fixed_limit.dominant == "peak"
    nothing = count_interval(
        peak_replicates=None,
        limit_span=None,
        **kwargs,
        **common,  # type: ignore[arg-type]
    )
    assert (nothing.dominant, nothing.low, nothing.high) == ("none", 4, 4)


def test_a_predicted_limit_widens_the_count_to_its_interval() -> None:
    """A limit the engine model predicted (the emulator's, whatif's) is drawn across its
    interval, where a real GPU's limit is expected, not only across the search's bracket."""
    measured = _fake_limit(np.random.default_rng(0))
    source = IntervalSource(basis="vllm/ampere", class_key="vllm/ampere", rows=12,
                            class_rows=12, low_quantile=0.1, high_quantile=0.9)  # fmt: skip
    interval = PredictedInterval(low=2.6, high=4.6, source=source)
    predicted = measured.model_copy(update={"predicted": interval})
    assert limit_span(measured) == limit_range(measured)
    assert limit_span(predicted) == (2.6, 4.6)
    peak = 40.0
    common = dict(instances=instances_for_load(peak, 4.0, HEADROOM) + REDUNDANCY,
                  peak_replicates=None, peak_rps=peak, limit=4.0, per_rps=1.0, growth=1.0,
                  headroom=HEADROOM, redundancy=REDUNDANCY, level=0.9)  # fmt: skip
    narrow = count_interval(limit_span=limit_span(measured), rng=np.random.default_rng(1), **common)  # type: ignore[arg-type]
    wide = count_interval(
        limit_span=limit_span(predicted), rng=np.random.default_rng(1), predicted=True, **common
    )  # type: ignore[arg-type]
    # 40 req/s at 20 % headroom: 17 instances at 2.6 req/s, 11 at 4.6, plus one spare.
    assert wide.high >= instances_for_load(peak, 2.75, HEADROOM) + REDUNDANCY > narrow.high
    assert wide.low <= instances_for_load(peak, 4.4, HEADROOM) + REDUNDANCY
    assert wide.method_finding.key == "review.count_method_predicted"
    assert narrow.method_finding.key == "review.count_method"
