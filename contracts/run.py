"""Typed contracts of a run directory: stage plans, record columns, stages.json and run.json.

Owned by the load-test code; read by the limit search, the planner and the report. Field
names carry units. `records.parquet` holds one row per scheduled request with
RECORD_COLUMNS (a public contract); times are seconds since the run's start.
"""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

RUN_SCHEMA = "capplan.run/1"

# records.parquet: public column contract (name -> polars dtype).
RECORD_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "stage": pl.Utf8,
    "request_id": pl.Utf8,
    "intended_send_s": pl.Float64,
    "sent_s": pl.Float64,
    "first_token_s": pl.Float64,
    "end_s": pl.Float64,
    "schedule_lag_s": pl.Float64,
    "ttft_s": pl.Float64,
    "tpot_s": pl.Float64,
    "itl_mean_s": pl.Float64,
    "itl_max_s": pl.Float64,
    "e2e_s": pl.Float64,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "tokens_estimated": pl.Boolean,
    "ok": pl.Boolean,
    "status_code": pl.Int64,
    "error_class": pl.Utf8,
    # The failure's message: an error body's `error.message`, a stream error event's message,
    # or the client's exception; at most 200 characters, never prompt text. Null when ok.
    "error_message": pl.Utf8,
    # Added by the load test: every gap between content chunks of the request (pooled for ITL).
    "itl_gaps_s": pl.List(pl.Float64),
}

# server_metrics.parquet: one row per scraped Prometheus sample.
SERVER_METRIC_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "t_s": pl.Float64,
    "name": pl.Utf8,
    "labels": pl.Utf8,
    "type": pl.Utf8,
    "value": pl.Float64,
}


class _Model(BaseModel):
    # +inf (a p95 that failed requests reach) is written as JSON's Infinity, not null: null
    # means "no sample" in a recovery curve.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


StageKind = Literal["open", "closed"]
StageRole = Literal["steady", "burst", "recovery", "step", "level", "replay"]


class Stage(_Model):
    """One stage of a plan: hold an open-loop rate or a closed-loop user count for a duration."""

    name: str = Field(min_length=1)
    kind: StageKind = Field(default="open", description="open: arrival schedule; closed: N users")
    role: StageRole = Field(default="steady", description="what the stage is for, read by reports")
    duration_s: float = Field(gt=0, description="stage length in seconds")
    rate_rps: float | None = Field(default=None, gt=0, description="open loop: mean arrival rate")
    users: int | None = Field(default=None, gt=0, description="closed loop: concurrent users")
    spawn_rate_users_per_s: float | None = Field(
        default=None, gt=0, description="closed loop: users started per second (None: all at once)"
    )
    arrival: str = Field(
        default="poisson", description="open loop: poisson | constant | gamma:K | replay"
    )
    requests: int | None = Field(
        default=None,
        gt=0,
        description="open loop: send exactly this many requests (vLLM's --num-prompts), at "
        "rate_rps or all at once when rate_rps is None; its summary runs until the last of them "
        "ended (meant for a plan's only or last stage)",
    )

    @model_validator(mode="after")
    def _load_matches_kind(self) -> Stage:
        if self.requests is not None and (self.kind != "open" or self.arrival == "replay"):
            raise ValueError(f"stage {self.name!r}: requests needs an open, non-replay stage")
        if (
            self.kind == "open"
            and self.rate_rps is None
            and self.arrival != "replay"
            and self.requests is None
        ):
            raise ValueError(f"stage {self.name!r}: an open stage needs rate_rps")
        if self.kind == "closed" and self.users is None:
            raise ValueError(f"stage {self.name!r}: a closed stage needs users")
        return self


class StagePlan(_Model):
    name: str = "custom"
    stages: list[Stage] = Field(min_length=1)


class Percentiles(_Model):
    """Distribution summary of one latency metric in seconds (None where no sample)."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None


class RecoveryCurve(_Model):
    """The rolling 10 s p95 TTFT around a burst (contracts.recovery): +inf where failures
    reach the p95, None where the window held too few requests."""

    t_s: list[float]
    ttft_p95_s: list[float | None]
    threshold_s: float
    burst_start_s: float
    burst_end_s: float
    recovery_s: float | None = Field(
        default=None, description="burst end until the rolling p95 is back under the threshold"
    )


class StageValidity(_Model):
    """Was the offered workload the asked one? (locustfiles.summary.stage_validity)"""

    asked_rps: float | None = Field(default=None, description="the stage's open-loop rate")
    offered_share: float | None = Field(
        default=None, description="offered / asked rate (scheduled requests over the stage)"
    )
    schedule_lag_p99_s: float | None = None
    prefix_hit_measured: float | None = Field(
        default=None, description="the server's prefix-cache hits / queries (tokens) in the stage"
    )
    prefix_hit_expected: float | None = Field(
        default=None, description="the profile's LRU hit ratio at the server's cache size"
    )
    cache_tokens: int | None = Field(default=None, description="the server's KV cache, tokens")
    warnings: list[str] = Field(default_factory=list, description="what makes it another load")


class StageSummary(_Model):
    """One entry of stages.json."""

    name: str
    kind: StageKind
    role: StageRole
    start_s: float = Field(description="stage start, seconds since run start")
    end_s: float
    duration_s: float
    target_rate_rps: float | None = None
    target_users: int | None = None
    scheduled: int = Field(description="requests scheduled in the stage (one record each)")
    completed: int = Field(description="requests that finished successfully")
    errors: int
    errors_by_class: dict[str, int] = Field(
        default_factory=dict,
        description="failed requests per error class (README: refused, server_error, timeout...)",
    )
    error_messages: dict[str, str] = Field(
        default_factory=dict, description="per error class, its most frequent error message"
    )
    offered_rps: float = Field(description="scheduled / duration")
    achieved_rps: float = Field(description="completed / duration")
    output_tokens_per_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    e2e_s: Percentiles
    schedule_lag_s: Percentiles
    ttft_from_intended_s: Percentiles = Field(
        default_factory=Percentiles, description="TTFT measured from the intended send"
    )
    mean_in_flight: float | None = None
    tokens_estimated: bool = False
    recovery_s: float | None = Field(
        default=None,
        description="recovery stage: burst end until the 10 s rolling p95 TTFT recovers",
    )
    recovered: bool | None = None
    recovery_curve: RecoveryCurve | None = Field(
        default=None, description="recovery stage: the rolling p95 TTFT the recovery is read on"
    )
    validity: StageValidity | None = Field(
        default=None, description="offered against asked load, client lag, prefix reuse"
    )
    planned_duration_s: float | None = Field(
        default=None, description="the plan's length of a stage that Locust's -t cut short"
    )
    server: dict[str, float] = Field(
        default_factory=dict, description="scraped server gauges: means / maxima over the stage"
    )
    slo: str | None = Field(
        default=None, description="the SLO that goodput and attainment were judged under"
    )
    success_only: bool = Field(
        default=False,
        description="`slo` was judged with --success-only (percentiles over the successful "
        "requests alone)",
    )
    goodput_rps: float | None = Field(
        default=None,
        description="good requests / duration under `slo` (planner.slo.verdict.evaluate: succeeded "
        "and "
        "within every per-request threshold)",
    )
    attainment: float | None = Field(
        default=None,
        description="good / scheduled requests under `slo` (errors and timeouts are not good)",
    )


class LostWorkerReport(_Model):
    """A load-generating worker the master stopped hearing from before its plan ended."""

    worker: str = Field(description="Locust's id of the worker (host name and a uuid)")
    slot: int = Field(ge=1, description="its share: arrivals k with k % of == slot - 1")
    of: int = Field(ge=1, description="the number of workers the schedule was split over")
    lost_at_s: float = Field(description="run clock when the master noticed (heartbeat missing)")
    lost_requests: int = Field(
        ge=0, description="its scheduled requests with no record, written as error class 'lost'"
    )


class RunInfo(_Model):
    """run.json."""

    schema_: str = Field(default=RUN_SCHEMA, alias="schema")
    name: str
    command: list[str]
    capplan_version: str
    locust_version: str = ""
    host: str
    model: str
    endpoint: Literal["chat", "completions"]
    profile_source: str = Field(
        description="profile path, 'preset:<name>', or a synthetic dataset ('random: 512 in / ...')"
    )
    profile_digest: str
    seed: int
    plan: StagePlan
    workers: int = 0
    client_concurrency_cap: int | None = None
    ignore_eos: bool = True
    time_scale: float = Field(
        default=1.0,
        description="the endpoint ran this many times faster than wall time (an emulator at "
        "--time-scale S); every time in the run is in the endpoint's time",
    )
    started_at: str
    start_epoch_s: float | None = Field(default=None, description="run start as a Unix time; t = 0")
    ended_at: str | None = None
    run_time_cap_s: float | None = Field(
        default=None, description="Locust's -t: the plan was cut to end by this time"
    )
    interrupted: bool = False
    tokens_estimated: bool = False
    master_bind: str | None = Field(
        default=None, description="HOST:PORT the master listened on for remote workers"
    )
    lost_workers: list[LostWorkerReport] = Field(
        default_factory=list, description="workers lost mid-run (their requests: class 'lost')"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True, ser_json_inf_nan="constants")
