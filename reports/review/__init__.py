"""The quarterly review PDF: page modules over a small layout toolkit (reports/review/layout.py).

Public entry point: `render_review(review, out_pdf, lang)`. Every number comes from the
Review (review.json); nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

from planner.review.schema import Review


def render_review(review: Review, out_pdf: str | Path, lang: str = "en") -> Path:
    """Write the review PDF in `lang` ("en" or "zh"); InputError for an unknown language."""
    from reports.review.document import build_review_pdf

    return build_review_pdf(review, Path(out_pdf), lang)


__all__ = ["render_review"]
