"""The fleet-verification page: the plan's fleet measured behind a load balancer
(capplan verify's verify.json), planned against measured at N and N-K, and the load spread.

Every figure is read from verify.json; the page words and arranges them. `verified_line`
is the first page's sentence: verified on the fleet on a date, or not verified.
"""

from __future__ import annotations

from reportlab.platypus import Flowable, PageBreak

from contracts.verify import Figures, Verify
from reports.i18n.findings import finding_text
from reports.layout import CONTENT_W
from reports.pages.context import ReportContext


def verified_line(ctx: ReportContext) -> str:
    """'Verified on the fleet on DATE' when a test at the planned count held, else why not."""
    at_n = [v for v in ctx.inputs.verifies if v.instances_down == 0]
    held = [v for v in at_n if v.holds]
    if held:
        v = held[-1]
        return ctx.t("verify_answer_yes", date=v.created_at[:10], n=v.instances_serving)
    if at_n:
        return ctx.t(
            "verify_answer_failed", date=at_n[-1].created_at[:10], n=at_n[-1].instances_serving
        )
    return ctx.t("verify_answer_no")


def page_verify(ctx: ReportContext) -> list[Flowable]:
    verifies = sorted(ctx.inputs.verifies, key=lambda v: v.instances_down)
    if not verifies:
        return []
    styles = ctx.styles
    out: list[Flowable] = [
        PageBreak(),
        ctx.para(ctx.t("verify_heading"), styles.h1),
        ctx.para(
            ctx.t("verify_intro", slo=verifies[0].slo, rate=ctx.words.rate(verifies[0].rate_rps))
        ),
    ]
    for v in verifies:
        out.append(ctx.para(finding_text(ctx.words, v.finding, v.sentence), styles.answer))
    out += [ctx.para(ctx.t("verify_compare_heading"), styles.h2), _comparison(ctx, verifies)]
    out += [ctx.para(ctx.t("verify_spread_heading"), styles.h2)]
    for v in verifies:
        out += [
            ctx.para(ctx.t("verify_spread_of", n=v.instances_serving, planned=v.instances_planned))
        ]
        out.append(_spread(ctx, v))
    return out


def _row(ctx: ReportContext, label: str, f: Figures | None, recovery: float | None) -> list[str]:
    w = ctx.words
    if f is None:
        return [label] + ["–"] * 7
    return [
        label,
        w.pct(f.attainment),
        w.seconds(f.ttft_p95_s),
        w.seconds(f.ttft_p99_s),
        w.seconds(f.tpot_p95_s),
        w.seconds(f.tpot_p99_s),
        w.seconds(recovery) if recovery is not None else ctx.t("verify_not_recovered"),
        ctx.t("yes" if f.meets_slo else "no"),
    ]


def _comparison(ctx: ReportContext, verifies: list[Verify]) -> Flowable:
    keys = ("col_instances", "col_attainment", "col_ttft_p95", "verify_col_ttft_p99",
            "col_tpot_p95", "verify_col_tpot_p99", "verify_col_recovery", "col_meets")  # fmt: skip
    rows: list[list[str]] = [[ctx.t(k) for k in keys]]
    for v in verifies:
        steady = next((p for p in v.phases if p.role == "steady"), None)
        n = v.instances_serving
        rows.append(
            _row(
                ctx,
                ctx.t("verify_measured", n=n),
                steady.measured if steady else None,
                v.recovery_s,
            )
        )
        rows.append(
            _row(
                ctx,
                ctx.t("verify_planned", n=n),
                steady.simulated if steady else None,
                v.recovery_simulated_s,
            )
        )
    widths = [CONTENT_W * f for f in (0.2, 0.11, 0.11, 0.11, 0.11, 0.11, 0.13, 0.12)]
    return ctx.table(rows, widths)


def _spread(ctx: ReportContext, v: Verify) -> Flowable:
    w = ctx.words
    keys = ("instance", "serving", "requests", "share", "queue", "kv", "prefix", "flag")
    rows: list[list[str]] = [[ctx.t(f"verify_col_{k}") for k in keys]]
    for r in v.instances:
        rows.append(
            [
                r.url,
                ctx.t("yes" if r.serving else "no"),
                w.integer(r.requests),
                w.pct(r.share),
                w.num(r.waiting_max),
                w.pct(r.kv_usage_mean),
                w.pct(r.prefix_hit_ratio),
                ctx.t(f"verify_flag_{r.flag}"),
            ]
        )
    widths = [CONTENT_W * f for f in (0.26, 0.09, 0.1, 0.09, 0.1, 0.1, 0.1, 0.16)]
    return ctx.table(rows, widths, mono_cols=(0,))
