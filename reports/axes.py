"""The charts' house style and axes: one palette, the text sizes, axis ranges and their ticks,
and text in the report's fonts (Latin runs in Helvetica, the rest in the CJK font).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from reportlab.graphics.shapes import Group, String
from reportlab.lib import colors
from reportlab.lib.colors import Color
from reportlab.pdfbase.pdfmetrics import stringWidth

from reports.i18n import LATIN_FONT, split_runs

# One palette for every chart and table.
NAVY = colors.HexColor("#1f4e79")
ORANGE = colors.HexColor("#d9822b")
TEAL = colors.HexColor("#2a9d8f")
RED = colors.HexColor("#c0392b")
GREEN = colors.HexColor("#2e8b57")
GRAY = colors.HexColor("#7f8c8d")
LIGHT = colors.HexColor("#eef2f7")
BURST_SHADE = colors.HexColor("#fbe3d0")
GRID = colors.HexColor("#d5dbe3")
INK = colors.HexColor("#222222")

TITLE_SIZE = 9.0
LABEL_SIZE = 7.0
TICK_SIZE = 6.5


@dataclass(frozen=True)
class Axis:
    """One axis: range, scale and label (the label carries the unit)."""

    lo: float
    hi: float
    label: str = ""
    log: bool = False

    def span(self) -> tuple[float, float]:
        if self.log:
            return math.log10(self.lo), math.log10(self.hi)
        return self.lo, self.hi


def nice_axis(
    values: Sequence[float] | np.ndarray,
    label: str = "",
    *,
    zero: bool = True,
    pad: float = 0.08,
    min_hi: float = 1e-9,
) -> Axis:
    """A linear axis that holds every finite value, starting at 0 unless told otherwise."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return Axis(0.0, 1.0, label)
    lo = 0.0 if zero else float(arr.min())
    hi = max(float(arr.max()), min_hi)
    if hi <= lo:
        hi = lo + 1.0
    hi += (hi - lo) * pad
    return Axis(lo, hi, label)


def log_axis(values: Sequence[float] | np.ndarray, label: str = "") -> Axis:
    """A log axis from the decade below the smallest positive value to the one above the largest."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr) & (arr > 0)]
    if arr.size == 0:
        return Axis(1.0, 10.0, label, log=True)
    lo = 10 ** math.floor(math.log10(arr.min()))
    hi = 10 ** math.ceil(math.log10(arr.max()))
    if hi <= lo:
        hi = lo * 10
    return Axis(lo, hi, label, log=True)


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * mag:
            return mult * mag
    return 10 * mag


def format_tick(value: float) -> str:
    """Compact tick text: 1, 2.5, 10k, 1.5M."""
    a = abs(value)
    if a >= 1e6:
        return f"{value / 1e6:g}M"
    if a >= 1e4:
        return f"{value / 1e3:g}k"
    if a >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.3g}"


def ticks(axis: Axis) -> list[float]:
    """Tick values: every decade of a log axis (at most 8), nice steps on a linear one."""
    if axis.log:
        lo, hi = axis.span()
        decades = range(int(round(lo)), int(round(hi)) + 1)
        ticks = [10.0**d for d in decades]
        return ticks if len(ticks) <= 8 else ticks[:: math.ceil(len(ticks) / 8)]
    step = _nice_step(axis.hi - axis.lo)
    first = math.ceil(axis.lo / step - 1e-9) * step
    n = int(math.floor((axis.hi - first) / step + 1e-9)) + 1
    return [first + i * step for i in range(n)]


def label(
    x: float,
    y: float,
    text: str,
    *,
    font: str,
    size: float,
    color: Color = INK,
    anchor: str = "start",
) -> Group:
    """Text at (x, y); Latin runs in Helvetica, the rest in `font` (e.g. the CJK font)."""
    runs = [(text, True)] if font == LATIN_FONT else split_runs(text)
    widths = [stringWidth(run, LATIN_FONT if latin else font, size) for run, latin in runs]
    total = sum(widths)
    start = x - total if anchor == "end" else x - total / 2 if anchor == "middle" else x
    group = Group()
    for (run, latin), width in zip(runs, widths, strict=True):
        group.add(
            String(
                start,
                y,
                run,
                fontName=LATIN_FONT if latin else font,
                fontSize=size,
                fillColor=color,
            )
        )
        start += width
    return group
