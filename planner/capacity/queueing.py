"""Queueing cross-check of the plan: Erlang-C (M/M/c) and its G/G/c corrections.

The fleet is read as a pool of request slots: an instance that carries a limit of K concurrent
requests (K = limit rate x e2e at the limit, by Little's law) is K servers, each busy for one
request's e2e. The offered load in Erlangs is the mean number of requests in flight at the peak.
Erlang-C gives the chance that a new request finds every slot busy and the mean wait; the
Allen–Cunneen approximation scales that wait by (ca² + cs²) / 2, so bursty arrivals (ca² > 1,
measured from the profile's inter-arrival CV) need more slots than Poisson arrivals (ca² = 1).
Kingman's formula is the single-server form of the same correction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from contracts.errors import ConfigError


def erlang_b(servers: int, offered_erlangs: float) -> float:
    """Blocking probability of M/M/c/c (Erlang B), by the stable recursion B(k) = aB/(k + aB)."""
    if servers < 0 or offered_erlangs < 0:
        raise ConfigError(
            f"erlang_b needs servers >= 0 and load >= 0 (got {servers}, {offered_erlangs})"
        )
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_erlangs * b / (k + offered_erlangs * b)
    return b


def erlang_c(servers: int, offered_erlangs: float) -> float:
    """Probability that an arrival waits in M/M/c (Erlang C); 1.0 when the load reaches c."""
    if servers < 1:
        raise ConfigError(f"erlang_c needs at least one server (got {servers})")
    if offered_erlangs >= servers:
        return 1.0
    if offered_erlangs <= 0:
        return 0.0
    b = erlang_b(servers, offered_erlangs)
    return servers * b / (servers - offered_erlangs * (1.0 - b))


def mmc_mean_wait_s(servers: int, offered_erlangs: float, service_s: float) -> float:
    """Mean queueing wait of M/M/c: C(c, a) x S / (c - a); infinite when a >= c."""
    if offered_erlangs >= servers:
        return math.inf
    return erlang_c(servers, offered_erlangs) * service_s / (servers - offered_erlangs)


def allen_cunneen_wait_s(
    servers: int, offered_erlangs: float, service_s: float, arrival_cv2: float, service_cv2: float
) -> float:
    """Mean wait of G/G/c by Allen–Cunneen: W(M/M/c) x (ca² + cs²) / 2."""
    return mmc_mean_wait_s(servers, offered_erlangs, service_s) * (arrival_cv2 + service_cv2) / 2.0


def kingman_wait_s(
    utilisation: float, service_s: float, arrival_cv2: float, service_cv2: float
) -> float:
    """Mean wait of G/G/1 by Kingman: rho / (1 - rho) x (ca² + cs²) / 2 x S."""
    if utilisation >= 1.0:
        return math.inf
    return utilisation / (1.0 - utilisation) * (arrival_cv2 + service_cv2) / 2.0 * service_s


def servers_for_wait(
    offered_erlangs: float,
    service_s: float,
    arrival_cv2: float,
    service_cv2: float,
    target_wait_s: float,
) -> int:
    """Fewest servers c whose Allen–Cunneen mean wait is at most `target_wait_s`.

    Raises ConfigError for a non-positive service time or target.
    """
    if service_s <= 0 or target_wait_s <= 0:
        raise ConfigError(
            "servers_for_wait needs a positive service time and target "
            f"(got {service_s}, {target_wait_s})"
        )
    c = max(1, math.floor(offered_erlangs) + 1)
    while (
        allen_cunneen_wait_s(c, offered_erlangs, service_s, arrival_cv2, service_cv2)
        > target_wait_s
    ):
        c += 1
    return c


@dataclass(frozen=True)
class SlotCount:
    """Instances the queueing approximation asks for, with and without burstiness."""

    slots_per_instance: float
    offered_erlangs: float
    target_wait_s: float
    slots_poisson: int
    slots_bursty: int
    instances_poisson: int
    instances_bursty: int
    wait_probability: float
    mean_wait_s: float


def instances_by_queueing(
    peak_rps: float,
    service_s: float,
    slots_per_instance: float,
    arrival_cv2: float,
    service_cv2: float,
    target_wait_s: float,
) -> SlotCount:
    """Instances for `peak_rps` when each instance is `slots_per_instance` M/G/c servers.

    The Poisson count uses ca² = 1, the bursty one the measured `arrival_cv2`; both use the
    service CV² `service_cv2`. `wait_probability` and `mean_wait_s` are those of the bursty
    count's slots. Raises ConfigError for a non-positive rate, service time or slot count.
    """
    if peak_rps <= 0 or slots_per_instance <= 0:
        raise ConfigError(
            "queueing needs a positive peak and slots per instance "
            f"(got {peak_rps}, {slots_per_instance})"
        )
    a = peak_rps * service_s
    poisson = servers_for_wait(a, service_s, 1.0, service_cv2, target_wait_s)
    bursty = servers_for_wait(a, service_s, arrival_cv2, service_cv2, target_wait_s)
    return SlotCount(
        slots_per_instance=slots_per_instance,
        offered_erlangs=a,
        target_wait_s=target_wait_s,
        slots_poisson=poisson,
        slots_bursty=bursty,
        instances_poisson=math.ceil(poisson / slots_per_instance - 1e-9),
        instances_bursty=math.ceil(bursty / slots_per_instance - 1e-9),
        wait_probability=erlang_c(bursty, a),
        mean_wait_s=allen_cunneen_wait_s(bursty, a, service_s, arrival_cv2, service_cv2),
    )
