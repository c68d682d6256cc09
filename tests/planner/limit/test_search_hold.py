"""The level that must hold a fast answer settles within its budget (planner.limit.measured.search):
not certain by then, the search steps down to 0.85 L, then 0.8 L, instead of pooling more
runs at 0.9 L; the answer rests on the lower level that held."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from contracts.errors import ConfigError
from planner.limit.measured.config import HELD_ANSWER, SearchConfig
from planner.limit.measured.levels import hold_levels
from planner.limit.measured.search import run_search
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import parse_slo
from tests.planner.limit.test_search import CurveProbe

SLO = parse_slo("ttft:p95<=1s")
Z95 = 1.6448536269514722  # the standard normal's 95th percentile


@dataclass
class AskedProbe(CurveProbe):
    """A CurveProbe that keeps what each run was asked: (load, budget, hopeless checks)."""

    asked: list[tuple[float, float | None, bool | None]] = field(default_factory=list)

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        budget = None if abandon is None else abandon.budget_s
        checks = None if abandon is None else abandon.hopeless_checks
        self.asked.append((load, budget, checks))
        return super().measure(load, abandon=abandon)


def _borderline(budget_s: float | None) -> tuple[SearchConfig, AskedProbe, float]:
    """A fast answer L whose 0.9 L sits exactly at the probe's true limit (p95 TTFT = 1 s
    there): 0.9 L stays within the noise run after run; 0.85 L is clearly below the limit."""
    probe = AskedProbe(np.random.default_rng(5), level_jitter=0.0)
    truth = probe.ttft_limit(1.0, Z95)
    answered = float(f"{truth / 0.9:.4g}")
    config = SearchConfig(
        slo=SLO,
        start=float(f"{0.9 * answered:.4g}"),
        growth=1.1 / 0.9,
        answered=answered,
        resamples=200,
        hold_budget_s=budget_s,
    )
    return config, probe, answered


def test_an_uncertain_hold_level_steps_down_and_the_answer_rests_below() -> None:
    config, probe, answered = _borderline(budget_s=60.0)
    result = run_search(probe, config)
    first, lower, lowest = hold_levels(config)
    assert (lower, lowest) == (float(f"{0.85 * answered:.4g}"), float(f"{0.8 * answered:.4g}"))
    runs_at_first = [a for a in probe.asked if a[0] == first]
    # budgeted: 60 s of 20 s runs, the first with the hopeless checks, repeats without
    assert runs_at_first == [(first, 60.0, True), (first, 40.0, False), (first, 20.0, False)]
    assert result.held_answer and result.stopped.startswith(HELD_ANSWER)
    assert result.feasible_max == lower  # rests on 0.85 L, which held with certainty
    held = result.outcome(lower)
    assert held is not None and held.certain and held.passed
    assert result.infeasible_min is not None and result.infeasible_min > answered


def test_without_a_budget_the_hold_level_is_pooled_as_before() -> None:
    """The control: the old search keeps running 0.9 L while it is uncertain."""
    config, probe, _ = _borderline(budget_s=None)
    run_search(probe, config)
    first = hold_levels(config)[0]
    assert hold_levels(config) == [first]
    assert sum(1 for a in probe.asked if a[0] == first) > 3
    assert all(budget is None for _, budget, _ in probe.asked)


def test_users_step_down_a_whole_user_or_more() -> None:
    config = SearchConfig(slo=SLO, dimension="concurrency", start=10, growth=1.1,
                          answered=10.0)  # fmt: skip
    assert hold_levels(config) == [10.0, 8.0, 7.0]
    small = SearchConfig(slo=SLO, dimension="concurrency", start=2, growth=1.5, answered=2.0)
    assert hold_levels(small) == [2.0, 1.0]


def test_a_bad_hold_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="hold budget must be > 0 s"):
        SearchConfig(slo=SLO, hold_budget_s=0.0)
