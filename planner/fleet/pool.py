"""Fleet points simulated side by side, one worker process per core, for the fleet check.

Every point of a fleet check (a fleet size and a routing) replays the same requests, so the
points are independent. `FleetPool.prefetch` simulates a batch of them on up to `workers`
spawned processes (each given the requests once, at its start) and keeps the results;
`FleetPool.measured` returns a kept one, or simulates it here. A check with few requests runs
in this process alone: starting a worker costs about a second, more than such a point.
`CAPPLAN_FLEET_WORKERS` sets the number of workers (1: none).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from contracts.errors import ConfigError
from contracts.plan import FleetPoint
from planner.engine import EngineConfig, EngineRequest
from planner.fleet.routing import Routing, RoutingSettings
from planner.fleet.sim import judge, simulate_fleet
from planner.slo.spec import Slo

# Below this many requests a point takes well under a second: workers would cost more.
MIN_PARALLEL_REQUESTS = 5000
MAX_WORKERS = 8
WORKERS_ENV = "CAPPLAN_FLEET_WORKERS"


@dataclass(frozen=True)
class FleetJob:
    """What every point of one check shares: the requests, the engine, the router, the SLO."""

    requests: Sequence[EngineRequest]
    config: EngineConfig
    settings: RoutingSettings | None
    slo: Slo
    warmup_s: float


@dataclass(frozen=True)
class Measured:
    """One simulated point and the wall time its simulation took (the progress line)."""

    point: FleetPoint
    wall_s: float


def measure(job: FleetJob, size: int, routing: Routing) -> Measured:
    """Simulate `job`'s requests against `size` instances routed by `routing`, and judge it."""
    run = simulate_fleet(job.requests, job.config, size, routing, job.settings)
    verdict = judge(run, job.slo, job.warmup_s)
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
    )
    return Measured(point, run.wall_s)


def workers_wanted(requests: int) -> int:
    """Worker processes for a check of `requests`: one per core (at most `MAX_WORKERS`), none
    for a small check, or `CAPPLAN_FLEET_WORKERS`. Raises ConfigError for a value that is not
    a count."""
    text = os.environ.get(WORKERS_ENV)
    if text is not None:
        try:
            wanted = int(text)
        except ValueError:
            wanted = 0
        if wanted < 1:
            raise ConfigError(f"{WORKERS_ENV}={text!r}: expected a whole number >= 1")
        return wanted
    if requests < MIN_PARALLEL_REQUESTS:
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
    Use it as a context manager: the workers end with it.
    """

    def __init__(
        self, job: FleetJob, workers: int, report: Callable[[Measured], None] | None = None
    ) -> None:
        self.job = job
        self.report = report
        self._pending: dict[tuple[int, Routing], Future[Measured]] = {}
        self._executor: ProcessPoolExecutor | None = None
        if workers > 1:
            self._executor = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(job,),
            )

    def __enter__(self) -> FleetPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def prefetch(self, wanted: Iterable[tuple[int, Routing]]) -> None:
        """Start simulating these points on the workers (nothing without workers)."""
        if self._executor is None:
            return
        for key in wanted:
            if key[0] >= 1 and key not in self._pending:
                self._pending[key] = self._executor.submit(_in_worker, *key)

    def measured(self, size: int, routing: Routing) -> Measured:
        """The point's result: a prefetched one (waiting for it), else simulated here."""
        future = self._pending.pop((size, routing), None)
        got = future.result() if future is not None else measure(self.job, size, routing)
        if self.report is not None:
            self.report(got)
        return got
