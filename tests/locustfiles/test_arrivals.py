"""Arrival schedules: rates, gamma CV, replay spacing, unknown kinds."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.errors import ConfigError
from locustfiles.arrivals import arrival_times, gamma_times, replay_times


def test_constant_is_evenly_spaced() -> None:
    t = arrival_times("constant", 10.0, 2.0, np.random.default_rng(0))
    assert len(t) == 20
    assert np.allclose(np.diff(t), 0.1)


def test_poisson_offers_exactly_the_rate_with_exponential_gaps() -> None:
    from scipy import stats

    t = arrival_times("poisson", 20.0, 200.0, np.random.default_rng(0))
    assert len(t) == 4000
    gaps = np.diff(t)
    assert abs(gaps.mean() - 0.05) < 0.001
    # Gaps of a Poisson process are exponential with mean 1 / rate.
    assert stats.kstest(gaps, "expon", args=(0, 0.05)).pvalue > 0.01


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_gamma_shows_the_requested_cv(shape: float) -> None:
    t = arrival_times(f"gamma:{shape}", 50.0, 400.0, np.random.default_rng(1))
    gaps = np.diff(t)
    cv = gaps.std() / gaps.mean()
    assert abs(cv - 1 / np.sqrt(shape)) / (1 / np.sqrt(shape)) < 0.05
    assert len(t) == 20000


def test_times_stay_inside_the_stage_and_are_seeded() -> None:
    a = arrival_times("gamma:0.5", 30.0, 5.0, np.random.default_rng(7))
    b = arrival_times("gamma:0.5", 30.0, 5.0, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert (a >= 0).all() and (a < 5.0).all() and (np.diff(a) >= 0).all()


def test_free_gamma_process_count_varies_and_the_conditioned_one_does_not() -> None:
    # The fleet simulation draws the free renewal process; a load-test stage its exact count.
    free = [
        len(gamma_times(10.0, 0.5, 100.0, np.random.default_rng(s), exact_count=False))
        for s in range(30)
    ]
    assert len(set(free)) > 5
    assert abs(np.mean(free) - 1000) < 60  # CV sqrt(2): the count's sd is about 45, its mean's 8
    exact = {
        len(gamma_times(10.0, 0.5, 100.0, np.random.default_rng(s), exact_count=True))
        for s in range(30)
    }
    assert exact == {1000}


def test_replay_divides_gaps_by_speed() -> None:
    t = replay_times(np.array([100.0, 101.0, 103.0, 150.0]), 10.0, 4.0)
    assert np.allclose(t, [0.0, 0.1, 0.3])


@pytest.mark.parametrize("bad", ["poison", "gamma:x", "gamma:-1", "constant:3"])
def test_unknown_arrival_lists_valid_kinds(bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        arrival_times(bad, 1.0, 1.0, np.random.default_rng(0))
    assert "poisson" in str(err.value) or "gamma" in str(err.value)
