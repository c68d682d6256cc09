"""The typed JSON of `capplan whatif` (`"schema": "capplan.whatif/1"`) and `capplan compare`
(`"schema": "capplan.compare/1"`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.finding import Finding
from contracts.limit import IntervalSource, PredictedInterval
from contracts.plan import FleetCheck, SloTerm

WHATIF_SCHEMA = "capplan.whatif/1"
COMPARE_SCHEMA = "capplan.compare/1"


# A knob's limit change smaller than this (either way) is within the noise of two limit
# searches, each within its 5 % tolerance and seeded draws apart (repeated searches of one
# configuration under the default rules differed by up to 5 %): whatif's lessons call it no
# real difference, not "pays off" or "hurts".
CLEAR_CHANGE = 0.10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NearFloor(_Model):
    """An SLO constraint that an idle instance already nearly uses up (planner.capacity.floor):
    little load fits under it, so latency, not throughput, sets the limit."""

    constraint: str = Field(description="the SLO constraint, e.g. ttft:p99")
    threshold_s: float
    floor_s: float = Field(description="the constraint's value for a lone request, idle")
    prompt_tokens: int = Field(description="the profile's prompt at the constraint's quantile")


class WhatifCandidate(_Model):
    """One engine configuration and what the engine model predicts for it."""

    label: str
    gpu: str
    tp: int
    pp: int = Field(default=1, description="pipeline stages (an instance holds tp x pp GPUs)")
    settings: dict[str, str] = Field(description="varied knob -> value")
    problem: str | None = Field(default=None, description="why there is no prediction")
    cannot_run: Literal["fit", "fp4", "heads", "other"] | None = Field(
        default=None,
        description="why the configuration cannot run at all, where it cannot: the model does "
        "not fit (fit), the format needs FP4 tensor cores (fp4), tp does not split the heads "
        "(heads), another configuration error (other); None where it ran",
    )
    short_gb_per_gpu: float | None = Field(
        default=None, description="cannot_run fit: how many GB per GPU the weights lack"
    )
    limit_rps: float | None = None
    limit_low_rps: float | None = Field(
        default=None,
        description="predicted, not measured: the low end of the limit's interval (the "
        "validation's error spread on published server results for this engine and GPU class)",
    )
    limit_high_rps: float | None = Field(
        default=None, description="the high end of the limit's interval"
    )
    limit_interval_basis: str | None = Field(
        default=None,
        description="the rows the interval comes from (`<engine>/<gpu class>` or `overall`, "
        "with why)",
    )
    limit_interval_source: IntervalSource | None = Field(
        default=None, description="the interval's source as fields, for saying it in any language"
    )
    infeasible_rps: float | None = None
    limit_note: str | None = Field(
        default=None,
        description="why the limit is low: an SLO constraint near the latency floor (an idle "
        "instance already uses 75 % of it or more)",
    )
    near_floors: list[NearFloor] = Field(
        default_factory=list, description="the constraints limit_note names, as figures"
    )
    binding: str | None = None
    stopped: str = ""
    levels: int = 0
    ttft_p95_s: float | None = Field(default=None, description="at the limit")
    tpot_p95_s: float | None = None
    e2e_p95_s: float | None = None
    mean_e2e_s: float | None = None
    concurrency_at_limit: float | None = None
    short_ttft_p99_s: float | None = None
    long_ttft_p99_s: float | None = None
    mean_output_tokens: float | None = None
    output_tokens_per_s: float | None = Field(
        default=None,
        description="output tokens per second one instance serves at its limit (limit_rps x "
        "mean_output_tokens), the figure serving benchmarks publish",
    )
    kv_capacity_tokens: int = 0
    shared_prompt_share: float | None = Field(
        default=None, description="replayed prompt tokens in blocks seen before (prefix reuse)"
    )
    instances: int | None = None
    gpus: int | None = None
    monthly_cost_usd: float | None = None
    usd_per_million_output_tokens: float | None = None
    gpu_hour_price_usd: float = 0.0
    cost_note: str | None = Field(
        default=None,
        description="why a candidate with a limit has no cost: no public price on file for its "
        "GPU (its limit and instances stand; --gpu-hour-price costs it)",
    )
    pareto: bool = False
    rank: int | None = None
    calibration_error: float | None = Field(
        default=None, description="mean relative error of the calibrated model (when calibrated)"
    )
    simulated_requests: int = 0
    wall_s: float = 0.0


class Lesson(_Model):
    """Does one method pay off on this workload: the change in limit, and the figure why."""

    knob: str
    baseline: str
    alternative: str
    limit_change: float | None = Field(description="median relative change of the limit")
    pairs: int
    figure: str = Field(description="the figure that explains the change")
    figure_findings: list[Finding] = Field(
        default_factory=list, description="the figure as keys and figures, one per clause"
    )
    where: str | None = Field(
        default=None,
        description="an engine ranking's configuration: the GPU, tp and other knobs the "
        "engines were ranked on (e.g. H100-80GB tp2)",
    )
    sentence: str


class Whatif(_Model):
    schema_: str = Field(default=WHATIF_SCHEMA, alias="schema")
    created_at: str
    capplan_version: str
    profile: str
    profile_digest: str
    slo: str
    slo_terms: list[SloTerm] = Field(
        default_factory=list, description="the SLO's terms, for words beside its grammar"
    )
    model: str
    quantization: str = Field(default="none", description="weight format (vLLM's spelling)")
    kv_cache_dtype: str = Field(default="auto", description="KV-cache format (vLLM's spelling)")
    peak_rps: float
    peak_definition: str
    growth: float
    headroom: float
    redundancy: int
    level_s: float | None = Field(
        default=None, description="fixed level seconds (--level-duration); None: steady-state rules"
    )
    calibration: dict[str, float] | None = None
    calibration_note: str | None = None
    candidates: list[WhatifCandidate]
    pareto: list[str] = Field(description="labels on the cost / p95 e2e Pareto front")
    lessons: list[Lesson]
    assumptions: list[str]
    simulated_requests: int
    wall_s: float
    routing_candidate: str | None = Field(
        default=None, description="the candidate whose fleet the routers were compared on"
    )
    routing: FleetCheck | None = Field(
        default=None, description="the routers compared on its planned fleet (--routing)"
    )


class CompareRow(_Model):
    """One limit run (measured, or the engine model's where `predicted` says so), planned for
    the profile's peak."""

    run: str
    label: str
    target: str
    model: str
    limit: float | None
    unit: str
    binding: str | None
    recovery_s: float | None
    recovered: bool | None
    instances: int | None
    gpus: int | None
    gpu: str
    monthly_cost_usd: float | None
    usd_per_million_output_tokens: float | None
    mean_output_tokens: float | None
    rank: int | None
    mismatched: bool = Field(
        default=False,
        description="measured on another profile or under another SLO than the first run "
        "(compared with --force)",
    )
    predicted: PredictedInterval | None = Field(
        default=None,
        description="the run's limit is the engine model's, not a GPU's (its limit.json's "
        "`predicted`, e.g. the demo's emulator run): where a GPU's limit is expected",
    )


class Compare(_Model):
    schema_: str = Field(default=COMPARE_SCHEMA, alias="schema")
    created_at: str
    capplan_version: str
    profile: str
    profile_digest: str
    slo: str
    slo_terms: list[SloTerm] = Field(
        default_factory=list, description="the SLO's terms, for words beside its grammar"
    )
    peak_rps: float
    peak_definition: str
    growth: float
    headroom: float
    redundancy: int
    forced: bool = Field(description="mismatched runs were compared with --force")
    mismatches: list[str]
    rows: list[CompareRow]
    sentence: str
