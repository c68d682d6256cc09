"""The limit page: the per-instance SLO limit from limit.json, its evidence, the search's levels
and the burst-recovery curve stored in stages.json.
"""

from __future__ import annotations

import math

from reportlab.graphics.shapes import Drawing
from reportlab.platypus import (
    Flowable,
    PageBreak,
    Spacer,
    Table,
)

from contracts.limit import LimitLevel
from reports import charts
from reports.charts import GRAY, GREEN, ORANGE, RED, Axis
from reports.i18n.predicted_words import interval_source
from reports.layout import CONTENT_W, NoChart
from reports.observed import observed_section
from reports.pages.context import ReportContext


def page_limit(ctx: ReportContext) -> list[Flowable]:
    """The per-instance limit: the sentence, the evidence, the charts, the levels, recovery
    (left out without a load test: the plan's limit was given)."""
    if not ctx.measured:
        return []
    words, styles = ctx.words, ctx.styles
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("limit_heading"), styles.h1),
        ctx.para(limit_sentence(ctx), styles.answer),
    ]
    extra = []
    lim = ctx.limit
    if lim.saturation_throughput_rps is not None:
        extra.append(ctx.t("saturation", value=words.rate(lim.saturation_throughput_rps)))
    if lim.littles_law is not None:
        ll = lim.littles_law
        extra.append(
            ctx.t(
                "littles_law",
                rate=words.rate(ll.rate_rps),
                e2e=words.seconds(ll.mean_e2e_s),
                conc=words.num(ll.concurrency),
            )
        )
    extra += limit_evidence(ctx)
    if extra:
        out.append(ctx.para(" ".join(extra)))
    out += [
        *ctx.chart_row([chart_limit(ctx), chart_attainment(ctx)]),
        ctx.para(ctx.t("limit_table"), styles.h2),
        limit_table(ctx),
        Spacer(1, 6),
        chart_recovery(ctx),
    ]
    plan = ctx.inputs.plan
    if plan.observed is not None:  # a profile read from Prometheus: production beside the test
        first = plan.scenarios[0]
        out += observed_section(plan.observed, first.per_instance_limit, first.unit, ctx)
    return out


def binding_name(ctx: ReportContext) -> str:
    lim = ctx.limit
    if lim.binding:
        return lim.binding
    for level in lim.levels:
        if level.constraints:
            return level.constraints[0].name
    return "–"


LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


def is_latency(name: str) -> bool:
    """A latency constraint (ttft:p95, e2e:p99, ...), in seconds; the others (errors,
    attainment) are shares."""
    return name.split(":")[0].split("_")[0] in LATENCY_METRICS


def constraint_text(ctx: ReportContext, name: str, value: float | None) -> str:
    """A constraint's value with its unit: a latency in ms or s, a share in %."""
    return ctx.words.seconds(value) if is_latency(name) else ctx.words.pct(value)


def constraint_axis(name: str) -> tuple[float, str]:
    """How a constraint is drawn: its values times the factor, on an axis in the unit."""
    return (1.0, "axis_seconds") if is_latency(name) else (100.0, "axis_percent")


def constraint_value(level: LimitLevel, name: str) -> float | None:
    for c in level.constraints:
        if c.name == name:
            return c.value
    return None


def limit_sentence(ctx: ReportContext) -> str:
    lim, words = ctx.limit, ctx.words
    if lim.feasible_max is None:
        return ctx.t("limit_sentence_none", slo=lim.slo)
    value = words.load(lim.feasible_max, lim.unit)
    if lim.method == "fast" and lim.fast is not None and lim.fast.interval is not None:
        low, high = lim.fast.interval
        return ctx.t(
            "limit_sentence_fast",
            value=value,
            slo=lim.slo,
            low=words.load(low, lim.unit),
            high=words.load(high, lim.unit),
            chunks=len(lim.fast.levels),
        )
    if lim.infeasible_min is None:
        return ctx.t("limit_sentence_open", value=value, slo=lim.slo)
    fail = words.load(lim.infeasible_min, lim.unit)
    failing = next((lv for lv in lim.levels if lv.load == lim.infeasible_min), None)
    if failing is not None and failing.verdict == "invalid":
        return ctx.t(
            "limit_sentence_client", value=value, slo=lim.slo, fail=fail, levels=len(lim.levels)
        )
    sentence = ctx.t(
        "limit_sentence",
        value=value,
        slo=lim.slo,
        binding=binding_name(ctx),
        fail=fail,
        levels=len(lim.levels),
        tol=words.pct(lim.tolerance, 0),
    )
    # The search says why it stopped (limit.json `stopped`); anything but "converged"
    # left the bracket wider than its tolerance.
    width = lim.infeasible_min - lim.feasible_max
    gap = width / lim.feasible_max if lim.feasible_max > 0 else 0.0
    if lim.stopped and lim.stopped != "converged":
        sentence += ctx.t("limit_gap_wide", value=value, fail=fail, gap=words.pct(gap, 0))
    return sentence


def limit_evidence(ctx: ReportContext) -> list[str]:
    """Failures at the limit and at the first failing level (by class), and the engine
    model's prediction beside the measured limit, as stored in limit.json."""
    lim, words = ctx.limit, ctx.words
    out: list[str] = []
    by_load = {lv.load: lv for lv in lim.levels}
    for key, load in (
        ("failures_at_limit", lim.feasible_max),
        ("failures_at_fail", lim.infeasible_min),
    ):
        lv = by_load.get(load) if load is not None else None
        if lv is None or lv.failure_share is None:
            continue
        classes = ", ".join(f"{c} {n}" for c, n in sorted(lv.errors_by_class.items()))
        out.append(
            ctx.t(
                key,
                load=words.load(lv.load, lim.unit),
                share=words.pct(lv.failure_share),
                classes=classes or ctx.t("no_failures"),
            )
        )
    if lim.prediction is not None and lim.prediction.feasible_max is not None:
        measured = lim.feasible_max
        gap = "–" if not measured else words.pct(measured / lim.prediction.feasible_max - 1.0, 0)
        out.append(
            ctx.t(
                "prediction_sentence",
                predicted=words.load(lim.prediction.feasible_max, lim.unit),
                measured=words.load(measured, lim.unit) if measured is not None else "–",
                gap=gap,
            )
        )
        iv = lim.prediction.interval
        if iv is not None:
            out.append(
                ctx.t(
                    "prediction_interval",
                    low=words.load(iv.low, lim.unit),
                    high=words.load(iv.high, lim.unit),
                    source=interval_source(ctx.t, iv.source),
                )
            )
    fast = lim.fast
    if fast is not None and fast.predicted_rps is not None:
        bias = ", ".join(f"{name} {value:+.3f}" for name, value in fast.bias.items())
        out.append(
            ctx.t(
                "fast_evidence",
                characterise=words.duration(fast.characterise_s),
                confirm=words.duration(fast.confirm_s),
                predicted=words.load(fast.predicted_rps, lim.unit),
                bias=bias or "–",
            )
        )
    if lim.time_scale != 1.0:
        out.append(ctx.t("time_scale_note", scale=f"{lim.time_scale:g}"))
    return out


def load_axis_label(ctx: ReportContext) -> str:
    return ctx.t("axis_load_rps") if ctx.limit.unit == "rps" else ctx.t("axis_load_users")


def verdict_points(
    ctx: ReportContext, panel: charts.Panel, values: list[tuple[LimitLevel, float | None]]
) -> None:
    for verdict, color in (
        ("pass", GREEN),
        ("fail", RED),
        ("uncertain", ORANGE),
        ("invalid", GRAY),
    ):
        chosen = [(lv.load, v) for lv, v in values if lv.verdict == verdict and v is not None]
        if chosen:
            panel.markers(
                [x for x, _ in chosen],
                [y for _, y in chosen],
                color,
                label=ctx.t(f"legend_{verdict}"),
            )


def mark_limit(ctx: ReportContext, panel: charts.Panel) -> None:
    lim = ctx.limit
    if lim.feasible_max is not None:
        panel.vline(lim.feasible_max, GREEN, text="")
    if lim.infeasible_min is not None:
        panel.vline(lim.infeasible_min, RED, text="")


def chart_limit(ctx: ReportContext) -> Drawing | NoChart:
    """The binding constraint's value per load level; left out when no level was measured."""
    lim = ctx.limit
    name = binding_name(ctx)
    if not lim.levels:
        return NoChart(ctx.t("chart_limit", binding=name), ctx.t("chart_levels_none"))
    factor, unit = constraint_axis(name)
    values = [(lv, _times(constraint_value(lv, name), factor)) for lv in lim.levels]
    threshold = _times(
        next((c.threshold for lv in lim.levels for c in lv.constraints if c.name == name), None),
        factor,
    )
    loads = [lv.load for lv in lim.levels]
    ys = [v for _, v in values if v is not None] + ([threshold] if threshold else [])
    drawing, panel = charts.single(
        CONTENT_W / 2,
        150,
        charts.nice_axis(loads, load_axis_label(ctx)),
        charts.nice_axis(ys or [1.0], ctx.t(unit)),
        font=ctx.words.font,
        title=ctx.t("chart_limit", binding=name),
    )
    mark_limit(ctx, panel)
    if threshold is not None:
        panel.hline(threshold, RED, text=ctx.t("slo_line"))
    ordered = sorted((lv.load, v) for lv, v in values if v is not None)
    panel.line([x for x, _ in ordered], [y for _, y in ordered], GRAY, width=0.6)
    verdict_points(ctx, panel, values)
    drawing.add(panel.render())
    return drawing


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def chart_attainment(ctx: ReportContext) -> Drawing | NoChart:
    """SLO attainment per load level; left out when no level recorded one."""
    lim = ctx.limit
    values = [(lv, None if lv.attainment is None else 100 * lv.attainment) for lv in lim.levels]
    ordered = sorted((lv.load, v) for lv, v in values if v is not None)
    if not ordered:
        reason = "chart_attainment_none" if lim.levels else "chart_levels_none"
        return NoChart(ctx.t("chart_attainment"), ctx.t(reason))
    loads = [lv.load for lv in lim.levels]
    drawing, panel = charts.single(
        CONTENT_W / 2,
        150,
        charts.nice_axis(loads, load_axis_label(ctx)),
        Axis(0.0, 105.0, ctx.t("axis_attainment")),
        font=ctx.words.font,
        title=ctx.t("chart_attainment"),
    )
    mark_limit(ctx, panel)
    panel.line([x for x, _ in ordered], [y for _, y in ordered], GRAY, width=0.6)
    verdict_points(ctx, panel, values)
    drawing.add(panel.render())
    return drawing


def limit_table(ctx: ReportContext) -> Table:
    words, lim = ctx.words, ctx.limit
    name = binding_name(ctx)
    rows: list[list[str]] = [
        [
            ctx.t("col_load"),
            ctx.t("col_verdict"),
            ctx.t("col_value", binding=name),
            ctx.t("col_achieved"),
            ctx.t("col_attainment"),
            ctx.t("col_completed_scheduled"),
        ]
    ]
    for lv in sorted(lim.levels, key=lambda lv: lv.load):
        value = constraint_value(lv, name)
        rows.append(
            [
                words.load(lv.load, lim.unit),
                ctx.t(f"verdict_{lv.verdict}")
                + (ctx.t("verdict_stopped_early") if lv.abandoned_early else "")
                + (ctx.t("verdict_unstable") if lv.unstable else ""),
                constraint_text(ctx, name, value),
                words.rate(lv.achieved_rps),
                words.pct(lv.attainment),
                requests_cell(ctx, lv),
            ]
        )
    return ctx.table(rows, [CONTENT_W * f for f in (0.18, 0.14, 0.17, 0.18, 0.15, 0.18)])


def requests_cell(ctx: ReportContext, lv: LimitLevel) -> str:
    """Completed of scheduled, with the requests still running when the window closed named
    as such: they are neither failures nor missing from the attainment beside them."""
    if lv.censored:
        return ctx.t(
            "requests_in_flight", completed=lv.completed, requests=lv.requests, n=lv.censored
        )
    return f"{lv.completed} / {lv.requests}"


def chart_recovery(ctx: ReportContext) -> Flowable:
    """The recovery curve stored in stages.json (contracts.recovery): the same series the
    recovery time was read on."""
    recovery = ctx.stage("recovery")
    curve = recovery.recovery_curve if recovery is not None else None
    if recovery is None or curve is None:
        return ctx.para(ctx.t("recovery_none"))
    points = [(x, y) for x, y in zip(curve.t_s, curve.ttft_p95_s, strict=True) if y is not None]
    finite = [y for _, y in points if math.isfinite(y)]
    top = max([*finite, curve.threshold_s]) * 1.15
    xs = [x for x, _ in points]
    ys = [min(y, top) for _, y in points]  # failures (+inf) drawn at the top edge
    steady = ctx.stage("steady")
    drawing, panel = charts.single(
        CONTENT_W,
        140,
        Axis(curve.t_s[0] if curve.t_s else 0.0, recovery.end_s, ctx.t("axis_time_s")),
        charts.nice_axis([*ys, curve.threshold_s], ctx.t("axis_seconds")),
        font=ctx.words.font,
        title=ctx.t("chart_recovery"),
    )
    panel.span(curve.burst_start_s, curve.burst_end_s)
    panel.line(xs, ys, ORANGE, label="TTFT p95")
    panel.hline(
        curve.threshold_s, RED, text=f"{ctx.t('slo_line')} {ctx.words.seconds(curve.threshold_s)}"
    )
    if steady is not None and steady.ttft_s.p95 is not None:
        panel.hline(steady.ttft_s.p95, GRAY, text=f"{ctx.role('steady')} p95")
    if curve.recovery_s is not None:
        at = curve.burst_end_s + curve.recovery_s
        panel.vline(
            at, GREEN, text=ctx.t("recovery_marker", value=ctx.words.seconds(curve.recovery_s))
        )
    drawing.add(panel.render())
    return drawing
