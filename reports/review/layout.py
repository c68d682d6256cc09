"""The review PDF's layout: the capacity baseline's toolkit (reports.layout) with the review's
own strings, headings and signed changes, so both documents look alike.
"""

from __future__ import annotations

from reportlab.platypus import Paragraph

from reports.layout import Layout as BaseLayout
from reports.review.words import rt


class Layout(BaseLayout):
    """Styles and helpers of one language; `t` reads the review's own strings."""

    def t(self, key: str, **values: object) -> str:
        return rt(self.words, key, **values)

    def h1(self, text: str) -> Paragraph:
        return self.para(text, self.styles.h1)

    def h2(self, text: str) -> Paragraph:
        return self.para(text, self.styles.h2)

    def signed(self, value: float, money: bool = False) -> str:
        if money:
            return ("+" if value >= 0 else "-") + self.words.usd(abs(value))
        return f"{value:+d}" if isinstance(value, int) else f"{value:+.3g}"
