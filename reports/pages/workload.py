"""The workload page: the profile's arrival and length figures and its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from reportlab.graphics.shapes import Drawing
from reportlab.platypus import (
    Flowable,
    PageBreak,
    Spacer,
)

from reports import charts
from reports.charts import NAVY, ORANGE, RED, TEAL, Axis
from reports.layout import CONTENT_W, NoChart, side_by_side
from reports.pages.context import ReportContext


def page_workload(ctx: ReportContext) -> list[Flowable]:
    prof, words, styles = ctx.inputs.profile, ctx.words, ctx.styles
    arr, lengths = prof.arrivals, prof.lengths
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("workload_heading"), styles.h1),
        ctx.para(
            ctx.t(
                "workload_intro",
                rows=words.integer(prof.source.rows),
                span=words.duration(arr.duration_s),
                files=", ".join(Path(f).name for f in prof.source.files) or "–",
                format=prof.source.format,
                skipped=words.integer(prof.source.rows_skipped),
            )
        ),
    ]
    rows = [(ctx.t("wl_mean_rate"), words.rate(arr.mean_rate_rps))]
    rows += [(ctx.t("wl_peak", window=k), words.rate(v)) for k, v in arr.peak_rate_rps.items()]
    rows += [
        (ctx.t("wl_peak_to_mean"), words.num(arr.peak_to_mean.get("60s"))),
        (ctx.t("wl_cv"), words.num(arr.interarrival_cv)),
        (
            ctx.t("wl_input"),
            " / ".join(
                words.integer(v) for v in (lengths.input.mean, lengths.input.p50, lengths.input.p99)
            ),
        ),
        (
            ctx.t("wl_output"),
            " / ".join(
                words.integer(v)
                for v in (lengths.output.mean, lengths.output.p50, lengths.output.p99)
            ),
        ),
        (
            ctx.t("wl_classes"),
            " / ".join(
                words.pct(lengths.classes.shares.get(k), 0) for k in ("short", "medium", "long")
            )
            + f" (<= {lengths.classes.short_max_tokens}, >= {lengths.classes.long_min_tokens})",
        ),
    ]
    if prof.prefix.available:
        rows.append((ctx.t("wl_prefix"), words.pct(prof.prefix.ideal_hit_ratio)))
    if prof.sessions.available and prof.sessions.turns is not None:
        rows.append(
            (
                ctx.t("wl_sessions"),
                f"{words.integer(prof.sessions.count)} / {words.num(prof.sessions.turns.mean)}",
            )
        )
    for metric, lat in prof.observed.latency.items() if prof.observed else []:
        values = (lat.p50_s, lat.p95_s, lat.p99_s)
        rows.append(
            (ctx.t("wl_observed", metric=metric.upper()), " / ".join(map(words.seconds, values)))
        )
    half = (len(rows) + 1) // 2
    left = ctx.table(rows[:half], [CONTENT_W * 0.3, CONTENT_W * 0.2], header=False)
    right = ctx.table(rows[half:], [CONTENT_W * 0.3, CONTENT_W * 0.2], header=False)
    out.append(side_by_side(left, right))
    if prof.source.tokens_estimated:
        out.append(ctx.para(ctx.t("wl_estimated")))
    out += _limitations(ctx)
    out += [
        Spacer(1, 6),
        chart_rate(ctx),
        Spacer(1, 4),
        *ctx.chart_row([chart_hours(ctx), chart_prefix(ctx)]),
        Spacer(1, 4),
        side_by_side(
            chart_hist(
                ctx,
                lengths.input.histogram.edges,
                lengths.input.histogram.counts,
                ctx.t("chart_input"),
                NAVY,
            ),
            chart_hist(
                ctx,
                lengths.output.histogram.edges,
                lengths.output.histogram.counts,
                ctx.t("chart_output"),
                TEAL,
            ),
        ),
    ]
    return out


def _limitations(ctx: ReportContext) -> list[Flowable]:
    """For a profile read from metrics: where from, and what it had to assume."""
    src = ctx.inputs.profile.source
    if src.metrics is None:
        return []
    m = src.metrics
    out: list[Flowable] = [
        ctx.para(
            ctx.t("wl_metrics", engine=m.engine, instances=len(m.instances), step=f"{m.step_s:g}")
        )
    ]
    out += [ctx.para(f"• {lim.unknown}: {lim.assumption}") for lim in src.limitations]
    return out


def chart_rate(ctx: ReportContext) -> Drawing:
    arr = ctx.inputs.profile.arrivals
    series = np.asarray(arr.rate_series.rates_rps, dtype=float)
    in_hours = arr.duration_s > 7200
    scale = 3600.0 if in_hours else 1.0
    xs = (np.arange(series.size) + 0.5) * arr.rate_series.bin_s / scale
    peak = ctx.plan.demand.peak_rps
    ys_all = list(series) + [peak] + [b.peak_rate_rps for b in arr.bursts]
    x_axis = Axis(
        0.0,
        max(float(xs[-1]) + arr.rate_series.bin_s / scale / 2, 1e-6) if xs.size else 1.0,
        ctx.t("axis_time_h") if in_hours else ctx.t("axis_time_s"),
    )
    drawing, panel = charts.single(
        CONTENT_W,
        150,
        x_axis,
        charts.nice_axis(ys_all, ctx.t("axis_rate")),
        font=ctx.words.font,
        title=ctx.t("chart_rate"),
    )
    for b in arr.bursts:
        panel.span(b.start_s / scale, (b.start_s + b.duration_s) / scale)
    panel.line(xs, series, NAVY, width=0.8)
    panel.hline(peak, ORANGE, text=f"{ctx.t('chart_rate_peak')} {ctx.words.rate(peak)}")
    if arr.bursts:
        panel.markers(
            [(b.start_s + b.duration_s / 2) / scale for b in arr.bursts],
            [b.peak_rate_rps for b in arr.bursts],
            RED,
            shape="triangle",
            label=ctx.t("chart_rate_burst"),
        )
    drawing.add(panel.render())
    return drawing


def chart_hours(ctx: ReportContext) -> Drawing | NoChart:
    """Mean rate per hour of day; left out when the profile has no such shape (a log shorter
    than a day, or one without wall-clock times)."""
    arr = ctx.inputs.profile.arrivals
    hours = arr.hour_of_day
    if not hours or max(hours) <= 0:
        short = arr.duration_s < 86400
        reason = (
            ctx.t("chart_hour_none", span=ctx.words.duration(arr.duration_s))
            if short
            else ctx.t("chart_hour_clock_none")
        )
        return NoChart(ctx.t("chart_hour"), reason)
    drawing, panel = charts.single(
        CONTENT_W / 2,
        135,
        Axis(-0.5, 23.5, ctx.t("axis_hour")),
        charts.nice_axis(hours, ctx.t("axis_rate")),
        font=ctx.words.font,
        title=ctx.t("chart_hour"),
    )
    panel.bars(list(range(24)), hours, NAVY)
    drawing.add(panel.render())
    return drawing


def chart_hist(
    ctx: ReportContext, edges: list[float], counts: list[int], title: str, color: Any
) -> Drawing:
    lo_edges = [max(e, 0.5) for e in edges]
    drawing, panel = charts.single(
        CONTENT_W / 2,
        135,
        charts.log_axis(lo_edges, ctx.t("axis_tokens")),
        charts.nice_axis(counts, ctx.t("axis_requests")),
        font=ctx.words.font,
        title=title,
    )
    panel.steps(lo_edges, counts, color)
    drawing.add(panel.render())
    return drawing


def chart_prefix(ctx: ReportContext) -> Drawing | NoChart:
    """LRU prefix-cache hit ratio against cache size; left out without prefix data."""
    prefix = ctx.inputs.profile.prefix
    points = prefix.lru_hit_ratio
    if not (prefix.available and points):
        return NoChart(ctx.t("chart_prefix"), ctx.t("chart_prefix_none"))
    xs = [float(p.cache_tokens) for p in points]
    drawing, panel = charts.single(
        CONTENT_W / 2,
        135,
        charts.log_axis(xs, ctx.t("axis_cache")),
        Axis(0.0, 1.0, ctx.t("axis_hit")),
        font=ctx.words.font,
        title=ctx.t("chart_prefix"),
    )
    panel.line(xs, [p.hit_ratio for p in points], TEAL, label="LRU")
    panel.markers(xs, [p.hit_ratio for p in points], TEAL)
    if prefix.ideal_hit_ratio is not None:
        panel.hline(prefix.ideal_hit_ratio, ORANGE, text=ctx.t("chart_prefix_ideal"))
    drawing.add(panel.render())
    return drawing
