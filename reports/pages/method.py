"""Assumptions and method: metric definitions, the steps from logs to a plan, warnings."""

from __future__ import annotations

from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    Spacer,
)

from contracts.finding import Finding
from contracts.limit import unconfirmed_reason
from reports.i18n.findings import finding_text
from reports.pages.context import ReportContext


def _limit_step(ctx: ReportContext) -> str:
    """How the limit was found: the fast search or the measured one, and, where its answer is
    unconfirmed, that it is (a measured search stopped before it narrowed the gap to its
    tolerance does not claim it did); given to the plan as a number when no run was given."""
    if not ctx.measured:
        return ctx.t("method_limit_given", limit=ctx.limit_value())
    lim = ctx.limit
    unconfirmed = unconfirmed_reason(lim) is not None
    key = "method_limit_fast" if lim.method == "fast" else "method_limit"
    if unconfirmed and lim.method != "fast":
        key = "method_limit_unconfirmed"
    text = ctx.t(
        key,
        dimension=ctx.t(f"dimension_{lim.dimension}"),
        slo=lim.slo,
        tol=ctx.words.pct(lim.tolerance, 0),
    )
    if unconfirmed and lim.method == "fast":
        text += " " + ctx.t("method_unconfirmed_note")
    return text


def page_method(ctx: ReportContext) -> list[Flowable]:
    plan, words, styles = ctx.plan, ctx.words, ctx.styles
    out: list[Flowable] = [
        CondPageBreak(320),
        Spacer(1, 10),
        ctx.para(ctx.t("method_heading"), styles.h1),
        ctx.para(ctx.t("method_metrics"), styles.h2),
    ]
    out += [
        ctx.para("• " + ctx.t(k))
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
    out.append(ctx.para(ctx.t("method_steps"), styles.h2))
    steps = [
        ctx.t(
            "method_profile",
            rows=words.integer(ctx.inputs.profile.source.rows),
            peak_def=ctx.peak_definition(),
            peak=words.rate(plan.demand.peak_rps),
        ),
        _limit_step(ctx),
        ctx.t(
            "method_instances",
            headroom=words.pct(plan.inputs.headroom, 0),
            spare=plan.inputs.redundancy,
        ),
        ctx.t(
            "method_cost",
            tp=plan.inputs.tp,
            price=words.usd(plan.cost.gpu_hour_price_usd),
            hours=f"{plan.cost.hours_per_month:g}",
        ),
        ctx.t("method_checks"),
    ]
    out += [ctx.para(f"{n}. {text}") for n, text in enumerate(steps, start=1)]
    out.append(ctx.para(ctx.t("warnings_heading"), styles.h2))
    warnings = []
    if plan.inputs.profile_digest and plan.inputs.profile_digest not in ctx.profile_digests():
        warnings.append(ctx.t("warn_digest"))
    run = ctx.inputs.run
    if run is not None and run.tokens_estimated:
        warnings.append(ctx.t("warn_estimated"))
    if run is not None and run.interrupted:
        warnings.append(ctx.t("warn_interrupted"))
    if ctx.inputs.profile.source.tokens_estimated:
        warnings.append(ctx.t("warn_profile_estimated"))
    fleet_warning = ctx.fleet_warning()
    if fleet_warning is not None:
        warnings.append(fleet_warning)
    stage_warnings = [
        (st.name, text)
        for st in ctx.inputs.stages
        if st.validity is not None
        for text in st.validity.warnings
    ]
    if stage_warnings and ctx.words.lang == "en":  # the load test writes them in English
        warnings += [ctx.t("warn_stage", stage=n, text=t) for n, t in stage_warnings]
    elif stage_warnings:
        warnings.append(ctx.t("warn_stages", n=len(stage_warnings)))
    notes, keyed = ctx.plan.notes, ctx.plan.note_findings
    # A plan from before findings has English notes only: a Chinese report counts them.
    findings: list[Finding | None] = (
        list(keyed) if len(keyed) == len(notes) else [None] * len(notes)
    )
    if ctx.words.lang == "en" or None not in findings:
        warnings += [
            ctx.t("warn_plan_note", note=finding_text(ctx.words, finding, note))
            for finding, note in zip(findings, notes, strict=True)
        ]
    else:
        warnings.append(ctx.t("warn_plan_notes", n=len(notes)))
    out += [ctx.para("• " + text) for text in warnings or [ctx.t("warn_none")]]
    return out
