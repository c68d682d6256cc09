"""capplan's measured search on users, holding closed-loop levels on a simulated slot server
(testkit/sim_server.py) in virtual time: the concurrency counterpart of
testkit/fast_truth.py's SpecProbe, used by bench/limit_concurrency_truth.py.

A level is `users` clients that each send again as soon as their answer ends (a refused one
`RETRY_S` later), as locustfiles/driver.py runs a closed stage. It is watched as a live level
is (planner.limit.measured.steady.assess and the AbandonRule every `check_every_s` on what a client
knows by then), stops once steady, hopeless or capped, and what runs past the drain is
cancelled. A closed loop is causal: what was sent before a time does not depend on what
was sent after it, so the level is simulated over a doubling span until the watcher decides
within it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from planner.limit.measured.steady import SteadyRules, assess
from planner.limit.predict import censor, watch_level
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import Slo
from testkit.fast_driver import RETRY_S
from testkit.sim_server import ServerSpec, SimServer


def closed_level(spec: ServerSpec, users: int, span_s: float, seed: list[int]) -> pl.DataFrame:
    """Records of `users` closed-loop clients on a fresh server, sending until `span_s`, every
    request run to its end."""
    server = SimServer(spec)
    rng = np.random.default_rng(seed)
    ids: list[int] = []
    retries: list[float] = []

    def send() -> None:
        rid = len(ids)
        ids.append(rid)
        server.arrive(rid, int(spec.draw_tokens(rng, 1)[0]))
        if rid in server.refused:
            retries.append(server.now + RETRY_S)

    for _ in range(users):
        send()
    while server.now < span_s:
        horizon = min([span_s, server.now + 1.0, *retries])
        ended = server.advance(horizon, first_end=True)
        due = [t for t in retries if t <= server.now]
        retries[:] = [t for t in retries if t > server.now]
        for _ in range(len(ended) + len(due)):
            if server.now < span_s:
                send()
    server.drain()
    records = server.records(ids)
    return records.with_columns(
        pl.col("sent_s").alias("intended_send_s"),
        (pl.col("sent_s") + pl.col("ttft_s")).alias("first_token_s"),
        pl.col("end_s").fill_null(pl.col("sent_s")),
    )


@dataclass
class ClosedProbe:
    """A Probe of closed-loop levels (load: users) on `spec`; `took_s` adds up each level's
    seconds and its drain, as a live search spends them."""

    spec: ServerSpec
    rules: SteadyRules
    slo: Slo
    drain_s: float
    seed: int = 0
    check_every_s: float = 1.0
    levels: int = 0
    took_s: float = 0.0

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        self.levels += 1
        users = max(1, round(load))
        rules = self.rules
        span_s = min(rules.max_level_s, 2.0 * (rules.min_warmup_s + rules.min_window_s))
        while True:
            full = closed_level(self.spec, users, span_s, [self.seed, self.levels, 11])
            stop_s, state, reason = watch_level(
                full, rules, self.slo, abandon, span_s=span_s,
                check_every_s=self.check_every_s, rate_rps=None,
            )  # fmt: skip
            if stop_s < span_s or span_s >= rules.max_level_s:
                break
            span_s = min(rules.max_level_s, 2.0 * span_s)
        censor_at = stop_s if reason is not None else stop_s + self.drain_s
        records = censor(full.filter(pl.col("sent_s") < stop_s), censor_at)
        if reason is not None or state is None:
            state = assess(records, start_s=0.0, now_s=stop_s, rate_rps=None, rules=rules,
                           slo=self.slo)  # fmt: skip
        self.took_s += stop_s + self.drain_s
        return LevelMeasurement(
            load=load,
            stage=f"virtual-{self.levels:02d}",
            records=records,
            duration_s=stop_s,
            warmup_s=min(state.warmup_s, 0.5 * stop_s),
            start_s=0.0,
            abandoned=reason,
            unstable=state.unstable if state.capped else None,
            steady=state.evidence(),
        )
