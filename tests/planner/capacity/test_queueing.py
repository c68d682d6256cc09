"""Erlang-B/C against published tables, and how burstiness moves the count (Allen–Cunneen)."""

from __future__ import annotations

import math

import pytest

from contracts.errors import ConfigError
from planner.capacity.queueing import (
    allen_cunneen_wait_s,
    erlang_b,
    erlang_c,
    instances_by_queueing,
    kingman_wait_s,
    mmc_mean_wait_s,
    servers_for_wait,
)


@pytest.mark.parametrize(
    ("servers", "erlangs", "blocking"),
    [
        # Standard Erlang B tables (e.g. Cooper, "Introduction to Queueing Theory", table of
        # traffic carried at 1 % and 2 % grade of service).
        (10, 4.46, 0.01),
        (10, 5.08, 0.02),
        (20, 12.03, 0.01),
        (50, 37.90, 0.01),
        (100, 84.06, 0.01),
    ],
)
def test_erlang_b_matches_published_tables(servers: int, erlangs: float, blocking: float) -> None:
    assert erlang_b(servers, erlangs) == pytest.approx(blocking, abs=2e-4)


@pytest.mark.parametrize(
    ("agents", "p_wait"),
    # Call Centre Helper's worked Erlang C example: 100 calls in 30 min, 180 s handling time
    # (10 Erlangs); probability of waiting with 11..14 agents.
    [(11, 0.6821), (12, 0.4494), (13, 0.2853), (14, 0.1741)],
)
def test_erlang_c_matches_published_example(agents: int, p_wait: float) -> None:
    assert erlang_c(agents, 10.0) == pytest.approx(p_wait, abs=1e-4)


def test_erlang_c_closed_forms() -> None:
    # M/M/1: P(wait) = rho; M/M/2: 2 rho^2 / (1 + rho).
    assert erlang_c(1, 0.7) == pytest.approx(0.7)
    rho = 0.6
    assert erlang_c(2, 2 * rho) == pytest.approx(2 * rho**2 / (1 + rho))
    assert erlang_c(3, 3.0) == 1.0
    assert erlang_c(3, 0.0) == 0.0


def test_mean_wait_of_published_example() -> None:
    # Same example: average speed of answer with 11 agents is 0.6821 x 180 / (11 - 10) = 122.8 s.
    assert mmc_mean_wait_s(11, 10.0, 180.0) == pytest.approx(122.8, abs=0.1)
    assert math.isinf(mmc_mean_wait_s(10, 10.0, 180.0))


def test_allen_cunneen_reduces_to_erlang_c_for_poisson_exponential() -> None:
    assert allen_cunneen_wait_s(12, 10.0, 1.0, 1.0, 1.0) == pytest.approx(
        mmc_mean_wait_s(12, 10.0, 1.0)
    )
    # Kingman at one server equals M/M/1 for ca2 = cs2 = 1: rho / (1 - rho) x S.
    assert kingman_wait_s(0.8, 2.0, 1.0, 1.0) == pytest.approx(8.0)
    assert kingman_wait_s(0.8, 2.0, 4.0, 1.0) == pytest.approx(20.0)


def test_burstier_arrivals_need_more_servers() -> None:
    poisson = servers_for_wait(100.0, 1.0, 1.0, 0.5, 0.01)
    bursty = servers_for_wait(100.0, 1.0, 4.0, 0.5, 0.01)
    smooth = servers_for_wait(100.0, 1.0, 0.2, 0.5, 0.01)
    assert smooth <= poisson < bursty
    assert allen_cunneen_wait_s(poisson, 100.0, 1.0, 1.0, 0.5) <= 0.01
    assert allen_cunneen_wait_s(poisson - 1, 100.0, 1.0, 1.0, 0.5) > 0.01


def test_instances_by_queueing_counts_slots_per_instance() -> None:
    # 20 req/s x 5 s = 100 Erlangs; instances of 30 slots.
    count = instances_by_queueing(
        20.0, 5.0, 30.0, arrival_cv2=4.0, service_cv2=1.0, target_wait_s=0.25
    )
    assert count.offered_erlangs == pytest.approx(100.0)
    assert count.slots_bursty > count.slots_poisson > 100
    assert count.instances_bursty >= count.instances_poisson >= 4
    assert count.instances_poisson == math.ceil(count.slots_poisson / 30.0)
    assert count.mean_wait_s <= 0.25
    with pytest.raises(ConfigError):
        instances_by_queueing(0.0, 5.0, 30.0, 1.0, 1.0, 0.25)
