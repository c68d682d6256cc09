"""The limit search against a slot queue in virtual time: capplan's search and steady-state
rules (planner.limit.measured.search, planner.limit.measured.steady, planner.limit.predict's probe)
holding levels on a simulated copy of the slot test server (testkit/slot_server.py), so that many
searches can be checked against the queueing truth (testkit/queue_truth.py) in seconds each.

The queue here is simulated on its own terms — c FCFS slots, or a loss system that refuses
beyond c active — with service times drawn like the slot server's (prefill + tokens x
per-token time); only the arrivals come from capplan's traffic generator (Poisson at the
level's rate). The truth knows nothing of the search.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from planner.engine import EngineRequest, build_engine_config
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.search import run_search
from planner.limit.measured.steady import SteadyRules
from planner.limit.predict import EngineProbe, simulated_records
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile
from testkit.queue_truth import fcfs_waits


@dataclass(frozen=True)
class SlotQueue:
    """c slots with a first token after `prefill_s` and `tokens` (LO, HI, uniform) answers of
    `per_token_s` each; `refuse`: refuse arrivals while c are active (else they queue)."""

    slots: int
    prefill_s: float
    per_token_s: float
    tokens: tuple[int, int]
    refuse: bool = False

    def service_times(self, rng: np.random.Generator, n: int) -> np.ndarray:
        low, high = self.tokens
        return self.prefill_s + rng.integers(low, high + 1, n) * self.per_token_s

    def serve(self, arrival_s: np.ndarray, service_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(TTFT, E2E) of each arrival in order; NaN for a refused one."""
        if self.refuse:
            ttft = np.full(arrival_s.size, np.nan)
            e2e = np.full(arrival_s.size, np.nan)
            active: list[float] = []
            for i, (t, s) in enumerate(zip(arrival_s.tolist(), service_s.tolist(), strict=True)):
                while active and active[0] <= t:
                    heapq.heappop(active)
                if len(active) < self.slots:
                    heapq.heappush(active, t + s)
                    ttft[i], e2e[i] = self.prefill_s, s
            return ttft, e2e
        wait = fcfs_waits(arrival_s, service_s, self.slots)
        return wait + self.prefill_s, wait + service_s


@dataclass(kw_only=True)
class SlotQueueProbe(EngineProbe):
    """EngineProbe whose instance is a SlotQueue instead of the engine model."""

    queue: SlotQueue = field(default_factory=lambda: SlotQueue(8, 0.05, 0.01, (32, 96)))
    _service: np.ndarray = field(default_factory=lambda: np.zeros(0))
    took_s: float = 0.0  # virtual seconds the levels ran, drains included

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        # One service time per request of the level, by arrival order: the growing spans the
        # probe simulates see the same requests the same way.
        rng = np.random.default_rng([self.seed, self.levels + 1, 7])
        cap_s = self.rules.max_level_s if self.rules is not None else self.level_s
        self._service = self.queue.service_times(rng, int(load * cap_s * 2) + 1000)
        measurement = super().measure(load, abandon=abandon)
        self.took_s += measurement.duration_s + self.drain_s
        return measurement

    def _simulate(self, requests: list[EngineRequest]) -> pl.DataFrame:
        arrival = np.array([r.arrival_s for r in requests], dtype=float)
        ttft, e2e = self.queue.serve(arrival, self._service[: arrival.size])
        records = simulated_records(
            arrival, ttft, e2e, np.full(arrival.size, self.queue.per_token_s)
        )
        if not self.queue.refuse:
            return records
        # A refusal is an immediate HTTP 429, as the load test records it (class `refused`):
        # over at once, not a request still running when the window closes.
        refused = pl.col("e2e_s").is_null()
        return records.with_columns(
            pl.when(refused).then(pl.col("sent_s")).otherwise(pl.col("end_s")).alias("end_s"),
            pl.when(refused)
            .then(pl.lit("refused"))
            .otherwise(pl.col("error_class"))
            .alias("error_class"),
        )


def search_slot_queue(
    queue: SlotQueue,
    slo: str,
    *,
    start_rps: float,
    rules: SteadyRules | None = None,
    seed: int = 0,
    search: dict[str, object] | None = None,
) -> tuple[float | None, float]:
    """(the limit the search finds on `queue`, the virtual seconds its levels took)."""
    parsed = parse_slo(slo)
    rules = rules or SteadyRules()
    longest = parsed.longest_wait_s or 10.0
    probe = SlotQueueProbe(
        profile=preset_profile("chat"),
        config=build_engine_config("H100-80GB", "llama-3.1-8b"),  # unused: the queue serves
        rules=rules,
        slo=parsed,
        drain_s=longest + 1.0,
        seed=seed,
        check_every_s=1.0,
        queue=queue,
    )
    config = SearchConfig(
        slo=parsed,
        dimension="rate",
        start=start_rps,
        seed=seed,
        **({"max_pooled_s": rules.max_level_s} | (search or {})),  # type: ignore[arg-type]
    )
    result = run_search(probe, config)
    return result.feasible_max, probe.took_s
