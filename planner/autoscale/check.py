"""The per-step model against the request-level simulation on the same trace and policy.

`compare_models` draws Poisson arrivals at each step's rate and exponential service times
(the per-step model's own assumptions, so what differs is the reduction: steps, the fluid
backlog, polls at step starts, no drain) and runs both models with fresh controllers. The
bench (bench/autoscale_speed.py --check) and the tests quote its figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contracts.autoscale import PolicySpec
from planner.autoscale.des import simulate
from planner.autoscale.fluid import simulate_steps
from planner.autoscale.policies import Controller, Targets, build_policy
from planner.autoscale.trace import Trace


@dataclass(frozen=True, kw_only=True)
class ModelPair:
    """One policy (None: the static count) by both models over the same trace."""

    label: str
    steps_attainment: float
    requests_attainment: float
    steps_replica_h: float
    requests_replica_h: float
    requests: int


def poisson_arrivals(trace: Trace, rng: np.random.Generator) -> np.ndarray:
    """Arrival times: per step a Poisson count at its rate, placed uniformly (sorted)."""
    counts = rng.poisson(trace.rate_rps * trace.step_s)
    starts = np.repeat(np.arange(len(counts)) * trace.step_s, counts)
    return np.sort(starts + rng.uniform(0.0, trace.step_s, starts.size))


def compare_models(
    trace: Trace,
    specs: list[PolicySpec | None],
    *,
    slots: int,
    service_s: float,
    initial: int,
    targets: Targets,
    cold_start_s: float,
    wait_budget_s: float,
    rng: np.random.Generator,
    kv_per_slot: float = 1.0,
) -> list[ModelPair]:
    """Both models for each spec (None: `initial` replicas fixed) over `trace`."""
    arrivals = poisson_arrivals(trace, rng)
    service = rng.exponential(service_s, arrivals.size)
    pairs = []
    for spec in specs:

        def controller(s: PolicySpec | None = spec) -> Controller | None:
            if s is None:
                return None
            return Controller(s, build_policy(s, targets, cold_start_s), targets.max_replicas)

        steps = simulate_steps(
            trace.rate_rps,
            step_s=trace.step_s,
            service_s=service_s,
            slots=slots,
            initial=initial,
            controller=controller(),
            cold_start_s=cold_start_s,
            wait_budget_s=wait_budget_s,
            kv_per_slot=kv_per_slot,
        )
        requests = simulate(
            arrivals,
            service,
            slots=slots,
            initial=initial,
            controller=controller(),
            cold_start_s=cold_start_s,
            horizon_s=trace.horizon_s,
            kv_per_slot=kv_per_slot,
        )
        good = float((requests.wait_s() <= wait_budget_s).mean()) if arrivals.size else 1.0
        pairs.append(
            ModelPair(
                label="static" if spec is None else spec.label,
                steps_attainment=float(steps.good.sum() / max(steps.arrivals.sum(), 1e-12)),
                requests_attainment=good,
                steps_replica_h=float(steps.held.sum()) * trace.step_s / 3600.0,
                requests_replica_h=requests.replica_s / 3600.0,
                requests=int(arrivals.size),
            )
        )
    return pairs
