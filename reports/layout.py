"""The PDF layout toolkit both capplan documents are set with: page geometry, one language's
paragraph styles, paragraphs (CJK text with Latin runs in Helvetica), house-style tables, two
flowables side by side, rows of charts that leave out the ones without data, and an A4 document
whose pages are numbered "n of total" in the footer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from reportlab.graphics.shapes import Drawing
from reportlab.lib import colors
from reportlab.lib.enums import TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from reports.charts import GRAY, LIGHT, NAVY, ORANGE, RED
from reports.fonts import is_cjk_font
from reports.i18n import LATIN_FONT, Words, split_runs
from reports.paragraphs import CjkParagraph, markup

PAGE_W, PAGE_H = A4
MARGIN = 17 * mm
CONTENT_W = PAGE_W - 2 * MARGIN
ANSWER_PAD_PT = 8  # the answer box's shading around its text
CELL_PAD_PT = 4  # a table cell's padding left and right of its text
# A section (a service of the review, the appendix) starts on the page where the last one
# ended when more than this much of the page is left: a short tail of the last section
# (two cross-checks, five caveats) never stands alone on a nearly empty page.
SECTION_ROOM_PT = 0.55 * (PAGE_H - 2 * MARGIN)


class Styles:
    """Paragraph styles of one language."""

    def __init__(self, w: Words) -> None:
        wrap = "CJK" if w.lang == "zh" else None
        # Lines break between words, or after a hyphen inside one ("batch-" / "summaries"),
        # before a word is cut where it does not fit.
        base: dict[str, Any] = {
            "fontName": w.font,
            "wordWrap": wrap,
            "alignment": TA_LEFT,
            "embeddedHyphenation": 1,
        }
        self.title = ParagraphStyle(
            "title",
            fontSize=19,
            leading=24,
            textColor=NAVY,
            spaceAfter=2,
            **{**base, "fontName": w.bold},
        )
        self.subtitle = ParagraphStyle(
            "subtitle", fontSize=8.5, leading=11, textColor=GRAY, spaceAfter=8, **base
        )
        self.h1 = ParagraphStyle(
            "h1",
            fontSize=14,
            leading=18,
            textColor=NAVY,
            spaceBefore=4,
            spaceAfter=5,
            keepWithNext=1,  # a heading never stands alone at a page's foot
            **{**base, "fontName": w.bold},
        )
        self.h2 = ParagraphStyle(
            "h2",
            fontSize=10.5,
            leading=14,
            textColor=NAVY,
            spaceBefore=7,
            spaceAfter=3,
            keepWithNext=1,
            **{**base, "fontName": w.bold},
        )
        self.body = ParagraphStyle("body", fontSize=8.8, leading=12.5, spaceAfter=3, **base)
        self.answer = ParagraphStyle(
            "answer",
            fontSize=13.5,
            leading=19,
            textColor=colors.black,
            backColor=LIGHT,
            borderPadding=ANSWER_PAD_PT,
            # the shading reaches borderPadding beyond the text: keep it off the line above
            spaceBefore=ANSWER_PAD_PT + 4,
            spaceAfter=ANSWER_PAD_PT + 4,
            **base,
        )
        self.cell = ParagraphStyle("cell", fontSize=7.8, leading=9.8, **base)
        self.cell_head = ParagraphStyle(
            "cell_head",
            fontSize=7.8,
            leading=9.8,
            textColor=colors.white,
            **{**base, "fontName": w.bold},
        )
        self.mono = ParagraphStyle("mono", fontSize=6.6, leading=8.4, fontName=w.mono)
        self.warning = ParagraphStyle(
            "warning", fontSize=9.5, leading=13, textColor=RED, spaceAfter=8, **base
        )
        self.badge = ParagraphStyle(
            "badge", fontSize=8, leading=10, textColor=colors.white, alignment=1, fontName=w.bold
        )


_SEPARATOR = re.compile(r"(?<=[/\\])")


def wrap_at_separators(text: str, font: str, size: float, width: float) -> str:
    """Paragraph markup of a path that breaks only after its separators (/ or \\) where it
    is wider than `width` points: "limit-run/" then "records.parquet", never "records.parqu"
    then "et". A piece between separators wider than a line still breaks where it must."""
    lines: list[str] = []
    current = ""
    for piece in _SEPARATOR.split(text):
        if current and stringWidth(current + piece, font, size) > width:
            lines.append(current)
            current = ""
        current += piece
    return "<br/>".join(escape(line) for line in [*lines, current])


def paragraph(text: str, style: ParagraphStyle) -> Paragraph:
    """A paragraph of plain text (escaped; Latin runs of CJK text in Helvetica; Chinese text
    breaks its lines with its Latin words whole: reports.paragraphs)."""
    if style.wordWrap == "CJK" and is_cjk_font(style.fontName):
        return CjkParagraph(text, style)
    return Paragraph(markup(text, style.fontName), style)


def draw_runs(
    canvas: Canvas, x: float, y: float, text: str, font: str, size: float, *, right: bool = False
) -> None:
    runs = split_runs(text) if is_cjk_font(font) else [(text, True)]
    fonts = [LATIN_FONT if latin else font for _, latin in runs]
    widths = [canvas.stringWidth(run, f, size) for (run, _), f in zip(runs, fonts, strict=True)]
    pos = x - sum(widths) if right else x
    for (run, _), f, width in zip(runs, fonts, widths, strict=True):
        canvas.setFont(f, size)
        canvas.drawString(pos, y, run)
        pos += width


def numbered_canvas(w: Words, footer: str, page_of_key: str) -> type[Canvas]:
    """A canvas class that writes 'page n of total' once the total is known."""

    class NumberedCanvas(Canvas):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict[str, Any]] = []

        def showPage(self) -> None:  # noqa: N802 (reportlab's name)
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            total = len(self._pages)
            for state in self._pages:
                self.__dict__.update(state)
                self.setFillColor(GRAY)
                draw_runs(self, MARGIN, 10 * mm, footer, w.font, 7)
                draw_runs(
                    self,
                    PAGE_W - MARGIN,
                    10 * mm,
                    w.t(page_of_key, n=self._pageNumber, total=total),
                    w.font,
                    7,
                    right=True,
                )
                self.setStrokeColor(LIGHT)
                self.line(MARGIN, 13 * mm, PAGE_W - MARGIN, 13 * mm)
                super().showPage()
            super().save()

    return NumberedCanvas


def side_by_side(left: Flowable, right: Flowable) -> Table:
    """Two flowables in the two halves of the content width, top-aligned."""
    pair = Table([[left, right]], colWidths=[CONTENT_W / 2, CONTENT_W / 2])
    pair.setStyle(
        TableStyle(
            [
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (-1, -1), 0),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        )
    )
    return pair


@dataclass(frozen=True)
class NoChart:
    """A chart left out because it has nothing to show: its title and why, for one line of text.

    The house rule for every chart: no data, no axis. Empty axes read as a measured zero.
    """

    title: str
    reason: str


def write_document(
    out_pdf: Path, story: list[Flowable], w: Words, *, title: str, subject: str, footer: str
) -> Path:
    """Build `story` into an A4 PDF at out_pdf (parent folders created): house margins, the
    document's title and subject, `footer` and "page n of total" on every page."""
    out_pdf.parent.mkdir(parents=True, exist_ok=True)
    doc = SimpleDocTemplate(
        str(out_pdf),
        pagesize=A4,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=18 * mm,
        title=title,
        author="capplan",
        subject=subject,
        lang=w.lang,
    )
    doc.build(story, canvasmaker=numbered_canvas(w, footer, "page_of"))
    return out_pdf


class Layout:
    """One language's words and styles, with the toolkit's helpers bound to them."""

    def __init__(self, words: Words) -> None:
        self.words = words
        self.styles = Styles(words)

    def t(self, key: str, **values: object) -> str:
        """The document's string `key` in this language, filled with `values`."""
        return self.words.t(key, **values)

    def para(self, text: str, style: ParagraphStyle | None = None) -> Paragraph:
        return paragraph(text, style or self.styles.body)

    def table(
        self,
        rows: Sequence[Sequence[Any]],
        widths: Sequence[float],
        *,
        header: bool = True,
        highlight: Sequence[tuple[int, int]] = (),
        mono_cols: Sequence[int] = (),
    ) -> Table:
        """A table in house style; string cells become wrapping paragraphs in these styles."""
        data = []
        for r, row in enumerate(rows):
            cells = []
            for c, value in enumerate(row):
                if isinstance(value, Flowable):
                    cells.append(value)
                    continue
                style = self.styles.cell_head if header and r == 0 else self.styles.cell
                if c in mono_cols and not (header and r == 0):
                    style = self.styles.mono
                    room = widths[c] - 2 * CELL_PAD_PT
                    text = wrap_at_separators(str(value), style.fontName, style.fontSize, room)
                    cells.append(Paragraph(text, style))
                    continue
                cells.append(paragraph(str(value), style))
            data.append(cells)
        grid = Table(data, colWidths=list(widths), repeatRows=1 if header else 0)
        commands: list[tuple[Any, ...]] = [
            ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
            ("TOPPADDING", (0, 0), (-1, -1), 2.2),
            ("BOTTOMPADDING", (0, 0), (-1, -1), 2.2),
            ("LEFTPADDING", (0, 0), (-1, -1), CELL_PAD_PT),
            ("RIGHTPADDING", (0, 0), (-1, -1), CELL_PAD_PT),
            ("LINEBELOW", (0, -1), (-1, -1), 0.5, NAVY),
        ]
        for r in range(1 if header else 0, len(rows)):
            if (r - (1 if header else 0)) % 2 == 1:
                commands.append(("BACKGROUND", (0, r), (-1, r), LIGHT))
        if header:
            commands.append(("BACKGROUND", (0, 0), (-1, 0), NAVY))
        for r, c in highlight:
            commands.append(("BACKGROUND", (c, r), (c, r), colors.HexColor("#ffe8a3")))
            commands.append(("BOX", (c, r), (c, r), 0.8, ORANGE))
        grid.setStyle(TableStyle(commands))
        return grid

    def chart_row(self, charts: Sequence[Drawing | NoChart]) -> list[Flowable]:
        """Half-width charts two to a row (a lone one in the left half), then one line per
        chart left out, saying why ("Hour-of-day shape: not drawn, the log spans ...")."""
        drawn = [c for c in charts if not isinstance(c, NoChart)]
        rows: list[Flowable] = [
            side_by_side(left, drawn[i + 1] if i + 1 < len(drawn) else Spacer(1, 1))
            for i, left in enumerate(drawn)
            if i % 2 == 0
        ]
        return rows + [
            self.para(self.words.t("chart_none", title=c.title, reason=c.reason))
            for c in charts
            if isinstance(c, NoChart)
        ]

    def grid(self, rows: Sequence[Sequence[Any]], fractions: Sequence[float]) -> Table:
        """A table with a header row; `fractions` of the content width per column."""
        return self.table(rows, [CONTENT_W * f for f in fractions])

    def pairs(self, rows: Sequence[tuple[str, str]], label_w: float = 0.42) -> Table:
        """A two-column label/value table without header."""
        return self.table(rows, [CONTENT_W * label_w, CONTENT_W * (1 - label_w)], header=False)
