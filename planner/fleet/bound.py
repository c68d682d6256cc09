"""The fleet check's capacity bound: a point proven to miss its SLO under any router, from a
sub-fleet, without simulating the whole fleet.

The argument (counting, whatever the router does). Let S be a TTFT bound of the SLO (a TTFT
or E2E percentile or per-request threshold: a request's E2E is at least its TTFT) and q the
share of judged requests that must meet it (the percentile's quantile, or the attainment).
A request that arrived by t - S and has no first token at t has a TTFT above S. The judged
requests (arriving after the warm-up w) get their first tokens in [w, t], which
ceil((t - w) / L) windows of L seconds cover; if each of the n instances gives at most c
first tokens in any such window after the warm-up, at most n c ceil((t - w) / L) of them
have one by t. So at least

    late(t) = A(t - S) - n c ceil((t - w) / L)

judged requests have a TTFT above S, A(x) being the judged arrivals by x (the check's own
traffic, known for the whole fleet). When late(t) > (1 - q) J + 1 for some t (J the judged
requests), fewer than q of them can meet S, so the SLO is missed by every router: the point
is a miss, and no sub-fleet of k/2, bootstrap or full simulation is needed.

c is measured, not derived: the most first tokens one instance of the sub-fleet gave in any
window of L seconds after the warm-up (the empty start's first admissions left out, as the
verdict leaves them out), raised by `CEILING_MARGIN`. The sub-fleet's instances take their
exact share of the arrivals (or whole sessions with their shared prompts), so each serves
the fleet's request mix at the fleet's load per instance. An instance's first-token rate
is held by its prefill and its admission (its batch and KV blocks free only as fast as it
finishes requests): a better balanced fleet keeps each instance less loaded, never faster
at its ceiling; the margin covers a full-fleet instance whose busiest window is busier than
any of the sub-fleet's. Below the ceiling c is the busiest window's arrivals, at least the
mean rate, so late(t) stays below zero and the bound says nothing: it decides only points
whose offered load exceeds what n instances serve (tests/planner/fleet/test_fleet_bound.py holds
it against the full simulation).
"""

from __future__ import annotations

import numpy as np

from planner.fleet.sim import FleetRun
from planner.slo.spec import Slo

WINDOW_S = 10.0  # L: the window over which an instance's first-token rate is measured
CEILING_MARGIN = 0.10  # c is the sub-fleet's busiest window raised by this share


def first_token_ceiling(run: FleetRun, warmup_s: float, window_s: float = WINDOW_S) -> float:
    """The most first tokens one of `run`'s instances gave in any `window_s` after
    `warmup_s`, raised by `CEILING_MARGIN` (0 when none was given)."""
    best = 0
    first_s = run.arrival_s + run.ttft_s
    for i in range(run.instances):
        times = first_s[run.instance == i]
        times = np.sort(times[~np.isnan(times) & (times >= warmup_s)])
        if len(times):
            ends = np.searchsorted(times, times + window_s, side="left")
            best = max(best, int((ends - np.arange(len(times))).max()))
    return (1.0 + CEILING_MARGIN) * best


def ttft_goals(slo: Slo) -> list[tuple[float, float]]:
    """(S, q) for each term of `slo` that a request without a first token after S seconds
    fails: TTFT and E2E percentiles (not a mean), and per-request TTFT and E2E thresholds
    under an attainment."""
    goals = [
        (c.threshold_s, q)
        for c in slo.percentiles
        if c.metric in ("ttft", "e2e") and (q := c.quantile) is not None
    ]
    if slo.min_attainment is not None:
        goals += [
            (t.threshold_s, slo.min_attainment)
            for t in slo.request_thresholds
            if t.metric in ("ttft", "e2e")
        ]
    return goals


def proven_miss(
    arrival_s: np.ndarray,
    instances: int,
    sub_run: FleetRun,
    slo: Slo,
    warmup_s: float,
) -> bool:
    """Whether `instances` instances fed the arrivals `arrival_s` (the whole fleet's) miss
    `slo` under any router, by the module's bound with c measured on `sub_run` (a sub-fleet
    of the same check)."""
    goals = ttft_goals(slo)
    if not goals:
        return False
    judged = np.sort(arrival_s[arrival_s >= warmup_s])
    if len(judged) == 0:
        return False
    ceiling = first_token_ceiling(sub_run, warmup_s)
    counts = np.arange(1, len(judged) + 1)  # A(a_i) for the i-th judged arrival a_i
    for bound_s, share in goals:
        # late(t) at t = a_i + S, where A(t - S) steps up: the largest it gets.
        windows = np.ceil((judged + bound_s - warmup_s) / WINDOW_S)
        late = counts - instances * ceiling * windows
        if float(late.max()) > (1.0 - share) * len(judged) + 1.0:
            return True
    return False
