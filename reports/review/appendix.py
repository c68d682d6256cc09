"""The review's appendix: every input it rests on, with its sha256."""

from __future__ import annotations

from reportlab.platypus import Flowable, PageBreak

from contracts.review import Review
from reports.review.layout import Layout


def page_appendix(r: Review, lay: Layout) -> list[Flowable]:
    rows = [[lay.t("col_role"), lay.t("col_path"), lay.t("col_sha")]]
    rows += [[d.role, d.path, d.sha256] for d in r.inputs]
    return [PageBreak(), lay.h1(lay.t("appendix_heading")), lay.grid(rows, [0.22, 0.3, 0.48])]
