"""Assembling the capacity-baseline PDF from loaded inputs, in page order.

Pages (one module each under reports/pages/): (1) the answer for a manager, the comparison
with the previous baseline and the three biggest risks; (2) workload; (3-4) load test and
limit (left out when the plan's limit was given as a number and no run is given); (5-6)
plan and its cross-checks; then, when given whatif.json or compare.json, "Which
configuration" (reports.pages.which); (7) assumptions and method; (8) appendix. Every number is
read from the inputs; the only judgement made is the risk level beside each risk
(reports.pages.risks). `build_which_pdf` sets the "Which configuration" section alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from reportlab.platypus import Flowable

from reports.data import ReportInputs
from reports.i18n import Words
from reports.layout import Layout, write_document
from reports.pages.answer import page_answer
from reports.pages.appendix import page_appendix
from reports.pages.autoscale import page_autoscale
from reports.pages.checks import page_checks
from reports.pages.context import ReportContext
from reports.pages.limit import page_limit
from reports.pages.loadtest import page_loadtest
from reports.pages.method import page_method
from reports.pages.plan import page_plan
from reports.pages.verify import page_verify
from reports.pages.which import page_which
from reports.pages.workload import page_workload
from reports.which_data import WhichSection


def story(ctx: ReportContext, which: Sequence[WhichSection] = ()) -> list[Flowable]:
    """Every page's flowables, in order."""
    return (
        page_answer(ctx)
        + page_workload(ctx)
        + page_loadtest(ctx)
        + page_limit(ctx)
        + page_plan(ctx)
        + page_checks(ctx)
        + page_autoscale(ctx)
        + page_verify(ctx)
        + page_which(ctx, which)
        + page_method(ctx)
        + page_appendix(ctx)
    )


def build_pdf(
    inputs: ReportInputs,
    out_pdf: Path,
    words: Words,
    generated_at: datetime,
    which: Sequence[WhichSection] = (),
) -> Path:
    """Write the report PDF to out_pdf (parent folders created) and return its path; `which`
    adds the "Which configuration" section before the method page."""
    ctx = ReportContext(inputs, words, generated_at)
    name = inputs.plan.name or inputs.profile.name or (inputs.run.name if inputs.run else "")
    return write_document(
        out_pdf,
        story(ctx, which),
        words,
        title=words.t("doc_title", name=name),
        subject=ctx.answer_sentence(),
        footer=words.t("footer", name=name, date=ctx.date),
    )


def build_which_pdf(
    sections: Sequence[WhichSection], out_pdf: Path, words: Words, generated_at: datetime
) -> Path:
    """Write a PDF of the "Which configuration" section alone (no run or plan needed)."""
    layout = Layout(words)
    name = Path(sections[0].profile).stem if sections else ""
    date = generated_at.strftime("%Y-%m-%d %H:%M UTC")
    title = words.t("which_doc_title", name=name)
    head: list[Flowable] = [layout.para(title, layout.styles.title)]
    return write_document(
        out_pdf,
        head + page_which(layout, sections, standalone=True),
        words,
        title=title,
        subject=words.t("which_heading"),
        footer=words.t("which_footer", name=name, date=date),
    )
