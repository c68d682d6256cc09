"""Typed contract of the plan as operations watch it: the alert thresholds and the files.

Owned by planner/ops; stored in plan.json as the optional `ops` field (a plan written before
it loads unchanged). Each threshold says where its number came from, so an alert can be
traced back to the plan or the limit run that set it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Threshold(_Model):
    """One alert's line and its origin."""

    value: float
    source: str = Field(description="where the number came from, in words")


class OpsThresholds(_Model):
    """The numbers the rules and the dashboard draw, from the plan and its limit."""

    unit: str = Field(description="rps: the load is a request rate; users: requests in flight")
    capacity: Threshold = Field(description="the serving instances x the per-instance limit")
    planned_load: Threshold = Field(
        description="capacity / (1 + headroom): the load the plan was sized for"
    )
    queue_per_instance: Threshold = Field(description="requests waiting on one instance")
    kv_usage: Threshold = Field(description="KV-cache usage fraction of one instance")
    slo_quantile: float = Field(gt=0, lt=1, description="the quantile the latency SLO names")
    ttft_s: Threshold | None = None
    tpot_s: Threshold | None = None
    attainment: Threshold | None = Field(
        default=None, description="share of requests meeting the TTFT bound, from the histogram"
    )
    ttft_bucket_s: float | None = Field(
        default=None, description="the histogram bucket (le) the attainment rule counts up to"
    )


class OpsFiles(_Model):
    """What `capplan plan` wrote beside plan.json for operations."""

    prometheus_rule: str = Field(description="PrometheusRule (monitoring.coreos.com/v1)")
    rule_groups: str = Field(description="the same groups as a plain Prometheus rule file")
    dashboard: str = Field(description="Grafana dashboard JSON")
    alerts: list[str] = Field(description="the alert names, in the file's order")
    thresholds: OpsThresholds
