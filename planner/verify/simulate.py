"""The plan's own prediction of a verify run: the requests it sent, sent to the engine model.

`sent_requests` rebuilds the run's traffic as its load generator scheduled it
(locustfiles.driver: each open stage's arrivals seeded by the run seed and the stage's
number, `locustfiles.arrivals.arrival_times`; shapes from one `WorkloadStream` of the run
seed, numbered across the open stages; a replayed steady stage the log's own arrivals and
lengths, cut and sped up as the load test cuts them, `locustfiles.replay`).
`simulate_stages` sends the requests the run did send (by request id: a recovery ended early
or a run stopped by SIGTERM sent fewer) to `instances` engines of the plan's GPU, model and
calibration in virtual time (planner.fleet.sim, the fleet check's simulator) and returns
per-request records in the columns the verdict and the recovery curve read. The prediction
is then for the very traffic measured: a fresh draw's percentiles differ from the run's
(over 12 seeds single draws of one steady stage spread 0.244-0.284 s at p95 and
0.288-0.418 s at p99: bench/verify_overhead.py), and that spread is no error of the plan.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from contracts.plan import Plan
from contracts.run import StagePlan
from locustfiles.arrivals import replay_times, stage_times
from locustfiles.replay import read_log_table, slice_log
from planner.engine import EngineConfig, build_engine_config
from planner.engine.precision import precision_overrides
from planner.engine.requests import EngineRequest
from planner.fleet.sim import Routing, run_records, simulate_fleet
from planner.fleet.traffic import shape_request
from profiles.model import Profile
from profiles.workload import WorkloadStream, replay_shape

CALIBRATED_FACTORS = ("mfu", "mbu", "step_overhead_s")


def plan_engine(plan: Plan) -> EngineConfig:
    """The engine the plan's fleet check simulated: its GPU, model and tp, with the factors
    its calibration fitted (when it was calibrated)."""
    inputs = plan.inputs
    fleet = plan.checks.fleet
    fitted = fleet.calibration if fleet is not None and fleet.calibration else {}
    overrides: dict[str, Any] = {k: fitted[k] for k in CALIBRATED_FACTORS if k in fitted}
    return build_engine_config(
        inputs.gpu, inputs.model, inputs.tp, inputs.catalog, pp=inputs.pp,
        **precision_overrides(inputs.quantization, inputs.kv_cache_dtype),
        **overrides,
    )  # fmt: skip


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


def sent_requests(
    profile: Profile,
    config: EngineConfig,
    stages: StagePlan,
    *,
    seed: int,
    replay: tuple[str, float] | None = None,
) -> list[EngineRequest]:
    """Every request the load generator schedules for `stages` (open loop), with its id
    (`STAGE/j`, as the run's records name it) and its time from the first stage's start,
    stages back to back at their planned lengths. `replay` (log path, speed) for a stage
    whose arrivals are `replay`."""
    stream = WorkloadStream(profile, seed)
    shape = next(stream)
    out: list[EngineRequest] = []
    offset_s = 0.0
    base = 0  # the open stages' shapes are numbered across stages
    for i, stage in enumerate(stages.stages):
        if stage.arrival == "replay":
            if replay is None:
                raise ValueError(f"stage {stage.name!r} replays a log but none was given")
            logged = replayed_requests(replay[0], replay[1], stage.duration_s, config)
            out += [
                replace(r, request_id=f"{stage.name}/{j}", arrival_s=offset_s + r.arrival_s)
                for j, r in enumerate(logged)
            ]
        else:
            rng = np.random.default_rng([seed, 1, i])
            times = stage_times(stage, rng)
            for j, t in enumerate(times.tolist()):
                while shape.index < base + j:
                    shape = next(stream)
                out.append(
                    shape_request(
                        shape,
                        f"{stage.name}/{j}",
                        offset_s + t,
                        config.effective_max_model_len,
                        config.block_tokens,
                    )
                )
            base += len(times)
        offset_s += stage.duration_s
    return sorted(out, key=lambda r: r.arrival_s)


def simulate_stages(
    profile: Profile,
    config: EngineConfig,
    stages: StagePlan,
    instances: int,
    routing: Routing,
    *,
    seed: int = 0,
    replay: tuple[str, float] | None = None,
    sent: Collection[str] | None = None,
) -> pl.DataFrame:
    """Per-request records (intended_send_s, ttft_s, tpot_s, e2e_s, ok, schedule_lag_s) of
    `stages` (steady, burst, recovery; open loop) as the run of seed `seed` scheduled them
    (`sent_requests`), simulated on `instances` engines; `sent`: the request ids the run
    sent (None: all it scheduled)."""
    requests = sent_requests(profile, config, stages, seed=seed, replay=replay)
    if sent is not None:
        keep = set(sent)
        requests = [r for r in requests if r.request_id in keep]
    run = simulate_fleet(requests, config, instances, routing)
    return (
        run_records(run)
        .with_columns(
            pl.col("arrival_s").alias("intended_send_s"),
            pl.col("arrival_s").alias("sent_s"),
            pl.lit(0.0).alias("schedule_lag_s"),
            (pl.col("arrival_s") + pl.col("e2e_s")).alias("end_s"),
        )
        .sort("intended_send_s")
    )
