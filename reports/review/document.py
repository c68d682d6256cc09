"""Assembling the review PDF: page 1, one section per service, the appendix; numbered pages."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from contracts.review import Review
from profiles.model import Profile
from reports.layout import write_document
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
    return write_document(
        out_pdf,
        story,
        w,
        title=lay.t("title", name=review.name),
        subject=fleet_sentence(review, lay),
        footer=lay.t("footer", name=review.name, date=date),
    )
