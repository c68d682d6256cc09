"""The plan's cross-checks: the queueing estimate and the fleet simulation."""

from __future__ import annotations

from collections.abc import Sequence

from reportlab.graphics.shapes import Drawing
from reportlab.platypus import (
    Flowable,
    KeepTogether,
    PageBreak,
    Spacer,
)

from contracts.plan import FleetPoint
from reports import charts
from reports.charts import GRAY, GREEN, NAVY, ORANGE, RED, TEAL, Axis
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext
from reports.pages.routing import routers_section

# One line per router in the fleet chart (orange marks the count for load).
ROUTING_COLORS = {
    "round_robin": NAVY,
    "least_outstanding": TEAL,
    "power_of_two": GRAY,
    "session_affinity": RED,
    "prefix_aware": GREEN,
}


def page_checks(ctx: ReportContext) -> list[Flowable]:
    plan, words, styles = ctx.plan, ctx.words, ctx.styles
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("checks_heading"), styles.h1),
        ctx.para(ctx.t("queue_heading"), styles.h2),
    ]
    q = plan.checks.queueing
    if q is None:
        out.append(ctx.para(ctx.t("queue_none")))
    else:
        text = ctx.t(
            "queue_text",
            ca2=words.num(q.arrival_cv2),
            cs2=words.num(q.service_cv2),
            bursty=q.instances_bursty,
            poisson=q.instances_poisson,
        )
        if q.wait_probability is not None or q.mean_wait_s is not None:
            text += ctx.t(
                "queue_wait", pw=words.pct(q.wait_probability), wait=words.seconds(q.mean_wait_s)
            )
        out.append(ctx.para(text))
    out.append(ctx.para(ctx.t("fleet_heading"), styles.h2))
    fleet = plan.checks.fleet
    if fleet is None:
        out.append(ctx.para(ctx.t("fleet_none")))
        return out
    out.append(
        ctx.para(
            ctx.t(
                "fleet_text", rate=words.rate(fleet.rate_rps), sim=words.duration(fleet.simulated_s)
            )
        )
    )
    for routing in dict.fromkeys(p.routing for p in fleet.points):
        pts = sorted((p for p in fleet.points if p.routing == routing), key=lambda p: p.instances)
        ok = next((p.instances for p in pts if p.meets_slo), None)
        label = ctx.words.router(routing)
        if ok is None:
            text = ctx.t("fleet_verdict_none", routing=label)
        else:
            text = ctx.t("fleet_verdict", routing=label, ok=ok)
            fail = [p.instances for p in pts if not p.meets_slo and p.instances < ok]
            if fail:
                text += ctx.t("fleet_verdict_fail", fail=max(fail))
        out.append(ctx.para(text + ("." if ctx.words.lang == "en" else "。")))
    rows: list[list[str]] = [
        [
            ctx.t(k)
            for k in (
                "col_instances",
                "col_routing",
                "col_attainment",
                "col_ttft_p95",
                "col_tpot_p95",
                "col_meets",
                "col_requests",
            )
        ]
    ]
    for p in sorted(fleet.points, key=lambda p: (p.routing, p.instances)):
        rows.append(
            [
                str(p.instances),
                ctx.words.router(p.routing),
                words.pct(p.attainment),
                words.seconds(p.ttft_p95_s),
                words.seconds(p.tpot_p95_s),
                ctx.t("yes" if p.meets_slo else "no"),
                words.integer(p.requests),
            ]
        )
    out += [
        KeepTogether([chart_fleet(ctx)]),
        Spacer(1, 4),
        ctx.table(rows, [CONTENT_W * f for f in (0.1, 0.26, 0.13, 0.12, 0.12, 0.12, 0.15)]),
        *routers_section(ctx, fleet),
    ]
    return out


DODGE_INSTANCES = 0.07  # each router's points sit this far beside the next one's
SHAPES = ("circle", "triangle")


def chart_fleet(ctx: ReportContext) -> Drawing:
    """Simulated attainment (%) against instances, one line per router. Routers that reach
    the same attainment (all at 100 % is common) would hide each other: each router's points
    are set a little beside the last one's, with its own marker and dash, and a note says
    which lines coincide."""
    fleet = ctx.plan.checks.fleet
    assert fleet is not None
    ns = [p.instances for p in fleet.points]
    routers = [r for r in ROUTING_COLORS if any(p.routing == r for p in fleet.points)]
    drawing, panel = charts.single(
        CONTENT_W,
        140,
        Axis(min(ns) - 0.5, max(ns) + 0.5, ctx.t("axis_instances")),
        Axis(
            100 * min(0.5, min(p.attainment for p in fleet.points) - 0.05),
            102,
            ctx.t("axis_attainment"),
        ),
        font=ctx.words.font,
        title=ctx.t("chart_fleet"),
    )
    if ctx.first_scenario is not None:
        panel.vline(ctx.first_scenario.instances_for_load, ORANGE, text="")
    for k, routing in enumerate(routers):
        pts = sorted((p for p in fleet.points if p.routing == routing), key=lambda p: p.instances)
        xs = [p.instances + (k - (len(routers) - 1) / 2) * DODGE_INSTANCES for p in pts]
        ys = [100 * p.attainment for p in pts]
        color = ROUTING_COLORS[routing]
        panel.line(
            xs,
            ys,
            color,
            dash=(3, 2) if k % 2 else None,
            label=ctx.words.router(routing),
        )
        panel.markers(xs, ys, color, shape=SHAPES[k % len(SHAPES)])
    same = _coinciding(fleet.points, routers)
    if same:
        panel.note(
            ctx.t("fleet_lines_coincide", routers=", ".join(ctx.words.router(r) for r in same))
        )
    drawing.add(panel.render())
    return drawing


def _coinciding(points: Sequence[FleetPoint], routers: Sequence[str]) -> list[str]:
    """The routers whose attainment is the same as another router's at every instance count
    both simulated (their lines would lie on top of each other)."""
    curves = {
        r: {p.instances: round(p.attainment, 4) for p in points if p.routing == r} for r in routers
    }
    return [r for r in routers if any(o != r and curves[o] == curves[r] for o in routers)]
