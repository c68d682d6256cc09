"""Typed contract of the autoscaling study: the policies, their simulated outcome, the manifests.

Owned by planner/autoscale; stored in plan.json as the optional `autoscale` field (a plan
written before it loads unchanged) and read by the plan's report page and the review.
`PolicySpec` is also the validated form of a `--autoscale-policy` option.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.names import PolicyName

# A policy kind by its name in planner.autoscale.policies' registry, which holds the names (a
# file is validated for the form; the planner refuses a kind it has no entry for).
PolicyKind = PolicyName
ReactiveMetric = Literal["queue", "kv"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicySpec(_Model):
    """One autoscaling policy, with the semantics of the Kubernetes HPA (and KEDA over it).

    Every `poll_s` the controller reads the policy's fleet-wide metric, asks for
    ceil(metric / target) replicas (a schedule: its hour's count), clamps to
    [min_replicas, max_replicas], scales up at once and scales down only to the highest
    recommendation of the last `window_s` seconds and no sooner than `cooldown_s` after the
    last scaling. Replicas that are still loading count as replicas (as the HPA counts pods).
    """

    kind: PolicyKind
    name: str = Field(default="", description="label in the tables (default: from kind/metric)")
    metric: ReactiveMetric | None = Field(
        default=None, description="reactive only: queue (requests waiting) or kv (KV-cache usage)"
    )
    target: float | None = Field(
        default=None,
        gt=0,
        description="per-replica target of the metric (default: derived from the limit)",
    )
    window_s: float = Field(default=300.0, ge=0, description="scale-down stabilisation window")
    cooldown_s: float = Field(default=60.0, ge=0, description="least time between scalings down")
    poll_s: float = Field(default=30.0, gt=0, description="how often the metric is read")
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int | None = Field(default=None, ge=1, description="default: 2 x the plan")
    tolerance: float = Field(default=0.1, ge=0, lt=1, description="HPA's no-change band")

    @model_validator(mode="after")
    def _consistent(self) -> PolicySpec:
        if self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) is above max_replicas ({self.max_replicas})"
            )
        if self.kind == "reactive" and self.metric is None:
            raise ValueError("a reactive policy needs metric=queue or metric=kv")
        if self.kind != "reactive" and self.metric is not None:
            raise ValueError(f"metric applies to reactive policies only, not {self.kind}")
        return self

    @property
    def label(self) -> str:
        """The name, or `reactive-queue`, `rate`, `schedule`."""
        return self.name or (f"{self.kind}-{self.metric}" if self.metric else self.kind)


class BurstMinute(_Model):
    """The worst minute after a burst began (within the cold start and ten minutes after)."""

    burst_start_s: float = Field(description="when the burst began (s from the trace start)")
    minute_start_s: float = Field(description="start of the worst minute (s from the trace start)")
    attainment: float = Field(ge=0, le=1, description="share of that minute's requests good")
    instances: int = Field(ge=0, description="ready instances in that minute")


class PolicyOutcome(_Model):
    """One policy (or the static plan) simulated over the whole trace."""

    label: str
    spec: PolicySpec | None = Field(description="None: the static plan's fixed count")
    target_per_replica: float | None = Field(
        default=None, description="the metric's per-replica target used (None: no metric)"
    )
    attainment: float = Field(ge=0, le=1, description="good requests / all, whole trace")
    hourly_attainment: list[float | None] = Field(
        description="24 values, hour of day 0..23 (UTC): good / all requests of that hour"
    )
    hourly_worst: list[float | None] = Field(
        description="24 values: the lowest attainment of any single clock hour at that hour"
    )
    gpu_hours: float = Field(ge=0, description="GPU-hours over the trace, loading time included")
    gpu_hours_per_month: float = Field(ge=0, description="gpu_hours scaled to 730 hours")
    monthly_cost_usd: float = Field(ge=0)
    cost_vs_static: float = Field(ge=0, description="GPU-hours / the static plan's")
    mean_instances: float = Field(ge=0)
    max_instances: int = Field(ge=0)
    scale_ups: int = Field(ge=0, description="scaling decisions that added replicas")
    worst_burst_minute: BurstMinute | None = None
    meets_target: bool = Field(description="attainment >= the target attainment")


class AutoscaleManifests(_Model):
    """The Kubernetes objects written for the recommended policy."""

    policy: str
    keda_path: str = Field(description="KEDA ScaledObject (keda.sh/v1alpha1)")
    hpa_path: str | None = Field(
        description="HorizontalPodAutoscaler (autoscaling/v2); None for min 0 (KEDA only)"
    )
    metric_name: str = Field(description="the engine's metric the trigger reads")
    query: str = Field(description="the PromQL the KEDA trigger runs")
    threshold: float = Field(description="per-replica target of the query")


class AutoscaleResult(_Model):
    """The autoscaling study of a plan: every policy over the profile's day, bursts included."""

    cold_start_s: float = Field(ge=0, description="time from a scale-up until the replica serves")
    horizon_s: float = Field(gt=0, description="length of the simulated trace")
    step_s: float = Field(gt=0, description="resolution of the per-step queue model")
    trace: str = Field(description="how the per-minute arrival rates were built from the profile")
    model: str = Field(description="the queue model and its measured error")
    good_rule: str = Field(description="when a simulated request counts as good")
    wait_budget_s: float = Field(ge=0)
    target_attainment: float = Field(gt=0, le=1)
    slots_per_instance: int = Field(ge=1, description="concurrent requests one instance serves")
    service_s: float = Field(gt=0, description="mean time a request holds its slot")
    per_instance_rps: float = Field(gt=0, description="the limit as a rate")
    bursts: int = Field(ge=0, description="bursts in the trace")
    static: PolicyOutcome
    policies: list[PolicyOutcome]
    recommended: str = Field(description="label of the recommended policy")
    recommended_reason: str
    manifests: AutoscaleManifests | None = None
