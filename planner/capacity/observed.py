"""Observed capacity: the load each instance carried in production while the latency its server
reported still met the SLO, beside the load-tested limit.

Pure: reads a profile's per-instance windows (`observed.windows`, filled from Prometheus
histograms) and the SLO. A window meets the SLO when every checkable percentile constraint
(ttft, tpot or e2e at p50, p90, p95 or p99) is at or below its threshold; the instance's
carried load is the highest window rate that met it, and the lowest rate that missed it says
where production already fell short. When a threshold is a bucket edge the verdict is exact
(the share of requests at or below the edge is counted); between edges it carries the
bucket's interpolation.
"""

from __future__ import annotations

from contracts.plan import InstanceCapacity, ObservedCapacity
from planner.slo.spec import PercentileConstraint, Slo
from profiles.model import ObservedWindows, Profile

STATS = ("p50", "p90", "p95", "p99")


def observed_capacity(
    profile: Profile, slo: Slo | None, limit_rps: float | None
) -> ObservedCapacity | None:
    """Per instance, carried and missed loads; None without windows or checkable constraints.

    `limit_rps` is the load-tested per-instance limit in req/s (None for a concurrency limit:
    then nothing is compared).
    """
    if slo is None:
        return None
    windows = {
        name: body.observed.windows
        for name, body in profile.groups.items()
        if body.observed is not None and body.observed.windows is not None
    }
    if not windows:
        return None
    have = next(iter(windows.values())).latency_s
    checked = [c for c in slo.percentiles if c.stat in STATS and c.metric in have]
    unchecked = [c.name for c in slo.percentiles if c not in checked]
    if not checked:
        return None
    rows = [_instance(name, w, checked) for name, w in sorted(windows.items())]
    carried = [r.carried_rps for r in rows if r.carried_rps is not None]
    missed = [r.missed_min_rps for r in rows if r.missed_min_rps is not None]
    contradicts = limit_rps is not None and any(m < limit_rps for m in missed)
    best = max(carried) if carried else None
    window_s = next(iter(windows.values())).window_s
    return ObservedCapacity(
        window_s=window_s,
        checked=[c.name for c in checked],
        unchecked=unchecked,
        instances=rows,
        carried_rps=best,
        contradicts_limit=contradicts,
        sentence=_sentence(rows, best, min(missed) if missed else None, limit_rps, window_s),
    )


def _instance(
    name: str, w: ObservedWindows, checked: list[PercentileConstraint]
) -> InstanceCapacity:
    met_rates: list[tuple[float, int]] = []
    missed: list[float] = []
    for i, rate in enumerate(w.rate_rps):
        values = [w.latency_s[c.metric][c.stat][i] for c in checked]
        if rate <= 0 or any(v is None for v in values):
            continue
        ok = all(v is not None and v <= c.threshold_s for v, c in zip(values, checked, strict=True))
        if ok:
            met_rates.append((rate, i))
        else:
            missed.append(rate)
    top = max(met_rates, default=None)
    at = {}
    if top is not None:
        at = {c.name: float(w.latency_s[c.metric][c.stat][top[1]] or 0.0) for c in checked}
    return InstanceCapacity(
        instance=name,
        carried_rps=top[0] if top else None,
        carried_at=at,
        missed_min_rps=min(missed) if missed else None,
        windows_met=len(met_rates),
        windows_missed=len(missed),
    )


def _sentence(
    rows: list[InstanceCapacity],
    best: float | None,
    missed: float | None,
    limit_rps: float | None,
    window_s: float,
) -> str:
    per = f"over {window_s / 60:g}-minute windows"
    if best is None:
        text = f"production never met the SLO {per} on any of {len(rows)} instance(s)"
    else:
        row = next(r for r in rows if r.carried_rps == best)
        at = ", ".join(f"{k} {v:.2f} s" for k, v in row.carried_at.items())
        text = f"production carried {best:.2f} req/s per instance at {at} ({per})"
    if missed is not None:
        text += f"; missed the SLO from {missed:.2f} req/s"
    if limit_rps is not None:
        text += f"; the load test says {limit_rps:.2f}"
        if missed is not None and missed < limit_rps:
            text += " - production contradicts the measured limit"
    return text
