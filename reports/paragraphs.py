"""Paragraph markup, and Chinese paragraphs whose Latin words never break inside.

reportlab's CJK wrap breaks a line between any two characters; inside a Latin run it backs
off to a space only within the last half of the line, so a service name that starts before
the middle of a line broke inside ("code-completio" / "n-east" in a review). `CjkParagraph`
breaks its lines itself, at the width it is given: between any two Chinese characters
(never before closing punctuation, which hangs on the line before), at a space, or inside a
Latin word only where the word is longer than a whole line (after a hyphen, underscore,
slash or dot where it has one: "batch-" / "summaries"); reportlab then sets the lines as
given.
"""

from __future__ import annotations

import re
from typing import Any
from xml.sax.saxutils import escape

from reportlab.lib.styles import ParagraphStyle
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.platypus import Paragraph

from reports.fonts import is_cjk_font
from reports.i18n import LATIN_FONT, split_runs

# Characters a Chinese line may not start with: they hang on the line before.
NO_LINE_START = frozenset("，。、；：？！）》」』】〉")
# Points kept free at a line's end, so reportlab's own sums never find a line too wide.
FUZZ = 0.5
_SPACES = re.compile(r"( +)")
_BREAKS = re.compile(r"(?<=[-_/.])")


def markup(text: str, font: str) -> str:
    """Escaped paragraph markup; in CJK text, Latin runs are set in Helvetica."""
    if not is_cjk_font(font):
        return escape(text)
    return "".join(
        f'<font face="{LATIN_FONT}">{escape(run)}</font>' if latin else escape(run)
        for run, latin in split_runs(text)
    )


def _pieces(text: str) -> list[tuple[str, bool]]:
    """(piece, is_latin): each Chinese character alone; Latin runs as words and spaces."""
    out: list[tuple[str, bool]] = []
    for run, latin in split_runs(text):
        if latin:
            out += [(p, True) for p in _SPACES.split(run) if p]
        else:
            out += [(ch, False) for ch in run]
    return out


def cjk_lines(text: str, font: str, size: float, width: float) -> list[str]:
    """`text` (Chinese, Latin runs set in LATIN_FONT) broken into lines of at most `width`
    points: Latin words whole unless one is wider than a line."""
    lines: list[str] = []
    line: list[str] = []
    used = 0.0
    room = width - FUZZ

    def close() -> None:
        nonlocal line, used
        if line:
            lines.append("".join(line).rstrip(" "))
        line, used = [], 0.0

    for piece, latin in _pieces(text):
        face = LATIN_FONT if latin else font
        wide = stringWidth(piece, face, size)
        space = latin and not piece.strip(" ")
        if space and not line:
            continue  # no line starts with a space
        hangs = not latin and piece in NO_LINE_START
        if line and used + wide > room and not hangs:
            close()
            if space:
                continue
        if latin and not space and wide > room:  # a word wider than a line: after a - _ / or
            for part in _BREAKS.split(piece):  # . where it can, else by characters
                steps = [part] if stringWidth(part, face, size) <= room else list(part)
                for step in steps:
                    step_w = stringWidth(step, face, size)
                    if line and used + step_w > room:
                        close()
                    line.append(step)
                    used += step_w
            continue
        line.append(piece)
        used += wide
    close()
    return lines


class CjkParagraph(Paragraph):
    """A Chinese paragraph of plain text that breaks its own lines (see the module): at each
    width it is wrapped to, it is set again from its text with those lines. The pieces a page
    break splits it into keep their lines as they are."""

    def __init__(self, text: str | None, style: ParagraphStyle, *args: Any, **kwargs: Any) -> None:
        self._source = text if kwargs.get("frags") is None else None
        self._set_for: float | None = None
        shown = markup(text, style.fontName) if text is not None and self._source else text
        super().__init__(shown, style, *args, **kwargs)

    def wrap(self, availWidth: float, availHeight: float) -> tuple[float, float]:  # noqa: N803 (reportlab's names)
        if self._source is not None and availWidth != self._set_for:
            style = self.style
            inner = availWidth - style.leftIndent - style.rightIndent
            width = inner - max(style.firstLineIndent, 0)
            lines = cjk_lines(self._source, style.fontName, style.fontSize, width)
            source, self._set_for = self._source, availWidth
            font = style.fontName
            super().__init__("<br/>".join(markup(line, font) for line in lines), style)
            self._source, self._set_for = source, availWidth
        return super().wrap(availWidth, availHeight)
