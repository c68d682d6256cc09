"""The engine model's per-instance limit: the limit search in virtual time, under the same
steady-state rules as a measured one.

`EngineProbe` holds a load level on one simulated instance (planner.fleet's simulator over
the profile's traffic) as `capplan limit` holds it on a live endpoint: the level is planned
as long as the rules allow, the same `planner.steady.assess` and AbandonRule are checked
every `check_every_s` of virtual time on what a client would know by then (the requests
finished so far and the number in flight), the level ends once steady (requests still
running `drain_s` later count at their age, as the load test cancels them), and the search
(planner.search) judges the records with the same verdict. So a predicted limit and a
measured one differ only by what the model gets wrong, not by how they were taken.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from planner.engine import EngineConfig
from planner.errors import ConfigError
from planner.fleet import ArrivalKind, profile_requests, simulate_fleet
from planner.limit_schema import LimitResult
from planner.search import (
    AbandonRule,
    LevelMeasurement,
    SearchConfig,
    build_limit_result,
    run_search,
)
from planner.slo import Slo
from planner.steady import LevelState, SteadyRules, assess, in_flight_series
from profiles.model import Profile


@dataclass
class EngineProbe:
    """A Probe over one simulated instance in virtual time (rate levels only)."""

    profile: Profile
    config: EngineConfig
    rules: SteadyRules
    slo: Slo
    arrival_kind: ArrivalKind = "poisson"
    drain_s: float = 10.0
    seed: int = 0
    check_every_s: float = 1.0
    levels: int = 0

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        """Simulate one level until it is steady, hopeless or capped."""
        self.levels += 1
        rng = np.random.default_rng([self.seed, self.levels])
        span_s = self.rules.max_level_s
        requests = profile_requests(
            self.profile,
            load,
            span_s,
            rng,
            self.config.effective_max_model_len,
            self.arrival_kind,
            block_tokens=self.config.block_tokens,
        )
        run = simulate_fleet(requests, self.config, 1)
        full = _records(run.arrival_s, run.ttft_s, run.e2e_s, run.tpot_s)
        stop_s, state, reason = self._watch(full, load, abandon)
        censor_at = stop_s if reason is not None else stop_s + self.drain_s
        records = _censor(full.filter(pl.col("intended_send_s") < stop_s), censor_at)
        if reason is not None or state is None:
            state = assess(
                records,
                start_s=0.0,
                now_s=stop_s,
                rate_rps=load,
                rules=self.rules,
                slo=self.slo,
            )
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

    def _watch(
        self, full: pl.DataFrame, load: float, abandon: AbandonRule | None
    ) -> tuple[float, LevelState | None, str | None]:
        """Step through the level as a watcher would: (stop time, last state, abandon reason)."""
        span_s = self.rules.max_level_s
        state: LevelState | None = None
        t = self.check_every_s
        while t <= span_s + 1e-9:
            known = full.filter(pl.col("end_s") <= t)
            grid, counts = in_flight_series(full.filter(pl.col("intended_send_s") <= t), 0.0, t)
            state = assess(
                known,
                start_s=0.0,
                now_s=t,
                rate_rps=load,
                rules=self.rules,
                slo=self.slo,
                in_flight=(grid, counts),
            )
            reason = None
            if abandon is not None:
                reason = abandon.hopeless(
                    known,
                    now_s=t,
                    start_s=0.0,
                    duration_s=self.rules.min_warmup_s
                    + max(self.rules.min_window_s, state.window_s),
                    warmup_s=self.rules.min_warmup_s,
                    load=load,
                    dimension="rate",
                )
            if reason is not None:
                return t, state, reason
            if state.done:
                return t, state, None
            t += self.check_every_s
        return span_s, state, None


def _records(
    arrival_s: np.ndarray, ttft_s: np.ndarray, e2e_s: np.ndarray, tpot_s: np.ndarray
) -> pl.DataFrame:
    """Simulated requests as load-test records (sent when scheduled: no client lag)."""
    first = arrival_s + ttft_s
    end = arrival_s + e2e_s
    return pl.DataFrame(
        {
            "intended_send_s": arrival_s,
            "sent_s": arrival_s,
            "first_token_s": first,
            "end_s": end,
            "ttft_s": ttft_s,
            "tpot_s": tpot_s,
            "e2e_s": e2e_s,
            "ok": ~np.isnan(e2e_s),
        },
        nan_to_null=True,
    ).with_columns(pl.lit(None, dtype=pl.Utf8).alias("error_class"))


def _censor(records: pl.DataFrame, at_s: float) -> pl.DataFrame:
    """Requests still running at `at_s` become `cancelled` rows ending there (the load test
    cancels what is in flight when its drain ends); a first token before then is kept."""
    running = pl.col("end_s").is_null() | (pl.col("end_s") > at_s)
    got_first = pl.col("first_token_s") <= at_s
    return records.with_columns(
        pl.when(running).then(pl.lit(False)).otherwise(pl.col("ok")).alias("ok"),
        pl.when(running)
        .then(pl.lit("cancelled"))
        .otherwise(pl.col("error_class"))
        .alias("error_class"),
        pl.when(running & ~got_first).then(None).otherwise(pl.col("ttft_s")).alias("ttft_s"),
        pl.when(running & ~got_first)
        .then(None)
        .otherwise(pl.col("first_token_s"))
        .alias("first_token_s"),
        pl.when(running).then(None).otherwise(pl.col("e2e_s")).alias("e2e_s"),
        pl.when(running).then(None).otherwise(pl.col("tpot_s")).alias("tpot_s"),
        pl.when(running).then(pl.lit(at_s)).otherwise(pl.col("end_s")).alias("end_s"),
    )


def predict_limit(
    profile: Profile,
    config: EngineConfig,
    search: SearchConfig,
    rules: SteadyRules,
    *,
    arrival_kind: ArrivalKind = "poisson",
    drain_s: float | None = None,
    seed: int = 0,
) -> LimitResult:
    """The per-instance rate limit the engine model predicts, as limit.json's contract.

    Runs `planner.search` against `EngineProbe` with `rules` in virtual time. `drain_s`
    defaults to the SLO's longest wait plus one second (as `capplan limit`). Raises
    ConfigError for a concurrency search (the virtual probe holds rates).
    """
    if search.dimension != "rate":
        raise ConfigError("the engine model's prediction searches rates (req/s) only")
    longest = search.slo.longest_wait_s
    if drain_s is None:
        drain_s = longest + 1.0 if longest is not None else 10.0
    probe = EngineProbe(
        profile, config, rules, search.slo, arrival_kind=arrival_kind, drain_s=drain_s, seed=seed
    )
    result = run_search(probe, search)
    return build_limit_result(result, target="engine model (virtual time)", model=config.model.name)
