"""The load-test page: the run, its stages, failures by class and the per-second timeline."""

from __future__ import annotations

import numpy as np
from reportlab.platypus import (
    Flowable,
    PageBreak,
    Spacer,
    Table,
)

from contracts.latency import CENSORED_CLASSES
from contracts.run import StageSummary
from contracts.rundir import RECORDS_FILE
from reports import charts
from reports.charts import GRAY, NAVY, ORANGE, RED, TEAL, Axis
from reports.data import KV_METRIC, QUEUE_METRIC, Series
from reports.errors import ErrorRow, error_rows
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext

# A stage that offered less than this share of its asked rate shows the asked one beside it
# (the load test warns when the offered share misses 1 by more than its tolerance).
SHORT_OF_ASKED = 0.9


def page_loadtest(ctx: ReportContext) -> list[Flowable]:
    if not ctx.measured:  # the plan's limit was given: no load test to show
        return []
    run, styles = ctx.run, ctx.styles
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("loadtest_heading"), styles.h1),
        ctx.para(
            ctx.t(
                "loadtest_intro",
                run=run.name,
                host=run.host,
                model=run.model,
                endpoint=run.endpoint,
                stages=len(ctx.inputs.stages),
                seed=run.seed,
                workers=run.workers,
            )
        ),
        ctx.para(ctx.t("stage_table"), styles.h2),
        stage_table(ctx),
        *errors_table(ctx),
        Spacer(1, 6),
        timeline(ctx),
    ]
    return out


def stage_table(ctx: ReportContext) -> Table:
    """One row per stage; with an attainment column when the load test judged its stages
    under an SLO (StageSummary.attainment, stored in stages.json)."""
    words = ctx.words
    judged = any(st.attainment is not None for st in ctx.inputs.stages)
    keys = [
        "col_stage",
        "col_role",
        "col_duration",
        "col_offered",
        "col_achieved",
        "col_ttft_p50",
        "col_ttft_p95",
        "col_tpot_p95",
        "col_errors",
        "col_recovery",
    ]
    in_flight = any(cancelled(st) for st in ctx.inputs.stages)
    keys += ["col_cancelled"] if in_flight else []
    rows: list[list[str]] = [[ctx.t(k) for k in keys + (["col_attainment"] if judged else [])]]
    stopped = {
        name for lv in ctx.limit.levels if lv.abandoned_early for name in [lv.stage, *lv.stages]
    }
    for st in ctx.inputs.stages:
        if st.recovery_s is not None:
            recovery = words.seconds(st.recovery_s)
        elif st.recovered is False:
            recovery = ctx.t("not_recovered")
        else:
            recovery = "–"
        rows.append(
            [
                st.name,
                ctx.role(st.role),
                words.duration(st.duration_s),
                offered_cell(ctx, st, stopped),
                words.rate(st.achieved_rps),
                words.seconds(st.ttft_s.p50),
                words.seconds(st.ttft_s.p95),
                words.seconds(st.tpot_s.p95),
                f"{st.errors - cancelled(st)}",
                recovery,
            ]
            + ([f"{cancelled(st)}"] if in_flight else [])
            + ([words.pct(st.attainment)] if judged else [])
        )
    widths = [0.1, 0.065, 0.085, 0.125, 0.09, 0.065, 0.065, 0.065, 0.065, 0.09]
    widths += [0.095] if in_flight else []
    if judged:
        widths += [0.1]
    widths = [w / sum(widths) for w in widths]
    return ctx.table(rows, [CONTENT_W * f for f in widths])


def errors_table(ctx: ReportContext) -> list[Flowable]:
    """Failures by class for the load test's stages and the limit's levels (if any); then,
    in a table of their own, the requests cancelled while still in flight (not failures)."""
    found = error_rows(ctx.inputs.stages, ctx.limit)
    failed = [r for r in found if r.error_class not in CENSORED_CLASSES]
    cancelled = [r for r in found if r.error_class in CENSORED_CLASSES]
    out: list[Flowable] = []
    if failed:
        out += [
            ctx.para(ctx.t("errors_table"), ctx.styles.h2),
            ctx.para(ctx.t("errors_classes")),
            _class_rows(ctx, failed),
        ]
    if cancelled:
        out += [ctx.para(ctx.t("cancelled_table"), ctx.styles.h2), _class_rows(ctx, cancelled)]
    return out


def _class_rows(ctx: ReportContext, found: list[ErrorRow]) -> Table:
    words, unit = ctx.words, ctx.limit.unit
    rows: list[list[str]] = [
        [ctx.t(k) for k in ("col_where", "col_class", "col_requests", "col_message")]
    ]
    for r in found:
        where = r.where if r.load is None else ctx.t("limit_level", load=words.load(r.load, unit))
        # the load generator's own word for a request it stopped waiting for, in this language
        message = ctx.t("error_in_flight") if r.error_class in CENSORED_CLASSES else r.message
        rows.append([where, r.error_class, f"{r.requests}", message or "–"])
    widths = [CONTENT_W * f for f in (0.2, 0.16, 0.1, 0.54)]
    return ctx.table(rows, widths, mono_cols=(1,))


def cancelled(st: StageSummary) -> int:
    """The stage's requests cancelled while still in flight: counted in `errors` by the load
    test, shown apart from its failures here."""
    return sum(n for cls, n in st.errors_by_class.items() if cls in CENSORED_CLASSES)


def offered_cell(ctx: ReportContext, st: StageSummary, stopped: set[str]) -> str:
    """The offered load, with the asked one beside it when the stage stopped early or fell
    short of it: "5.91 req/s, stopped early (16.7 asked)", never a bare 5.91 req/s."""
    words = ctx.words
    asked = st.validity.asked_rps if st.validity is not None else None
    asked = asked if asked is not None else st.target_rate_rps
    offered = words.rate(st.offered_rps)
    if asked is None:
        return offered
    if st.name in stopped or st.planned_duration_s is not None:
        return ctx.t("offered_stopped", offered=offered, asked=words.num(asked))
    if st.offered_rps < SHORT_OF_ASKED * asked:
        return ctx.t("offered_short", offered=offered, asked=words.num(asked))
    return offered


def ttft_threshold_s(ctx: ReportContext) -> float | None:
    for level in ctx.limit.levels:
        for c in level.constraints:
            if c.name.startswith("ttft"):
                return c.threshold
    return None


def mark_stages(ctx: ReportContext, panel: charts.Panel, label: bool) -> None:
    for st in ctx.inputs.stages:
        if st.role == "burst":
            panel.span(st.start_s, st.end_s)
        if st.start_s > 0:
            panel.vline(st.start_s, GRAY, width=0.5, dash=(1, 2))
        # label a stage only where it is wide enough to hold its name
        wide = panel.px(st.end_s) - panel.px(st.start_s) > 6 * len(ctx.role(st.role))
        if label and wide:
            panel.text(st.start_s + 1, panel.y.hi * 0.86, ctx.role(st.role), GRAY)


def timeline(ctx: ReportContext) -> Flowable:
    tl = ctx.inputs.timeline
    if tl is None:
        return ctx.para(ctx.t("records_none", file=RECORDS_FILE))
    end = max([st.end_s for st in ctx.inputs.stages] + [float(tl.offered_rps.x[-1]) + 0.5])
    x_axis = Axis(0.0, end, ctx.t("axis_time_s"))
    threshold = ttft_threshold_s(ctx)
    ttft = tl.ttft_p95_rolling_s
    finite = [float(y) for y in ttft.y if np.isfinite(y)] + ([threshold] if threshold else [])
    top = max(finite, default=1.0) * 1.15
    ttft_y = np.minimum(ttft.y, top)  # failures (+inf) drawn at the top edge
    ttft_vals = [*ttft_y, *([threshold] if threshold else [])]
    panels_spec: list[tuple[str, Axis, float]] = [
        (
            ctx.t("chart_timeline"),
            charts.nice_axis(
                np.concatenate([tl.offered_rps.y, tl.achieved_rps.y]), ctx.t("axis_rate")
            ),
            70,
        ),
        (ctx.t("chart_ttft"), charts.nice_axis(ttft_vals, ctx.t("axis_seconds")), 62),
        (
            ctx.t("chart_errors"),
            charts.nice_axis(tl.errors_per_s.y, ctx.t("axis_errors"), min_hi=1.0),
            38,
        ),
    ]
    queue = tl.server.get(QUEUE_METRIC)
    kv = tl.server.get(KV_METRIC)
    kv_pct = Series(kv.x, kv.y * (100.0 if kv.y.max(initial=0) <= 1.0 else 1.0)) if kv else None
    panels_spec.append(
        (
            ctx.t("chart_queue"),
            charts.nice_axis(queue.y if queue else [1.0], ctx.t("axis_waiting"), min_hi=1.0),
            44,
        )
    )
    panels_spec.append((ctx.t("chart_kv"), Axis(0.0, 100.0, ctx.t("axis_kv")), 44))
    drawing, panels = charts.stacked(
        CONTENT_W,
        [h for _, _, h in panels_spec],
        x_axis,
        [a for _, a, _ in panels_spec],
        font=ctx.words.font,
        titles=[t for t, _, _ in panels_spec],
    )
    for i, panel in enumerate(panels):
        mark_stages(ctx, panel, label=i == 0)
    panels[0].line(
        tl.offered_rps.x, tl.offered_rps.y, GRAY, width=0.8, label=ctx.t("legend_offered")
    )
    panels[0].line(tl.achieved_rps.x, tl.achieved_rps.y, NAVY, label=ctx.t("legend_achieved"))
    panels[1].line(ttft.x, ttft_y, ORANGE)
    if threshold is not None:
        panels[1].hline(threshold, RED, text=f"{ctx.t('slo_line')} {ctx.words.seconds(threshold)}")
    panels[2].bars(list(tl.errors_per_s.x), list(tl.errors_per_s.y), RED, width_frac=0.9)
    if queue is not None:
        panels[3].line(queue.x, queue.y, TEAL)
    else:
        panels[3].note(ctx.t("not_scraped"))
    if kv_pct is not None:
        panels[4].line(kv_pct.x, kv_pct.y, NAVY)
    else:
        panels[4].note(ctx.t("not_scraped"))
    for panel in panels:
        drawing.add(panel.render())
    return drawing
