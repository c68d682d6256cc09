"""Reading an engine's metrics from Prometheus into per-instance arrays, a chunk at a time.

`read_metrics(client, engine_roles, selector, grid)` reads the request counter at the step and
the gauges once a minute, chunk by chunk (each chunk's counter values become increases per step
at once), and the histograms and prefix counters per hour (profiles.prometheus.windows), so
memory holds the per-step request counts, the gauges (one float per minute per instance) and
the histograms' hourly bucket increases, never more than a few chunks' raw answers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from profiles.prometheus.client import Grid, PromClient, instance_of
from profiles.prometheus.series import increases, parse_le
from profiles.prometheus.windows import Windows, restarts, window_increases

HISTOGRAM_ROLES = ("input_tokens", "output_tokens", "ttft", "tpot", "e2e")
LATENCY_ROLES = ("ttft", "tpot", "e2e")
WINDOW_S = 3600  # latency against load: per instance, per hour of the span
# Gauges (running, waiting, the older engines' hit-rate) are sampled once a minute, not at every
# step: their statistics over a span (mean, p50, p99, the largest sample) need no more, and at
# 15 s they would be two thirds of a quarter's points.
GAUGE_STEP_S = 60


@dataclass
class HistogramTotals:
    """A histogram's increase over the span: per upper edge, and its _sum's."""

    buckets: dict[float, float] = field(default_factory=lambda: defaultdict(float))
    sum: float = 0.0
    windows: dict[float, np.ndarray] = field(default_factory=dict)  # per edge, per WINDOW_S

    def window_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted upper edges and cumulative counts per window, shape (windows, edges)."""
        edges = np.array(sorted(self.windows))
        return edges, np.stack([self.windows[e] for e in edges], axis=1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted upper edges and cumulative counts."""
        edges = np.array(sorted(self.buckets))
        return edges, np.array([self.buckets[e] for e in edges])

    def add(self, other: HistogramTotals) -> None:
        for e, c in other.buckets.items():
            self.buckets[e] += c
        self.sum += other.sum


# Gauges that are shares (0-1): averaged over an instance's series and over the fleet.
SHARE_GAUGES = ("prefix_hit_rate", "kv_usage")


@dataclass
class InstanceMetrics:
    """One instance's metrics over the span (steps of the grid)."""

    requests: np.ndarray  # per step
    histograms: dict[str, HistogramTotals] = field(default_factory=dict)
    gauges: dict[str, np.ndarray] = field(default_factory=dict)  # per grid point
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    prefix_hit_rate: list[float] = field(default_factory=list)  # gauge means per chunk


def read_metrics(
    client: PromClient, roles: dict[str, str], selector: str, grid: Grid
) -> dict[str, InstanceMetrics]:
    """Per instance, what `roles` (role -> metric name) hold on `grid` (steps = points - 1)."""
    steps = grid.points - 1
    out: dict[str, InstanceMetrics] = {}

    def inst(name: str) -> InstanceMetrics:
        if name not in out:
            out[name] = InstanceMetrics(requests=np.zeros(steps))
        return out[name]

    for name, inc in _counter_steps(client, f"sum by (instance) ({roles['requests']}{selector})",
                                    grid):  # fmt: skip
        inst(name).requests += inc
    end_s = grid.start_s + steps * grid.step_s
    windows = Windows(start_s=grid.start_s, end_s=end_s, window_s=WINDOW_S, step_s=grid.step_s)
    restarted = restarts(client, roles["requests"], selector, windows)
    for role in HISTOGRAM_ROLES:
        if role in roles:
            _read_histogram(client, role, roles[role], selector, windows, restarted, inst)
    for role in ("prefix_queries", "prefix_hits"):
        if role in roles:
            for labels, inc in window_increases(
                client, _summed(roles[role]), selector, windows, restarted
            ).items():
                m = inst(instance_of(labels))
                setattr(m, role, getattr(m, role) + float(inc.sum()))
    every = max(1, round(GAUGE_STEP_S / grid.step_s))
    gauge_grid = Grid(
        start_s=grid.start_s,
        step_s=grid.step_s * every,
        points=(grid.points - 1) // every + 1,
        chunk_points=grid.chunk_points,
    )
    for role in ("running", "waiting", "prefix_hit_rate", "kv_usage"):
        if role in roles:
            agg = "avg" if role in SHARE_GAUGES else "sum"
            query = f"{agg} by (instance) ({roles[role]}{selector})"
            for first, chunk in client.range_chunks(query, gauge_grid):
                for labels, vals in chunk.items():
                    m = inst(instance_of(labels))
                    if role == "prefix_hit_rate":
                        m.prefix_hit_rate.extend(vals[~np.isnan(vals)].tolist())
                        continue
                    g = m.gauges.setdefault(role, np.full(gauge_grid.points, np.nan))
                    g[first : first + vals.size] = vals
    return out


def _counter_steps(client: PromClient, query: str, grid: Grid) -> list[tuple[str, np.ndarray]]:
    """Per series (by instance): its increase per step over the whole grid."""
    prev: dict[tuple[tuple[str, str], ...], float] = {}
    per: dict[tuple[tuple[str, str], ...], np.ndarray] = {}
    for first, chunk in client.range_chunks(query, grid):
        for labels, vals in chunk.items():
            created = labels not in prev and (first > 0 or bool(np.isnan(vals[0])))
            inc, prev[labels] = increases(vals, prev.get(labels, np.nan), from_zero=created)
            arr = per.setdefault(labels, np.zeros(grid.points))
            arr[first : first + vals.size] = inc
    return [(instance_of(labels), arr[1:]) for labels, arr in per.items()]


def _summed(name: str) -> Callable[[str], str]:
    """The query summing counter `name` by instance, for a selector."""
    return lambda sel: f"sum by (instance) ({name}{sel})"


def _read_histogram(
    client: PromClient,
    role: str,
    name: str,
    selector: str,
    windows: Windows,
    restarted: dict[str, set[int]],
    inst: Callable[[str], InstanceMetrics],
) -> None:
    """A histogram's bucket and _sum increases per window, into each instance's totals."""
    buckets = window_increases(
        client, lambda sel: f"sum by (instance, le) ({name}_bucket{sel})", selector, windows,
        restarted,
    )  # fmt: skip
    for labels, inc in buckets.items():
        h = inst(instance_of(labels)).histograms.setdefault(role, HistogramTotals())
        le = parse_le(dict(labels).get("le", "+Inf"))
        h.buckets[le] += float(inc.sum())
        if role in LATENCY_ROLES:
            h.windows[le] = h.windows.get(le, 0.0) + inc
    sums = window_increases(client, _summed(f"{name}_sum"), selector, windows, restarted)
    for labels, inc in sums.items():
        inst(instance_of(labels)).histograms.setdefault(role, HistogramTotals()).sum += float(
            inc.sum()
        )
