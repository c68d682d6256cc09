"""Assembling the review PDF: page 1, one section per service, the appendix; numbered pages."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.lib.units import mm
from reportlab.platypus import SimpleDocTemplate

from planner.review.schema import Review
from profiles.model import Profile
from reports.pdf import MARGIN, _numbered_canvas
from reports.review.appendix import page_appendix
from reports.review.fleet_page import fleet_sentence, page_fleet
from reports.review.layout import Layout
from reports.review.service_pages import service_section


def build_review_pdf(
    review: Review,
    out_pdf: Path,
    lang: str,
    profiles: dict[str, Profile] | None = None,
    generated_at: datetime | None = None,
) -> Path:
    """Write the review PDF; `profiles` by service name add the baseline's workload and plan
    pages (a service without one gets the review's own section only)."""
    from reports import words_for

    w = words_for(lang)  # Chinese embeds a CJK font subset (reports.fonts)
    lay = Layout(w)
    date = (generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    story = page_fleet(review, lay)
    for s in review.services:
        story += service_section(s, (profiles or {}).get(s.name), lay)
    story += page_appendix(review, lay)
    out_pdf.parent.mkdir(parents=True, exist_ok=True)
    doc = SimpleDocTemplate(
        str(out_pdf),
        pagesize=A4,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=18 * mm,
        title=lay.t("title", name=review.name),
        author="capplan",
        subject=fleet_sentence(review, lay),
        lang=w.lang,
    )
    footer = lay.t("footer", name=review.name, date=date)
    doc.build(story, canvasmaker=_numbered_canvas(w, footer, "page_of"))
    return out_pdf
