"""A simulated run's figures: attainment by hour of day, GPU-hours, cost, the worst burst minute."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contracts.autoscale import BurstMinute, PolicyOutcome, PolicySpec
from planner.autoscale.fluid import StepRun
from planner.autoscale.trace import Trace
from planner.capacity.cost import HOURS_PER_MONTH

BURST_AFTER_S = 600.0  # a burst's aftermath: the cold start and ten minutes more


@dataclass(frozen=True, kw_only=True)
class Costing:
    """What turns replica-steps into GPU-hours and dollars."""

    tp: int
    gpu_hour_price_usd: float
    cold_start_s: float
    target_attainment: float


def _share(good: np.ndarray, arrivals: np.ndarray) -> float | None:
    total = float(arrivals.sum())
    return float(good.sum()) / total if total > 0 else None


def _hourly(trace: Trace, run: StepRun) -> tuple[list[float | None], list[float | None]]:
    hod = trace.hour_of_day()
    per_hour = max(1, int(round(3600.0 / trace.step_s)))
    clock = np.arange(len(hod)) // per_hour
    good, arrivals = run.good, run.arrivals
    mean: list[float | None] = []
    worst: list[float | None] = []
    for h in range(24):
        sel = hod == h
        mean.append(_share(good[sel], arrivals[sel]))
        shares = [
            s
            for c in np.unique(clock[sel])
            if (s := _share(good[sel & (clock == c)], arrivals[sel & (clock == c)])) is not None
        ]
        worst.append(min(shares) if shares else None)
    return mean, worst


def worst_burst_minute(trace: Trace, run: StepRun, cold_start_s: float) -> BurstMinute | None:
    """The lowest-attainment step from each burst's start to cold start + 10 min after it."""
    worst: BurstMinute | None = None
    for start in trace.burst_starts_s:
        first = int(start // trace.step_s)
        last = min(
            len(run.arrivals), int((start + cold_start_s + BURST_AFTER_S) // trace.step_s) + 1
        )
        for m in range(first, last):
            if run.arrivals[m] <= 0:
                continue
            share = float(run.good_share[m])
            if worst is None or share < worst.attainment:
                worst = BurstMinute(
                    burst_start_s=float(start),
                    minute_start_s=m * trace.step_s,
                    attainment=share,
                    instances=int(np.floor(run.ready[m] + 1e-9)),
                )
    return worst


def outcome(
    label: str,
    spec: PolicySpec | None,
    trace: Trace,
    run: StepRun,
    costing: Costing,
    static_gpu_hours: float | None,
    target_per_replica: float | None = None,
) -> PolicyOutcome:
    """The outcome record of one run (`static_gpu_hours` None: this is the static plan)."""
    gpu_hours = float(run.held.sum()) * trace.step_s / 3600.0 * costing.tp
    per_month = gpu_hours * HOURS_PER_MONTH / (trace.horizon_s / 3600.0)
    mean, worst = _hourly(trace, run)
    attainment = _share(run.good, run.arrivals) or 0.0
    return PolicyOutcome(
        label=label,
        spec=spec,
        target_per_replica=target_per_replica,
        attainment=min(1.0, attainment),
        hourly_attainment=mean,
        hourly_worst=worst,
        gpu_hours=gpu_hours,
        gpu_hours_per_month=per_month,
        monthly_cost_usd=per_month * costing.gpu_hour_price_usd,
        cost_vs_static=gpu_hours / static_gpu_hours if static_gpu_hours else 1.0,
        mean_instances=float(run.held.mean()),
        max_instances=int(np.ceil(run.held.max() - 1e-9)),
        scale_ups=run.scale_ups,
        worst_burst_minute=worst_burst_minute(trace, run, costing.cold_start_s),
        meets_target=attainment >= costing.target_attainment,
    )
