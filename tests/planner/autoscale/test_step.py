"""The request-level autoscaler simulation against truths it does not compute.

A load step on a fleet of 3 replicas of 16 slots (2 s exponential service, so 8 req/s each):
10 req/s (utilisation 0.42) then 20 req/s (0.83). A rate policy (6 req/s per replica) asks
for a 4th replica at its first poll that sees the whole minute at 20 req/s. Truths: the new
replica serves exactly the cold start after that poll, never before; and the share of the
under-provisioned minutes' requests that wait longer than the budget is Erlang C's
C(48, 40) x exp(-(48/2 - 20) x budget) (the M/M/c waiting-time tail), within 10 %.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.autoscale.des import DesRun, simulate
from planner.autoscale.policies import Controller, Targets, build_policy, parse_policy
from planner.capacity.queueing import erlang_c

SLOTS, SERVICE_S, COLD_START_S = 16, 2.0, 3600.0
LOW_RPS, HIGH_RPS, STEP_AT_S, HORIZON_S = 10.0, 20.0, 600.0, 4800.0
BUDGET_S = 0.25
TARGETS = Targets(
    queue_per_replica=1.0,
    kv_per_replica=0.5,
    rate_per_replica=6.0,
    schedule=(3,) * 24,
    max_replicas=10,
)


def _poisson(rng: np.random.Generator, rate: float, start: float, end: float) -> np.ndarray:
    gaps = rng.exponential(1.0 / rate, int(rate * (end - start) * 1.3) + 10)
    times = start + np.cumsum(gaps)
    return times[times < end]


def _step_run(seed: int) -> DesRun:
    rng = np.random.default_rng(seed)
    arrivals = np.concatenate(
        (_poisson(rng, LOW_RPS, 0.0, STEP_AT_S), _poisson(rng, HIGH_RPS, STEP_AT_S, HORIZON_S))
    )
    service = rng.exponential(SERVICE_S, len(arrivals))
    spec = parse_policy("rate:target=6,min=3,max=10,poll=30")
    controller = Controller(spec, build_policy(spec, TARGETS, COLD_START_S), 10)
    return simulate(
        arrivals,
        service,
        slots=SLOTS,
        initial=3,
        controller=controller,
        cold_start_s=COLD_START_S,
        horizon_s=HORIZON_S,
    )


def _trigger_and_ready(run: DesRun) -> tuple[float, float, int]:
    trigger = next(t for t, kind, _ in run.events if kind == "scale")
    ready_t, replica = next((t, i) for t, kind, i in run.events if kind == "ready")
    return trigger, ready_t, replica


@pytest.mark.parametrize("seed", [0, 1])
def test_new_replica_serves_exactly_cold_start_after_trigger(seed: int) -> None:
    run = _step_run(seed)
    trigger, ready_t, replica = _trigger_and_ready(run)
    # The first poll that sees a whole minute at the high rate: 20 / 6 -> 4 replicas.
    assert trigger == STEP_AT_S + 60.0
    assert ready_t == trigger + COLD_START_S
    served = run.start_s[run.replica == replica]
    assert served.size > 0 and served.min() >= ready_t
    waited = ((run.arrival_s < ready_t) & ~(run.start_s < ready_t)).any()
    # A request queued at the moment it became ready starts on it at that very instant.
    assert (served.min() == ready_t) == bool(waited)


def test_dip_matches_erlang_c_of_under_provisioned_minutes() -> None:
    bad = total = 0
    for seed in range(8):  # one under-provisioned hour each; one alone is +-30 %
        run = _step_run(seed)
        _, ready_t, _ = _trigger_and_ready(run)
        under = (run.arrival_s >= STEP_AT_S) & (run.arrival_s < ready_t)
        bad += int((run.wait_s()[under] > BUDGET_S).sum())
        total += int(under.sum())
    servers = 3 * SLOTS
    offered = HIGH_RPS * SERVICE_S
    truth = erlang_c(servers, offered) * math.exp(-(servers / SERVICE_S - HIGH_RPS) * BUDGET_S)
    simulated = bad / total
    assert simulated == pytest.approx(truth, rel=0.10), (simulated, truth)
    # Before the step the fleet is far from busy: the dip is the step's, not a constant.
    run = _step_run(0)
    before = run.arrival_s < STEP_AT_S
    assert (run.wait_s()[before] > BUDGET_S).mean() < truth / 10
