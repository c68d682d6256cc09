"""The plan page: the answer, the arithmetic per growth scenario, sensitivity, resources, cost."""

from __future__ import annotations

from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    PageBreak,
    Table,
)

from contracts.plan import Scenario
from reports.i18n.findings import finding_text
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext


def arithmetic_row(ctx: ReportContext, sc: Scenario) -> str:
    words = ctx.words
    return ctx.t(
        "arith_row",
        growth=f"{sc.growth:g}",
        demand=words.num(sc.demand, 4),
        h=words.num(1 + ctx.plan.inputs.headroom),
        limit=words.num(sc.per_instance_limit),
        spare=sc.redundancy,
        dwh=words.num(sc.demand_with_headroom, 4),
        load=sc.instances_for_load,
        n=sc.instances,
    )


def page_plan(ctx: ReportContext) -> list[Flowable]:
    plan, words, styles = ctx.plan, ctx.words, ctx.styles
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("plan_heading"), styles.h1),
        ctx.para(ctx.answer_sentence(), styles.answer),
        ctx.para(ctx.t("arith_heading"), styles.h2),
        ctx.para(ctx.t("arith_formula")),
    ]
    out += [ctx.para(arithmetic_row(ctx, sc), styles.body) for sc in plan.scenarios]
    rows: list[list[str]] = [
        [
            ctx.t(k)
            for k in (
                "col_growth",
                "col_demand",
                "col_with_headroom",
                "col_limit",
                "col_for_load",
                "col_spare",
                "col_instances",
                "col_gpus",
                "col_cost",
            )
        ]
    ]
    for sc in plan.scenarios:
        rows.append(
            [
                f"×{sc.growth:g}",
                words.load(sc.demand, sc.unit),
                words.load(sc.demand_with_headroom, sc.unit),
                words.load(sc.per_instance_limit, sc.unit),
                f"{sc.instances_for_load}",
                f"{sc.redundancy}",
                f"{sc.instances}",
                f"{sc.gpus}",
                words.usd(sc.monthly_cost_usd),
            ]
        )
    out += [
        ctx.para(ctx.t("scenario_table"), styles.h2),
        ctx.table(
            rows, [CONTENT_W * f for f in (0.08, 0.13, 0.13, 0.13, 0.1, 0.08, 0.1, 0.1, 0.15)]
        ),
    ]
    if plan.sensitivity:
        out += [
            ctx.para(ctx.t("sensitivity_heading"), styles.h2),
            sensitivity_table(ctx),
            ctx.para(ctx.t("sensitivity_note")),
        ]
    gm = plan.resources.gpu_memory
    res = plan.resources
    res_rows = [
        (ctx.t("res_gpu_mem"), words.gib(gm.capacity_bytes_per_gpu)),
        (ctx.t("res_weights"), words.gib(gm.weights_bytes_per_gpu)),
        (ctx.t("res_kv_token"), f"{words.integer(gm.kv_bytes_per_token_per_gpu)} B"),
        (
            ctx.t("res_kv_capacity"),
            ctx.t("tokens_unit", value=words.integer(gm.kv_capacity_tokens)),
        ),
        (
            ctx.t("res_kv_needed"),
            ctx.t("tokens_unit", value=words.integer(gm.kv_needed_tokens_at_limit)),
        ),
        (ctx.t("res_kv_headroom"), words.pct(gm.kv_headroom_frac)),
        (ctx.t("res_context"), ctx.t("tokens_unit", value=words.integer(gm.mean_context_tokens))),
        (ctx.t("res_concurrency"), words.num(gm.concurrency_at_limit)),
        (ctx.t("res_cpu"), f"{res.cpu_cores_per_instance} / {res.cpu_cores_total}"),
        (
            ctx.t("res_ram"),
            f"{res.host_ram_gib_per_instance:g} GiB / {res.host_ram_gib_total:g} GiB",
        ),
    ]
    if ctx.words.lang == "en" or res.rule_finding is not None:
        res_rows.append((ctx.t("res_rule"), finding_text(ctx.words, res.rule_finding, res.rule)))
    cost_rows = [
        (ctx.t("cost_price"), words.usd(plan.cost.gpu_hour_price_usd)),
        (ctx.t("cost_hours"), f"{plan.cost.hours_per_month:g} h"),
        (ctx.t("cost_monthly"), words.usd(plan.cost.monthly_usd)),
    ]
    if ctx.words.lang == "en":
        cost_rows.append((ctx.t("cost_source"), plan.cost.price_source))
    out += [
        CondPageBreak(200),
        ctx.para(ctx.t("resources_heading"), styles.h2),
        ctx.pairs(res_rows),
        ctx.para(ctx.t("cost_heading"), styles.h2),
        ctx.pairs(cost_rows),
    ]
    return out


def sensitivity_table(ctx: ReportContext) -> Table:
    plan = ctx.plan
    growths = sorted({c.growth for c in plan.sensitivity})
    headrooms = sorted({c.headroom for c in plan.sensitivity})
    cells = {(c.growth, c.headroom): c.instances for c in plan.sensitivity}
    rows: list[list[str]] = [
        [ctx.t("sensitivity_corner")] + [ctx.words.pct(h, 0) for h in headrooms]
    ]
    highlight = []
    first_growth = ctx.first_scenario.growth if ctx.first_scenario else None
    for r, g in enumerate(growths, start=1):
        rows.append([f"×{g:g}"] + [str(cells.get((g, h), "–")) for h in headrooms])
        for c, h in enumerate(headrooms, start=1):
            if g == first_growth and abs(h - plan.inputs.headroom) < 1e-9:
                highlight.append((r, c))
    width = CONTENT_W / (len(headrooms) + 1)
    return ctx.table(rows, [width] * (len(headrooms) + 1), highlight=highlight)
