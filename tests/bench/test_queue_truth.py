"""The queueing truth (testkit/queue_truth.py) against textbook values: Erlang-B table
entries, and M/M/1 and M/M/c wait quantiles from Erlang-C, P(W > t) = C(c, a) e^{-(cμ-λ)t}."""

from __future__ import annotations

import numpy as np
import pytest

from testkit.queue_truth import (
    erlang_b,
    erlang_b_max_load,
    erlang_c,
    loss_max_rate,
    mgc_max_rate,
    mmc_wait_quantile,
    simulate_ttft,
    ttft_quantile,
)

ARRIVALS = 100_000


@pytest.mark.parametrize(
    ("servers", "blocking", "erlangs"),
    [  # Erlang-B table (offered traffic in Erlangs for a grade of service)
        (1, 0.01, 0.0101),
        (5, 0.01, 1.361),
        (6, 0.05, 2.960),
        (10, 0.01, 4.461),
        (10, 0.05, 6.216),
        (20, 0.01, 12.031),
        (20, 0.05, 15.249),
    ],
)
def test_erlang_b_matches_table(servers: int, blocking: float, erlangs: float) -> None:
    assert erlang_b_max_load(servers, blocking) == pytest.approx(erlangs, abs=1.5e-3)
    assert erlang_b(servers, erlangs) == pytest.approx(blocking, rel=2e-3)


def test_erlang_b_single_server_and_limits() -> None:
    assert erlang_b(1, 3.0) == pytest.approx(3.0 / 4.0)
    assert erlang_b(0, 2.0) == 1.0
    with pytest.raises(ValueError):
        erlang_b_max_load(4, 1.5)


def test_refusing_server_of_the_issue() -> None:
    # 6 slots, 0.76 s per request, p95: refusals reach 5 % at about 3.9 req/s
    assert loss_max_rate(6, 0.76, 0.95) == pytest.approx(3.9, abs=0.01)


def test_erlang_c_textbook() -> None:
    assert erlang_c(1, 0.8) == pytest.approx(0.8)  # M/M/1: P(wait) = ρ
    assert erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0)  # M/M/2: 2ρ²/(1+ρ) = 1/3 at ρ = 1/2
    with pytest.raises(ValueError):
        erlang_c(2, 2.0)


def _exponential(seed: int = 7, n: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    service = np.random.default_rng(seed).exponential(1.0, n)
    return service, np.zeros(n)


@pytest.mark.parametrize(("servers", "load"), [(1, 0.8), (4, 0.8), (32, 0.9)])
def test_simulated_wait_p95_matches_erlang_c(servers: int, load: float) -> None:
    service, first = _exponential()
    rate = load * servers  # mean service 1 s
    expected = mmc_wait_quantile(servers, rate, 1.0, 0.95)
    simulated = ttft_quantile(rate, service, first, servers, 0.95, arrivals=ARRIVALS)
    assert expected > 0.3  # a real queue, not the no-wait floor
    assert simulated == pytest.approx(expected, rel=0.06)


def test_first_token_offset_adds_and_no_wait_when_idle() -> None:
    service = np.full(10, 0.5)
    first = np.full(10, 0.05)
    ttft = simulate_ttft(0.01, service, first, servers=4, arrivals=5_000)
    assert float(np.max(ttft)) == pytest.approx(0.05)  # almost never two at once on 4 slots


def test_quantile_rises_with_rate_under_common_random_numbers() -> None:
    service, first = _exponential(n=2_000)
    rates = [2.0, 2.5, 3.0, 3.5]
    quantiles = [ttft_quantile(r, service, first, 4, 0.95, arrivals=20_000) for r in rates]
    assert quantiles == sorted(quantiles) and quantiles[0] < quantiles[-1]


def test_max_rate_matches_erlang_c_inverse() -> None:
    servers, threshold_s, offset_s = 8, 1.5, 0.1
    service, _ = _exponential()
    first = np.full_like(service, offset_s)
    # The rate where C(c, a) e^{-(cμ-λ)(t - offset)} = 5 %, by bisection on the formula.
    low, high = 1.0, servers - 1e-6
    while high - low > 1e-9:
        mid = (low + high) / 2
        if mmc_wait_quantile(servers, mid, 1.0, 0.95) + offset_s <= threshold_s:
            low = mid
        else:
            high = mid
    found = mgc_max_rate(service, first, servers, threshold_s, arrivals=ARRIVALS, rel_tol=0.005)
    assert found == pytest.approx(low, rel=0.03)


def test_max_rate_refuses_an_impossible_threshold() -> None:
    service = np.full(5, 1.0)
    with pytest.raises(ValueError, match="even without a queue"):
        mgc_max_rate(service, np.full(5, 0.3), 2, 0.2, arrivals=1_000)
