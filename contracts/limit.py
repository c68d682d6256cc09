"""Typed contract of limit.json (`"schema": "capplan.limit/1"`): the per-instance SLO limit.

Owned by the limit search; read by the planner and the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.jsonio import read_json, validate, write_json_text

LIMIT_SCHEMA = "capplan.limit/1"
LIMIT_FILE = "limit.json"
# How a load unit is written for people (console lines, sentences): one spelling each.
UNIT_LABELS: dict[str, str] = {"rps": "req/s", "users": "users"}


def unit_label(unit: str) -> str:
    """The load unit as printed: "req/s" for "rps" (never rps or r/s), "users" for "users"."""
    return UNIT_LABELS.get(unit, unit)


Dimension = Literal["rate", "concurrency"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConstraintVerdict(_Model):
    """One SLO constraint at one level."""

    name: str = Field(description="e.g. 'ttft:p95', 'errors', 'attainment'")
    value: float | None
    threshold: float
    margin: float | None = Field(
        description="room left (>= 0 passes) in the metric's unit: threshold - value, or "
        "value - threshold for attainment"
    )
    passed: bool
    interval: tuple[float, float] | None = Field(
        None, description="bootstrap confidence interval of the value"
    )


class LimitLevel(_Model):
    """One load level the search held."""

    load: float = Field(description="req/s (rate) or users (concurrency)")
    stage: str = Field(description="stage name in records.parquet / stages.json")
    stages: list[str] = Field(
        default_factory=list, description="every stage that measured this level (repeats pooled)"
    )
    requests: int = Field(description="requests scheduled after the warm-up (all runs pooled)")
    completed: int = Field(description="of those, the ones that succeeded")
    errors_by_class: dict[str, int] = Field(
        default_factory=dict,
        description="of those, the failed ones per error class (refused, server_error, ...)",
    )
    metrics: dict[str, float | None] = Field(description="e.g. ttft_p95_s, tpot_p95_s, ...")
    constraints: list[ConstraintVerdict]
    verdict: Literal["pass", "fail", "uncertain", "invalid"] = Field(
        description="the level's verdict from its pooled runs; the search writes pass or fail "
        "and says in `certain` whether it held across the bootstrap intervals; invalid: the "
        "load generator could not offer the load (no verdict on the endpoint)"
    )
    certain: bool = Field(
        default=True,
        description="the verdict holds across the bootstrap intervals of every constraint",
    )
    interval: dict[str, tuple[float, float]] = Field(default_factory=dict)
    repeats: int = 0
    abandoned_early: bool = False
    abandoned_reason: str | None = None
    achieved_rps: float | None = None
    mean_e2e_s: float | None = None
    goodput_rps: float | None = None
    attainment: float | None = None
    failure_share: float | None = Field(
        default=None, description="failed / scheduled requests after the warm-up"
    )
    censored: int = Field(
        default=0, description="requests still running when the window closed (at their age)"
    )
    schedule_lag_p99_s: float | None = None
    unstable: str | None = Field(
        default=None, description="why the level never settled (it fails), e.g. queue grows"
    )
    invalid: str | None = Field(
        default=None, description="why the client could not offer the load (no verdict)"
    )
    steady: str | None = Field(
        default=None, description="steady-state evidence: warm-up, window, in-flight trend"
    )


class LittlesLaw(_Model):
    rate_rps: float
    concurrency: float
    mean_e2e_s: float


class IntervalSource(_Model):
    """Where a predicted limit's interval comes from: the validation's spread (published /
    predicted limit) on published server results, for the prediction's engine and GPU class,
    or over all rows where that class has too few (planner.whatif.interval)."""

    basis: str = Field(description="`<engine>/<gpu class>` the spread is taken over, or `overall`")
    class_key: str = Field(description="the prediction's own `<engine>/<gpu class>`")
    rows: int = Field(ge=0, description="published results the spread rests on")
    class_rows: int = Field(ge=0, description="published results of class_key")
    low_quantile: float = Field(description="quantile of the spread at the low end, e.g. 0.1")
    high_quantile: float = Field(description="quantile of the spread at the high end, e.g. 0.9")


class PredictedInterval(_Model):
    """Predicted, not measured: where a GPU's measured limit is expected, around the engine
    model's figure."""

    low: float = Field(gt=0, description="low end, in the limit's unit")
    high: float = Field(gt=0, description="high end, in the limit's unit")
    source: IntervalSource


class Prediction(_Model):
    """The engine model's limit for the same SLO, searched in virtual time under the same
    steady-state rules (planner.limit.predict), for comparison with the measured one."""

    feasible_max: float | None = Field(description="highest load the model says meets the SLO")
    infeasible_min: float | None = Field(description="lowest load the model says fails it")
    gpu: str = ""
    model: str = ""
    note: str = Field("", description="how it was made (engine, rules, time scale)")
    interval: PredictedInterval | None = Field(
        default=None, description="where a GPU's limit is expected around feasible_max"
    )


class FastSearchRecord(_Model):
    """How the fast search (planner.limit.fast) reached its answer: characterised the server,
    predicted with the model, confirmed on open-loop levels and corrected the model by its
    measured bias."""

    stopped: str = Field(description="converged, time cap, model inadequate: why, unsupported")
    adequate: bool = Field(description="false: the measured search gave the answer instead")
    characterise_s: float = Field(description="seconds of closed-loop characterisation")
    confirm_s: float = Field(description="seconds of open-loop confirmation levels")
    predicted_rps: float | None = Field(description="the characterised model's limit alone")
    limit_rps: float | None = Field(description="the corrected model's limit")
    interval: tuple[float, float] | None = Field(
        default=None, description="90 % interval of the limit (bias error and model spread)"
    )
    bias: dict[str, float] = Field(
        default_factory=dict,
        description="per constraint: measured miss share - the model's on the same requests",
    )
    bias_se: dict[str, float] = Field(
        default_factory=dict, description="batch-means standard error of each bias"
    )
    delay_bias_s: float | None = Field(
        default=None,
        description="last confirmation: mean of (server - model) per request of the SLO's "
        "first latency, capped at 4x its threshold, on the same arrivals and sizes",
    )
    delay_se_s: float | None = Field(
        default=None, description="batch-means standard error of delay_bias_s"
    )
    delay_moved_s: float | None = Field(
        default=None,
        description="no longer computed (null since 2026-12-04; earlier files keep it): how "
        "far the model's own mean delay moved for +/-5 % of load; the adequacy rule is "
        "delay_shift",
    )
    delay_shift: float | None = Field(
        default=None,
        description="how far delay_bias_s, as a constant offset of the model's latencies on "
        "those requests, moves the model's limit (a share): the model is adequate while this "
        "stays within the tolerance",
    )
    levels: list[tuple[float, int, int]] = Field(
        default_factory=list,
        description="each confirmation estimate: (rate, chunks at that rate, requests compared)",
    )
    slots: int | None = Field(default=None, description="requests the server serves at once")
    refuses: bool | None = Field(default=None, description="refuses beyond its slots (HTTP 429)")
    max_slowdown: float | None = Field(
        default=None, description="how much slower each request runs with every slot busy"
    )
    model: str | None = Field(
        default=None,
        description="the model it predicted with, in words: slots characterised in closed "
        "loop, or the endpoint's engine model (calibrated) with the offsets measured alone",
    )
    sizes: Literal["profile", "measured"] | None = Field(
        default=None,
        description="the request sizes the model predicted on: profile (drawn from the "
        "profile as the load test asks them, where the server counts them so) or measured "
        "(the prompt and answer tokens the server returned)",
    )
    pace: float | None = Field(
        default=None,
        description="the queue check's refit of the characterised model's work under the "
        "open-loop load: 1.05 = each request's work 5 % longer than the closed-loop steps "
        "showed; null: not refitted",
    )


class LimitResult(_Model):
    """limit.json."""

    schema_: str = Field(LIMIT_SCHEMA, alias="schema")
    dimension: Dimension
    unit: Literal["rps", "users"]
    feasible_max: float | None = Field(description="highest load that met the SLO")
    infeasible_min: float | None = Field(description="lowest load that failed it")
    binding: str | None = Field(description="constraint that fails first above the limit")
    slo: str = Field(description="the SLO spec as given")
    tolerance: float
    levels: list[LimitLevel]
    saturation_throughput_rps: float | None = None
    littles_law: LittlesLaw | None = None
    confidence: str = ""
    target: str = ""
    model: str = ""
    profile_digest: str = ""
    wall_s: float | None = None
    recovery_s: float | None = Field(None, description="from --verify-burst, when run")
    recovered: bool | None = Field(
        default=None,
        description="--verify-burst: did the endpoint recover within the recovery stage",
    )
    time_scale: float = Field(
        default=1.0,
        description="the endpoint ran this many times faster than wall time (an emulator at "
        "--time-scale S); loads and latencies are in its time",
    )
    prediction: Prediction | None = Field(
        default=None, description="the engine model's steady-state limit, when one was made"
    )
    method: Literal["measured", "fast"] = Field(
        default="measured",
        description="measured: levels bracketed and narrowed (planner.limit.measured.search); "
        "fast: characterise, predict, confirm, correct (planner.limit.fast)",
    )
    fast: FastSearchRecord | None = Field(
        default=None, description="the fast search's account, when it ran"
    )
    held_load: float | None = Field(
        default=None,
        description="the measured level the answer rests on below: the highest that held the "
        "SLO with certainty at or below feasible_max (the measured search: feasible_max itself)",
    )
    failed_load: float | None = Field(
        default=None,
        description="the measured level above the answer that failed the SLO, where the server "
        "reached one (the measured search: infeasible_min)",
    )
    answer_held: bool = Field(
        default=False,
        description="the fast search answered and the measured levels held its answer: "
        "held_load passed with certainty below it and failed_load, one step above, failed "
        "(false: the measured search answered, or an earlier file)",
    )
    held_gap: float | None = Field(
        default=None,
        description="how far below the answer held_load is, as a share of the answer (0.10 "
        "for 0.9 L; more where the level at 0.9 L was not certain within --hold-budget and "
        "the search stepped down to 0.85 L or 0.8 L)",
    )
    unconfirmed: str | None = Field(
        default=None,
        description="why the answer is not confirmed (a search stopped before the measured "
        "levels around its answer held it); `capplan plan` refuses such a limit unless "
        "--accept-unconfirmed. null: confirmed, or a measured search that ended",
    )
    predicted: PredictedInterval | None = Field(
        default=None,
        description="set when the endpoint was the engine model itself (the demo measures "
        "capplan's emulator), so the limit is a prediction for the GPU, not a measurement of "
        "one: where a GPU's limit is expected around feasible_max. A plan on this limit carries "
        "it, and the report's first page says predicted, not measured. null: a real endpoint",
    )
    sentence: str = Field("", description="the answer in one sentence")
    stopped: str = Field(
        default="",
        description="why the search ended: 'converged', 'interrupted' (Ctrl-C: the bracket is "
        "not final), 'stopped at N levels', 'passed at the maximum load X', 'failed at the "
        "lowest load X'",
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def unconfirmed_reason(result: LimitResult) -> str | None:
    """Why a limit.json's answer is not confirmed, or None. A fast answer is confirmed only
    when the measured levels around it held it (`answer_held`); a file that says so names
    why (`unconfirmed`), one written before that field gets a reason from its fields."""
    if result.unconfirmed is not None:
        return result.unconfirmed
    if result.method == "fast" and not result.answer_held:
        return "a fast answer the measured levels around it did not hold"
    return None


def load_limit(path: str | Path) -> LimitResult:
    """Read a limit.json (a run directory may be given); InputError naming the file and why
    it cannot be read, or its first bad field."""
    path = Path(path)
    if path.is_dir():
        path = path / LIMIT_FILE
    return validate(LimitResult, read_json(path, "limit"), path, LIMIT_SCHEMA)


def write_limit(result: LimitResult, path: Path) -> None:
    """Write limit.json atomically (a crash never leaves half a file). Through `json.dumps`,
    not pydantic's JSON: an interval open on one side keeps its bound as `Infinity`, which
    pydantic would write as null and then refuse to read back."""
    text = json.dumps(result.model_dump(mode="json", by_alias=True), indent=2) + "\n"
    write_json_text(path, text, "limit")
