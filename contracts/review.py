"""Typed contract of review.json (`"schema": "capplan.review/1"`): the quarterly capacity review.

Written by `capplan review`, read by the review PDF and by the next quarter's `--previous`.
Every number the review PDF shows is stored here (and in each service's embedded plan).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.finding import Finding
from contracts.plan import ObservedCapacity, Plan

REVIEW_SCHEMA = "capplan.review/1"

RiskLevel = Literal["high", "medium", "low"]
ChangeStatus = Literal["changed", "new", "unchanged"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DayTypeHours(_Model):
    """Instances needed in each hour of day (0..23, UTC) on one kind of day."""

    day_type: Literal["weekday", "weekend", "all"]
    days: int = Field(ge=0, description="days of this type the log covers")
    instances: list[int | None] = Field(
        description="24 counts: the most any covered day of this type needed in that hour "
        "(None where no such hour is covered)"
    )
    peak_rps: list[float | None] = Field(description="24 peak rates behind the counts (req/s)")


class FleetOption(_Model):
    """One way to run the service's fleet through the day, with its monthly GPU-hours and cost."""

    kind: Literal["peak_all_day", "fixed_schedule", "autoscaled"]
    gpu_hours_per_month: float = Field(ge=0)
    monthly_cost_usd: float = Field(ge=0)
    rule: str = Field(description="how the count per hour is set, in words")
    rule_finding: Finding | None = None


class HourlyCapacity(_Model):
    """Capacity by hour of day, from the profile's peak per clock hour."""

    window_s: float
    hours_covered: int
    day_types: list[DayTypeHours]
    per_clock_hour_instances: list[int] = Field(
        description="instances each covered clock hour of the log needed, in order"
    )
    scale_up_delay_s: float = Field(ge=0, description="model load time of a new instance")
    options: list[FleetOption]
    trough_instances: int
    peak_instances: int


class GrowthTrend(_Model):
    """The trend of weekly peak demand, projected to the end of the next quarter."""

    model: Literal["linear", "exponential"]
    weeks: int
    weekly_peak_rps: list[float]
    slope: float = Field(description="req/s per week (linear) or log-growth per week (exp.)")
    weekly_growth: float = Field(description="fitted growth per week as a fraction")
    r2: float = Field(description="R² of the chosen fit, on weekly peaks in req/s")
    r2_other: float = Field(description="R² of the other model, for comparison")
    horizon: str = Field(description="ISO date of the end of the next quarter")
    horizon_weeks: float = Field(description="weeks from the last full week's middle to it")
    growth: float = Field(description="projected peak / fitted peak of the last week")
    growth_low: float = Field(description="lower end of the interval")
    growth_high: float = Field(description="upper end of the interval")
    level: float = Field(description="confidence of the interval, e.g. 0.9")
    statement: str
    statement_finding: Finding | None = None


class CountInterval(_Model):
    """How sure the instance count is: a bootstrap interval and what drives it."""

    level: float
    instances: int
    low: int
    high: int
    peak_rps_interval: tuple[float, float] | None = Field(
        description="interval of the planning peak (block bootstrap of window rates)"
    )
    limit_interval: tuple[float, float] | None = Field(
        description="range of the per-instance limit (limit.json bracket and its bootstrap)"
    )
    peak_spread: float = Field(description="log(high/low) of the peak interval, 0 if none")
    limit_spread: float = Field(description="log(high/low) of the limit range, 0 if none")
    dominant: Literal["peak", "limit", "none"]
    replicates: int
    block_windows: int
    method: str
    method_finding: Finding | None = None


class Risk(_Model):
    service: str
    level: RiskLevel
    kind: str = Field(description="short key, e.g. 'kv_headroom', 'count_interval'")
    text: str = Field(description="the finding in English")
    finding: Finding | None = Field(None, description="the text as a key and its figures")
    monthly_cost_usd: float = Field(description="the service's cost, used to rank risks")


class ServiceChange(_Model):
    instances: int
    gpus: int
    monthly_cost_usd: float
    status: ChangeStatus = Field(
        description="new: not in the previous review; unchanged: same plan inputs (profile "
        "content, limit, SLO, growth, headroom, redundancy, GPU, model, price) and the same "
        "instances, GPUs and cost; changed: otherwise"
    )


class ServiceReview(_Model):
    name: str
    profile: str = Field(description="the profile as given: path, sample:NAME or preset:NAME")
    profile_digest: str
    limit: str = Field(description="the limit as given: limit.json path or number with unit")
    gpu: str
    model: str
    tp: int
    instances: int
    gpus: int
    redundancy: int
    monthly_cost_usd: float
    gpu_hour_price_usd: float
    peak_rps: float
    per_instance_limit: float
    unit: Literal["rps", "users"]
    growth: float = Field(description="growth of the scenario the fleet total uses")
    growth_source: Literal["given", "data", "none"]
    count_interval: CountInterval | None
    hourly: HourlyCapacity | None
    trend: GrowthTrend | None
    risks: list[Risk]
    change: ServiceChange | None = None
    observed: ObservedCapacity | None = Field(
        default=None, description="observed capacity per instance (a profile from metrics)"
    )
    plan: Plan


class GpuPool(_Model):
    """Services on one GPU type, summed, with spares counted per service and shared."""

    gpu: str
    services: list[str]
    instances: int
    gpus_for_load: int = Field(description="GPUs without any spare")
    spare_gpus_per_service: int = Field(
        description="sum of each service's spares (its k spare instances x TP)"
    )
    spare_gpus_shared: int = Field(
        description="one shared pool of spares: as many GPUs as the service with the most "
        "spares keeps (its k spare instances x TP), not its N+k"
    )
    gpus_per_service_spares: int
    gpus_shared_spares: int
    gpu_hour_price_usd: float = Field(description="highest price among the pool's services")
    monthly_cost_usd: float = Field(description="with spares per service (the plans' total)")
    monthly_cost_shared_usd: float
    rule: str
    rule_finding: Finding | None = None


class FleetTotals(_Model):
    services: int
    instances: int
    gpus: int
    gpus_by_type: dict[str, int]
    monthly_cost_usd: float
    gpus_shared_spares: int
    monthly_cost_shared_usd: float


class FleetChange(_Model):
    previous_name: str
    instances: int
    gpus: int
    monthly_cost_usd: float
    gpus_by_type: dict[str, int]
    removed_services: list[str]
    new_services: list[str]


class InputDigest(_Model):
    role: str
    path: str
    sha256: str


class Review(_Model):
    schema_: str = Field(default=REVIEW_SCHEMA, alias="schema")
    name: str
    created_at: str
    capplan_version: str
    review_file: str
    confidence: float
    scale_up_delay_s: float
    services: list[ServiceReview]
    pools: list[GpuPool]
    fleet: FleetTotals
    change: FleetChange | None
    risks: list[Risk] = Field(description="every service's risks, ranked")
    inputs: list[InputDigest]
    sentence: str

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
