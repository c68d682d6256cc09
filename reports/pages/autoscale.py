"""The autoscaling page: each policy against the static plan, hour by hour, and its manifests.

Shown only when the plan has an autoscaling study (`capplan plan --autoscale`); every figure
is the study's, from plan.json.
"""

from __future__ import annotations

from reportlab.platypus import Flowable, PageBreak, Spacer

from contracts.autoscale import PolicyOutcome
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext

DEFAULT_LABELS = ("static", "reactive-queue", "reactive-kv", "rate", "schedule")


def label(ctx: ReportContext, name: str) -> str:
    """A default policy's name in the report's language; a name the user gave as given."""
    if name in DEFAULT_LABELS:
        return ctx.t("autoscale_label_" + name.replace("-", "_"))
    return name


def _worst_hour(o: PolicyOutcome) -> float | None:
    return min((x for x in o.hourly_worst if x is not None), default=None)


def page_autoscale(ctx: ReportContext) -> list[Flowable]:
    auto, words, styles = ctx.plan.autoscale, ctx.words, ctx.styles
    if auto is None:
        return []
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("autoscale_heading"), styles.h1),
        ctx.para(
            ctx.t(
                "autoscale_intro",
                days=words.num(auto.horizon_s / 86400, 3),
                cold=words.seconds(auto.cold_start_s),
                budget=words.seconds(auto.wait_budget_s),
                target=words.pct(auto.target_attainment),
                slots=auto.slots_per_instance,
            )
        ),
    ]
    head = [
        ctx.t(k)
        for k in (
            "autoscale_col_policy",
            "col_attainment",
            "autoscale_col_worst_hour",
            "autoscale_col_burst",
            "autoscale_col_gpu_h",
            "autoscale_col_vs_static",
            "autoscale_col_mean",
        )
    ]
    rows = [head]
    for o in (auto.static, *auto.policies):
        burst = o.worst_burst_minute
        rows.append(
            [
                ("* " if o.label == auto.recommended else "") + label(ctx, o.label),
                words.pct(o.attainment),
                words.pct(_worst_hour(o)),
                words.pct(burst.attainment) if burst else ctx.t("na"),
                words.integer(round(o.gpu_hours_per_month)),
                words.pct(o.cost_vs_static),
                words.num(o.mean_instances, 3),
            ]
        )
    out += [
        ctx.table(rows, [CONTENT_W * f for f in (0.2, 0.13, 0.13, 0.14, 0.14, 0.13, 0.13)]),
        Spacer(1, 6),
        ctx.para(ctx.t("autoscale_recommended", policy=label(ctx, auto.recommended))),
        ctx.para(ctx.t("autoscale_hourly_heading"), styles.h2),
    ]
    names = [label(ctx, o.label) for o in (auto.static, *auto.policies)]
    hours = [[ctx.t("autoscale_col_hour"), *names]]
    for h in range(24):
        hours.append(
            [
                f"{h:02d}",
                *(words.pct(o.hourly_attainment[h]) for o in (auto.static, *auto.policies)),
            ]
        )
    share = 0.84 / (len(hours[0]) - 1)
    out.append(ctx.table(hours, [CONTENT_W * 0.16] + [CONTENT_W * share] * (len(hours[0]) - 1)))
    m = auto.manifests
    if m is not None:
        out.append(
            ctx.para(
                ctx.t(
                    "autoscale_manifests",
                    policy=label(ctx, m.policy),
                    query=m.query,
                    threshold=words.num(m.threshold, 3),
                )
            )
        )
    # The trace and model are the planner's English sentences; the Chinese page names the guide.
    out.append(ctx.para(ctx.t("autoscale_method", trace=auto.trace, model=auto.model)))
    return out
