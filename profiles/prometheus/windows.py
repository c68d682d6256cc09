"""Counters read per window (an hour) rather than per step: histogram buckets and sums, prefix
counters. Only their increase per window is needed, and a counter's increase over a window is
the difference of its values at the window's two ends, so a quarter's histograms cost one point
per hour a series instead of 240.

That difference is exact unless the process restarted inside the window (the counter fell back
to 0 and climbed again). Restarts are found with PromQL's `resets()` on the request counter (every
counter of a process restarts together), and only those windows of that instance are read again
at the step, where the step-by-step increases are exact as in profiles.prometheus.read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from profiles.prometheus.client import NO_INSTANCE, Grid, Labels, PromClient, instance_of
from profiles.prometheus.series import increases


@dataclass(frozen=True, kw_only=True)
class Windows:
    """Windows of `window_s` from `start_s`, the last one ending at `end_s` (maybe shorter)."""

    start_s: float
    end_s: float
    window_s: float
    step_s: float

    @property
    def count(self) -> int:
        return math.ceil((self.end_s - self.start_s) / self.window_s - 1e-9)

    def bounds(self, w: int) -> tuple[float, float]:
        lo = self.start_s + w * self.window_s
        return lo, min(lo + self.window_s, self.end_s)


def with_instance(selector: str, instance: str | None) -> str:
    """`selector` narrowed to one instance (None: series without an instance label)."""
    value = (instance or "").replace("\\", "\\\\").replace('"', '\\"')
    inner = selector[1:-1].strip() if selector else ""
    return "{" + (inner + "," if inner else "") + f'instance="{value}"' + "}"


def values_at_bounds(client: PromClient, query: str, windows: Windows) -> dict[Labels, np.ndarray]:
    """Each series' value at every window bound (count + 1 of them; NaN where it had none)."""
    whole = int((windows.end_s - windows.start_s) // windows.window_s)
    grid = Grid(start_s=windows.start_s, step_s=windows.window_s, points=whole + 1)
    out: dict[Labels, np.ndarray] = {}
    for first, chunk in client.range_chunks(query, grid):
        for labels, vals in chunk.items():
            arr = out.setdefault(labels, np.full(windows.count + 1, np.nan))
            arr[first : first + vals.size] = vals
    if windows.count > whole:  # the last window is partial: its end is no grid point
        for labels, value in client.instant(query, windows.end_s).items():
            out.setdefault(labels, np.full(windows.count + 1, np.nan))[-1] = value
    return out


def restarts(
    client: PromClient, counter: str, selector: str, windows: Windows
) -> dict[str, set[int]]:
    """Instance -> the windows in which its request counter fell (a process restart).

    The range reaches one step into the window before, so a fall right at a bound is seen
    (the window before is then read again too: harmless)."""
    reach = f"{int(windows.window_s + windows.step_s)}s"
    query = f"sum by (instance) (resets({counter}{selector}[{reach}]))"
    out: dict[str, set[int]] = {}
    for labels, vals in values_at_bounds(client, query, windows).items():
        hit = {k - 1 for k in range(1, vals.size) if vals[k] > 0}
        if hit:
            out[instance_of(labels)] = hit
    return out


def window_increases(
    client: PromClient,
    build: Callable[[str], str],
    selector: str,
    windows: Windows,
    restarted: dict[str, set[int]],
) -> dict[Labels, np.ndarray]:
    """Each series' increase per window of the counter query `build(selector)`; windows with a
    restart are read again at the step for that instance alone."""
    out = {
        labels: increases(vals, np.nan, from_zero=bool(np.isnan(vals[0])))[0][1:]
        for labels, vals in values_at_bounds(client, build(selector), windows).items()
    }
    for instance, hit in restarted.items():
        narrowed = build(with_instance(selector, None if instance == NO_INSTANCE else instance))
        for w in sorted(hit):
            lo, hi = windows.bounds(w)
            grid = Grid(
                start_s=lo, step_s=windows.step_s, points=round((hi - lo) / windows.step_s) + 1
            )
            for _, chunk in client.range_chunks(narrowed, grid):
                for labels, vals in chunk.items():
                    arr = out.setdefault(labels, np.zeros(windows.count))
                    fresh = bool(np.isnan(vals[0]))  # created inside the window
                    arr[w] = float(increases(vals, np.nan, from_zero=fresh)[0].sum())
    return out
