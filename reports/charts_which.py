"""The "Which configuration" section's chart: cost per month of each candidate, as horizontal
bars in rank order (cheapest on top), each named above its bar and its cost at its end (the
costs are written out, so the chart draws no value axis)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reportlab.graphics.shapes import Drawing, Line, Rect
from reportlab.lib.colors import Color

from reports.charts import (
    GRID,
    INK,
    LABEL_SIZE,
    LATIN_FONT,
    NAVY,
    TEAL,
    TICK_SIZE,
    TITLE_SIZE,
    label,
    nice_axis,
)

ROW_H = 20.0  # points per candidate: its name (TICK_SIZE) above a bar
BAR_H = 9.0
PAD_X = 6.0
HEAD = 30.0  # title and legend
FOOT = 18.0  # the axis label


@dataclass(frozen=True)
class Bar:
    """One candidate's bar: its name, its cost per month, and whether to set it apart."""

    name: str
    value: float
    marked: bool = False


def cost_bars(
    bars: Sequence[Bar],
    width: float,
    *,
    font: str,
    title: str,
    axis_label: str,
    value_text: Sequence[str],
    marked_label: str = "",
) -> Drawing:
    """Horizontal bars of `bars` top to bottom, `value_text` written at each bar's end; marked
    bars in teal, with `marked_label` in the legend when any is marked."""
    axis = nice_axis([b.value for b in bars], axis_label, pad=0.22)
    height = HEAD + ROW_H * len(bars) + FOOT
    drawing = Drawing(width, height)
    x0, x1 = PAD_X, width - PAD_X
    top, bottom = height - HEAD, FOOT

    def px(value: float) -> float:
        return x0 + (value - axis.lo) / (axis.hi - axis.lo) * (x1 - x0)

    drawing.add(Line(x0, bottom, x0, top, strokeColor=GRID, strokeWidth=0.8))
    drawing.add(Line(x0, bottom, x1, bottom, strokeColor=GRID, strokeWidth=0.8))
    drawing.add(
        label((x0 + x1) / 2, bottom - 12, axis.label, font=font, size=LABEL_SIZE, anchor="middle")
    )
    drawing.add(label(x0, height - 12, title, font=font, size=TITLE_SIZE, color=NAVY))
    if marked_label and any(b.marked for b in bars):
        legend = label(0, 0, marked_label, font=font, size=TICK_SIZE)
        lx0, _, lx1, _ = legend.getBounds()
        lx = x1 - (lx1 - lx0) - 11
        drawing.add(Rect(lx, top + 5, 7, 5, fillColor=TEAL, strokeColor=None))
        drawing.add(label(lx + 11, top + 5, marked_label, font=font, size=TICK_SIZE))
    for i, (bar, text) in enumerate(zip(bars, value_text, strict=True)):
        y = top - ROW_H * (i + 1) + 2
        color: Color = TEAL if bar.marked else NAVY
        end = px(max(bar.value, axis.lo))
        drawing.add(Rect(x0, y, end - x0, BAR_H, fillColor=color, strokeColor=None))
        drawing.add(label(x0 + 2, y + BAR_H + 2, bar.name, font=font, size=TICK_SIZE))
        drawing.add(label(end + 3, y + 2, text, font=LATIN_FONT, size=TICK_SIZE, color=INK))
    return drawing
