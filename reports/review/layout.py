"""The review PDF's small layout toolkit: paragraphs, house-style tables, one language's styles.

Reuses the capacity baseline's styles and table look (reports.pdf) so both documents match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reportlab.platypus import Flowable, Paragraph, Table

from reports.i18n import Words
from reports.pdf import CONTENT_W, Report, Styles, _p
from reports.review.words import rt


class Layout:
    """Styles and helpers of one language; `t` reads the review's own strings."""

    def __init__(self, w: Words) -> None:
        self.w = w
        self.s = Styles(w)

    def t(self, key: str, **values: object) -> str:
        return rt(self.w, key, **values)

    def para(self, text: str, style: Any = None) -> Paragraph:
        return _p(text, style or self.s.body)

    def h1(self, text: str) -> Paragraph:
        return _p(text, self.s.h1)

    def h2(self, text: str) -> Paragraph:
        return _p(text, self.s.h2)

    def table(self, rows: Sequence[Sequence[Any]], fractions: Sequence[float]) -> Table:
        """A table with a header row; `fractions` of the content width per column."""
        # The baseline report's table() only reads its styles: borrow it without its inputs.
        host = Report.__new__(Report)
        host.s = self.s
        return host.table(rows, [CONTENT_W * f for f in fractions])

    def signed(self, value: float, money: bool = False) -> str:
        if money:
            return ("+" if value >= 0 else "-") + self.w.usd(abs(value))
        return f"{value:+d}" if isinstance(value, int) else f"{value:+.3g}"


def flow(items: Sequence[Flowable | None]) -> list[Flowable]:
    return [x for x in items if x is not None]
