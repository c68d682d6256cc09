"""One section per service: count interval, growth trend, hourly chart and fleets, then the
capacity baseline's own workload and plan pages for that service."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from reportlab.graphics.shapes import Drawing
from reportlab.platypus import CondPageBreak, Flowable

from contracts.review import HourlyCapacity, ServiceReview
from profiles.model import Profile
from reports import charts
from reports.charts import NAVY, ORANGE, RED, Axis
from reports.data import ReportInputs
from reports.i18n.findings import finding_text, plan_sentence
from reports.layout import CONTENT_W, SECTION_ROOM_PT
from reports.observed import observed_section
from reports.pages.checks import page_checks
from reports.pages.context import ReportContext
from reports.pages.plan import page_plan
from reports.pages.workload import page_workload
from reports.review.layout import Layout

DAY_COLORS = {"weekday": NAVY, "weekend": ORANGE, "all": NAVY}


def chart_hourly(h: HourlyCapacity, lay: Layout) -> Drawing:
    """Instances per hour of day per day type, against the fleet sized for the peak."""
    drawing, panel = charts.single(
        CONTENT_W,
        150,
        Axis(0, 24, lay.t("axis_hour")),
        Axis(0, h.peak_instances * 1.15 + 0.5, lay.t("axis_instances")),
        font=lay.words.font,
        title=lay.t("chart_hourly"),
    )
    for d in h.day_types:
        xs, ys = [], []
        for hour, n in enumerate(d.instances):
            if n is None:
                continue
            xs += [hour, hour + 1]
            ys += [n, n]
        if xs:
            panel.line(xs, ys, DAY_COLORS[d.day_type], label=lay.t(f"day_{d.day_type}"))
    panel.hline(h.peak_instances, RED, text=lay.t("peak_line"))
    drawing.add(panel.render())
    return drawing


def _hourly(h: HourlyCapacity | None, lay: Layout) -> list[Flowable]:
    out: list[Flowable] = [lay.h2(lay.t("hourly_heading"))]
    if h is None:
        return out + [lay.para(lay.t("hourly_none"))]
    out.append(chart_hourly(h, lay))
    rows = [[lay.t("col_fleet"), lay.t("col_gpu_hours"), lay.t("col_cost"), lay.t("col_rule")]]
    for o in h.options:
        rows.append(
            [
                lay.t(f"opt_{o.kind}"),
                lay.words.integer(o.gpu_hours_per_month),
                lay.words.usd(o.monthly_cost_usd),
                finding_text(lay.words, o.rule_finding, o.rule),
            ]
        )
    out.append(lay.grid(rows, [0.17, 0.15, 0.13, 0.55]))
    return out


_DEFAULT_POLICIES = ("static", "reactive-queue", "reactive-kv", "rate", "schedule")


def _policy(name: str, lay: Layout) -> str:
    """A default policy's name in the review's language; a name the user gave as given."""
    return lay.t("policy_" + name.replace("-", "_")) if name in _DEFAULT_POLICIES else name


def _autoscale(s: ServiceReview, lay: Layout) -> list[Flowable]:
    """The autoscaling study of the service's plan (review option `autoscale: true`)."""
    auto = s.plan.autoscale
    if auto is None:
        return []
    w = lay.words
    rows = [[lay.t(k) for k in ("col_policy", "col_attainment", "col_burst", "col_gpu_hours",
                                "col_vs_static")]]  # fmt: skip
    for o in (auto.static, *auto.policies):
        burst = o.worst_burst_minute
        rows.append(
            [
                ("* " if o.label == auto.recommended else "") + _policy(o.label, lay),
                w.pct(o.attainment),
                w.pct(burst.attainment) if burst else "-",
                w.integer(o.gpu_hours_per_month),
                w.pct(o.cost_vs_static),
            ]
        )
    return [
        lay.h2(lay.t("autoscale_heading")),
        lay.para(
            lay.t("autoscale_text", cold=w.seconds(auto.cold_start_s), policy=auto.recommended)
        ),  # fmt: skip
        lay.grid(rows, [0.28, 0.17, 0.19, 0.2, 0.16]),
    ]


def _interval(s: ServiceReview, lay: Layout) -> list[Flowable]:
    iv = s.count_interval
    out: list[Flowable] = [lay.h2(lay.t("count_heading"))]
    if iv is None:
        return out + [lay.para(lay.t("count_none"))]

    def span(x: tuple[float, float] | None, unit: str) -> str:
        if x is None:
            return lay.t("count_none")
        return f"{lay.words.load(x[0], unit)} – {lay.words.load(x[1], unit)}"

    out.append(
        lay.para(
            lay.t(
                "count_sentence",
                n=s.instances,
                level=f"{iv.level:.0%}",
                low=iv.low,
                high=iv.high,
                peak_iv=span(iv.peak_rps_interval, "rps"),
                limit_iv=span(iv.limit_interval, s.unit),
                dominant=lay.t(f"dominant_{iv.dominant}"),
            )
        )
    )
    out.append(
        lay.para(
            lay.t("count_method", method=finding_text(lay.words, iv.method_finding, iv.method)),
            lay.styles.cell,
        )
    )
    return out


def _observed(s: ServiceReview, lay: Layout) -> list[Flowable]:
    """Observed capacity per instance beside the load-tested limit (profiles from metrics)."""
    if s.observed is None:
        return []
    return observed_section(s.observed, s.per_instance_limit, s.unit, lay)


def baseline_pages(s: ServiceReview, profile: Profile, lay: Layout) -> list[Flowable]:
    """The capacity baseline's workload and plan pages for this service.

    Those pages read only the profile and the plan, so the report is given those and no run.
    """
    inputs = ReportInputs(
        profile=profile,
        profile_path=Path(s.profile),
        run=cast(Any, None),
        run_dir=Path(),
        stages=[],
        limit=cast(Any, None),
        limit_path=Path(s.limit),
        plan=s.plan,
        plan_path=Path(),
        previous=None,
        previous_path=None,
        timeline=None,
        digests=[],
    )
    ctx = ReportContext(inputs, lay.words, datetime.now(UTC))
    return page_workload(ctx) + page_plan(ctx) + page_checks(ctx)


def service_section(s: ServiceReview, profile: Profile | None, lay: Layout) -> list[Flowable]:
    source = lay.t(f"source_{s.growth_source}")
    out: list[Flowable] = [
        CondPageBreak(SECTION_ROOM_PT),
        lay.h1(lay.t("service_heading", name=s.name)),
        lay.para(
            lay.t(
                "service_intro",
                model=s.model,
                gpu=s.gpu,
                tp=s.tp,
                profile=s.profile,
                limit=s.limit,
                growth=f"{s.growth:g}",
                source=source,
            )
        ),
        lay.para(plan_sentence(lay.words, s.plan), lay.styles.answer),
    ]
    out += _interval(s, lay)
    out.append(lay.h2(lay.t("trend_heading")))
    trend = s.trend
    out.append(
        lay.para(
            finding_text(lay.words, trend.statement_finding, trend.statement)
            if trend
            else lay.t("trend_none")
        )
    )
    out += _hourly(s.hourly, lay)
    out += _autoscale(s, lay)
    out += _observed(s, lay)
    if profile is not None:
        out += baseline_pages(s, profile, lay)
    return out
