"""The risks on page 1, worst first: burst recovery, KV-cache headroom, growth beyond the plan.

Burst recovery is the fleet's when a capplan verify run of the plan measured a burst (the
verify.json at the planned count first), else the load test's burst and recovery stages.

The level shown next to each risk is the one judgement the report makes; its thresholds are
stated here so they can be argued with.
"""

from __future__ import annotations

from typing import Any

from reportlab.platypus import (
    Table,
    TableStyle,
)

from contracts.verify import Verify
from reports.charts import GREEN, LIGHT, ORANGE, RED
from reports.data import KV_METRIC
from reports.layout import CONTENT_W, paragraph
from reports.pages.context import ReportContext

# Risk levels shown on page 1 (presentation thresholds, stated here so they can be argued with).
RECOVERY_HIGH_S = 60.0  # recovery longer than a minute, or none: high
RECOVERY_WATCH_S = 20.0
KV_WATCH_HEADROOM = 0.2  # less than 20 % KV headroom at the limit: watch; below zero: high
KV_WATCH_BURST_USAGE = 0.95  # KV usage above 95 % during the burst: at least watch
LEVEL_ORDER = {"high": 0, "medium": 1, "low": 2}
LEVEL_COLOR = {"high": RED, "medium": ORANGE, "low": GREEN}


def risk_items(ctx: ReportContext) -> list[tuple[str, str, str]]:
    """(level, title, text) for burst recovery, KV headroom and growth, worst first."""
    words, plan = ctx.words, ctx.plan
    items: list[tuple[str, str, str]] = []
    # burst recovery
    fleet = fleet_burst(ctx)
    burst, steady, recovery = ctx.stage("burst"), ctx.stage("steady"), ctx.stage("recovery")
    recovery_s = (
        recovery.recovery_s
        if recovery and recovery.recovery_s is not None
        else ctx.inputs.limit.recovery_s
        if ctx.inputs.limit is not None
        else None
    )
    if fleet is not None:
        level, text = _fleet_risk(ctx, fleet)
    elif burst is None or (recovery is None and recovery_s is None):
        level, text = "medium", ctx.t("risk_burst_unmeasured")
    else:
        ratio = burst.offered_rps / steady.offered_rps if steady and steady.offered_rps else None
        fields = dict(
            burst=words.rate(burst.offered_rps),
            burst_ratio=words.num(ratio, 2),
            burst_p95=words.seconds(burst.ttft_s.p95),
        )
        recovered = recovery.recovered if recovery else recovery_s is not None
        if burst.ttft_s.p95 is None:
            level = "high"
            text = ctx.t("risk_burst_nothing_completed", **fields)
            if recovered and recovery_s is not None:
                text += ctx.t("risk_burst_recovered_after", recovery=words.seconds(recovery_s))
        elif recovered is False or recovery_s is None:
            level = "high"
            text = ctx.t("risk_burst_not_recovered", **fields)
        else:
            level = _recovery_level(recovery_s)
            text = ctx.t("risk_burst_recovered", recovery=words.seconds(recovery_s), **fields)
    if plan.demand.burst_peak_rps is not None and plan.demand.burst_factor is not None:
        text += ctx.t(
            "risk_burst_traffic",
            burst_peak=words.rate(plan.demand.burst_peak_rps),
            factor=words.num(plan.demand.burst_factor, 2),
        )
    items.append((level, ctx.t("risk_burst"), text))
    # KV-cache headroom
    gm = plan.resources.gpu_memory
    if gm.kv_headroom_frac < 0:
        level = "high"
        text = ctx.t(
            "risk_kv_short",
            needed=words.integer(gm.kv_needed_tokens_at_limit),
            capacity=words.integer(gm.kv_capacity_tokens),
        )
    else:
        level = "medium" if gm.kv_headroom_frac < KV_WATCH_HEADROOM else "low"
        text = ctx.t(
            "risk_kv_text",
            conc=words.num(gm.concurrency_at_limit),
            ctx=words.integer(gm.mean_context_tokens),
            needed=words.integer(gm.kv_needed_tokens_at_limit),
            capacity=words.integer(gm.kv_capacity_tokens),
            headroom=words.pct(gm.kv_headroom_frac, 0),
        )
    kv_burst = burst_kv_peak(ctx)
    if kv_burst is not None:
        text += ctx.t("risk_kv_burst", kv=words.pct(kv_burst, 0))
        if kv_burst >= KV_WATCH_BURST_USAGE and level == "low":
            level = "medium"
    items.append((level, ctx.t("risk_kv"), text))
    # growth beyond the plan
    first = ctx.first_scenario
    larger = [sc for sc in plan.scenarios if first and sc.growth > first.growth]
    growth = f"{first.growth:g}" if first else "1"
    if larger:
        top = max(larger, key=lambda sc: sc.growth)
        delta = top.instances - plan.instances
        level = "medium" if delta > 0 else "low"
        text = ctx.t(
            "risk_growth_text",
            growth=growth,
            top=f"{top.growth:g}",
            n=top.instances,
            delta=delta,
            cost=words.usd(top.monthly_cost_usd),
        )
    else:
        level, text = "medium", ctx.t("risk_growth_none", growth=growth)
    items.append((level, ctx.t("risk_growth"), text))
    return sorted(items, key=lambda item: LEVEL_ORDER[item[0]])


def _recovery_level(recovery_s: float) -> str:
    if recovery_s > RECOVERY_HIGH_S:
        return "high"
    return "medium" if recovery_s > RECOVERY_WATCH_S else "low"


def fleet_burst(ctx: ReportContext) -> Verify | None:
    """The verify run whose burst the risk states: the latest at the planned count, else the
    one with the fewest instances down; None when no verify run given measured a burst."""
    tested = [v for v in ctx.inputs.verifies if any(p.role == "burst" for p in v.phases)]
    if not tested:
        return None
    return max(tested, key=lambda v: (-v.instances_down, v.created_at))


def _fleet_risk(ctx: ReportContext, v: Verify) -> tuple[str, str]:
    """(level, text) of the burst and recovery the fleet showed behind its load balancer."""
    words = ctx.words
    burst = next(p for p in v.phases if p.role == "burst")
    if v.recovery_s is not None and v.recovered:
        level = _recovery_level(v.recovery_s)
        after = ctx.t("risk_fleet_recovered_in", recovery=words.seconds(v.recovery_s))
    elif v.recovered:  # an SLO without a TTFT bound: the recovery stage met it
        level, after = ("low" if v.held_burst else "medium"), ctx.t("risk_fleet_recovered")
    else:
        level, after = "high", ctx.t("risk_fleet_not_recovered")
    text = ctx.t(
        "risk_burst_fleet",
        n=v.instances_serving,
        planned=v.instances_planned,
        duration=words.duration(burst.duration_s),
        burst=words.rate(burst.rate_rps),
        burst_ratio=words.num(burst.rate_rps / v.rate_rps, 2),
        burst_p95=words.seconds(burst.measured.ttft_p95_s),
        held=ctx.t("risk_fleet_held" if v.held_burst else "risk_fleet_missed"),
        after=after,
    )
    return level, text


def burst_kv_peak(ctx: ReportContext) -> float | None:
    """Highest scraped KV usage (0..1) during the burst stage, when scraped."""
    burst = ctx.stage("burst")
    tl = ctx.inputs.timeline
    if burst is None or tl is None or KV_METRIC not in tl.server:
        return None
    series = tl.server[KV_METRIC]
    inside = (series.x >= burst.start_s) & (series.x <= burst.end_s)
    if not inside.any():
        return None
    peak = float(series.y[inside].max())
    return peak / 100 if peak > 1.0 else peak


def risks_table(ctx: ReportContext) -> Table:
    rows = []
    commands: list[tuple[Any, ...]] = [
        ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
        ("LINEBELOW", (0, 0), (-1, -2), 0.4, LIGHT),
        ("TOPPADDING", (0, 0), (-1, -1), 4),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
    ]
    for r, (level, title, text) in enumerate(risk_items(ctx)):
        rows.append(
            [
                paragraph(ctx.t(f"risk_{level}"), ctx.styles.badge),
                paragraph(title, ctx.styles.h2),
                paragraph(text, ctx.styles.body),
            ]
        )
        commands.append(("BACKGROUND", (0, r), (0, r), LEVEL_COLOR[level]))
    table = Table(rows, colWidths=[CONTENT_W * 0.1, CONTENT_W * 0.22, CONTENT_W * 0.68])
    table.setStyle(TableStyle(commands))
    return table
