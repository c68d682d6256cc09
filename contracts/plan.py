"""Typed contract of plan.json (`"schema": "capplan.plan/1"`): the capacity plan.

Owned by the planner; read by the report. Top level: `instances` (the count for the first
growth scenario), `scenarios`, `demand`, `resources`, `cost`, `checks`, `sensitivity` and
every input.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts import names
from contracts.autoscale import AutoscaleResult
from contracts.finding import Finding
from contracts.limit import PredictedInterval
from contracts.ops import OpsFiles

PLAN_SCHEMA = "capplan.plan/1"
# A limit given as a number with its unit (`plan --limit 17.4rps`), not a limit.json's path
LIMIT_NUMBER_RE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LimitInput(_Model):
    value: float = Field(gt=0)
    unit: Literal["rps", "users"]
    source: str = Field(description="path of limit.json or the number as given")
    slo: str | None = None
    mean_e2e_s: float | None = Field(None, description="e2e at the limit, for Little's law")
    binding: str | None = None
    predicted: PredictedInterval | None = Field(
        default=None,
        description="the limit is the engine model's prediction, not a GPU's measurement (the "
        "limit.json's `predicted`): where a GPU's limit is expected. null: measured or given",
    )

    @property
    def given(self) -> bool:
        """The limit was given to the planner as a number, not read from a limit.json."""
        return LIMIT_NUMBER_RE.match(self.source) is not None


class SloTerm(_Model):
    """One term of the plan's SLO, for saying it in words in any language ("95 % of requests
    see the first token within 2 s"); planner.slo.spec.Slo.terms writes them."""

    metric: str = Field(description="ttft, tpot, e2e, itl_max, or errors")
    stat: str | None = Field(
        default=None, description="p95, mean, max; None for an attainment form's per-request bound"
    )
    threshold: float = Field(description="seconds for a latency, a fraction for errors")
    share: float | None = Field(
        default=None, description="attainment form: the share of requests that must meet it"
    )


class PlanInputs(_Model):
    profile: str
    profile_digest: str
    limit: LimitInput
    slo: str | None
    slo_terms: list[SloTerm] = Field(
        default_factory=list, description="the SLO's terms, for words beside its grammar"
    )
    peak_window: str
    peak_quantile: float
    peak_rps_given: float | None = None
    peak_users_given: float | None = None
    growth: list[float]
    headroom: float
    redundancy: int
    gpu: str
    model: str
    tp: int
    pp: int = Field(default=1, description="pipeline stages (an instance holds tp x pp GPUs)")
    quantization: str = Field(default="none", description="weight format (vLLM's spelling)")
    kv_cache_dtype: str = Field(default="auto", description="KV-cache format (vLLM's spelling)")
    catalog: str | None = Field(
        default=None, description="the catalog file GPU and model came from"
    )
    gpu_hour_price_usd: float
    price_source: str
    fleet_check: bool = True
    calibrate: bool = True
    fleet_span_s: float | None = None
    seed: int = 0
    cpu_cores_per_gpu: int | None = None
    host_ram_per_gpu_memory: float | None = None


class Demand(_Model):
    peak_rps: float
    peak_definition: str = Field(description="e.g. 'p99 of 60s window rates'")
    mean_rps: float | None = None
    burst_factor: float | None = Field(None, description="peak 10s-window rate / planning peak")
    burst_peak_rps: float | None = None
    peak_concurrency: float | None = Field(None, description="Little's law at the peak")
    mean_e2e_s: float | None = None
    interarrival_cv: float | None = None
    mean_e2e_source: str | None = None  # measured at the limit, or simulated


class Scenario(_Model):
    growth: float
    demand: float = Field(description="peak x growth in the limit's unit")
    demand_with_headroom: float
    per_instance_limit: float
    unit: Literal["rps", "users"]
    instances_for_load: int
    redundancy: int
    instances: int
    gpus: int
    monthly_cost_usd: float
    arithmetic: str = Field(description="the formula with the numbers filled in")


class SensitivityCell(_Model):
    growth: float
    headroom: float
    instances: int


class GpuMemory(_Model):
    capacity_bytes_per_gpu: int
    weights_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    kv_capacity_tokens: int
    kv_needed_tokens_at_limit: float
    kv_headroom_frac: float = Field(description="1 - needed / capacity (negative: does not fit)")
    mean_context_tokens: float
    concurrency_at_limit: float


class Resources(_Model):
    instances: int
    tp: int
    pp: int = 1
    gpus: int
    gpu: str
    gpu_memory: GpuMemory
    cpu_cores_per_instance: int
    host_ram_gib_per_instance: float
    cpu_cores_total: int
    host_ram_gib_total: float
    rule: str = Field(description="the stated rule for CPU and RAM")
    rule_finding: Finding | None = None


class Cost(_Model):
    gpu_hour_price_usd: float
    price_source: str
    hours_per_month: float = 730.0
    monthly_usd: float
    per_scenario_monthly_usd: dict[str, float] = Field(default_factory=dict)


class QueueingCheck(_Model):
    method: str
    arrival_cv2: float
    service_cv2: float
    instances_poisson: int
    instances_bursty: int
    wait_probability: float | None = None
    mean_wait_s: float | None = None
    note: str = ""
    slots_per_instance: float | None = Field(None, description="the limit's concurrency")
    offered_erlangs: float | None = Field(None, description="peak rate x e2e: requests in flight")
    slots_poisson: int | None = None
    slots_bursty: int | None = None
    target_wait_s: float | None = None


# A router of the fleet simulation by its name in planner.fleet.routing's registry, which holds
# the names (a file is validated for the form; the planner refuses a name it has no router for).
RoutingName = names.RoutingName


class FleetPoint(_Model):
    instances: int
    routing: RoutingName
    attainment: float
    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    e2e_p95_s: float | None = None
    meets_slo: bool
    requests: int
    prefix_hit_ratio: float | None = Field(
        None, description="hit over queried prompt tokens, counted by the simulated engines"
    )
    sampled_instances: int | None = Field(
        None,
        description="instances simulated with their share of the traffic (None: all of them)",
    )
    settled: bool = Field(
        True,
        description="False: a router-count search point whose error bound did not hold on its "
        "first sub-fleet; its verdict and p95s are that sub-fleet's",
    )


class RouterCount(_Model):
    """What one router needs on the profile's traffic (`capplan plan --routing`)."""

    routing: RoutingName
    min_instances_meeting: int | None = Field(
        description="fewest simulated instances meeting the SLO (None: none up to searched_up_to)"
    )
    searched_up_to: int = Field(ge=1, description="the largest fleet simulated for it")
    settled: bool = Field(
        True,
        description="False: min_instances_meeting rests on an unsettled point (at it or one "
        "below), so it holds within the sub-fleet's sampling error",
    )
    prefix_hit_ratio: float | None = Field(
        None, description="the simulated engines' hit ratio at the planned count"
    )
    ideal_share: float | None = Field(
        None, description="prefix_hit_ratio over the profile's ideal hit ratio"
    )


class FleetCheck(_Model):
    simulated_s: float
    rate_rps: float
    points: list[FleetPoint]
    verdict: str = Field(description="e.g. 'n=6 meets the SLO, n=5 does not'")
    verdict_finding: Finding | None = None
    calibration: dict[str, float] | None = None
    wall_s: float | None = None
    estimated_wall_s: float | None = Field(
        None, description="the first points' cost estimated before they ran (a timed probe)"
    )
    estimated_full_wall_s: float | None = Field(
        None, description="the same estimate with every instance simulated (no shortcut)"
    )
    simulated_requests: int | None = Field(
        None, description="requests judged over all points (a shortcut point: its share)"
    )
    slo: str | None = None
    arrivals: str = Field("", description="how the arrival process was generated")
    min_instances_meeting: int | None = None  # fewest simulated instances meeting the SLO
    engine: str = Field("", description="GPU x model x tp and efficiency factors simulated")
    ideal_prefix_hit_ratio: float | None = Field(
        None, description="the profile's ideal prefix-hit ratio (every earlier block cached)"
    )
    routers: list[RouterCount] = Field(
        default_factory=list, description="instances each router needs (plan --routing)"
    )
    assumed_routing: RoutingName | None = Field(
        None, description="the router the plan's count assumes: the first one of --routing"
    )
    prefix_threshold: float | None = Field(
        None, description="the prefix router's threshold (share of a prompt's blocks matched)"
    )


class Checks(_Model):
    queueing: QueueingCheck | None = None
    fleet: FleetCheck | None = None


class InstanceCapacity(_Model):
    """What one instance carried in production while its observed latencies met the SLO."""

    instance: str
    carried_rps: float | None = Field(
        description="highest window rate with every checked SLO percentile met (None: never met)"
    )
    carried_at: dict[str, float] = Field(
        default_factory=dict, description="constraint -> observed value in that window (s)"
    )
    missed_min_rps: float | None = Field(
        description="lowest window rate at which a checked percentile was missed (None: never)"
    )
    windows_met: int = Field(ge=0)
    windows_missed: int = Field(ge=0)


class ObservedCapacity(_Model):
    """Observed capacity beside the load-tested limit (profiles read from Prometheus)."""

    window_s: float = Field(description="length of the windows load and latency are read over")
    checked: list[str] = Field(description="SLO constraints the metrics can check, e.g. ttft:p95")
    unchecked: list[str] = Field(
        description="SLO constraints the metrics cannot check (stat or metric not in them)"
    )
    instances: list[InstanceCapacity]
    carried_rps: float | None = Field(
        description="the highest carried rate over instances (req/s per instance)"
    )
    contradicts_limit: bool = Field(
        description="some instance missed the SLO at a load below the load-tested limit"
    )
    sentence: str

    @property
    def missed_min_rps(self) -> float | None:
        """The lowest rate at which any instance missed the SLO (None: none did)."""
        missed = [r.missed_min_rps for r in self.instances if r.missed_min_rps is not None]
        return min(missed) if missed else None


class Plan(_Model):
    """plan.json."""

    schema_: str = Field(PLAN_SCHEMA, alias="schema")
    name: str = ""
    created_at: str = ""
    capplan_version: str = ""
    instances: int
    scenarios: list[Scenario]
    demand: Demand
    resources: Resources
    cost: Cost
    checks: Checks
    sensitivity: list[SensitivityCell] = Field(default_factory=list)
    inputs: PlanInputs
    sentence: str = Field("", description="the answer in one sentence")
    notes: list[str] = Field(default_factory=list, description="caveats the reader must see")
    sentence_finding: Finding | None = Field(None, description="the sentence as key and figures")
    note_findings: list[Finding] = Field(
        default_factory=list, description="the notes as keys and figures, in the same order"
    )
    observed: ObservedCapacity | None = Field(
        None,
        description="what each instance carried in production while its server's latency met "
        "the SLO, beside the limit (a profile read from Prometheus, with an SLO)",
    )
    autoscale: AutoscaleResult | None = Field(
        default=None,
        description="the autoscaling study (capplan plan --autoscale): each policy over the "
        "profile's day and bursts against the static count; absent in plans without it",
    )
    ops: OpsFiles | None = Field(
        default=None,
        description="the alert rules and the dashboard written beside the plan, with their "
        "thresholds; absent in plans without an SLO and in earlier plans",
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
