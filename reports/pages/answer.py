"""Page 1: the answer for a manager, the key figures, the comparison with the previous
baseline and the three biggest risks (reports.pages.risks).
"""

from __future__ import annotations

from typing import Any

from reportlab.platypus import (
    Flowable,
    Table,
)

from contracts.limit import unconfirmed_reason
from contracts.plan import Plan
from reports.i18n.predicted_words import interval_source
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext
from reports.pages.risks import risks_table
from reports.pages.verify import verified_line


def page_answer(ctx: ReportContext) -> list[Flowable]:
    plan, styles = ctx.plan, ctx.styles
    name = plan.name or ctx.inputs.profile.name or (ctx.run.name if ctx.measured else "")
    out: list[Flowable] = [
        ctx.para(ctx.t("doc_title", name=name), styles.title),
        ctx.para(
            ctx.t(
                "subtitle",
                model=plan.inputs.model,
                gpu=plan.resources.gpu,
                tp=plan.resources.tp,
                slo=ctx.slo(),
                date=ctx.date,
            ),
            styles.subtitle,
        ),
        ctx.para(ctx.t("answer_heading"), styles.h2),
        ctx.para(ctx.answer_sentence(), styles.answer),
        ctx.para(verified_line(ctx)),
    ]
    warnings = (
        unconfirmed_warning(ctx),
        predicted_warning(ctx),
        given_warning(ctx),
        ctx.fleet_warning(),
        observed_warning(ctx),
    )
    for warning in warnings:
        if warning is not None:
            out.append(ctx.para(warning, styles.warning))
    out += [
        ctx.para(ctx.t("key_figures"), styles.h2),
        ctx.pairs(key_figures(ctx)),
    ]
    if ctx.inputs.previous is not None:
        out += [ctx.para(ctx.t("compare_heading"), styles.h2), comparison(ctx, ctx.inputs.previous)]
    out += [ctx.para(ctx.t("risks_heading"), styles.h2), risks_table(ctx)]
    return out


def predicted_warning(ctx: ReportContext) -> str | None:
    """'Predicted, not measured' with the interval, when the plan's limit is the engine
    model's (a load test of capplan's emulator), not a GPU's."""
    limit = ctx.plan.inputs.limit
    iv = limit.predicted
    if iv is None:
        return None
    return ctx.t(
        "predicted_answer",
        limit=ctx.words.load(limit.value, limit.unit),
        low=ctx.words.load(iv.low, limit.unit),
        high=ctx.words.load(iv.high, limit.unit),
        source=interval_source(ctx.t, iv.source),
    )


def unconfirmed_warning(ctx: ReportContext) -> str | None:
    """ "Unconfirmed" when the run's limit is (a search stopped before it confirmed its answer,
    planned with --accept-unconfirmed): the plan rests on it (reports.data checks that)."""
    lim = ctx.inputs.limit
    if lim is None or unconfirmed_reason(lim) is None or lim.feasible_max is None:
        return None
    failed = (
        ""
        if lim.infeasible_min is None
        else ctx.t("unconfirmed_failed", high=ctx.words.load(lim.infeasible_min, lim.unit))
    )
    return ctx.t(
        "unconfirmed_answer", limit=ctx.words.load(lim.feasible_max, lim.unit), failed=failed
    )


def given_warning(ctx: ReportContext) -> str | None:
    """'The limit was given, not measured' when no load test stands behind the plan's limit."""
    if ctx.measured:
        return None
    return ctx.t("limit_given_answer", limit=ctx.limit_value())


def observed_warning(ctx: ReportContext) -> str | None:
    """A sentence when production missed the SLO below the load-tested limit."""
    o = ctx.plan.observed
    if o is None or not o.contradicts_limit or o.missed_min_rps is None:
        return None
    return ctx.t("observed_warning", missed=ctx.words.load(o.missed_min_rps, "rps"))


def key_figures(ctx: ReportContext) -> list[tuple[str, str]]:
    plan, words = ctx.plan, ctx.words
    first = ctx.first_scenario
    rows = [
        (
            ctx.t("fig_peak"),
            f"{words.load(first.demand if first else plan.demand.peak_rps, ctx.unit)}"
            f" ({ctx.peak_definition()})",
        ),
        (ctx.t("fig_limit"), limit_figure(ctx)),
        (
            ctx.t("fig_instances"),
            ctx.t(
                "fig_instances_value",
                n=plan.instances,
                load=first.instances_for_load if first else plan.instances,
                spare=plan.inputs.redundancy,
            ),
        ),
        (ctx.t("fig_gpus"), f"{plan.resources.gpus} × {plan.resources.gpu}"),
        (ctx.t("fig_cost"), words.usd(plan.cost.monthly_usd)),
    ]
    growth = "; ".join(
        ctx.t(
            "fig_growth_value",
            growth=f"{sc.growth:g}",
            n=sc.instances,
            cost=words.usd(sc.monthly_cost_usd),
        )
        for sc in plan.scenarios
    )
    if growth:
        rows.append((ctx.t("fig_growth"), growth))
    return rows


def limit_matches_run(ctx: ReportContext) -> bool:
    """The plan's limit is the one in limit.json (not a number given to the planner)."""
    given, measured = ctx.plan.inputs.limit, ctx.inputs.limit
    return (
        measured is not None
        and measured.feasible_max is not None
        and given.unit == measured.unit
        and abs(given.value - measured.feasible_max) <= 1e-6 * max(1.0, given.value)
    )


def limit_figure(ctx: ReportContext) -> str:
    limit = ctx.plan.inputs.limit
    measured = ctx.inputs.limit
    binding = limit.binding or (measured.binding if measured else None) or ctx.t("na")
    if limit_matches_run(ctx) and measured and measured.infeasible_min is not None:
        return ctx.t(
            "fig_limit_value",
            value=ctx.limit_value(),
            binding=binding,
            fail=ctx.words.load(measured.infeasible_min, measured.unit),
        )
    return ctx.t("fig_limit_value_short", value=ctx.limit_value(), binding=binding)


def comparison(ctx: ReportContext, prev: Plan) -> Table:
    words = ctx.words
    plan = ctx.plan

    def demand(p: Plan) -> float:
        return p.scenarios[0].demand if p.scenarios else p.demand.peak_rps

    def unit(p: Plan) -> str:
        return p.scenarios[0].unit if p.scenarios else p.inputs.limit.unit

    def change(new: float, old: float, fmt: Any) -> str:
        delta = new - old
        sign = "+" if delta >= 0 else "-"
        rel = f" ({delta / old * 100:+.0f} %)" if old else ""
        return f"{sign}{fmt(abs(delta))}{rel}"

    rows: list[list[str]] = [
        [
            "",
            ctx.t("compare_previous", name=prev.name or "–"),
            ctx.t("compare_this"),
            ctx.t("compare_change"),
        ]
    ]
    specs = [
        ("compare_demand", demand(prev), demand(plan), lambda v: words.load(v, unit(plan))),
        (
            "compare_limit",
            prev.inputs.limit.value,
            plan.inputs.limit.value,
            lambda v: words.load(v, plan.inputs.limit.unit),
        ),
        ("compare_instances", float(prev.instances), float(plan.instances), words.integer),
        ("compare_gpus", float(prev.resources.gpus), float(plan.resources.gpus), words.integer),
        ("compare_cost", prev.cost.monthly_usd, plan.cost.monthly_usd, words.usd),
    ]
    for key, old, new, fmt in specs:
        rows.append([ctx.t(key), fmt(old), fmt(new), change(new, old, fmt)])
    return ctx.table(rows, [CONTENT_W * f for f in (0.28, 0.24, 0.24, 0.24)])
