"""The fleet check's shortcut: a few instances' share of the traffic simulated instead of all n.

A router that treats instances alike (`SYMMETRIC`: round-robin, least-outstanding, power of
two) gives each of n instances the same arrival process. Round-robin gives instance i the
arrivals i, i+n, i+2n, ...; so a sub-fleet of k instances fed the arrivals whose number
modulo n is below k, routed round-robin among themselves, replays exactly what k of the n
instances see (`sub_indices`). Power of two routes the same share among k instances
instead of n: fewer instances to choose from, so the sub-fleet is never better balanced than
the whole one, and its point stands only when it meets the SLO (a miss goes to the full
simulation) and tells what the sub-fleet of k/2 told (`agree`: the same verdict, p95s within
`REL_WIDTH`). Least-outstanding's sub-fleet (`MEAN_FIELD`) takes no fixed share: every
arrival is routed among its k instances and the n - k others, modelled at their mean load
(`planner.fleet.rest`), so its instances pool their load with the whole fleet's. Fed a fixed
share, k of them balance only among themselves: on the chat preset at 400 req/s, n = 42, TTFT
p95 0.173 s with k = 4 over 300 s and 0.181 s with k = 8 over 100 s, against 0.159 s with all
42 over either; with the rest modelled, 0.159 s and 0.163 s. Its "meets" stands on the
bootstrap alone; a miss goes to larger sub-fleets, then the full simulation.

The error of taking k of n instances is bounded by a bootstrap over the simulated instances
(`bootstrap_agrees`): the sub-fleet's requests are regrouped by instance, instances drawn with
replacement, and each draw judged. The point stands when the verdicts of `AGREEMENT` of the
draws agree with its own and, for a "meets", the 95 % interval of each judged p95 lies within
`REL_WIDTH` of the estimate; otherwise k doubles, and past half the fleet the whole fleet is
simulated. A sub-fleet's miss also stands, under any router, when the capacity bound
(`planner.fleet.bound`) proves that the fleet misses whatever the router does.
A router that breaks the symmetry (`GROUPED`: prefix-aware, session affinity) decides where a
request goes from the requests before it (the session's first turn, the prompts already
routed), so a sub-fleet takes whole sessions (`group_sub_indices`): session s goes to shard
s mod n and every one of its turns with it, a request without a session to its arrival number
mod n; the shards below k make the sub-fleet, routed by the same router among the k. Each
simulated instance sees its sessions intact and its share of each shared prompt. Fewer
instances to choose from, as for power of two: its points settle the same way (a
"meets" that agrees with the sub-fleet of k/2 and holds over the bootstrap; a miss is
simulated in full). A grouped router that finds nothing it reads in the traffic (no sessions
for session affinity; no sessions or shared prompts, hence no block hashes, for prefix-aware)
sends every request to the least-loaded instance, as least-outstanding does: its point is
least-outstanding's, to the bit, and is simulated once (`stands_for`).

Request shapes: without sessions the load test's stream draws shapes independently, so the
sub-fleet's requests take the stream's first shapes in order
(`planner.fleet.traffic.Traffic.sub_requests`); with
sessions a turn's prompt depends on the turns before it, so the sub-fleet takes the same
requests the full draw would give those arrival numbers.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from planner.engine import EngineRequest
from planner.fleet.routing import Routing
from planner.fleet.sim import FleetRun, FleetVerdict
from planner.fleet.traffic import Traffic

SYMMETRIC: frozenset[Routing] = frozenset({"round_robin", "least_outstanding", "power_of_two"})
# Routers whose sub-fleet takes whole sessions (`group_sub_indices`).
GROUPED: frozenset[Routing] = frozenset({"session_affinity", "prefix_aware"})
# Routers under which k sub-fleet instances see exactly what k of the n instances see.
EXACT_SHARE: frozenset[Routing] = frozenset({"round_robin"})
# Routers whose sub-fleet routes every arrival among its instances and the rest of the fleet
# (`planner.fleet.rest`): no sub-fleet of k/2 needed. Power of two samples two of k as of n,
# and the grouped routers' caches see k instances' prompts: they still need it.
MEAN_FIELD: frozenset[Routing] = frozenset({"least_outstanding"})
ATTAINMENT_GAP = 0.01  # sub-fleets of k and 2k agree when their attainments are this close
# Fewer and the few instances' request shapes decide a p95: under least-outstanding (the
# rest modelled) `python bench/fleet_rest_tuning.py` gives p95s -7.8 % to +0.8 % of the full
# fleet's with k = 4, -1.7 % to +2.9 % with k = 8 (chat preset, 400 req/s, 300 s, n = 41-43,
# seeds 0 and 1); round-robin's k = 4 was 5.6 % low too (`CHANGELOG.md`).
MIN_SAMPLED_INSTANCES = 8
MIN_SAMPLED_REQUESTS = 10_000  # fewer and a p95 per draw is too coarse to bound
RESAMPLES = 60
AGREEMENT = 0.95  # share of bootstrap draws whose verdict must agree with the estimate's
REL_WIDTH = 0.05  # the 95 % bootstrap interval of a judged p95, relative to the estimate


def stands_for(traffic: Traffic, routing: Routing) -> Routing:
    """The router whose simulation `routing`'s is on `traffic`, bit for bit: least-outstanding
    for a router in `GROUPED` that finds nothing it reads (session affinity on traffic without
    sessions, prefix-aware on traffic without block hashes: each sends every request to the
    least-loaded instance, lowest index on a tie, as least-outstanding does, and the engines
    see the same requests); `routing` itself otherwise. A point of such a router is
    least-outstanding's, settled by its rules (`MEAN_FIELD`), and simulated once."""
    if routing == "session_affinity" and not traffic.has_sessions:
        return "least_outstanding"
    if routing == "prefix_aware" and not traffic.has_shared_prompts:
        return "least_outstanding"
    return routing


def sub_indices(arrivals: int, instances: int, sampled: int) -> np.ndarray:
    """Arrival numbers that `sampled` of `instances` round-robin instances receive."""
    return np.flatnonzero(np.arange(arrivals) % instances < sampled)


def group_sub_indices(
    requests: Sequence[EngineRequest], instances: int, sampled: int
) -> np.ndarray:
    """Numbers of `requests` (in arrival order) whose shard is below `sampled` of `instances`:
    a session's shard is its number mod `instances` (all its turns together), a request
    without a session's its arrival number mod `instances`."""
    shards = np.array(
        [
            k if r.session_id is None else _session_number(r.session_id)
            for k, r in enumerate(requests)
        ],
        dtype=np.int64,
    )
    return np.flatnonzero(shards % instances < sampled)


def _session_number(session_id: str) -> int:
    """The stream numbers its sessions; any other id is hashed (stable across processes)."""
    return int(session_id) if session_id.isdigit() else zlib.crc32(session_id.encode())


def first_sample_size(arrivals: int, instances: int) -> int | None:
    """Instances to simulate first for a fleet of `instances` (None: simulate them all).

    At least `MIN_SAMPLED_INSTANCES` and enough for `MIN_SAMPLED_REQUESTS`; the whole fleet
    when that is more than half of it (the shortcut would save too little).
    """
    per_instance = max(1.0, arrivals / instances)
    k = max(MIN_SAMPLED_INSTANCES, math.ceil(MIN_SAMPLED_REQUESTS / per_instance))
    return k if 2 * k <= instances else None


def agree(smaller: FleetVerdict, larger: FleetVerdict) -> bool:
    """Whether a sub-fleet of 2k instances tells what one of k told: the same verdict, the
    attainment within `ATTAINMENT_GAP`, each p95 within `REL_WIDTH` of the larger's."""
    if smaller.meets_slo != larger.meets_slo:
        return False
    if abs(smaller.attainment - larger.attainment) > ATTAINMENT_GAP:
        return False
    for name in ("ttft_p95_s", "tpot_p95_s"):
        a, b = getattr(smaller, name), getattr(larger, name)
        if (a is None) != (b is None):
            return False
        if a is not None and abs(a - b) > REL_WIDTH * abs(b):
            return False
    return True


def regroup(run: FleetRun, chosen: np.ndarray) -> FleetRun:
    """`run`'s requests of the instances `chosen` (repeats allowed), as one run."""
    rows = np.concatenate([np.flatnonzero(run.instance == i) for i in chosen.tolist()])
    return FleetRun(
        instances=len(chosen),
        routing=run.routing,
        arrival_s=run.arrival_s[rows],
        ttft_s=run.ttft_s[rows],
        tpot_s=run.tpot_s[rows],
        e2e_s=run.e2e_s[rows],
        output_tokens=run.output_tokens[rows],
        instance=run.instance[rows],
        simulated_s=run.simulated_s,
        wall_s=0.0,
        steps=0,
    )


def bootstrap_agrees(
    run: FleetRun,
    verdict: FleetVerdict,
    judged: Callable[[FleetRun], FleetVerdict],
    rng: np.random.Generator,
) -> bool:
    """Whether a sub-fleet's verdict and p95s hold over draws of its instances (docstring)."""
    # Once more draws disagree than AGREEMENT allows, the answer is no: stop judging (each
    # judged draw is a verdict over the sub-fleet's requests, the bootstrap's cost).
    allowed = RESAMPLES - math.ceil(AGREEMENT * RESAMPLES - 1e-9)
    draws: list[FleetVerdict] = []
    disagree = 0
    for _ in range(RESAMPLES):
        draw = judged(regroup(run, rng.integers(run.instances, size=run.instances)))
        draws.append(draw)
        disagree += draw.meets_slo != verdict.meets_slo
        if disagree > allowed:
            # Draw the rest unused, so the generator moves on as a full bootstrap's would
            # (a later sub-fleet's draws stay those of the check without the early stop).
            rng.integers(run.instances, size=(RESAMPLES - len(draws), run.instances))
            return False
    if not verdict.meets_slo:
        # Only an `EXACT_SHARE` sub-fleet's miss is bootstrapped (a pessimistic router's
        # goes to the full fleet): its instances are a sample of the fleet's, and a miss
        # that 95 % of the draws give stands however wide its p95s' interval (an
        # overloaded fleet's p95 is as wide as its queue is long); its p95s are the
        # sub-fleet's.
        return True
    for name in ("ttft_p95_s", "tpot_p95_s"):
        estimate = getattr(verdict, name)
        values = [getattr(d, name) for d in draws]
        if estimate is None or any(v is None for v in values):
            continue
        lo, hi = np.percentile(np.array(values, dtype=float), [2.5, 97.5])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return False
        if max(estimate - lo, hi - estimate) > REL_WIDTH * abs(estimate):
            return False
    return True
