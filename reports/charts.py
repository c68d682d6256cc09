"""Vector charts for the report, drawn with reportlab.graphics in one house style.

Charts are reportlab Drawings (vector in the PDF), so their text uses the report's own font
(for Chinese, the CJK font `reports.fonts` chose) and matplotlib needs no CJK font. A `Panel`
is one set of axes placed inside a Drawing; `single()` holds one, `stacked()` stacks panels that
share an x axis. The palette, axes and ticks are reports.axes' (re-exported here for the pages).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from reportlab.graphics.shapes import Drawing, Group, Line, Polygon, PolyLine, Rect
from reportlab.lib import colors
from reportlab.lib.colors import Color

from reports.axes import (
    BURST_SHADE,
    GRAY,
    GREEN,
    GRID,
    INK,
    LABEL_SIZE,
    LIGHT,
    NAVY,
    ORANGE,
    RED,
    TEAL,
    TICK_SIZE,
    TITLE_SIZE,
    Axis,
    format_tick,
    label,
    log_axis,
    nice_axis,
    ticks,
)
from reports.i18n import LATIN_FONT

__all__ = [
    "BURST_SHADE",
    "GRAY",
    "GREEN",
    "GRID",
    "INK",
    "LABEL_SIZE",
    "LIGHT",
    "NAVY",
    "ORANGE",
    "RED",
    "TEAL",
    "TICK_SIZE",
    "TITLE_SIZE",
    "Axis",
    "Panel",
    "format_tick",
    "label",
    "log_axis",
    "nice_axis",
    "single",
    "stacked",
]


class Panel:
    """One set of axes at (x0, y0) with size (w, h) in points, inside a Drawing."""

    def __init__(
        self,
        x0: float,
        y0: float,
        w: float,
        h: float,
        x: Axis,
        y: Axis,
        *,
        font: str,
        title: str = "",
        show_x_ticks: bool = True,
    ) -> None:
        self.x0, self.y0, self.w, self.h = x0, y0, w, h
        self.x, self.y = x, y
        self.font = font
        self.group = Group()
        self.front = Group()
        self._right_labels: list[float] = []  # baselines of the hline labels drawn so far
        self._legend: list[tuple[str, Color, bool]] = []
        _draw_frame(self, title, show_x_ticks)

    def px(self, value: float) -> float:
        lo, hi = self.x.span()
        v = math.log10(max(value, 1e-300)) if self.x.log else value
        return self.x0 + (v - lo) / (hi - lo) * self.w

    def py(self, value: float) -> float:
        lo, hi = self.y.span()
        v = math.log10(max(value, 1e-300)) if self.y.log else value
        v = min(max(v, lo), hi)
        return self.y0 + (v - lo) / (hi - lo) * self.h

    def line(
        self,
        xs: Sequence[float] | np.ndarray,
        ys: Sequence[float] | np.ndarray,
        color: Color,
        *,
        width: float = 1.1,
        dash: tuple[float, float] | None = None,
        label: str = "",
    ) -> None:
        """A polyline; NaN values break the line."""
        points: list[float] = []
        for xv, yv in zip(xs, ys, strict=True):
            if not (np.isfinite(xv) and np.isfinite(yv)):
                self._flush(points, color, width, dash)
                points = []
                continue
            points += [self.px(float(xv)), self.py(float(yv))]
        self._flush(points, color, width, dash)
        if label:
            self._legend.append((label, color, False))

    def _flush(
        self, points: list[float], color: Color, width: float, dash: tuple[float, float] | None
    ) -> None:
        if len(points) >= 4:
            self.front.add(
                PolyLine(
                    points,
                    strokeColor=color,
                    strokeWidth=width,
                    strokeDashArray=list(dash) if dash else None,
                    strokeLineJoin=1,
                )
            )

    def steps(
        self, edges: Sequence[float], counts: Sequence[float], color: Color, *, label: str = ""
    ) -> None:
        """Filled histogram bars between consecutive edges."""
        for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True):
            if c <= 0:
                continue
            x0, x1 = self.px(lo), self.px(hi)
            self.group.add(
                Rect(
                    x0,
                    self.y0,
                    max(x1 - x0, 0.3),
                    self.py(c) - self.y0,
                    fillColor=color,
                    strokeColor=colors.white,
                    strokeWidth=0.3,
                )
            )
        if label:
            self._legend.append((label, color, True))

    def bars(
        self,
        xs: Sequence[float],
        heights: Sequence[float],
        color: Color,
        *,
        width_frac: float = 0.7,
        label: str = "",
    ) -> None:
        """Bars centred on xs, each width_frac of the spacing between xs."""
        spacing = (xs[1] - xs[0]) if len(xs) > 1 else 1.0
        for xv, hv in zip(xs, heights, strict=True):
            x0 = self.px(xv - spacing * width_frac / 2)
            x1 = self.px(xv + spacing * width_frac / 2)
            self.group.add(
                Rect(x0, self.y0, x1 - x0, self.py(hv) - self.y0, fillColor=color, strokeColor=None)
            )
        if label:
            self._legend.append((label, color, True))

    def span(self, x_lo: float, x_hi: float, color: Color = BURST_SHADE) -> None:
        """A shaded vertical band (behind the data)."""
        x0 = max(self.px(x_lo), self.x0)
        x1 = min(self.px(x_hi), self.x0 + self.w)
        if x1 > x0:
            self.group.add(Rect(x0, self.y0, x1 - x0, self.h, fillColor=color, strokeColor=None))

    def _rule(
        self,
        x0: float,
        y0: float,
        x1: float,
        y1: float,
        color: Color,
        width: float,
        dash: tuple[float, float],
    ) -> None:
        """A dashed line in front of the data, from (x0, y0) to (x1, y1) in points."""
        self.front.add(
            Line(x0, y0, x1, y1, strokeColor=color, strokeWidth=width, strokeDashArray=list(dash))
        )

    def vline(
        self,
        x: float,
        color: Color,
        *,
        text: str = "",
        dash: tuple[float, float] = (3, 2),
        width: float = 0.9,
    ) -> None:
        xx = self.px(x)
        if xx < self.x0 - 0.1 or xx > self.x0 + self.w + 0.1:
            return
        self._rule(xx, self.y0, xx, self.y0 + self.h, color, width, dash)
        if text:
            self.front.add(
                label(
                    xx + 2, self.y0 + self.h - 8, text, font=self.font, size=TICK_SIZE, color=color
                )
            )

    def hline(
        self,
        y: float,
        color: Color,
        *,
        text: str = "",
        dash: tuple[float, float] = (3, 2),
        width: float = 0.9,
    ) -> None:
        yy = self.py(y)
        self._rule(self.x0, yy, self.x0 + self.w, yy, color, width, dash)
        if text:
            # Two lines close together (an SLO and a p95 near it) stack their labels
            # instead of printing one over the other.
            base = yy + 2
            while any(abs(base - other) < TICK_SIZE + 1 for other in self._right_labels):
                base += TICK_SIZE + 1
            self._right_labels.append(base)
            self.front.add(
                label(
                    self.x0 + self.w - 2,
                    base,
                    text,
                    font=self.font,
                    size=TICK_SIZE,
                    color=color,
                    anchor="end",
                )
            )

    def markers(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        color: Color,
        *,
        size: float = 2.6,
        shape: str = "circle",
        label: str = "",
    ) -> None:
        for xv, yv in zip(xs, ys, strict=True):
            if not (np.isfinite(xv) and np.isfinite(yv)):
                continue
            cx, cy = self.px(float(xv)), self.py(float(yv))
            if shape == "triangle":
                pts = [cx - size, cy - size * 0.8, cx + size, cy - size * 0.8, cx, cy + size]
            else:  # a diamond reads as a dot at this size and needs no curve
                pts = [cx - size, cy, cx, cy + size, cx + size, cy, cx, cy - size]
            self.front.add(Polygon(pts, fillColor=color, strokeColor=colors.white, strokeWidth=0.4))
        if label:
            self._legend.append((label, color, True))

    def text(self, x: float, y: float, value: str, color: Color = INK) -> None:
        """Text at data coordinates."""
        self.front.add(
            label(self.px(x), self.py(y), value, font=self.font, size=TICK_SIZE, color=color)
        )

    def note(self, value: str) -> None:
        """A centred message in an empty panel (e.g. 'not scraped')."""
        self.front.add(
            label(
                self.x0 + self.w / 2,
                self.y0 + self.h / 2,
                value,
                font=self.font,
                size=LABEL_SIZE,
                color=GRAY,
                anchor="middle",
            )
        )

    def render(self) -> Group:
        out = Group(self.group, self.front)
        x = self.x0 + self.w
        for text, color, filled in reversed(self._legend):
            group = label(0, 0, text, font=self.font, size=TICK_SIZE)
            x0, _, x1, _ = group.getBounds()
            width = (x1 - x0) + 16
            x -= width
            yy = self.y0 + self.h + 5
            if filled:
                out.add(Rect(x, yy, 7, 5, fillColor=color, strokeColor=None))
            else:
                out.add(Line(x, yy + 2.5, x + 9, yy + 2.5, strokeColor=color, strokeWidth=1.4))
            out.add(label(x + 11, yy, text, font=self.font, size=TICK_SIZE))
        return out


def _draw_frame(panel: Panel, title: str, show_x_ticks: bool) -> None:
    """The panel's box, grid, tick labels, axis labels and title (behind the data)."""
    g = panel.group
    g.add(
        Rect(
            panel.x0,
            panel.y0,
            panel.w,
            panel.h,
            fillColor=colors.white,
            strokeColor=GRID,
            strokeWidth=0.5,
        )
    )
    for t in ticks(panel.y):
        yy = panel.py(t)
        g.add(Line(panel.x0, yy, panel.x0 + panel.w, yy, strokeColor=GRID, strokeWidth=0.4))
        g.add(
            label(
                panel.x0 - 3,
                yy - 2.2,
                format_tick(t),
                font=LATIN_FONT,
                size=TICK_SIZE,
                anchor="end",
            )
        )
    for t in ticks(panel.x):
        xx = panel.px(t)
        if xx < panel.x0 - 0.1 or xx > panel.x0 + panel.w + 0.1:
            continue
        g.add(Line(xx, panel.y0, xx, panel.y0 + panel.h, strokeColor=GRID, strokeWidth=0.4))
        if show_x_ticks:
            # a label at the left corner starts there, clear of the y axis's lowest label
            corner = xx < panel.x0 + 0.5
            g.add(
                label(
                    panel.x0 - 1 if corner else xx,
                    panel.y0 - 8,
                    format_tick(t),
                    font=LATIN_FONT,
                    size=TICK_SIZE,
                    anchor="start" if corner else "middle",
                )
            )
    if panel.x.label and show_x_ticks:
        g.add(
            label(
                panel.x0 + panel.w / 2,
                panel.y0 - 17,
                panel.x.label,
                font=panel.font,
                size=LABEL_SIZE,
                anchor="middle",
            )
        )
    if panel.y.label:
        rotated = Group(
            label(0, 0, panel.y.label, font=panel.font, size=LABEL_SIZE, anchor="middle")
        )
        rotated.transform = (0, 1, -1, 0, panel.x0 - 24, panel.y0 + panel.h / 2)
        g.add(rotated)
    if title:
        g.add(
            label(
                panel.x0,
                panel.y0 + panel.h + 5,
                title,
                font=panel.font,
                size=TITLE_SIZE,
                color=NAVY,
            )
        )


# Room around a panel for tick labels, the axis label and the title.
LEFT = 34.0
BOTTOM = 22.0
TOP = 16.0
RIGHT = 8.0


def single(
    width: float, height: float, x: Axis, y: Axis, *, font: str, title: str
) -> tuple[Drawing, Panel]:
    """A Drawing holding one panel; call drawing.add(panel.render()) when done."""
    drawing = Drawing(width, height)
    panel = Panel(
        LEFT, BOTTOM, width - LEFT - RIGHT, height - BOTTOM - TOP, x, y, font=font, title=title
    )
    return drawing, panel


def stacked(
    width: float,
    heights: Sequence[float],
    x: Axis,
    ys: Sequence[Axis],
    *,
    font: str,
    titles: Sequence[str],
) -> tuple[Drawing, list[Panel]]:
    """Panels stacked top to bottom sharing the x axis; only the bottom one shows x ticks."""
    total = sum(h + TOP for h in heights) + BOTTOM
    drawing = Drawing(width, total)
    panels = []
    top = total
    for i, (h, y, title) in enumerate(zip(heights, ys, titles, strict=True)):
        top -= TOP + h
        panels.append(
            Panel(
                LEFT,
                top,
                width - LEFT - RIGHT,
                h,
                x,
                y,
                font=font,
                title=title,
                show_x_ticks=i == len(heights) - 1,
            )
        )
    return drawing, panels
