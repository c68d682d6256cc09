"""The appendix: the run's metadata (when a load test was given) and the sha256 of every
input the report rests on."""

from __future__ import annotations

from reportlab.platypus import (
    CondPageBreak,
    Flowable,
)

from reports.layout import CONTENT_W, SECTION_ROOM_PT
from reports.pages.context import ReportContext


def _run_rows(ctx: ReportContext) -> list[tuple[str, str]]:
    if not ctx.measured:
        return []
    run, words = ctx.run, ctx.words
    stages = "; ".join(
        ctx.t(
            "meta_stage",
            name=st.name,
            role=ctx.role(st.role),
            duration=words.duration(st.duration_s),
            load=words.rate(st.rate_rps)
            if st.rate_rps is not None
            else words.load(st.users, "users"),
        )
        for st in run.plan.stages
    )
    return [
        (ctx.t("meta_run"), run.name),
        (ctx.t("meta_command"), " ".join(run.command)),
        (ctx.t("meta_versions"), f"{run.capplan_version} / {run.locust_version or '–'}"),
        (ctx.t("meta_target"), run.host),
        (ctx.t("meta_model"), f"{run.model} / {run.endpoint}"),
        (ctx.t("meta_seed"), f"{run.seed} / {run.workers}"),
        (ctx.t("meta_time"), f"{run.started_at} / {run.ended_at or '–'}"),
        (ctx.t("meta_plan"), f"{run.plan.name}: {stages}"),
    ]


def page_appendix(ctx: ReportContext) -> list[Flowable]:
    words, styles = ctx.words, ctx.styles
    prof = ctx.inputs.profile
    rows = [
        *_run_rows(ctx),
        (
            ctx.t("meta_profile_source"),
            f"{', '.join(prof.source.files)} ({prof.source.format})",
        ),
        (
            ctx.t("meta_profile_rows"),
            f"{words.integer(prof.source.rows)} / {words.integer(prof.source.rows_skipped)}",
        ),
    ]
    digest_rows: list[list[str]] = [[ctx.t("col_role_file"), ctx.t("col_path"), ctx.t("col_sha")]]
    for d in ctx.inputs.digests:
        digest_rows.append([ctx.t(f"digest_role_{d.role}"), d.path, d.sha256])
    known = ctx.profile_digests()

    def verdict(value: str) -> str:
        if not value:
            return ctx.t("unknown")
        return ctx.t("match") if value in known else ctx.t("mismatch")

    recorded = [
        [ctx.t("col_role_file"), ctx.t("col_sha"), ""],
        [ctx.t("rec_profile"), ctx.inputs.profile.digest(), ""],
        *(
            [
                [ctx.t("rec_run"), ctx.run.profile_digest, verdict(ctx.run.profile_digest)],
                [ctx.t("rec_limit"), ctx.limit.profile_digest, verdict(ctx.limit.profile_digest)],
            ]
            if ctx.measured
            else []
        ),
        [
            ctx.t("rec_plan"),
            ctx.plan.inputs.profile_digest,
            verdict(ctx.plan.inputs.profile_digest),
        ],
    ]
    return [
        CondPageBreak(SECTION_ROOM_PT),
        ctx.para(ctx.t("appendix_heading"), styles.h1),
        ctx.pairs(rows, label_w=0.25),
        ctx.para(ctx.t("digest_heading"), styles.h2),
        ctx.table(digest_rows, [CONTENT_W * f for f in (0.22, 0.36, 0.42)], mono_cols=(1, 2)),
        ctx.para(ctx.t("recorded_digests"), styles.h2),
        ctx.table(recorded, [CONTENT_W * f for f in (0.3, 0.55, 0.15)], mono_cols=(1,)),
    ]
