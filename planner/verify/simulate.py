"""The plan's own prediction of a verify run: the same stages sent to the engine model.

`simulate_stages` draws the verify run's traffic from the profile (Poisson arrivals at the
steady rate, time-warped to the burst's rate inside the burst: planner.fleet.traffic), replays
it against `instances` engines of the plan's GPU, model and calibration in virtual time
(planner.fleet.sim, the fleet check's simulator) and returns per-request records in the
columns the verdict and the recovery curve read, pooled over `repeats` seeded draws so the
model's percentiles are its expectation rather than one sample's. With `--replay` the steady
stage is the log's own arrivals and lengths, cut and sped up as the load test cuts them
(locustfiles.replay, locustfiles.arrivals.replay_times), in every draw: the plan's prediction
is then for the traffic that was sent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from contracts.plan import Plan
from contracts.run import StagePlan
from locustfiles.arrivals import replay_times
from locustfiles.replay import read_log_table, slice_log
from planner.engine import EngineConfig, build_engine_config
from planner.engine.requests import EngineRequest
from planner.fleet.sim import Routing, run_records, simulate_fleet
from planner.fleet.traffic import BurstWindow, profile_requests, shape_request
from profiles.model import Profile
from profiles.workload import replay_shape

CALIBRATED_FACTORS = ("mfu", "mbu", "step_overhead_s")


def plan_engine(plan: Plan) -> EngineConfig:
    """The engine the plan's fleet check simulated: its GPU, model and tp, with the factors
    its calibration fitted (when it was calibrated)."""
    inputs = plan.inputs
    fleet = plan.checks.fleet
    fitted = fleet.calibration if fleet is not None and fleet.calibration else {}
    overrides: dict[str, Any] = {k: fitted[k] for k in CALIBRATED_FACTORS if k in fitted}
    return build_engine_config(inputs.gpu, inputs.model, inputs.tp, **overrides)


def replayed_requests(
    path: str, speed: float, duration_s: float, config: EngineConfig
) -> list[EngineRequest]:
    """The requests a replayed steady stage of `duration_s` sends: the log's from its second
    0 (the load test's `replay_start_s`), `speed` times faster, with the log's lengths."""
    table = slice_log(read_log_table(path), 0.0, duration_s * speed + 1.0)
    times = replay_times(table["arrival_s"].to_numpy(), speed, duration_s, 0.0)
    inputs = table["input_tokens"].fill_null(1).to_list()
    outputs = table["output_tokens"].fill_null(1).to_list()
    return [
        shape_request(
            replay_shape(j, inputs[j], outputs[j]),
            f"replay-{j}",
            t,
            config.effective_max_model_len,
            config.block_tokens,
        )
        for j, t in enumerate(times.tolist())
    ]


def simulate_stages(
    profile: Profile,
    config: EngineConfig,
    stages: StagePlan,
    instances: int,
    routing: Routing,
    *,
    seed: int = 0,
    repeats: int = 3,
    replay: tuple[str, float] | None = None,
) -> pl.DataFrame:
    """Per-request records (intended_send_s, ttft_s, tpot_s, e2e_s, ok, schedule_lag_s) of
    `stages` (steady, burst, recovery; open loop) simulated on `instances` engines, `repeats`
    draws pooled on one time axis. `replay` (log path, speed): the steady stage is that
    log's requests (`replayed_requests`), the burst and recovery drawn from the profile."""
    steady, burst, recovery = stages.stages
    assert steady.rate_rps is not None and burst.rate_rps is not None
    span_s = steady.duration_s + burst.duration_s + recovery.duration_s
    window = BurstWindow(
        start_s=steady.duration_s,
        duration_s=burst.duration_s,
        factor=burst.rate_rps / steady.rate_rps,
    )
    logged = replayed_requests(replay[0], replay[1], steady.duration_s, config) if replay else []
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
        if replay:
            drawn = [r for r in requests if r.arrival_s >= steady.duration_s]
            requests = sorted([*logged, *drawn], key=lambda r: r.arrival_s)
        run = simulate_fleet(requests, config, instances, routing)
        frames.append(run_records(run))
    pooled = pl.concat(frames)
    return pooled.with_columns(
        pl.col("arrival_s").alias("intended_send_s"),
        pl.col("arrival_s").alias("sent_s"),
        pl.lit(0.0).alias("schedule_lag_s"),
        (pl.col("arrival_s") + pl.col("e2e_s")).alias("end_s"),
    ).sort("intended_send_s")
