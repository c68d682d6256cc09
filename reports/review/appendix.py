"""The review's appendix: every input it rests on, with its sha256."""

from __future__ import annotations

from reportlab.platypus import CondPageBreak, Flowable

from contracts.review import Review
from reports.layout import CONTENT_W, SECTION_ROOM_PT
from reports.review.layout import Layout


def page_appendix(r: Review, lay: Layout) -> list[Flowable]:
    rows = [[lay.t("col_role"), lay.t("col_path"), lay.t("col_sha")]]
    rows += [[d.role, d.path, d.sha256] for d in r.inputs]
    # paths and digests in Courier: a path breaks after a "/", never inside a name
    widths = [CONTENT_W * f for f in (0.3, 0.3, 0.4)]
    return [
        CondPageBreak(SECTION_ROOM_PT),
        lay.h1(lay.t("appendix_heading")),
        lay.table(rows, widths, mono_cols=(1, 2)),
    ]
