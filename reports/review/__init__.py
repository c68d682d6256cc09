"""The quarterly review PDF: page modules over a small layout toolkit (reports/review/layout.py).

Public entry point: `render_review(review, out_pdf, lang)`. Every number comes from the
Review (review.json); nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

from contracts.review import Review
from profiles.model import Profile


def render_review(
    review: Review,
    out_pdf: str | Path,
    lang: str = "en",
    profiles: dict[str, Profile] | None = None,
) -> Path:
    """Write the review PDF in `lang` ("en" or "zh"); InputError for an unknown language.

    `profiles` (by service name) add each service's workload and plan pages.
    """
    from reports.review.document import build_review_pdf

    return build_review_pdf(review, Path(out_pdf), lang, profiles)


__all__ = ["render_review"]
