"""What `capplan whatif` was asked: its options, validated here and by the engine config (apart
from the run, so the lessons read them without a cycle)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from contracts.executor import LOCAL, ExecutorSpec
from planner.fleet.routing import Routing, RoutingSettings
from planner.limit.measured.steady import SteadyRules
from planner.slo.spec import SloField
from planner.whatif.disagg import DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S

FIXED_LEVEL_S = 60.0  # a fixed level's length when none is given and rules are off


class WhatifOptions(BaseModel):
    """What `capplan whatif` was asked: each option's bound and default declared once here (the
    CLI builds it with `capplan.cli.build_options`; the engine config checks the names)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    profile_path: str = Field(description="the profile's file (or preset name)")
    slo: SloField  # parsed once where the text came in (planner.slo.spec.parse_slo)
    model: str = "llama-3.1-8b"
    engine: str = "vllm"  # every candidate's engine, unless `vary` holds `engine`
    gpus: tuple[str, ...] = ("H100-80GB",)
    tps: tuple[Annotated[int, Field(ge=1)], ...] = (1,)
    # pipeline stages; an instance holds tp x pp GPUs
    pps: tuple[Annotated[int, Field(ge=1)], ...] = (1,)
    quantization: str = "none"  # vLLM's --quantization (planner.engine.precision)
    kv_cache_dtype: str = "auto"  # vLLM's --kv-cache-dtype: auto (the model's dtype) or fp8
    catalog: str | None = None  # a GPU/model catalog file extending the built-in one
    vary: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    tp_link: str = "auto"  # auto: each board's own link (catalog.yaml); or force one
    # P/D only
    kv_link_bandwidth_bytes_per_s: float = Field(
        default=DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S, gt=0
    )
    # default: the profile's longest request, rounded up
    max_model_len: int | None = Field(default=None, ge=1)
    peak_window: str = "60s"
    peak_quantile: float = Field(default=0.99, gt=0, le=1)
    peak_rps: float | None = Field(default=None, gt=0)
    growth: float = Field(default=1.0, gt=0)
    headroom: float = Field(default=0.2, ge=0)
    redundancy: int = Field(default=1, ge=0)
    gpu_hour_price_usd: float | None = Field(default=None, gt=0)
    # None (the default): each level judged under capplan limit's steady-state rules; a
    # number: fixed levels that long (quicker, may be optimistic), or with `steady` the
    # rules' shortest measured window
    level_s: float | None = Field(
        default=None, ge=10, le=3600, description="virtual seconds a level (10 s to 1 h)"
    )
    steady: bool = False
    tolerance: float = Field(default=0.05, gt=0)
    seed: int = 0
    # build_engine_config overrides for every candidate (a cal.json's factors)
    engine_overrides: dict[str, Any] = Field(default_factory=dict)
    # --routing: routers compared for the cheapest candidate (None: no comparison)
    routings: tuple[Routing, ...] | None = None
    routing_settings: RoutingSettings = Field(default_factory=RoutingSettings)
    # simulated seconds per fleet size, as the plan's default
    routing_span_s: float = Field(default=300.0, gt=0)
    executor: ExecutorSpec = LOCAL  # where the candidates and the router comparison's points run

    def rules(self) -> SteadyRules | None:
        """capplan limit's steady-state rules (by default; with `steady`, `level_s` as the
        shortest window), or None for fixed levels of `level_s` (20 % warm-up)."""
        if self.level_s is None:
            return SteadyRules()
        return SteadyRules(min_window_s=self.level_s) if self.steady else None

    @property
    def fixed_level_s(self) -> float:
        """Seconds of a fixed level (used only without steady-state rules)."""
        return self.level_s if self.level_s is not None else FIXED_LEVEL_S

    def search_text(self) -> str:
        """How each level is judged, and what fixed levels skip, in one sentence."""
        rules = self.rules()
        if rules is not None:
            return (
                "levels judged under capplan limit's steady-state rules (warm-up >= "
                f"{rules.warmup_e2es:g} mean E2Es, window >= {rules.min_window_s:g} s, "
                f"{rules.window_e2es:g} mean E2Es and {rules.min_window_requests} requests, "
                f"settled: no growing queue; at most {rules.max_level_s:g} s, or as long as a "
                f"low rate takes to send {2 * rules.min_window_requests} requests)"
            )
        return (
            f"fixed {self.fixed_level_s:g} s levels (--level-duration, 20 % warm-up): they skip "
            "the steady-state rules (warm-up of several mean E2Es, a window of 5 mean E2Es, no "
            "growing queue), so a level shorter than the slowest requests can pass a load "
            "it would not hold: the limit may be optimistic"
        )
