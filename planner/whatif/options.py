"""What `capplan whatif` was asked: its options, validated here and by the engine config (apart
from the run, so the lessons read them without a cycle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner.fleet.executor import LOCAL, ExecutorSpec
from planner.fleet.routing import Routing, RoutingSettings
from planner.limit.measured.steady import SteadyRules
from planner.slo.spec import Slo
from planner.whatif.disagg import DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S

FIXED_LEVEL_S = 60.0  # a fixed level's length when none is given and rules are off


@dataclass(frozen=True)
class WhatifOptions:
    """What `capplan whatif` was asked (validated here and by the engine config)."""

    profile_path: str
    slo: Slo  # parsed once where the text came in (planner.slo.spec.parse_slo)
    model: str = "llama-3.1-8b"
    engine: str = "vllm"  # every candidate's engine, unless `vary` holds `engine`
    gpus: tuple[str, ...] = ("H100-80GB",)
    tps: tuple[int, ...] = (1,)
    pps: tuple[int, ...] = (1,)  # pipeline stages; an instance holds tp x pp GPUs
    quantization: str = "none"  # vLLM's --quantization (planner.engine.precision)
    kv_cache_dtype: str = "auto"  # vLLM's --kv-cache-dtype: auto (the model's dtype) or fp8
    catalog: str | None = None  # a GPU/model catalog file extending the built-in one
    vary: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tp_link: str = "auto"  # auto: each board's own link (catalog.yaml); or force one
    kv_link_bandwidth_bytes_per_s: float = DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S  # P/D only
    max_model_len: int | None = None  # default: the profile's longest request, rounded up
    peak_window: str = "60s"
    peak_quantile: float = 0.99
    peak_rps: float | None = None
    growth: float = 1.0
    headroom: float = 0.2
    redundancy: int = 1
    gpu_hour_price_usd: float | None = None
    # None (the default): each level judged under capplan limit's steady-state rules; a
    # number: fixed levels that long (quicker, may be optimistic), or with `steady` the
    # rules' shortest measured window
    level_s: float | None = None
    steady: bool = False
    tolerance: float = 0.05
    seed: int = 0
    # build_engine_config overrides for every candidate (a cal.json's factors)
    engine_overrides: dict[str, Any] = field(default_factory=dict)
    # --routing: routers compared for the cheapest candidate (None: no comparison)
    routings: tuple[Routing, ...] | None = None
    routing_settings: RoutingSettings = field(default_factory=RoutingSettings)
    routing_span_s: float = 300.0  # simulated seconds per fleet size, as the plan's default
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
                "settled: no growing queue)"
            )
        return (
            f"fixed {self.fixed_level_s:g} s levels (--level-s, 20 % warm-up): they skip the "
            "steady-state rules (warm-up of several mean E2Es, a window of 5 mean E2Es, no "
            "growing queue), so a level shorter than the slowest requests can pass a load "
            "it would not hold: the limit may be optimistic"
        )
