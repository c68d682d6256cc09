"""Steady-state limits of queueing systems, independent of capplan's code: the truth that
`capplan limit` is checked against.

- M/G/c FCFS under Poisson arrivals, simulated with a given sample of service times (with
  the time from service start to first token of each): the steady-state TTFT quantile at a
  rate, and the highest rate whose quantile stays within a threshold. Common random
  numbers across rates (one seeded stream of unit inter-arrivals and service draws), so the
  quantile rises monotonically with the rate and bisection is exact for the sample.
- The loss system M/G/N/N (refuse when N are active): Erlang-B blocking, which depends on
  the service time only through its mean, and the highest rate whose blocking stays within
  a share. With failures counted as +infinity in a percentile, a `p95` SLO allows at most
  5 % refused when admitted requests are fast.
- Erlang-C for M/M/c, to check the simulation against textbook formulas.

Pure functions over numpy arrays; rates in requests per second, times in seconds. Written
apart from planner.capacity.queueing on purpose: a truth must not share code with what it checks.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np


def simulate_ttft(
    rate_rps: float,
    service_s: np.ndarray,
    first_token_s: np.ndarray,
    servers: int,
    *,
    arrivals: int = 200_000,
    warmup_share: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """TTFTs (queue wait + first-token offset) of an M/G/c FCFS queue at `rate_rps`, after
    discarding the first `warmup_share` of `arrivals`. Request i draws the pair
    (service_s[j], first_token_s[j]) for a seeded uniform j; the same `seed` gives the same
    draws and unit inter-arrivals at every rate."""
    service_s = np.asarray(service_s, dtype=float)
    first_token_s = np.asarray(first_token_s, dtype=float)
    if service_s.shape != first_token_s.shape or service_s.size == 0:
        raise ValueError("service and first-token samples must be non-empty and of equal size")
    if rate_rps <= 0 or servers < 1:
        raise ValueError("rate must be > 0 and servers >= 1")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0, arrivals)
    picks = rng.integers(0, service_s.size, arrivals)
    waits = fcfs_waits(np.cumsum(gaps) / rate_rps, service_s[picks], servers)
    skip = int(warmup_share * arrivals)
    return waits[skip:] + first_token_s[picks[skip:]]


def fcfs_waits(arrival_s: np.ndarray, service_s: np.ndarray, servers: int) -> np.ndarray:
    """Each arrival's wait for a free server in a c-server FCFS queue that starts empty
    (arrivals in time order, `service_s` the service time of each)."""
    free_at = [0.0] * servers  # a heap of the times each server becomes free
    waits = [0.0] * len(arrival_s)
    for i, (t, s) in enumerate(zip(arrival_s.tolist(), service_s.tolist(), strict=True)):
        start = t if t >= free_at[0] else free_at[0]
        waits[i] = start - t
        heapq.heapreplace(free_at, start + s)
    return np.asarray(waits)


def ttft_quantile(
    rate_rps: float,
    service_s: np.ndarray,
    first_token_s: np.ndarray,
    servers: int,
    q: float = 0.95,
    *,
    arrivals: int = 200_000,
    seed: int = 0,
) -> float:
    """The steady-state `q` quantile of TTFT at `rate_rps` (see simulate_ttft)."""
    ttft = simulate_ttft(rate_rps, service_s, first_token_s, servers, arrivals=arrivals, seed=seed)
    return float(np.quantile(ttft, q))


def _bisect(holds: Callable[[float], bool], low: float, high: float, rel_tol: float) -> float:
    """The highest x in [low, high] with holds(x), given holds(low) and not holds(high)."""
    while high - low > rel_tol * low:
        mid = 0.5 * (low + high)
        if holds(mid):
            low = mid
        else:
            high = mid
    return low


def mgc_max_rate(
    service_s: np.ndarray,
    first_token_s: np.ndarray,
    servers: int,
    threshold_s: float,
    q: float = 0.95,
    *,
    rel_tol: float = 0.002,
    arrivals: int = 200_000,
    seed: int = 0,
) -> float:
    """The highest Poisson rate at which the M/G/c TTFT `q` quantile is <= `threshold_s`.
    Raises ValueError when even an idle server misses the threshold."""
    capacity = servers / float(np.mean(service_s))

    def holds(rate: float) -> bool:
        quantile = ttft_quantile(
            rate, service_s, first_token_s, servers, q, arrivals=arrivals, seed=seed
        )
        return quantile <= threshold_s

    low = 1e-3 * capacity
    if not holds(low):
        raise ValueError(f"TTFT p{q * 100:g} exceeds {threshold_s} s even without a queue")
    return _bisect(holds, low, capacity, rel_tol)


def erlang_b(servers: int, offered_erlangs: float) -> float:
    """Blocking probability of M/G/N/N with N = `servers` and load a (the recursion
    B(k) = a B(k-1) / (k + a B(k-1)), B(0) = 1)."""
    if servers < 0 or offered_erlangs < 0:
        raise ValueError("servers and offered load must be >= 0")
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered_erlangs * blocking / (k + offered_erlangs * blocking)
    return blocking


def erlang_b_max_load(servers: int, max_blocking: float, *, rel_tol: float = 1e-6) -> float:
    """The highest offered load (Erlangs) whose Erlang-B blocking is <= `max_blocking`."""
    if not 0 < max_blocking < 1:
        raise ValueError("max blocking must be in (0, 1)")

    def holds(load: float) -> bool:
        return erlang_b(servers, load) <= max_blocking

    high = 1.0
    while holds(high):
        high *= 2
    low = high / 2
    while not holds(low):
        low /= 2
    return _bisect(holds, low, high, rel_tol)


def loss_max_rate(servers: int, mean_service_s: float, q: float = 0.95) -> float:
    """The highest rate whose refused share stays within 1 - q: where a `q` percentile
    that counts refusals as +infinity still holds (admitted requests meet the threshold)."""
    return erlang_b_max_load(servers, 1.0 - q) / mean_service_s


def erlang_c(servers: int, offered_erlangs: float) -> float:
    """Probability that an arrival waits in M/M/c (c = `servers`, a = λ/μ < c)."""
    if offered_erlangs >= servers:
        raise ValueError("M/M/c is unstable when the offered load reaches the servers")
    blocking = erlang_b(servers, offered_erlangs)
    rho = offered_erlangs / servers
    return blocking / (1.0 - rho * (1.0 - blocking))


def mmc_wait_quantile(servers: int, rate_rps: float, mean_service_s: float, q: float) -> float:
    """The `q` quantile of the M/M/c FCFS wait: P(W > t) = C(c, a) exp(-(c μ - λ) t)."""
    mu = 1.0 / mean_service_s
    waiting = erlang_c(servers, rate_rps / mu)
    if waiting <= 1.0 - q:
        return 0.0
    return math.log(waiting / (1.0 - q)) / (servers * mu - rate_rps)


def closed_ttfts(
    users: int,
    service_s: np.ndarray,
    first_token_s: np.ndarray,
    servers: int,
    *,
    requests: int = 100_000,
    warmup_share: float = 0.1,
    refuse: bool = False,
    retry_s: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """TTFTs of `users` closed-loop clients without think time on a c-server FCFS queue
    (each sends again the moment its answer ends), after the first `warmup_share` of
    `requests`; NaN for a request refused (with `refuse`: no queue, the client sends again
    `retry_s` later). Request i draws the pair (service_s[j], first_token_s[j]) for a seeded
    uniform j. Requests are taken in send order; in FCFS order the next one starts when it
    is sent or when the earliest server frees, whichever is later."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, service_s.size, requests)
    sends = [(0.0, u) for u in range(users)]  # (send time, user), a heap
    free_at = [0.0] * servers
    out = np.full(requests, np.nan)
    for i in range(requests):
        sent, user = heapq.heappop(sends)
        if refuse and free_at[0] > sent:
            heapq.heappush(sends, (sent + retry_s, user))
            continue
        start = max(sent, heapq.heappop(free_at))
        end = start + float(service_s[picks[i]])
        heapq.heappush(free_at, end)
        out[i] = start - sent + float(first_token_s[picks[i]])
        heapq.heappush(sends, (end, user))
    return out[int(warmup_share * requests) :]


def closed_max_users(
    service_s: np.ndarray,
    first_token_s: np.ndarray,
    servers: int,
    threshold_s: float,
    q: float,
    *,
    refuse: bool = False,
    retry_s: float = 0.1,
    max_users: int = 4096,
) -> int:
    """The most closed-loop users whose TTFT q-quantile (a refusal counting as +infinity)
    stays within `threshold_s`, counted up from one."""
    users = 0
    while users < max_users:
        ttft = closed_ttfts(users + 1, service_s, first_token_s, servers, refuse=refuse,
                            retry_s=retry_s)  # fmt: skip
        values = np.where(np.isnan(ttft), np.inf, ttft)
        if float(np.quantile(values, q, method="inverted_cdf")) > threshold_s:
            break
        users += 1
    return users


def loaded_ttfts(
    rate_rps: float,
    first_token_s: np.ndarray,
    token_s: np.ndarray,
    servers: int,
    slowdown: float,
    *,
    arrivals: int = 200_000,
    warmup_share: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """TTFTs of an M/G/c FCFS queue at `rate_rps` whose work per request grows with
    concurrency: a request that starts while k servers are busy (itself counted) takes
    first_token_s[j] + token_s[j] x (1 + slowdown x k / c), for a seeded uniform j (the
    slot server's --slowdown). `token_s`: the request's nominal time after its first token.
    Common random numbers across rates, as simulate_ttft."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0, arrivals)
    picks = rng.integers(0, token_s.size, arrivals)
    arrival_s = (np.cumsum(gaps) / rate_rps).tolist()
    first = first_token_s[picks].tolist()
    tokens = token_s[picks].tolist()
    free_at = [0.0] * servers
    ttfts = [0.0] * arrivals
    for i, t in enumerate(arrival_s):
        start = t if t >= free_at[0] else free_at[0]
        busy = 1 + sum(1 for f in free_at[1:] if f > start)
        service = first[i] + tokens[i] * (1.0 + slowdown * busy / servers)
        heapq.heapreplace(free_at, start + service)
        ttfts[i] = start - t + first[i]
    return np.asarray(ttfts[int(warmup_share * arrivals) :])


def loaded_max_rate(
    first_token_s: np.ndarray,
    token_s: np.ndarray,
    servers: int,
    slowdown: float,
    threshold_s: float,
    q: float = 0.95,
    *,
    rel_tol: float = 0.002,
    seed: int = 0,
) -> float:
    """The highest Poisson rate at which the TTFT `q` quantile of `loaded_ttfts` is <=
    `threshold_s`. Raises ValueError when even an idle server misses the threshold."""
    capacity = servers / float(np.mean(first_token_s + token_s))

    def holds(rate: float) -> bool:
        ttft = loaded_ttfts(rate, first_token_s, token_s, servers, slowdown, seed=seed)
        return float(np.quantile(ttft, q)) <= threshold_s

    low = 1e-3 * capacity
    if not holds(low):
        raise ValueError(f"TTFT p{q * 100:g} exceeds {threshold_s} s even without a queue")
    return _bisect(holds, low, capacity, rel_tol)
