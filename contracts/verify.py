"""Typed contract of verify.json (`"schema": "capplan.verify/1"`): the planned fleet measured.

Written by `capplan verify` (planner.verify), read by the report's verify page. One file holds
one test: the plan's design peak, a burst and a recovery, sent through a load balancer to the
plan's instances less `instances_down`, judged by the limit search's steady-state rules and
SLO verdict, beside the engine model's simulation of the very same stages at that fleet size,
with what each instance's metrics say it carried.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.finding import Finding
from contracts.plan import FleetPoint
from contracts.run import StagePlan

VERIFY_SCHEMA = "capplan.verify/1"
VERIFY_FILE = "verify.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class Figures(_Model):
    """One phase's SLO figures (seconds; +inf where failed requests reach the percentile)."""

    requests: int = Field(ge=0, description="scheduled requests judged (after the warm-up)")
    attainment: float | None = Field(description="good / scheduled under the SLO")
    meets_slo: bool
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p95_s: float | None = None
    tpot_p99_s: float | None = None
    e2e_p95_s: float | None = None


class Phase(_Model):
    """One stage (steady at the peak, burst, recovery): measured, and simulated alike."""

    name: str
    role: Literal["steady", "burst", "recovery"]
    rate_rps: float = Field(gt=0, description="the stage's open-loop rate")
    duration_s: float = Field(gt=0)
    warmup_s: float = Field(default=0.0, ge=0, description="left out at the stage's start")
    measured: Figures
    simulated: Figures | None = None
    errors_by_class: dict[str, int] = Field(
        default_factory=dict,
        description="failed requests per class; 502 and 504 answered by the load balancer are "
        "gateway_502 and gateway_504",
    )


class InstanceLoad(_Model):
    """What one instance's Prometheus page (or capplan's own router) says it carried."""

    url: str
    serving: bool = Field(description="planned to take traffic (not one of the instances down)")
    source: Literal["router", "metrics", "none"] = Field(
        description="router: capplan's own count; metrics: the instance's /metrics; none: unread"
    )
    engine: str | None = Field(
        default=None, description="vllm, sglang, tgi, llamacpp (from the names)"
    )
    requests: float | None = Field(default=None, description="requests it finished during the test")
    share: float | None = Field(default=None, description="its part of the fleet's load (0-1)")
    load_measure: str | None = Field(
        default=None, description="finished requests, or mean requests in flight"
    )
    running_mean: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    kv_usage_mean: float | None = Field(default=None, description="KV-cache usage, 0-1")
    kv_usage_max: float | None = None
    prefix_hit_ratio: float | None = Field(default=None, description="prefix-cache hits / queries")
    flag: Literal["ok", "over_share", "idle", "not_down", "unread"] = Field(
        description="over_share: more than its share; idle: serving but took nothing (ejected?); "
        "not_down: taken out but still took traffic; unread: no metrics"
    )


class Spread(_Model):
    """How evenly the serving instances shared the load."""

    measure: str | None = Field(description="finished requests, or mean requests in flight")
    max_over_fair: float | None = Field(description="the busiest instance's share x serving count")
    tolerance: float = Field(description="a share above (1 + tolerance) / serving is flagged")
    flagged: list[str] = Field(default_factory=list, description="instances flagged, with why")


class Verify(_Model):
    """verify.json."""

    schema_: str = Field(default=VERIFY_SCHEMA, alias="schema")
    created_at: str
    capplan_version: str
    plan: str = Field(description="path of plan.json")
    plan_digest: str
    profile: str
    profile_digest: str
    target: str = Field(description="the load balancer's URL, or capplan's router's")
    routing: str = Field(description="the user's load balancer, or capplan's round_robin / ...")
    hosts: list[str] = Field(default_factory=list, description="the instances, when listed")
    slo: str
    time_scale: float = 1.0
    arrivals: str = Field(description="how the load was generated: profile draws or replay")
    instances_planned: int = Field(ge=1)
    instances_down: int = Field(ge=0)
    instances_serving: int = Field(ge=1)
    rate_rps: float = Field(gt=0, description="the plan's design peak, sent at steady state")
    burst_rps: float = Field(gt=0)
    stages: StagePlan
    run_dir: str
    steady_state: str = Field(description="the steady-state rules' evidence for the steady stage")
    valid: bool = Field(description="the offered load was the planned one and the stage settled")
    invalid_reason: str | None = None
    phases: list[Phase]
    recovery_s: float | None = Field(
        description="burst end until the rolling p95 TTFT is back under the SLO's threshold"
    )
    recovery_simulated_s: float | None = None
    held_peak: bool
    held_burst: bool
    recovered: bool
    holds: bool = Field(description="meets the SLO at the peak and recovers from the burst")
    plan_points: list[FleetPoint] = Field(
        default_factory=list, description="the plan's own fleet check at this instance count"
    )
    instances: list[InstanceLoad] = Field(default_factory=list)
    spread: Spread | None = None
    sentence: str
    finding: Finding

    model_config = ConfigDict(extra="forbid", populate_by_name=True, ser_json_inf_nan="constants")
