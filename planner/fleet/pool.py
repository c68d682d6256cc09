"""Fleet points simulated side by side, one worker process per core, for the fleet check.

Every point of a fleet check (a fleet size and a routing) replays the same requests, so the
points are independent. `FleetPool.prefetch` simulates a batch of them on up to `workers`
spawned processes (each given the requests once, at its start) and keeps the results;
`FleetPool.measured` returns a kept one, or simulates it here. A check with few requests runs
in this process alone: starting a worker costs about a second, more than such a point.
`CAPPLAN_FLEET_WORKERS` sets the number of workers (1: none). With a Dask executor
(`planner.fleet.executor`) every point runs on the cluster instead. Results are kept for the
check's length, and a router that stands for another on the check's traffic
(`planner.fleet.sample.stands_for`) is given that router's point under its own name.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from contracts.errors import ConfigError
from contracts.executor import LOCAL, ExecutorSpec
from contracts.plan import FleetPoint
from planner.engine import EngineConfig, EngineRequest
from planner.fleet.bound import proven_miss
from planner.fleet.executor import DaskPoints, result_of, start_local, stop_local
from planner.fleet.rest import RestOfFleet
from planner.fleet.routing import Routing, RoutingSettings
from planner.fleet.sample import (
    EXACT_SHARE,
    GROUPED,
    MEAN_FIELD,
    SYMMETRIC,
    agree,
    bootstrap_agrees,
    first_sample_size,
    group_sub_indices,
    stands_for,
    sub_indices,
)
from planner.fleet.sim import FleetRun, FleetSimulation, FleetVerdict, judge, simulate_fleet
from planner.fleet.traffic import Traffic
from planner.slo.spec import Slo

# Below this many requests a point takes well under a second: workers would cost more.
MIN_PARALLEL_REQUESTS = 5000
MAX_WORKERS = 8
WORKERS_ENV = "CAPPLAN_FLEET_WORKERS"


@dataclass(frozen=True)
class FleetJob:
    """What every point of one check shares: the traffic, the engine, the router, the SLO.

    With `shortcut`, a point under a router that treats instances alike simulates a few
    instances' share of the traffic (`planner.fleet.sample`) where the bound holds.
    """

    traffic: Traffic
    config: EngineConfig
    settings: RoutingSettings | None
    slo: Slo
    warmup_s: float
    shortcut: bool = True
    seed: int = 0
    # Sizes whose points are settled whatever it costs (the bounds, else the full fleet);
    # None: every size. Any other size's point (a router-count search's) whose bound does
    # not hold on its first sub-fleet takes that sub-fleet's verdict, unsettled.
    settle_sizes: frozenset[int] | None = None


@dataclass(frozen=True)
class Measured:
    """One simulated point and the wall time its simulation took (the progress line);
    `same_as`: the router whose point it is, simulated once for both (`sample.stands_for`)."""

    point: FleetPoint
    wall_s: float
    same_as: Routing | None = None


def measure(job: FleetJob, size: int, routing: Routing) -> Measured:
    """Simulate `job`'s traffic against `size` instances routed by `routing`, and judge it.

    With the job's shortcut and a router in `SYMMETRIC` (or `GROUPED`: whole sessions), k of
    the `size` instances are simulated with their share of the arrivals, k doubling until the
    bound holds (`planner.fleet.sample`: the bootstrap, and for a router outside `EXACT_SHARE`
    and `MEAN_FIELD` the same verdict and p95s as the sub-fleet of k/2); the whole fleet when
    k would pass half of it. A sub-fleet's miss stands at once when the capacity bound proves
    that `size` instances miss under any router (`planner.fleet.bound`). A size outside the
    job's `settle_sizes` stops at its first sub-fleet instead, unsettled.
    """
    wall0 = time.perf_counter()
    arrivals = len(job.traffic.arrival_s)
    sampled = first_sample_size(arrivals, size) if job.shortcut else None
    rng = np.random.default_rng([job.seed, size, 0x5A])
    smaller: FleetVerdict | None = None
    while sampled is not None and routing in SYMMETRIC | GROUPED:
        run = _sub_fleet_run(job, routing, size, sampled)
        verdict = judge(run, job.slo, job.warmup_s)
        if not verdict.meets_slo and proven_miss(
            job.traffic.arrival_s, size, run, job.slo, job.warmup_s
        ):
            # More load than `size` instances serve: a miss under every router
            # (`planner.fleet.bound`), so neither the bootstrap nor the full fleet is needed.
            return _measured(size, routing, run, verdict, sampled, wall0)
        exact = routing in EXACT_SHARE
        # Elsewhere a "meets" holds for the fleet once the rest of the fleet is modelled
        # (`MEAN_FIELD`) or the sub-fleet of k/2 agrees, and a "misses" is left to the
        # larger sub-fleets and the full simulation.
        settled = exact or (
            verdict.meets_slo
            and (routing in MEAN_FIELD or (smaller is not None and agree(smaller, verdict)))
        )
        if settled and bootstrap_agrees(
            run, verdict, lambda r: judge(r, job.slo, job.warmup_s), rng
        ):
            return _measured(size, routing, run, verdict, sampled, wall0)
        smaller = verdict
        if job.settle_sizes is not None and size not in job.settle_sizes:
            # A router-count search point: near the fewest count no sub-fleet settles one (n
            # and n-1 differ by less than the sampling error) and the full fleet costs
            # minutes a point at 4,000 req/s, so the first sub-fleet's verdict is taken.
            return _measured(size, routing, run, verdict, sampled, wall0, settled=False)
        sampled = 2 * sampled if 4 * sampled <= size else None
    run = simulate_fleet(job.traffic.all_requests(), job.config, size, routing, job.settings)
    return _measured(size, routing, run, judge(run, job.slo, job.warmup_s), None, wall0)


def _sub_fleet_run(job: FleetJob, routing: Routing, size: int, sampled: int) -> FleetRun:
    """`sampled` of `size` instances simulated: under a router in `MEAN_FIELD`, routed
    every arrival together with the rest of the fleet (`planner.fleet.rest`); under any
    other, fed their share of the arrivals (`_sub_fleet_requests`)."""
    if routing not in MEAN_FIELD:
        requests = _sub_fleet_requests(job, routing, size, sampled)
        return simulate_fleet(requests, job.config, sampled, routing, job.settings)
    traffic = job.traffic
    rng = np.random.default_rng([job.seed, size, sampled, 0x5B])  # the rest's completions
    rest = RestOfFleet(traffic.arrival_s, size, sampled, traffic.request_maker(), rng)
    sim = FleetSimulation([], job.config, sampled, routing, job.settings, rest=rest)
    sim.advance()
    return sim.run()


def _sub_fleet_requests(
    job: FleetJob, routing: Routing, size: int, sampled: int
) -> list[EngineRequest]:
    """The requests `sampled` of `size` instances receive: their round-robin share, or their
    whole sessions under a router in `GROUPED` (`planner.fleet.sample`; without sessions
    the shards are the round-robin share's, whose shapes are quicker to make)."""
    if routing in GROUPED and job.traffic.has_sessions:
        every = job.traffic.all_requests()
        return [every[k] for k in group_sub_indices(every, size, sampled).tolist()]
    return job.traffic.sub_requests(sub_indices(len(job.traffic.arrival_s), size, sampled))


def _measured(
    size: int,
    routing: Routing,
    run: FleetRun,
    verdict: FleetVerdict,
    sampled: int | None,
    wall0: float,
    settled: bool = True,
) -> Measured:
    point = FleetPoint(
        instances=size,
        routing=routing,
        attainment=verdict.attainment,
        ttft_p95_s=verdict.ttft_p95_s,
        tpot_p95_s=verdict.tpot_p95_s,
        e2e_p95_s=verdict.e2e_p95_s,
        meets_slo=verdict.meets_slo,
        requests=verdict.requests,
        prefix_hit_ratio=run.prefix_hit_ratio,
        sampled_instances=sampled,
        settled=settled,
    )
    return Measured(point, time.perf_counter() - wall0)


def workers_wanted(requests: int) -> int:
    """Worker processes for a check of `requests`: one per core (at most `MAX_WORKERS`), none
    for a small check, or `CAPPLAN_FLEET_WORKERS`. Raises ConfigError for a value that is not
    a count."""
    return parallel_workers(requests >= MIN_PARALLEL_REQUESTS)


def parallel_workers(worth_it: bool) -> int:
    """`CAPPLAN_FLEET_WORKERS` when set, else one worker per core (at most `MAX_WORKERS`) when
    the work is `worth_it` (it outweighs starting them), else 1. Raises ConfigError for a
    value that is not a count."""
    text = os.environ.get(WORKERS_ENV)
    if text is not None:
        try:
            wanted = int(text)
        except ValueError:
            wanted = 0
        if wanted < 1:
            raise ConfigError(f"{WORKERS_ENV}={text!r}: expected a whole number >= 1")
        return wanted
    if not worth_it:
        return 1
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


_JOB: FleetJob | None = None


def _start_worker(job: FleetJob) -> None:
    global _JOB
    _JOB = job


def _in_worker(size: int, routing: Routing) -> Measured:
    assert _JOB is not None, "the worker was started without its job"
    return measure(_JOB, size, routing)


class FleetPool:
    """Points of one fleet check, simulated by workers ahead of need or here on demand.

    `report` is called with each point as it is used, in the order the check asks for them.
    Use it as a context manager: the workers end with it, at once when it is left by an
    exception (Ctrl-C, SIGTERM: `planner.fleet.executor.stop_local`).
    """

    def __init__(
        self,
        job: FleetJob,
        workers: int,
        report: Callable[[Measured], None] | None = None,
        executor: ExecutorSpec = LOCAL,
    ) -> None:
        self.job = job
        self.report = report
        self._pending: dict[tuple[int, Routing], Future[Measured]] = {}
        self._executor: ProcessPoolExecutor | None = None
        self._dask = DaskPoints(executor, job) if executor.kind == "dask" else None
        self.workers = self._dask.workers() if self._dask is not None else workers
        if workers > 1 and self._dask is None:
            self._executor = start_local(workers, _start_worker, job)

    def __enter__(self) -> FleetPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._dask is not None:
            self._dask.close(at_once=exc_type is not None)
        if self._executor is not None:
            stop_local(self._executor, at_once=exc_type is not None)

    def _key(self, size: int, routing: Routing) -> tuple[int, Routing]:
        """The point simulated for (size, routing): a router that stands for another on the
        job's traffic (`planner.fleet.sample.stands_for`) shares that router's point."""
        return size, stands_for(self.job.traffic, routing)

    def prefetch(self, wanted: Iterable[tuple[int, Routing]]) -> None:
        """Start simulating these points on the workers (nothing without workers)."""
        for size, routing in wanted:
            key = self._key(size, routing)
            if size < 1 or key in self._pending:
                continue
            if self._dask is not None:
                self._pending[key] = self._dask.submit(measure, *key)
            elif self._executor is not None:
                self._pending[key] = self._executor.submit(_in_worker, *key)

    def measured(self, size: int, routing: Routing) -> Measured:
        """The point's result: a prefetched or earlier one (waiting for it), else simulated
        here (or on the Dask cluster, when the pool has one). Results are kept: a router
        that stands for another gets that router's point under its own name."""
        key = self._key(size, routing)
        if self._dask is not None:
            self.prefetch([key])
        future = self._pending.get(key)
        if future is None:
            future = Future()
            future.set_result(measure(self.job, *key))
            self._pending[key] = future
        got = result_of(future)
        if key[1] != routing:
            point = got.point.model_copy(update={"routing": routing})
            got = Measured(point, got.wall_s, same_as=key[1])
        if self.report is not None:
            self.report(got)
        return got
