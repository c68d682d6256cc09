"""What `capplan whatif` was asked: its options, validated here and by the engine config (apart
from the run, so the lessons read them without a cycle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner.fleet.executor import LOCAL, ExecutorSpec
from planner.fleet.routing import Routing, RoutingSettings
from planner.limit.steady import SteadyRules
from planner.slo.spec import Slo
from planner.whatif.disagg import DEFAULT_KV_LINK_BANDWIDTH_BYTES_PER_S


@dataclass(frozen=True)
class WhatifOptions:
    """What `capplan whatif` was asked (validated here and by the engine config)."""

    profile_path: str
    slo: Slo  # parsed once where the text came in (planner.slo.spec.parse_slo)
    model: str = "llama-3.1-8b"
    engine: str = "vllm"  # every candidate's engine, unless `vary` holds `engine`
    gpus: tuple[str, ...] = ("H100-80GB",)
    tps: tuple[int, ...] = (1,)
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
    level_s: float = 60.0  # fixed levels; with `steady`, the shortest measured window
    steady: bool = False  # capplan limit's steady-state rules (slower, truer)
    tolerance: float = 0.05
    seed: int = 0
    # build_engine_config overrides for every candidate (a cal.json's factors)
    engine_overrides: dict[str, Any] = field(default_factory=dict)
    # --routing: routers compared for the cheapest candidate (None: no comparison)
    routings: tuple[Routing, ...] | None = None
    routing_settings: RoutingSettings = field(default_factory=RoutingSettings)
    routing_span_s: float = 300.0  # simulated seconds per fleet size, as the plan's default
    executor: ExecutorSpec = LOCAL  # where the router comparison's fleet points run

    def rules(self) -> SteadyRules | None:
        """capplan limit's steady-state rules with `level_s` as the shortest window, or None
        for fixed levels of `level_s` (20 % warm-up)."""
        return SteadyRules(min_window_s=self.level_s) if self.steady else None
