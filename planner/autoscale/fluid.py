"""The per-step queue model of an autoscaled fleet: fast enough for a quarter of minutes.

The request-level simulation (`des.py`) is the truth but serves a quarter's tens of millions
of requests too slowly, so the study of a whole profile runs this reduction instead. In
each step (60 s by default) the arrival rate is constant and the ready replicas give
c = replicas x slots servers of mean service time s. A fluid backlog B carries overload
from step to step: B' = max(0, B + (rate - c/s) x step). While B is zero and the step is
stable, a request's chance of waiting longer than the budget is the M/M/c tail
C(c, a) x exp(-(c/s - rate) x budget) (Erlang C); while B is positive, a request waits
B / (c/s) (fluid) and is good when that is within the budget. The controller is the same
`Controller` the request-level simulation drives, polled at step starts (a poll interval
shorter than a step is read once per step). Replicas ready inside a step count for the
part of the step they serve; a removed replica leaves at once (no drain).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from planner.autoscale.policies import Controller, Metrics
from planner.capacity.queueing import erlang_c


def erlang_c_array(servers: np.ndarray, offered: np.ndarray) -> np.ndarray:
    """Erlang C for arrays of (c, a), by the Erlang B recursion run to the largest c.

    1.0 where a >= c (every arrival waits); 0.0 where a is zero.
    """
    c = np.asarray(servers, dtype=np.int64)
    a = np.asarray(offered, dtype=float)
    b = np.ones_like(a)
    out_b = np.ones_like(a)
    for k in range(1, int(c.max(initial=0)) + 1):
        b = a * b / (k + a * b)
        out_b = np.where(c == k, b, out_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ec = c * out_b / (c - a * (1.0 - out_b))
    ec = np.where(a >= c, 1.0, ec)
    return np.where(a <= 0, 0.0, np.clip(ec, 0.0, 1.0))


@dataclass(frozen=True, kw_only=True)
class StepRun:
    """Per step: expected arrivals, the good share, replicas held and ready."""

    step_s: float
    arrivals: np.ndarray
    good_share: np.ndarray
    held: np.ndarray  # replica-steps held (loading included), fractional at changes
    ready: np.ndarray  # ready replicas (time-weighted inside the step)
    scale_ups: int

    @property
    def good(self) -> np.ndarray:
        return self.arrivals * self.good_share


def _fluid_good(b0: float, drift: float, theta: float, step_s: float) -> tuple[float, float]:
    """Shares of the step with 0 < B <= theta (good by fluid) and with B = 0 (stationary)."""
    if b0 <= 0 and drift < 0:
        return 0.0, 1.0
    if drift >= 0:  # backlog grows from b0; good while it is under theta
        if b0 > theta:
            return 0.0, 0.0
        if drift == 0:
            return 1.0, 0.0
        return min(1.0, (theta - b0) / drift / step_s), 0.0
    empty_at = b0 / -drift  # draining: above theta until it crosses it, empty after
    cross = max(0.0, (b0 - theta) / -drift)
    good = max(0.0, min(empty_at, step_s) - cross) / step_s
    stationary = max(0.0, step_s - empty_at) / step_s
    return good, stationary


def simulate_steps(
    rate_rps: np.ndarray,
    *,
    step_s: float,
    service_s: float,
    slots: int,
    initial: int,
    controller: Controller | None,
    cold_start_s: float,
    wait_budget_s: float,
    kv_per_slot: float = 1.0,
) -> StepRun:
    """Run the fleet over `rate_rps` (one rate per step); `controller` None: a fixed count."""
    n = len(rate_rps)
    ready_n = initial
    loading: list[float] = []  # ready times of replicas still loading
    backlog = 0.0
    good = np.zeros(n)
    stationary = np.zeros(n)
    servers = np.zeros(n, dtype=np.int64)
    held = np.zeros(n)
    ready_w = np.zeros(n)
    next_poll, ups = 0.0, 0
    poll_s = controller.spec.poll_s if controller is not None else math.inf
    mu = 1.0 / service_s
    reads_queue = controller is not None and controller.spec.metric == "queue"
    for m in range(n):
        t0, t1 = m * step_s, (m + 1) * step_s
        lam = float(rate_rps[m])
        if controller is not None and t0 >= next_poll:
            c_now = ready_n * slots
            seen = float(rate_rps[max(m - 1, 0)])  # the last minute's rate (at 0: the first)
            a_now = seen * service_s
            m_in = Metrics(
                now_s=t0,
                replicas=ready_n + len(loading),
                ready=ready_n,
                waiting=backlog + (_mean_queue(c_now, a_now) if reads_queue else 0.0),
                kv_usage=min(a_now, c_now) * kv_per_slot,
                rate_rps=seen,
            )
            target = controller.decide(m_in)
            now_total = ready_n + len(loading)
            if target > now_total:
                ups += 1
                loading += [t0 + cold_start_s] * (target - now_total)
            elif target < now_total:
                drop = now_total - target
                cancel = min(drop, len(loading))
                loading = sorted(loading)[: len(loading) - cancel]
                ready_n -= drop - cancel
            next_poll = t0 + poll_s * max(1, math.ceil(step_s / poll_s - 1e-9))
        arriving = [r for r in loading if r < t1]
        loading = [r for r in loading if r >= t1]
        part = sum((t1 - max(r, t0)) / step_s for r in arriving)
        held[m] = ready_n + len(loading) + len(arriving)
        ready_w[m] = ready_n + part
        ready_n += len(arriving)
        c = int(round(ready_w[m] * slots))
        servers[m] = c
        drift = lam - c * mu
        g, s = _fluid_good(backlog, drift, wait_budget_s * c * mu, step_s)
        good[m], stationary[m] = g, s
        backlog = max(0.0, backlog + drift * step_s)
    tail = np.zeros(n)
    mask = stationary > 0
    if mask.any():
        c_arr, lam_arr = servers[mask], np.asarray(rate_rps, dtype=float)[mask]
        ec = erlang_c_array(c_arr, lam_arr * service_s)
        tail[mask] = 1.0 - ec * np.exp(-(c_arr * mu - lam_arr) * wait_budget_s)
    share = np.clip(good + stationary * tail, 0.0, 1.0)
    return StepRun(
        step_s=step_s,
        arrivals=np.asarray(rate_rps, dtype=float) * step_s,
        good_share=share,
        held=held,
        ready=ready_w,
        scale_ups=ups,
    )


@functools.lru_cache(maxsize=65536)
def _mean_queue_at(servers: int, offered: float) -> float:
    ec = erlang_c(servers, offered)
    return ec * offered / (servers - offered)


def _mean_queue(servers: int, offered: float) -> float:
    """Mean requests waiting in M/M/c (the queue metric between steps); capped for a >= c.

    The load is rounded to 0.1 Erlang so a quarter's polls reuse their computations."""
    if offered <= 0:
        return 0.0
    if servers <= 0 or offered >= servers:
        return offered
    return _mean_queue_at(servers, min(round(offered, 1), servers - 0.05))
