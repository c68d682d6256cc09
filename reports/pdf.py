"""Assembling the capacity-baseline PDF from loaded inputs: pages, tables, charts, footers.

Pages: (1) the answer for a manager, the comparison with the previous baseline and the three
biggest risks; (2) workload; (3-4) load test and limit; (5-6) plan and its cross-checks;
(7) assumptions and method; (8) appendix. Every number is read from the inputs; the only
judgement made here is the risk level shown next to each risk (thresholds below).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
from reportlab.graphics.shapes import Drawing
from reportlab.lib import colors
from reportlab.lib.enums import TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    KeepTogether,
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from planner.limit_schema import LimitLevel
from planner.plan_schema import Plan, Scenario
from planner.run_schema import StageSummary
from reports import charts
from reports.charts import GRAY, GREEN, LIGHT, NAVY, ORANGE, RED, TEAL, Axis
from reports.data import KV_METRIC, QUEUE_METRIC, ReportInputs, Series
from reports.errors import error_rows
from reports.fonts import is_cjk_font
from reports.i18n import LATIN_FONT, Words, split_runs

PAGE_W, PAGE_H = A4
MARGIN = 17 * mm
CONTENT_W = PAGE_W - 2 * MARGIN

# Risk levels shown on page 1 (presentation thresholds, stated here so they can be argued with).
RECOVERY_HIGH_S = 60.0  # recovery longer than a minute, or none: high
RECOVERY_WATCH_S = 20.0
KV_WATCH_HEADROOM = 0.2  # less than 20 % KV headroom at the limit: watch; below zero: high
KV_WATCH_BURST_USAGE = 0.95  # KV usage above 95 % during the burst: at least watch
LEVEL_ORDER = {"high": 0, "medium": 1, "low": 2}
LEVEL_COLOR = {"high": RED, "medium": ORANGE, "low": GREEN}


class Styles:
    """Paragraph styles of one language."""

    def __init__(self, w: Words) -> None:
        wrap = "CJK" if w.lang == "zh" else None
        base: dict[str, Any] = {"fontName": w.font, "wordWrap": wrap, "alignment": TA_LEFT}
        self.title = ParagraphStyle(
            "title",
            fontSize=19,
            leading=24,
            textColor=NAVY,
            spaceAfter=2,
            **{**base, "fontName": w.bold},
        )
        self.subtitle = ParagraphStyle(
            "subtitle", fontSize=8.5, leading=11, textColor=GRAY, spaceAfter=8, **base
        )
        self.h1 = ParagraphStyle(
            "h1",
            fontSize=14,
            leading=18,
            textColor=NAVY,
            spaceBefore=4,
            spaceAfter=5,
            **{**base, "fontName": w.bold},
        )
        self.h2 = ParagraphStyle(
            "h2",
            fontSize=10.5,
            leading=14,
            textColor=NAVY,
            spaceBefore=7,
            spaceAfter=3,
            **{**base, "fontName": w.bold},
        )
        self.body = ParagraphStyle("body", fontSize=8.8, leading=12.5, spaceAfter=3, **base)
        self.answer = ParagraphStyle(
            "answer",
            fontSize=13.5,
            leading=19,
            textColor=colors.black,
            backColor=LIGHT,
            borderPadding=8,
            spaceBefore=4,
            spaceAfter=12,
            **base,
        )
        self.cell = ParagraphStyle("cell", fontSize=7.8, leading=9.8, **base)
        self.cell_head = ParagraphStyle(
            "cell_head",
            fontSize=7.8,
            leading=9.8,
            textColor=colors.white,
            **{**base, "fontName": w.bold},
        )
        self.mono = ParagraphStyle("mono", fontSize=6.6, leading=8.4, fontName=w.mono)
        self.warning = ParagraphStyle(
            "warning", fontSize=9.5, leading=13, textColor=RED, spaceAfter=8, **base
        )
        self.badge = ParagraphStyle(
            "badge", fontSize=8, leading=10, textColor=colors.white, alignment=1, fontName=w.bold
        )


def _markup(text: str, font: str) -> str:
    """Escaped paragraph markup; in CJK text, Latin runs are set in Helvetica."""
    if not is_cjk_font(font):
        return escape(text)
    return "".join(
        f'<font face="{LATIN_FONT}">{escape(run)}</font>' if latin else escape(run)
        for run, latin in split_runs(text)
    )


def _p(text: str, style: ParagraphStyle) -> Paragraph:
    return Paragraph(_markup(text, style.fontName), style)


def _draw_runs(
    canvas: Canvas, x: float, y: float, text: str, font: str, size: float, *, right: bool = False
) -> None:
    runs = split_runs(text) if is_cjk_font(font) else [(text, True)]
    fonts = [LATIN_FONT if latin else font for _, latin in runs]
    widths = [canvas.stringWidth(run, f, size) for (run, _), f in zip(runs, fonts, strict=True)]
    pos = x - sum(widths) if right else x
    for (run, _), f, width in zip(runs, fonts, widths, strict=True):
        canvas.setFont(f, size)
        canvas.drawString(pos, y, run)
        pos += width


class Report:
    """Builds the flowables of one report in one language."""

    def __init__(self, inputs: ReportInputs, w: Words, generated_at: datetime) -> None:
        self.i = inputs
        self.w = w
        self.s = Styles(w)
        self.date = generated_at.strftime("%Y-%m-%d %H:%M UTC")
        self.plan = inputs.plan
        self.first = inputs.plan.scenarios[0] if inputs.plan.scenarios else None
        self.unit = self.first.unit if self.first else inputs.plan.inputs.limit.unit

    # ---------- helpers ----------
    def t(self, key: str, **values: object) -> str:
        return self.w.t(key, **values)

    def para(self, text: str, style: ParagraphStyle | None = None) -> Paragraph:
        return _p(text, style or self.s.body)

    def table(
        self,
        rows: Sequence[Sequence[Any]],
        widths: Sequence[float],
        *,
        header: bool = True,
        highlight: Sequence[tuple[int, int]] = (),
        mono_cols: Sequence[int] = (),
    ) -> Table:
        """A table in house style; string cells become wrapping paragraphs."""
        data = []
        for r, row in enumerate(rows):
            cells = []
            for c, value in enumerate(row):
                if isinstance(value, Flowable):
                    cells.append(value)
                    continue
                style = self.s.cell_head if header and r == 0 else self.s.cell
                if c in mono_cols and not (header and r == 0):
                    style = self.s.mono
                cells.append(_p(str(value), style))
            data.append(cells)
        table = Table(data, colWidths=list(widths), repeatRows=1 if header else 0)
        commands: list[tuple[Any, ...]] = [
            ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
            ("TOPPADDING", (0, 0), (-1, -1), 2.2),
            ("BOTTOMPADDING", (0, 0), (-1, -1), 2.2),
            ("LEFTPADDING", (0, 0), (-1, -1), 4),
            ("RIGHTPADDING", (0, 0), (-1, -1), 4),
            ("LINEBELOW", (0, -1), (-1, -1), 0.5, NAVY),
        ]
        for r in range(1 if header else 0, len(rows)):
            if (r - (1 if header else 0)) % 2 == 1:
                commands.append(("BACKGROUND", (0, r), (-1, r), LIGHT))
        if header:
            commands.append(("BACKGROUND", (0, 0), (-1, 0), NAVY))
        for r, c in highlight:
            commands.append(("BACKGROUND", (c, r), (c, r), colors.HexColor("#ffe8a3")))
            commands.append(("BOX", (c, r), (c, r), 0.8, ORANGE))
        table.setStyle(TableStyle(commands))
        return table

    def pairs(self, rows: Sequence[tuple[str, str]], label_w: float = 0.42) -> Table:
        """A two-column label/value table without header."""
        return self.table(rows, [CONTENT_W * label_w, CONTENT_W * (1 - label_w)], header=False)

    def side_by_side(self, left: Flowable, right: Flowable) -> Table:
        table = Table([[left, right]], colWidths=[CONTENT_W / 2, CONTENT_W / 2])
        table.setStyle(
            TableStyle(
                [
                    ("LEFTPADDING", (0, 0), (-1, -1), 0),
                    ("RIGHTPADDING", (0, 0), (-1, -1), 0),
                    ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ]
            )
        )
        return table

    def slo(self) -> str:
        return self.plan.inputs.slo or self.plan.inputs.limit.slo or self.i.limit.slo

    def stage(self, role: str) -> StageSummary | None:
        return next((s for s in self.i.stages if s.role == role), None)

    def role(self, role: str) -> str:
        return self.t(f"role_{role}")

    def limit_value(self) -> str:
        return self.w.load(self.plan.inputs.limit.value, self.plan.inputs.limit.unit)

    def peak_definition(self) -> str:
        inputs = self.plan.inputs
        if inputs.peak_rps_given is not None or inputs.peak_users_given is not None:
            return self.t("peak_def_given")
        return self.t(
            "peak_def_quantile", q=f"{inputs.peak_quantile * 100:g}", window=inputs.peak_window
        )

    def gpu_label(self) -> str:
        res = self.plan.resources
        return res.gpu if res.tp == 1 else f"{res.tp}× {res.gpu}"

    # ---------- page 1 ----------
    def answer_sentence(self) -> str:
        plan = self.plan
        first = self.first
        peak = first.demand if first else plan.demand.peak_rps
        key = "answer_rate" if self.unit == "rps" else "answer_users"
        return self.t(
            key,
            peak=self.w.rate(peak) if self.unit == "rps" else self.w.num(peak),
            peak_def=self.peak_definition(),
            slo=self.slo(),
            n=plan.instances,
            gpu=self.gpu_label(),
            load=first.instances_for_load if first else plan.instances,
            spare=first.redundancy if first else plan.inputs.redundancy,
            cost=self.w.usd(plan.cost.monthly_usd),
        )

    def page_summary(self) -> list[Flowable]:
        plan, s = self.plan, self.s
        name = plan.name or self.i.profile.name or self.i.run.name
        out: list[Flowable] = [
            self.para(self.t("doc_title", name=name), s.title),
            self.para(
                self.t(
                    "subtitle",
                    model=plan.inputs.model,
                    gpu=plan.resources.gpu,
                    tp=plan.resources.tp,
                    slo=self.slo(),
                    date=self.date,
                ),
                s.subtitle,
            ),
            self.para(self.t("answer_heading"), s.h2),
            self.para(self.answer_sentence(), s.answer),
        ]
        warning = self.fleet_warning()
        if warning is not None:
            out.append(self.para(warning, s.warning))
        out += [
            self.para(self.t("key_figures"), s.h2),
            self.pairs(self.key_figures()),
        ]
        if self.i.previous is not None:
            out += [self.para(self.t("compare_heading"), s.h2), self.comparison(self.i.previous)]
        out += [self.para(self.t("risks_heading"), s.h2), self.risks()]
        return out

    def key_figures(self) -> list[tuple[str, str]]:
        plan, w = self.plan, self.w
        first = self.first
        rows = [
            (
                self.t("fig_peak"),
                f"{w.load(first.demand if first else plan.demand.peak_rps, self.unit)}"
                f" ({self.peak_definition()})",
            ),
            (self.t("fig_limit"), self.limit_figure()),
            (
                self.t("fig_instances"),
                self.t(
                    "fig_instances_value",
                    n=plan.instances,
                    load=first.instances_for_load if first else plan.instances,
                    spare=plan.inputs.redundancy,
                ),
            ),
            (self.t("fig_gpus"), f"{plan.resources.gpus} × {plan.resources.gpu}"),
            (self.t("fig_cost"), w.usd(plan.cost.monthly_usd)),
        ]
        growth = "; ".join(
            self.t(
                "fig_growth_value",
                growth=f"{sc.growth:g}",
                n=sc.instances,
                cost=w.usd(sc.monthly_cost_usd),
            )
            for sc in plan.scenarios
        )
        if growth:
            rows.append((self.t("fig_growth"), growth))
        return rows

    def limit_matches_run(self) -> bool:
        """The plan's limit is the one in limit.json (not a number given to the planner)."""
        given, measured = self.plan.inputs.limit, self.i.limit
        return (
            measured.feasible_max is not None
            and given.unit == measured.unit
            and abs(given.value - measured.feasible_max) <= 1e-6 * max(1.0, given.value)
        )

    def limit_figure(self) -> str:
        limit = self.plan.inputs.limit
        binding = limit.binding or self.i.limit.binding or self.t("na")
        if self.limit_matches_run() and self.i.limit.infeasible_min is not None:
            return self.t(
                "fig_limit_value",
                value=self.limit_value(),
                binding=binding,
                fail=self.w.load(self.i.limit.infeasible_min, self.i.limit.unit),
            )
        return self.t("fig_limit_value_short", value=self.limit_value(), binding=binding)

    def fleet_warning(self) -> str | None:
        """A sentence when the fleet simulation does not confirm the planned count."""
        fleet = self.plan.checks.fleet
        if fleet is None or self.first is None:
            return None
        n = self.first.instances_for_load
        at_n = [p for p in fleet.points if p.instances == n]
        if at_n and not any(p.meets_slo for p in at_n):
            return self.t("fleet_warning", n=n)
        return None

    def comparison(self, prev: Plan) -> Table:
        w = self.w
        plan = self.plan

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
                self.t("compare_previous", name=prev.name or "–"),
                self.t("compare_this"),
                self.t("compare_change"),
            ]
        ]
        specs = [
            ("compare_demand", demand(prev), demand(plan), lambda v: w.load(v, unit(plan))),
            (
                "compare_limit",
                prev.inputs.limit.value,
                plan.inputs.limit.value,
                lambda v: w.load(v, plan.inputs.limit.unit),
            ),
            ("compare_instances", float(prev.instances), float(plan.instances), w.integer),
            ("compare_gpus", float(prev.resources.gpus), float(plan.resources.gpus), w.integer),
            ("compare_cost", prev.cost.monthly_usd, plan.cost.monthly_usd, w.usd),
        ]
        for key, old, new, fmt in specs:
            rows.append([self.t(key), fmt(old), fmt(new), change(new, old, fmt)])
        return self.table(rows, [CONTENT_W * f for f in (0.28, 0.24, 0.24, 0.24)])

    def risk_items(self) -> list[tuple[str, str, str]]:
        """(level, title, text) for burst recovery, KV headroom and growth, worst first."""
        w, plan = self.w, self.plan
        items: list[tuple[str, str, str]] = []
        # burst recovery
        burst, steady, recovery = self.stage("burst"), self.stage("steady"), self.stage("recovery")
        recovery_s = (
            recovery.recovery_s
            if recovery and recovery.recovery_s is not None
            else self.i.limit.recovery_s
        )
        if burst is None or (recovery is None and recovery_s is None):
            level, text = "medium", self.t("risk_burst_unmeasured")
        else:
            ratio = (
                burst.offered_rps / steady.offered_rps if steady and steady.offered_rps else None
            )
            fields = dict(
                burst=w.rate(burst.offered_rps),
                burst_ratio=w.num(ratio, 2),
                burst_p95=w.seconds(burst.ttft_s.p95),
            )
            recovered = recovery.recovered if recovery else recovery_s is not None
            if burst.ttft_s.p95 is None:
                level = "high"
                text = self.t("risk_burst_nothing_completed", **fields)
                if recovered and recovery_s is not None:
                    text += self.t("risk_burst_recovered_after", recovery=w.seconds(recovery_s))
            elif recovered is False or recovery_s is None:
                level = "high"
                text = self.t("risk_burst_not_recovered", **fields)
            else:
                level = (
                    "high"
                    if recovery_s > RECOVERY_HIGH_S
                    else "medium"
                    if recovery_s > RECOVERY_WATCH_S
                    else "low"
                )
                text = self.t("risk_burst_recovered", recovery=w.seconds(recovery_s), **fields)
        if plan.demand.burst_peak_rps is not None and plan.demand.burst_factor is not None:
            text += self.t(
                "risk_burst_traffic",
                burst_peak=w.rate(plan.demand.burst_peak_rps),
                factor=w.num(plan.demand.burst_factor, 2),
            )
        items.append((level, self.t("risk_burst"), text))
        # KV-cache headroom
        gm = plan.resources.gpu_memory
        if gm.kv_headroom_frac < 0:
            level = "high"
            text = self.t(
                "risk_kv_short",
                needed=w.integer(gm.kv_needed_tokens_at_limit),
                capacity=w.integer(gm.kv_capacity_tokens),
            )
        else:
            level = "medium" if gm.kv_headroom_frac < KV_WATCH_HEADROOM else "low"
            text = self.t(
                "risk_kv_text",
                conc=w.num(gm.concurrency_at_limit),
                ctx=w.integer(gm.mean_context_tokens),
                needed=w.integer(gm.kv_needed_tokens_at_limit),
                capacity=w.integer(gm.kv_capacity_tokens),
                headroom=w.pct(gm.kv_headroom_frac, 0),
            )
        kv_burst = self.burst_kv_peak()
        if kv_burst is not None:
            text += self.t("risk_kv_burst", kv=w.pct(kv_burst, 0))
            if kv_burst >= KV_WATCH_BURST_USAGE and level == "low":
                level = "medium"
        items.append((level, self.t("risk_kv"), text))
        # growth beyond the plan
        first = self.first
        larger = [sc for sc in plan.scenarios if first and sc.growth > first.growth]
        growth = f"{first.growth:g}" if first else "1"
        if larger:
            top = max(larger, key=lambda sc: sc.growth)
            delta = top.instances - plan.instances
            level = "medium" if delta > 0 else "low"
            text = self.t(
                "risk_growth_text",
                growth=growth,
                top=f"{top.growth:g}",
                n=top.instances,
                delta=delta,
                cost=w.usd(top.monthly_cost_usd),
            )
        else:
            level, text = "medium", self.t("risk_growth_none", growth=growth)
        items.append((level, self.t("risk_growth"), text))
        return sorted(items, key=lambda item: LEVEL_ORDER[item[0]])

    def burst_kv_peak(self) -> float | None:
        """Highest scraped KV usage (0..1) during the burst stage, when scraped."""
        burst = self.stage("burst")
        tl = self.i.timeline
        if burst is None or tl is None or KV_METRIC not in tl.server:
            return None
        series = tl.server[KV_METRIC]
        inside = (series.x >= burst.start_s) & (series.x <= burst.end_s)
        if not inside.any():
            return None
        peak = float(series.y[inside].max())
        return peak / 100 if peak > 1.0 else peak

    def risks(self) -> Table:
        rows = []
        commands: list[tuple[Any, ...]] = [
            ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
            ("LINEBELOW", (0, 0), (-1, -2), 0.4, LIGHT),
            ("TOPPADDING", (0, 0), (-1, -1), 4),
            ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
        ]
        for r, (level, title, text) in enumerate(self.risk_items()):
            rows.append(
                [
                    _p(self.t(f"risk_{level}"), self.s.badge),
                    _p(title, self.s.h2),
                    _p(text, self.s.body),
                ]
            )
            commands.append(("BACKGROUND", (0, r), (0, r), LEVEL_COLOR[level]))
        table = Table(rows, colWidths=[CONTENT_W * 0.1, CONTENT_W * 0.22, CONTENT_W * 0.68])
        table.setStyle(TableStyle(commands))
        return table

    # ---------- workload ----------
    def page_workload(self) -> list[Flowable]:
        prof, w, s = self.i.profile, self.w, self.s
        arr, lengths = prof.arrivals, prof.lengths
        out: list[Flowable] = [
            PageBreak(),
            self.para(self.t("workload_heading"), s.h1),
            self.para(
                self.t(
                    "workload_intro",
                    rows=w.integer(prof.source.rows),
                    span=w.duration(arr.duration_s),
                    files=", ".join(Path(f).name for f in prof.source.files) or "–",
                    format=prof.source.format,
                    skipped=w.integer(prof.source.rows_skipped),
                )
            ),
        ]
        rows = [(self.t("wl_mean_rate"), w.rate(arr.mean_rate_rps))]
        rows += [(self.t("wl_peak", window=k), w.rate(v)) for k, v in arr.peak_rate_rps.items()]
        rows += [
            (self.t("wl_peak_to_mean"), w.num(arr.peak_to_mean.get("60s"))),
            (self.t("wl_cv"), w.num(arr.interarrival_cv)),
            (
                self.t("wl_input"),
                " / ".join(
                    w.integer(v) for v in (lengths.input.mean, lengths.input.p50, lengths.input.p99)
                ),
            ),
            (
                self.t("wl_output"),
                " / ".join(
                    w.integer(v)
                    for v in (lengths.output.mean, lengths.output.p50, lengths.output.p99)
                ),
            ),
            (
                self.t("wl_classes"),
                " / ".join(
                    w.pct(lengths.classes.shares.get(k), 0) for k in ("short", "medium", "long")
                )
                + f" (< {lengths.classes.short_max_tokens}, >= {lengths.classes.long_min_tokens})",
            ),
        ]
        if prof.prefix.available:
            rows.append((self.t("wl_prefix"), w.pct(prof.prefix.ideal_hit_ratio)))
        if prof.sessions.available and prof.sessions.turns is not None:
            rows.append(
                (
                    self.t("wl_sessions"),
                    f"{w.integer(prof.sessions.count)} / {w.num(prof.sessions.turns.mean)}",
                )
            )
        half = (len(rows) + 1) // 2
        left = self.table(rows[:half], [CONTENT_W * 0.3, CONTENT_W * 0.2], header=False)
        right = self.table(rows[half:], [CONTENT_W * 0.3, CONTENT_W * 0.2], header=False)
        out.append(self.side_by_side(left, right))
        if prof.source.tokens_estimated:
            out.append(self.para(self.t("wl_estimated")))
        out += [
            Spacer(1, 6),
            self.chart_rate(),
            Spacer(1, 4),
            self.side_by_side(self.chart_hours(), self.chart_prefix()),
            Spacer(1, 4),
            self.side_by_side(
                self.chart_hist(
                    lengths.input.histogram.edges,
                    lengths.input.histogram.counts,
                    self.t("chart_input"),
                    NAVY,
                ),
                self.chart_hist(
                    lengths.output.histogram.edges,
                    lengths.output.histogram.counts,
                    self.t("chart_output"),
                    TEAL,
                ),
            ),
        ]
        return out

    def chart_rate(self) -> Drawing:
        arr = self.i.profile.arrivals
        series = np.asarray(arr.rate_series.rates_rps, dtype=float)
        in_hours = arr.duration_s > 7200
        scale = 3600.0 if in_hours else 1.0
        xs = (np.arange(series.size) + 0.5) * arr.rate_series.bin_s / scale
        peak = self.plan.demand.peak_rps
        ys_all = list(series) + [peak] + [b.peak_rate_rps for b in arr.bursts]
        x_axis = Axis(
            0.0,
            max(float(xs[-1]) + arr.rate_series.bin_s / scale / 2, 1e-6) if xs.size else 1.0,
            self.t("axis_time_h") if in_hours else self.t("axis_time_s"),
        )
        drawing, panel = charts.single(
            CONTENT_W,
            150,
            x_axis,
            charts.nice_axis(ys_all, self.t("axis_rate")),
            font=self.w.font,
            title=self.t("chart_rate"),
        )
        for b in arr.bursts:
            panel.span(b.start_s / scale, (b.start_s + b.duration_s) / scale)
        panel.line(xs, series, NAVY, width=0.8)
        panel.hline(peak, ORANGE, text=f"{self.t('chart_rate_peak')} {self.w.rate(peak)}")
        if arr.bursts:
            panel.markers(
                [(b.start_s + b.duration_s / 2) / scale for b in arr.bursts],
                [b.peak_rate_rps for b in arr.bursts],
                RED,
                shape="triangle",
                label=self.t("chart_rate_burst"),
            )
        drawing.add(panel.render())
        return drawing

    def chart_hours(self) -> Drawing:
        hours = self.i.profile.arrivals.hour_of_day
        values = hours or [0.0]
        drawing, panel = charts.single(
            CONTENT_W / 2,
            135,
            Axis(-0.5, 23.5, self.t("axis_hour")),
            charts.nice_axis(values, self.t("axis_rate")),
            font=self.w.font,
            title=self.t("chart_hour"),
        )
        if hours:
            panel.bars(list(range(24)), hours, NAVY)
        else:
            panel.note(self.t("chart_hour_none"))
        drawing.add(panel.render())
        return drawing

    def chart_hist(self, edges: list[float], counts: list[int], title: str, color: Any) -> Drawing:
        lo_edges = [max(e, 0.5) for e in edges]
        drawing, panel = charts.single(
            CONTENT_W / 2,
            135,
            charts.log_axis(lo_edges, self.t("axis_tokens")),
            charts.nice_axis(counts, self.t("axis_requests")),
            font=self.w.font,
            title=title,
        )
        panel.steps(lo_edges, counts, color)
        drawing.add(panel.render())
        return drawing

    def chart_prefix(self) -> Drawing:
        prefix = self.i.profile.prefix
        points = prefix.lru_hit_ratio
        xs: list[float] = [float(p.cache_tokens) for p in points] or [1.0, 10.0]
        drawing, panel = charts.single(
            CONTENT_W / 2,
            135,
            charts.log_axis(xs, self.t("axis_cache")),
            Axis(0.0, 1.0, self.t("axis_hit")),
            font=self.w.font,
            title=self.t("chart_prefix"),
        )
        if prefix.available and points:
            panel.line(xs, [p.hit_ratio for p in points], TEAL, label="LRU")
            panel.markers(xs, [p.hit_ratio for p in points], TEAL)
            if prefix.ideal_hit_ratio is not None:
                panel.hline(prefix.ideal_hit_ratio, ORANGE, text=self.t("chart_prefix_ideal"))
        else:
            panel.note(self.t("chart_prefix_none"))
        drawing.add(panel.render())
        return drawing

    # ---------- load test and limit ----------
    def page_loadtest(self) -> list[Flowable]:
        run, w, s = self.i.run, self.w, self.s
        out: list[Flowable] = [
            PageBreak(),
            self.para(self.t("loadtest_heading"), s.h1),
            self.para(
                self.t(
                    "loadtest_intro",
                    run=run.name,
                    host=run.host,
                    model=run.model,
                    endpoint=run.endpoint,
                    stages=len(self.i.stages),
                    seed=run.seed,
                    workers=run.workers,
                )
            ),
            self.para(self.t("stage_table"), s.h2),
            self.stage_table(),
            *self.errors_table(),
            Spacer(1, 6),
            self.timeline(),
            PageBreak(),
            self.para(self.t("limit_heading"), s.h1),
            self.para(self.limit_sentence(), s.answer),
        ]
        extra = []
        lim = self.i.limit
        if lim.saturation_throughput_rps is not None:
            extra.append(self.t("saturation", value=w.rate(lim.saturation_throughput_rps)))
        if lim.littles_law is not None:
            ll = lim.littles_law
            extra.append(
                self.t(
                    "littles_law",
                    rate=w.rate(ll.rate_rps),
                    e2e=w.seconds(ll.mean_e2e_s),
                    conc=w.num(ll.concurrency),
                )
            )
        extra += self.limit_evidence()
        if extra:
            out.append(self.para(" ".join(extra)))
        out += [
            self.side_by_side(self.chart_limit(), self.chart_attainment()),
            self.para(self.t("limit_table"), s.h2),
            self.limit_table(),
            Spacer(1, 6),
            self.chart_recovery(),
        ]
        return out

    def stage_table(self) -> Table:
        w = self.w
        rows: list[list[str]] = [
            [
                self.t(k)
                for k in (
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
                )
            ]
        ]
        for st in self.i.stages:
            if st.recovery_s is not None:
                recovery = w.seconds(st.recovery_s)
            elif st.recovered is False:
                recovery = self.t("not_recovered")
            else:
                recovery = "–"
            rows.append(
                [
                    st.name,
                    self.role(st.role),
                    w.duration(st.duration_s),
                    w.rate(st.offered_rps),
                    w.rate(st.achieved_rps),
                    w.seconds(st.ttft_s.p50),
                    w.seconds(st.ttft_s.p95),
                    w.seconds(st.tpot_s.p95),
                    f"{st.errors}",
                    recovery,
                ]
            )
        widths = [0.12, 0.09, 0.09, 0.11, 0.11, 0.1, 0.1, 0.1, 0.08, 0.1]
        return self.table(rows, [CONTENT_W * f for f in widths])

    def errors_table(self) -> list[Flowable]:
        """Failures by class for the load test's stages and the limit's levels (if any)."""
        found = error_rows(self.i.stages, self.i.limit)
        if not found:
            return []
        w, unit = self.w, self.i.limit.unit
        rows: list[list[str]] = [
            [self.t(k) for k in ("col_where", "col_class", "col_requests", "col_message")]
        ]
        for r in found:
            where = r.where if r.load is None else self.t("limit_level", load=w.load(r.load, unit))
            rows.append([where, r.error_class, f"{r.requests}", r.message or "–"])
        widths = [CONTENT_W * f for f in (0.2, 0.16, 0.1, 0.54)]
        return [
            self.para(self.t("errors_table"), self.s.h2),
            self.para(self.t("errors_classes")),
            self.table(rows, widths, mono_cols=(1,)),
        ]

    def ttft_threshold_s(self) -> float | None:
        for level in self.i.limit.levels:
            for c in level.constraints:
                if c.name.startswith("ttft"):
                    return c.threshold
        return None

    def mark_stages(self, panel: charts.Panel, label: bool) -> None:
        for st in self.i.stages:
            if st.role == "burst":
                panel.span(st.start_s, st.end_s)
            if st.start_s > 0:
                panel.vline(st.start_s, GRAY, width=0.5, dash=(1, 2))
            # label a stage only where it is wide enough to hold its name
            wide = panel.px(st.end_s) - panel.px(st.start_s) > 6 * len(self.role(st.role))
            if label and wide:
                panel.text(st.start_s + 1, panel.y.hi * 0.86, self.role(st.role), GRAY)

    def timeline(self) -> Flowable:
        tl = self.i.timeline
        if tl is None:
            return self.para(self.t("records_none", file="records.parquet"))
        end = max([st.end_s for st in self.i.stages] + [float(tl.offered_rps.x[-1]) + 0.5])
        x_axis = Axis(0.0, end, self.t("axis_time_s"))
        threshold = self.ttft_threshold_s()
        ttft_vals = list(tl.ttft_p95_rolling_s.y) + ([threshold] if threshold else [])
        panels_spec: list[tuple[str, Axis, float]] = [
            (
                self.t("chart_timeline"),
                charts.nice_axis(
                    np.concatenate([tl.offered_rps.y, tl.achieved_rps.y]), self.t("axis_rate")
                ),
                70,
            ),
            (self.t("chart_ttft"), charts.nice_axis(ttft_vals, self.t("axis_seconds")), 62),
            (
                self.t("chart_errors"),
                charts.nice_axis(tl.errors_per_s.y, self.t("axis_errors"), min_hi=1.0),
                38,
            ),
        ]
        queue = tl.server.get(QUEUE_METRIC)
        kv = tl.server.get(KV_METRIC)
        kv_pct = Series(kv.x, kv.y * (100.0 if kv.y.max(initial=0) <= 1.0 else 1.0)) if kv else None
        panels_spec.append(
            (
                self.t("chart_queue"),
                charts.nice_axis(queue.y if queue else [1.0], self.t("axis_waiting"), min_hi=1.0),
                44,
            )
        )
        panels_spec.append((self.t("chart_kv"), Axis(0.0, 100.0, self.t("axis_kv")), 44))
        drawing, panels = charts.stacked(
            CONTENT_W,
            [h for _, _, h in panels_spec],
            x_axis,
            [a for _, a, _ in panels_spec],
            font=self.w.font,
            titles=[t for t, _, _ in panels_spec],
        )
        for i, panel in enumerate(panels):
            self.mark_stages(panel, label=i == 0)
        panels[0].line(
            tl.offered_rps.x, tl.offered_rps.y, GRAY, width=0.8, label=self.t("legend_offered")
        )
        panels[0].line(tl.achieved_rps.x, tl.achieved_rps.y, NAVY, label=self.t("legend_achieved"))
        panels[1].line(tl.ttft_p95_rolling_s.x, tl.ttft_p95_rolling_s.y, ORANGE)
        if threshold is not None:
            panels[1].hline(
                threshold, RED, text=f"{self.t('slo_line')} {self.w.seconds(threshold)}"
            )
        panels[2].bars(list(tl.errors_per_s.x), list(tl.errors_per_s.y), RED, width_frac=0.9)
        if queue is not None:
            panels[3].line(queue.x, queue.y, TEAL)
        else:
            panels[3].note(self.t("not_scraped"))
        if kv_pct is not None:
            panels[4].line(kv_pct.x, kv_pct.y, NAVY)
        else:
            panels[4].note(self.t("not_scraped"))
        for panel in panels:
            drawing.add(panel.render())
        return drawing

    def binding_name(self) -> str:
        lim = self.i.limit
        if lim.binding:
            return lim.binding
        for level in lim.levels:
            if level.constraints:
                return level.constraints[0].name
        return "–"

    @staticmethod
    def constraint_value(level: LimitLevel, name: str) -> float | None:
        for c in level.constraints:
            if c.name == name:
                return c.value
        return None

    def limit_sentence(self) -> str:
        lim, w = self.i.limit, self.w
        if lim.feasible_max is None:
            return self.t("limit_sentence_none", slo=lim.slo)
        value = w.load(lim.feasible_max, lim.unit)
        if lim.infeasible_min is None:
            return self.t("limit_sentence_open", value=value, slo=lim.slo)
        fail = w.load(lim.infeasible_min, lim.unit)
        failing = next((lv for lv in lim.levels if lv.load == lim.infeasible_min), None)
        if failing is not None and failing.verdict == "invalid":
            return self.t(
                "limit_sentence_client", value=value, slo=lim.slo, fail=fail, levels=len(lim.levels)
            )
        sentence = self.t(
            "limit_sentence",
            value=value,
            slo=lim.slo,
            binding=self.binding_name(),
            fail=fail,
            levels=len(lim.levels),
            tol=w.pct(lim.tolerance, 0),
        )
        # The search says why it stopped (limit.json `stopped`); anything but "converged"
        # left the bracket wider than its tolerance.
        width = lim.infeasible_min - lim.feasible_max
        gap = width / lim.feasible_max if lim.feasible_max > 0 else 0.0
        if lim.stopped and lim.stopped != "converged":
            sentence += self.t("limit_gap_wide", value=value, fail=fail, gap=w.pct(gap, 0))
        return sentence

    def limit_evidence(self) -> list[str]:
        """Failures at the limit and at the first failing level (by class), and the engine
        model's prediction beside the measured limit, as stored in limit.json."""
        lim, w = self.i.limit, self.w
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
                self.t(
                    key,
                    load=w.load(lv.load, lim.unit),
                    share=w.pct(lv.failure_share),
                    classes=classes or self.t("no_failures"),
                )
            )
        if lim.prediction is not None and lim.prediction.feasible_max is not None:
            measured = lim.feasible_max
            gap = "–" if not measured else w.pct(measured / lim.prediction.feasible_max - 1.0, 0)
            out.append(
                self.t(
                    "prediction_sentence",
                    predicted=w.load(lim.prediction.feasible_max, lim.unit),
                    measured=w.load(measured, lim.unit) if measured is not None else "–",
                    gap=gap,
                )
            )
        if lim.time_scale != 1.0:
            out.append(self.t("time_scale_note", scale=f"{lim.time_scale:g}"))
        return out

    def load_axis_label(self) -> str:
        return self.t("axis_load_rps") if self.i.limit.unit == "rps" else self.t("axis_load_users")

    def verdict_points(
        self, panel: charts.Panel, values: list[tuple[LimitLevel, float | None]]
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
                    label=self.t(f"legend_{verdict}"),
                )

    def mark_limit(self, panel: charts.Panel) -> None:
        lim = self.i.limit
        if lim.feasible_max is not None:
            panel.vline(lim.feasible_max, GREEN, text="")
        if lim.infeasible_min is not None:
            panel.vline(lim.infeasible_min, RED, text="")

    def chart_limit(self) -> Drawing:
        lim = self.i.limit
        name = self.binding_name()
        values = [(lv, self.constraint_value(lv, name)) for lv in lim.levels]
        threshold = next(
            (c.threshold for lv in lim.levels for c in lv.constraints if c.name == name), None
        )
        loads = [lv.load for lv in lim.levels] or [1.0]
        ys = [v for _, v in values if v is not None] + ([threshold] if threshold else [])
        drawing, panel = charts.single(
            CONTENT_W / 2,
            150,
            charts.nice_axis(loads, self.load_axis_label()),
            charts.nice_axis(ys or [1.0], name),
            font=self.w.font,
            title=self.t("chart_limit", binding=name),
        )
        self.mark_limit(panel)
        if threshold is not None:
            panel.hline(threshold, RED, text=self.t("slo_line"))
        ordered = sorted((lv.load, v) for lv, v in values if v is not None)
        panel.line([x for x, _ in ordered], [y for _, y in ordered], GRAY, width=0.6)
        self.verdict_points(panel, values)
        drawing.add(panel.render())
        return drawing

    def chart_attainment(self) -> Drawing:
        lim = self.i.limit
        values = [(lv, lv.attainment) for lv in lim.levels]
        loads = [lv.load for lv in lim.levels] or [1.0]
        drawing, panel = charts.single(
            CONTENT_W / 2,
            150,
            charts.nice_axis(loads, self.load_axis_label()),
            Axis(0.0, 1.05, self.t("axis_attainment")),
            font=self.w.font,
            title=self.t("chart_attainment"),
        )
        self.mark_limit(panel)
        ordered = sorted((lv.load, v) for lv, v in values if v is not None)
        if ordered:
            panel.line([x for x, _ in ordered], [y for _, y in ordered], GRAY, width=0.6)
            self.verdict_points(panel, values)
        else:
            panel.note(self.t("na"))
        drawing.add(panel.render())
        return drawing

    def limit_table(self) -> Table:
        w, lim = self.w, self.i.limit
        name = self.binding_name()
        rows: list[list[str]] = [
            [
                self.t("col_load"),
                self.t("col_verdict"),
                self.t("col_value", binding=name),
                self.t("col_achieved"),
                self.t("col_attainment"),
                self.t("col_requests"),
            ]
        ]
        for lv in sorted(lim.levels, key=lambda lv: lv.load):
            value = self.constraint_value(lv, name)
            rows.append(
                [
                    w.load(lv.load, lim.unit),
                    self.t(f"verdict_{lv.verdict}")
                    + (self.t("verdict_stopped_early") if lv.abandoned_early else "")
                    + (self.t("verdict_unstable") if lv.unstable else ""),
                    w.num(value),
                    w.rate(lv.achieved_rps),
                    w.pct(lv.attainment),
                    f"{lv.completed} / {lv.requests}",
                ]
            )
        return self.table(rows, [CONTENT_W * f for f in (0.18, 0.14, 0.17, 0.18, 0.15, 0.18)])

    def chart_recovery(self) -> Flowable:
        """The recovery curve stored in stages.json (planner.recovery): the same series the
        recovery time was read on."""
        recovery = self.stage("recovery")
        curve = recovery.recovery_curve if recovery is not None else None
        if recovery is None or curve is None:
            return self.para(self.t("recovery_none"))
        points = [(x, y) for x, y in zip(curve.t_s, curve.ttft_p95_s, strict=True) if y is not None]
        finite = [y for _, y in points if math.isfinite(y)]
        top = max([*finite, curve.threshold_s]) * 1.15
        xs = [x for x, _ in points]
        ys = [min(y, top) for _, y in points]  # failures (+inf) drawn at the top edge
        steady = self.stage("steady")
        drawing, panel = charts.single(
            CONTENT_W,
            140,
            Axis(curve.t_s[0] if curve.t_s else 0.0, recovery.end_s, self.t("axis_time_s")),
            charts.nice_axis([*ys, curve.threshold_s], self.t("axis_seconds")),
            font=self.w.font,
            title=self.t("chart_recovery"),
        )
        panel.span(curve.burst_start_s, curve.burst_end_s)
        panel.line(xs, ys, ORANGE, label="TTFT p95")
        panel.hline(
            curve.threshold_s, RED, text=f"{self.t('slo_line')} {self.w.seconds(curve.threshold_s)}"
        )
        if steady is not None and steady.ttft_s.p95 is not None:
            panel.hline(steady.ttft_s.p95, GRAY, text=f"{self.role('steady')} p95")
        if curve.recovery_s is not None:
            at = curve.burst_end_s + curve.recovery_s
            panel.vline(
                at, GREEN, text=self.t("recovery_marker", value=self.w.seconds(curve.recovery_s))
            )
        drawing.add(panel.render())
        return drawing

    # ---------- plan ----------
    def arithmetic_row(self, sc: Scenario) -> str:
        w = self.w
        return self.t(
            "arith_row",
            growth=f"{sc.growth:g}",
            demand=w.num(sc.demand, 4),
            h=w.num(1 + self.plan.inputs.headroom),
            limit=w.num(sc.per_instance_limit),
            spare=sc.redundancy,
            dwh=w.num(sc.demand_with_headroom, 4),
            load=sc.instances_for_load,
            n=sc.instances,
        )

    def page_plan(self) -> list[Flowable]:
        plan, w, s = self.plan, self.w, self.s
        out: list[Flowable] = [
            PageBreak(),
            self.para(self.t("plan_heading"), s.h1),
            self.para(self.answer_sentence(), s.answer),
            self.para(self.t("arith_heading"), s.h2),
            self.para(self.t("arith_formula")),
        ]
        out += [self.para(self.arithmetic_row(sc), s.body) for sc in plan.scenarios]
        rows: list[list[str]] = [
            [
                self.t(k)
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
                    w.load(sc.demand, sc.unit),
                    w.load(sc.demand_with_headroom, sc.unit),
                    w.load(sc.per_instance_limit, sc.unit),
                    f"{sc.instances_for_load}",
                    f"{sc.redundancy}",
                    f"{sc.instances}",
                    f"{sc.gpus}",
                    w.usd(sc.monthly_cost_usd),
                ]
            )
        out += [
            self.para(self.t("scenario_table"), s.h2),
            self.table(
                rows, [CONTENT_W * f for f in (0.08, 0.13, 0.13, 0.13, 0.1, 0.08, 0.1, 0.1, 0.15)]
            ),
        ]
        if plan.sensitivity:
            out += [
                self.para(self.t("sensitivity_heading"), s.h2),
                self.sensitivity_table(),
                self.para(self.t("sensitivity_note")),
            ]
        gm = plan.resources.gpu_memory
        res = plan.resources
        res_rows = [
            (self.t("res_gpu_mem"), w.gib(gm.capacity_bytes_per_gpu)),
            (self.t("res_weights"), w.gib(gm.weights_bytes_per_gpu)),
            (self.t("res_kv_token"), f"{w.integer(gm.kv_bytes_per_token_per_gpu)} B"),
            (
                self.t("res_kv_capacity"),
                self.t("tokens_unit", value=w.integer(gm.kv_capacity_tokens)),
            ),
            (
                self.t("res_kv_needed"),
                self.t("tokens_unit", value=w.integer(gm.kv_needed_tokens_at_limit)),
            ),
            (self.t("res_kv_headroom"), w.pct(gm.kv_headroom_frac)),
            (self.t("res_context"), self.t("tokens_unit", value=w.integer(gm.mean_context_tokens))),
            (self.t("res_concurrency"), w.num(gm.concurrency_at_limit)),
            (self.t("res_cpu"), f"{res.cpu_cores_per_instance} / {res.cpu_cores_total}"),
            (
                self.t("res_ram"),
                f"{res.host_ram_gib_per_instance:g} GiB / {res.host_ram_gib_total:g} GiB",
            ),
        ]
        if self.w.lang == "en":  # free text written by the planner, in English
            res_rows.append((self.t("res_rule"), res.rule))
        cost_rows = [
            (self.t("cost_price"), w.usd(plan.cost.gpu_hour_price_usd)),
            (self.t("cost_hours"), f"{plan.cost.hours_per_month:g} h"),
            (self.t("cost_monthly"), w.usd(plan.cost.monthly_usd)),
        ]
        if self.w.lang == "en":
            cost_rows.append((self.t("cost_source"), plan.cost.price_source))
        out += [
            CondPageBreak(200),
            self.para(self.t("resources_heading"), s.h2),
            self.pairs(res_rows),
            self.para(self.t("cost_heading"), s.h2),
            self.pairs(cost_rows),
        ]
        out += self.checks()
        return out

    def sensitivity_table(self) -> Table:
        plan = self.plan
        growths = sorted({c.growth for c in plan.sensitivity})
        headrooms = sorted({c.headroom for c in plan.sensitivity})
        cells = {(c.growth, c.headroom): c.instances for c in plan.sensitivity}
        rows: list[list[str]] = [
            [self.t("sensitivity_corner")] + [self.w.pct(h, 0) for h in headrooms]
        ]
        highlight = []
        first_growth = self.first.growth if self.first else None
        for r, g in enumerate(growths, start=1):
            rows.append([f"×{g:g}"] + [str(cells.get((g, h), "–")) for h in headrooms])
            for c, h in enumerate(headrooms, start=1):
                if g == first_growth and abs(h - plan.inputs.headroom) < 1e-9:
                    highlight.append((r, c))
        width = CONTENT_W / (len(headrooms) + 1)
        return self.table(rows, [width] * (len(headrooms) + 1), highlight=highlight)

    def checks(self) -> list[Flowable]:
        plan, w, s = self.plan, self.w, self.s
        out: list[Flowable] = [
            PageBreak(),
            self.para(self.t("checks_heading"), s.h1),
            self.para(self.t("queue_heading"), s.h2),
        ]
        q = plan.checks.queueing
        if q is None:
            out.append(self.para(self.t("queue_none")))
        else:
            text = self.t(
                "queue_text",
                ca2=w.num(q.arrival_cv2),
                cs2=w.num(q.service_cv2),
                bursty=q.instances_bursty,
                poisson=q.instances_poisson,
            )
            if q.wait_probability is not None or q.mean_wait_s is not None:
                text += self.t(
                    "queue_wait", pw=w.pct(q.wait_probability), wait=w.seconds(q.mean_wait_s)
                )
            out.append(self.para(text))
        out.append(self.para(self.t("fleet_heading"), s.h2))
        fleet = plan.checks.fleet
        if fleet is None:
            out.append(self.para(self.t("fleet_none")))
            return out
        out.append(
            self.para(
                self.t("fleet_text", rate=w.rate(fleet.rate_rps), sim=w.duration(fleet.simulated_s))
            )
        )
        for routing in dict.fromkeys(p.routing for p in fleet.points):
            pts = sorted(
                (p for p in fleet.points if p.routing == routing), key=lambda p: p.instances
            )
            ok = next((p.instances for p in pts if p.meets_slo), None)
            label = self.t(f"routing_{routing}")
            if ok is None:
                text = self.t("fleet_verdict_none", routing=label)
            else:
                text = self.t("fleet_verdict", routing=label, ok=ok)
                fail = [p.instances for p in pts if not p.meets_slo and p.instances < ok]
                if fail:
                    text += self.t("fleet_verdict_fail", fail=max(fail))
            out.append(self.para(text + ("." if self.w.lang == "en" else "。")))
        rows: list[list[str]] = [
            [
                self.t(k)
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
                    self.t(f"routing_{p.routing}"),
                    w.pct(p.attainment),
                    w.seconds(p.ttft_p95_s),
                    w.seconds(p.tpot_p95_s),
                    self.t("yes" if p.meets_slo else "no"),
                    w.integer(p.requests),
                ]
            )
        out += [
            KeepTogether([self.chart_fleet()]),
            Spacer(1, 4),
            self.table(rows, [CONTENT_W * f for f in (0.1, 0.26, 0.13, 0.12, 0.12, 0.12, 0.15)]),
        ]
        return out

    def chart_fleet(self) -> Drawing:
        fleet = self.plan.checks.fleet
        assert fleet is not None
        ns = [p.instances for p in fleet.points]
        drawing, panel = charts.single(
            CONTENT_W,
            140,
            Axis(min(ns) - 0.5, max(ns) + 0.5, self.t("axis_instances")),
            Axis(
                min(0.5, min(p.attainment for p in fleet.points) - 0.05),
                1.02,
                self.t("axis_attainment"),
            ),
            font=self.w.font,
            title=self.t("chart_fleet"),
        )
        if self.first is not None:
            panel.vline(self.first.instances_for_load, ORANGE, text="")
        for routing, color in (("round_robin", NAVY), ("least_outstanding", TEAL)):
            pts = sorted(
                (p for p in fleet.points if p.routing == routing), key=lambda p: p.instances
            )
            if pts:
                panel.line(
                    [p.instances for p in pts],
                    [p.attainment for p in pts],
                    color,
                    label=self.t(f"routing_{routing}"),
                )
                panel.markers([p.instances for p in pts], [p.attainment for p in pts], color)
        drawing.add(panel.render())
        return drawing

    # ---------- method ----------
    def page_method(self) -> list[Flowable]:
        plan, w, s = self.plan, self.w, self.s
        lim = self.i.limit
        out: list[Flowable] = [
            CondPageBreak(320),
            Spacer(1, 10),
            self.para(self.t("method_heading"), s.h1),
            self.para(self.t("method_metrics"), s.h2),
        ]
        out += [
            self.para("• " + self.t(k))
            for k in (
                "def_ttft",
                "def_tpot",
                "def_itl",
                "def_e2e",
                "def_lag",
                "def_tokens",
                "def_good",
            )
        ]
        out.append(self.para(self.t("method_steps"), s.h2))
        steps = [
            self.t(
                "method_profile",
                rows=w.integer(self.i.profile.source.rows),
                peak_def=self.peak_definition(),
                peak=w.rate(plan.demand.peak_rps),
            ),
            self.t(
                "method_limit",
                dimension=self.t(f"dimension_{lim.dimension}"),
                slo=lim.slo,
                tol=w.pct(lim.tolerance, 0),
            ),
            self.t(
                "method_instances",
                headroom=w.pct(plan.inputs.headroom, 0),
                spare=plan.inputs.redundancy,
            ),
            self.t(
                "method_cost",
                tp=plan.inputs.tp,
                price=w.usd(plan.cost.gpu_hour_price_usd),
                hours=f"{plan.cost.hours_per_month:g}",
            ),
            self.t("method_checks"),
        ]
        out += [self.para(f"{n}. {text}") for n, text in enumerate(steps, start=1)]
        out.append(self.para(self.t("warnings_heading"), s.h2))
        warnings = []
        if plan.inputs.profile_digest and plan.inputs.profile_digest not in self.profile_digests():
            warnings.append(self.t("warn_digest"))
        if self.i.run.tokens_estimated:
            warnings.append(self.t("warn_estimated"))
        if self.i.run.interrupted:
            warnings.append(self.t("warn_interrupted"))
        if self.i.profile.source.tokens_estimated:
            warnings.append(self.t("warn_profile_estimated"))
        fleet_warning = self.fleet_warning()
        if fleet_warning is not None:
            warnings.append(fleet_warning)
        stage_warnings = [
            (st.name, text)
            for st in self.i.stages
            if st.validity is not None
            for text in st.validity.warnings
        ]
        if stage_warnings and self.w.lang == "en":  # the load test writes them in English
            warnings += [self.t("warn_stage", stage=n, text=t) for n, t in stage_warnings]
        elif stage_warnings:
            warnings.append(self.t("warn_stages", n=len(stage_warnings)))
        notes = self.plan.notes
        if notes and self.w.lang == "en":  # the planner writes its notes in English
            warnings += [self.t("warn_plan_note", note=note) for note in notes]
        elif notes:
            warnings.append(self.t("warn_plan_notes", n=len(notes)))
        out += [self.para("• " + text) for text in warnings or [self.t("warn_none")]]
        return out

    def profile_digests(self) -> set[str]:
        """Digests that identify the given profile: its JSON's and its source's."""
        return {
            d
            for d in (
                self.i.profile.digest(),
                self.i.profile.source.digest,
                next((x.sha256 for x in self.i.digests if x.role == "profile"), ""),
            )
            if d
        }

    # ---------- appendix ----------
    def page_appendix(self) -> list[Flowable]:
        run, w, s = self.i.run, self.w, self.s
        prof = self.i.profile
        stages = "; ".join(
            self.t(
                "meta_stage",
                name=st.name,
                role=self.role(st.role),
                duration=w.duration(st.duration_s),
                load=w.rate(st.rate_rps) if st.rate_rps is not None else w.load(st.users, "users"),
            )
            for st in run.plan.stages
        )
        rows = [
            (self.t("meta_run"), run.name),
            (self.t("meta_command"), " ".join(run.command)),
            (self.t("meta_versions"), f"{run.capplan_version} / {run.locust_version or '–'}"),
            (self.t("meta_target"), run.host),
            (self.t("meta_model"), f"{run.model} / {run.endpoint}"),
            (self.t("meta_seed"), f"{run.seed} / {run.workers}"),
            (self.t("meta_time"), f"{run.started_at} / {run.ended_at or '–'}"),
            (self.t("meta_plan"), f"{run.plan.name}: {stages}"),
            (
                self.t("meta_profile_source"),
                f"{', '.join(prof.source.files)} ({prof.source.format})",
            ),
            (
                self.t("meta_profile_rows"),
                f"{w.integer(prof.source.rows)} / {w.integer(prof.source.rows_skipped)}",
            ),
        ]
        digest_rows: list[list[str]] = [
            [self.t("col_role_file"), self.t("col_path"), self.t("col_sha")]
        ]
        for d in self.i.digests:
            digest_rows.append([self.t(f"digest_role_{d.role}"), d.path, d.sha256])
        known = self.profile_digests()

        def verdict(value: str) -> str:
            if not value:
                return self.t("unknown")
            return self.t("match") if value in known else self.t("mismatch")

        recorded = [
            [self.t("col_role_file"), self.t("col_sha"), ""],
            [self.t("rec_profile"), self.i.profile.digest(), ""],
            [self.t("rec_run"), run.profile_digest, verdict(run.profile_digest)],
            [
                self.t("rec_limit"),
                self.i.limit.profile_digest,
                verdict(self.i.limit.profile_digest),
            ],
            [
                self.t("rec_plan"),
                self.plan.inputs.profile_digest,
                verdict(self.plan.inputs.profile_digest),
            ],
        ]
        return [
            PageBreak(),
            self.para(self.t("appendix_heading"), s.h1),
            self.pairs(rows, label_w=0.25),
            self.para(self.t("digest_heading"), s.h2),
            self.table(digest_rows, [CONTENT_W * f for f in (0.17, 0.35, 0.48)], mono_cols=(1, 2)),
            self.para(self.t("recorded_digests"), s.h2),
            self.table(recorded, [CONTENT_W * f for f in (0.3, 0.55, 0.15)], mono_cols=(1,)),
        ]

    def story(self) -> list[Flowable]:
        return (
            self.page_summary()
            + self.page_workload()
            + self.page_loadtest()
            + self.page_plan()
            + self.page_method()
            + self.page_appendix()
        )


def _numbered_canvas(w: Words, footer: str, page_of_key: str) -> type[Canvas]:
    """A canvas class that writes 'page n of total' once the total is known."""

    class NumberedCanvas(Canvas):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict[str, Any]] = []

        def showPage(self) -> None:  # noqa: N802 (reportlab's name)
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            total = len(self._pages)
            for state in self._pages:
                self.__dict__.update(state)
                self.setFillColor(GRAY)
                _draw_runs(self, MARGIN, 10 * mm, footer, w.font, 7)
                _draw_runs(
                    self,
                    PAGE_W - MARGIN,
                    10 * mm,
                    w.t(page_of_key, n=self._pageNumber, total=total),
                    w.font,
                    7,
                    right=True,
                )
                self.setStrokeColor(LIGHT)
                self.line(MARGIN, 13 * mm, PAGE_W - MARGIN, 13 * mm)
                super().showPage()
            super().save()

    return NumberedCanvas


def build_pdf(inputs: ReportInputs, out_pdf: Path, words: Words, generated_at: datetime) -> Path:
    """Write the report PDF to out_pdf (parent folders created) and return its path."""
    report = Report(inputs, words, generated_at)
    out_pdf.parent.mkdir(parents=True, exist_ok=True)
    name = inputs.plan.name or inputs.profile.name or inputs.run.name
    doc = SimpleDocTemplate(
        str(out_pdf),
        pagesize=A4,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=18 * mm,
        title=words.t("doc_title", name=name),
        author="capplan",
        subject=report.answer_sentence(),
        lang=words.lang,
    )
    footer = words.t("footer", name=name, date=report.date)
    doc.build(report.story(), canvasmaker=_numbered_canvas(words, footer, "page_of"))
    return out_pdf
