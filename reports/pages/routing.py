"""The fleet check's router comparison (`capplan plan --routing`): which router the count
assumes, what the others would need, and the prefix-hit ratio each reaches against the
profile's ideal one."""

from __future__ import annotations

from reportlab.platypus import Flowable

from contracts.plan import FleetCheck, RouterCount
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext


def routers_section(ctx: ReportContext, fleet: FleetCheck) -> list[Flowable]:
    """Nothing when the plan compared no routers."""
    if not fleet.routers:
        return []
    styles, words = ctx.styles, ctx.words
    by = {r.routing: r for r in fleet.routers}
    assumed = by.get(fleet.assumed_routing) if fleet.assumed_routing else None
    out: list[Flowable] = [ctx.para(ctx.t("router_heading"), styles.h2)]
    text = ""
    if assumed is not None:
        text = ctx.t(
            "router_assumed",
            n=ctx.plan.instances,
            routing=ctx.words.router(assumed.routing),
            need=_need(ctx, assumed),
        )
    others = [r for r in fleet.routers if r is not assumed]
    if others:
        sep = ", " if words.lang == "en" else "、"
        listed = sep.join(
            ctx.t("router_other", routing=ctx.words.router(r.routing), need=_need(ctx, r))
            for r in others
        )
        text += ctx.t("router_others", others=listed)
    ideal = fleet.ideal_prefix_hit_ratio
    if ideal is None:
        text += ctx.t("router_ideal_none")
    else:
        text += ctx.t("router_ideal", n=ctx.plan.instances, ideal=words.pct(ideal))
    if fleet.prefix_threshold is not None:
        text += ctx.t("router_threshold", threshold=words.pct(fleet.prefix_threshold, 0))
    out.append(ctx.para(text.strip()))
    keys = ("col_routing", "col_router_needs", "col_prefix_hits", "col_of_ideal")
    rows = [[ctx.t(k) for k in keys]]
    for r in fleet.routers:
        rows.append(
            [
                ctx.words.router(r.routing),
                _need(ctx, r),
                words.pct(r.prefix_hit_ratio),
                words.pct(r.ideal_share, 0),
            ]
        )
    out.append(ctx.table(rows, [CONTENT_W * f for f in (0.3, 0.26, 0.22, 0.22)]))
    return out


def _need(ctx: ReportContext, r: RouterCount) -> str:
    if r.min_instances_meeting is None:
        return ctx.t("router_more_than", n=r.searched_up_to)
    # "~": the count rests on a point the sub-fleet's bound did not settle (contracts.plan)
    return str(r.min_instances_meeting) if r.settled else f"~{r.min_instances_meeting}"
