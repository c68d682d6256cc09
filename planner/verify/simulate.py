"""The plan's own prediction of a verify run: the same stages sent to the engine model.

`simulate_stages` draws the verify run's traffic from the profile (Poisson arrivals at the
steady rate, time-warped to the burst's rate inside the burst: planner.fleet.traffic), replays
it against `instances` engines of the plan's GPU, model and calibration in virtual time
(planner.fleet.sim, the fleet check's simulator) and returns per-request records in the
columns the verdict and the recovery curve read, pooled over `repeats` seeded draws so the
model's percentiles are its expectation rather than one sample's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from contracts.plan import Plan
from contracts.run import StagePlan
from planner.engine import EngineConfig, build_engine_config
from planner.fleet.sim import Routing, run_records, simulate_fleet
from planner.fleet.traffic import BurstWindow, profile_requests
from profiles.model import Profile

CALIBRATED_FACTORS = ("mfu", "mbu", "step_overhead_s")


def plan_engine(plan: Plan) -> EngineConfig:
    """The engine the plan's fleet check simulated: its GPU, model and tp, with the factors
    its calibration fitted (when it was calibrated)."""
    inputs = plan.inputs
    fleet = plan.checks.fleet
    fitted = fleet.calibration if fleet is not None and fleet.calibration else {}
    overrides: dict[str, Any] = {k: fitted[k] for k in CALIBRATED_FACTORS if k in fitted}
    return build_engine_config(inputs.gpu, inputs.model, inputs.tp, **overrides)


def simulate_stages(
    profile: Profile,
    config: EngineConfig,
    stages: StagePlan,
    instances: int,
    routing: Routing,
    *,
    seed: int = 0,
    repeats: int = 3,
) -> pl.DataFrame:
    """Per-request records (intended_send_s, ttft_s, tpot_s, e2e_s, ok, schedule_lag_s) of
    `stages` (steady, burst, recovery; open loop) simulated on `instances` engines, `repeats`
    draws pooled on one time axis."""
    steady, burst, recovery = stages.stages
    assert steady.rate_rps is not None and burst.rate_rps is not None
    span_s = steady.duration_s + burst.duration_s + recovery.duration_s
    window = BurstWindow(
        start_s=steady.duration_s,
        duration_s=burst.duration_s,
        factor=burst.rate_rps / steady.rate_rps,
    )
    frames = []
    for k in range(repeats):
        rng = np.random.default_rng(seed * 1000 + k)
        requests = profile_requests(
            profile,
            steady.rate_rps,
            span_s,
            rng,
            config.effective_max_model_len,
            "poisson",
            window,
            block_tokens=config.block_tokens,
        )
        run = simulate_fleet(requests, config, instances, routing)
        frames.append(run_records(run))
    pooled = pl.concat(frames)
    return pooled.with_columns(
        pl.col("arrival_s").alias("intended_send_s"),
        pl.col("arrival_s").alias("sent_s"),
        pl.lit(0.0).alias("schedule_lag_s"),
        (pl.col("arrival_s") + pl.col("e2e_s")).alias("end_s"),
    ).sort("intended_send_s")
