"""The limit search's progress note: elapsed time and the time left
(planner.limit.measured.progress), checked against a bisection counted here step by step."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from planner.limit.measured.config import SearchConfig
from planner.limit.measured.progress import Left, format_clock, measured_left, progress_note
from planner.limit.measured.search import LevelOutcome
from planner.slo.spec import parse_slo
from planner.slo.verdict import evaluate

SLO = parse_slo("ttft:p95<=1s")
EVALUATION = evaluate(pl.DataFrame({"ttft_s": [0.1], "ok": [True]}), SLO, duration_s=1.0)


def _outcome(load: float, passed: bool, settled: bool = True) -> LevelOutcome:
    return LevelOutcome(load=load, stages=(f"level-{load:g}",), evaluation=EVALUATION,
                        passed=passed, certain=settled, settled=settled)  # fmt: skip


def _bisections(lo: float, hi: float, limit: float, tolerance: float) -> int:
    """Levels a bisection runs until the pass/fail gap is within the tolerance."""
    count = 0
    while hi - lo > tolerance * lo:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid <= limit else (lo, mid)
        count += 1
    return count


@pytest.mark.parametrize(("lo", "hi", "tolerance"), [(10, 20, 0.05), (3, 4, 0.01), (100, 400, 0.1)])
def test_a_closed_bracket_leaves_about_the_levels_a_bisection_runs(
    lo: float, hi: float, tolerance: float
) -> None:
    config = SearchConfig(slo=SLO, tolerance=tolerance, max_levels=50)
    left = measured_left({lo: _outcome(lo, True), hi: _outcome(hi, False)}, config)
    assert not left.at_least and not left.at_most
    for limit in np.random.default_rng(1).uniform(lo, hi, 200):
        count = _bisections(lo, hi, float(limit), tolerance)
        # an upper bound (the highest pass only rises), never more than log2(hi/lo) + 1 over
        assert count <= left.runs <= count + math.log2(hi / lo) + 1


def test_an_open_bracket_is_a_lower_bound_and_max_levels_caps_it() -> None:
    config = SearchConfig(slo=SLO, tolerance=0.05, growth=2.0, max_levels=24)
    left = measured_left({4.0: _outcome(4.0, True)}, config)
    # one level to fail, then narrowing a gap of 4 above 4: log2(4 / 0.2) -> 5
    assert left == Left(6, at_least=True)
    capped = SearchConfig(slo=SLO, tolerance=0.05, max_levels=3)
    two = {4.0: _outcome(4.0, True), 8.0: _outcome(8.0, True)}
    assert measured_left(two, capped) == Left(1)


def test_an_unsettled_end_of_the_bracket_costs_one_more_run() -> None:
    config = SearchConfig(slo=SLO, tolerance=0.05)
    settled = measured_left({10.0: _outcome(10.0, True), 10.4: _outcome(10.4, False)}, config)
    unsettled = {10.0: _outcome(10.0, True, settled=False), 10.4: _outcome(10.4, False)}
    assert settled == Left(0)
    assert measured_left(unsettled, config) == Left(1)


def test_the_note_costs_the_runs_left_at_the_mean_run() -> None:
    assert format_clock(42) == "42s" and format_clock(245) == "4m05s"
    assert format_clock(3720) == "1h02m"
    assert progress_note(245, Left(3), 245 / 2) == "elapsed 4m05s  left ~6m08s (3 levels)"
    bound = progress_note(60, Left(2, at_least=True), 30)
    assert bound == "elapsed 1m00s  left >=1m00s (2+ levels)"
    chunks = progress_note(60, Left(5, at_most=True), 10, unit="chunks")
    assert chunks == "elapsed 1m00s  left <=50s (5 chunks)"
    assert progress_note(60, Left(0), 30) == "elapsed 1m00s  left ~0s"
