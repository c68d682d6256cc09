"""The engine model's per-instance limit: the limit search in virtual time, under the same
steady-state rules as a measured one.

`EngineProbe` holds a load level on one simulated instance (planner.fleet's simulator over
the profile's traffic, drawn by planner.fleet.traffic) as `capplan limit` holds it on a live
endpoint: the level is planned as long as the rules allow, the same
`planner.limit.measured.steady.assess` and AbandonRule are checked every `check_every_s` of virtual
time on what a client would know by then (the requests finished so far and the number in
flight), the level ends once steady (requests still running `drain_s` later count at their
age, as the load test cancels them), and the search (planner.limit.measured.search) judges the
records with the same verdict. So a predicted limit and a measured one differ only by what the
model gets wrong, not by how they were taken.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import polars as pl

from contracts.errors import ConfigError
from contracts.limit import Dimension, LimitResult
from planner.engine import EngineConfig, EngineRequest
from planner.fleet.sim import FleetRun, FleetSimulation, simulate_fleet
from planner.fleet.traffic import ArrivalKind, profile_requests
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.result import build_limit_result
from planner.limit.measured.search import run_search
from planner.limit.measured.steady import LevelState, SteadyRules, assess
from planner.limit.measured.steady_rows import RecordColumns, assess_rows
from planner.limit.probe import AbandonColumns, AbandonRule, LevelMeasurement
from planner.slo.spec import Slo
from profiles.model import Profile

# How far a paused level is simulated between looks at it (virtual seconds): at most this much
# is simulated past the stop; a snapshot of the records is taken each time.
WATCH_CHUNK_S = 20.0
# How often a copy of the paused run is saved (virtual seconds): a level stopped before its
# last arrival is simulated again from the last copy, not from its start.
SAVE_EVERY_S = 100.0


@dataclass(kw_only=True)
class EngineProbe:
    """A Probe over one simulated instance in virtual time (rate levels only).

    With `rules`, each level follows capplan limit's steady-state rules (see the module).
    Without (`rules=None`), each level is a fixed `level_s` of traffic whose first fifth is
    warm-up and whose every request is simulated to its end: quick and comparable between
    candidates (what-if grids), but not a steady-state verdict.
    """

    profile: Profile
    config: EngineConfig
    rules: SteadyRules | None
    slo: Slo
    arrival_kind: ArrivalKind = "poisson"
    drain_s: float = 10.0
    seed: int = 0
    check_every_s: float = 1.0
    level_s: float = 60.0  # the fixed level length when there are no rules
    # Virtual time only (what-if): a level at a rate too low for `max_level_s` to hold the
    # rules' `min_window_requests` runs until it can (`level_rules`); False keeps the live
    # search's 900 s, which judges such a level on the few requests it holds.
    hold_window_requests: bool = False
    save_every_s: float = SAVE_EVERY_S  # a copy of a paused level's run, this often
    levels: int = 0
    # What the levels replayed, for what-if figures: requests, prompt tokens, and prompt
    # tokens in blocks an earlier request of the same level had (prefix reuse).
    simulated_requests: int = 0
    prompt_tokens: int = 0
    shared_prompt_tokens: int = 0
    judged_by_load: dict[float, list[pl.DataFrame]] = field(default_factory=dict)

    def judged(self, load: float) -> pl.DataFrame:
        """Every judged request (after each run's warm-up) of a level; empty if never run."""
        frames = self.judged_by_load.get(load, [])
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        """Simulate one level until it is steady, hopeless or capped.

        The engine is causal (later arrivals never change what happened before them), so
        one run over every arrival up to the cap (`FleetSimulation`) is advanced
        `WATCH_CHUNK_S` at a time and watched on what is known by each check, until the
        watcher decides (a disaggregated unit, which cannot pause, is simulated over a
        doubling span until the watcher decides within it). A request still running at the stop
        would finish differently without the arrivals after it, so the level is simulated
        once more with only the arrivals before the stop (the load test stops sending there)
        unless that is every arrival; what runs past the drain is censored.
        """
        self.levels += 1
        rng = np.random.default_rng([self.seed, self.levels])
        if self.rules is None:
            return self._fixed_level(load, rng)
        rules = self.level_rules(load)
        cap_s = rules.max_level_s
        if abandon is not None and abandon.budget_s is not None:
            cap_s = min(cap_s, abandon.budget_s)  # judged as it stands at the budget
        requests = self._requests(load, cap_s, rng)
        arrivals = [r.arrival_s for r in requests]
        sim = self._simulation(requests)
        saved: FleetSimulation | None = None
        if sim is not None:
            stop_s, state, reason, saved = self._watch_run(
                sim, requests, arrivals, load, abandon, cap_s
            )
        else:
            span_s = min(cap_s, 2.0 * (rules.min_warmup_s + rules.min_window_s))
            while True:
                full = self._simulate(requests[: bisect.bisect_left(arrivals, span_s)])
                stop_s, state, reason, _ = self._watch(full, load, abandon, span_s)
                if stop_s < span_s or span_s >= cap_s:
                    break
                span_s = min(cap_s, 2.0 * span_s)
        sent = requests[: bisect.bisect_left(arrivals, stop_s)]
        self._count(sent)
        censor_at = stop_s if reason is not None else stop_s + self.drain_s
        if sim is not None and len(sent) == len(requests):
            sim.advance()  # the load test sent every request: the one run, to its end
            records = censor(self._records(sim.run(), requests), censor_at)
        elif saved is not None:  # the run as it stood before the stop, with no later arrival
            rest = saved.fork(len(sent))
            rest.advance()
            records = censor(self._records(rest.run(len(sent)), requests), censor_at)
        else:
            records = censor(self._simulate(sent), censor_at)
        if reason is not None or state is None:
            state = assess(
                records,
                start_s=0.0,
                now_s=stop_s,
                rate_rps=load,
                rules=rules,
                slo=self.slo,
            )
        return self._measured(
            load,
            records,
            stop_s,
            min(state.warmup_s, 0.5 * stop_s),
            abandoned=reason,
            unstable=state.unstable if state.capped else None,
            steady=state.evidence(),
        )

    def level_rules(self, load: float) -> SteadyRules:
        """The rules a level at `load` req/s runs under: `rules`, and with
        `hold_window_requests` a longest level of at least twice the time `load` takes to send
        `min_window_requests` (warm-up and window both fit), so that a low-rate level is judged
        on as many requests as any other, not on the dozen 900 s hold at 0.014 req/s."""
        assert self.rules is not None
        rules = self.rules
        if not self.hold_window_requests or load <= 0:
            return rules
        needed_s = 2.0 * rules.min_window_requests / load
        if needed_s <= rules.max_level_s:
            return rules
        return rules.model_copy(update={"max_level_s": needed_s})

    def _fixed_level(self, load: float, rng: np.random.Generator) -> LevelMeasurement:
        requests = self._requests(load, self.level_s, rng)
        self._count(requests)
        return self._measured(load, self._simulate(requests), self.level_s, 0.2 * self.level_s)

    def _requests(
        self, load: float, span_s: float, rng: np.random.Generator
    ) -> list[EngineRequest]:
        """The profile's requests at `load` over `span_s`, in arrival order."""
        return sorted(
            profile_requests(
                self.profile,
                load,
                span_s,
                rng,
                self.config.effective_max_model_len,
                self.arrival_kind,
                block_tokens=self.config.block_tokens,
            ),
            key=lambda r: r.arrival_s,
        )

    def _measured(
        self,
        load: float,
        records: pl.DataFrame,
        duration_s: float,
        warmup_s: float,
        *,
        abandoned: str | None = None,
        unstable: str | None = None,
        steady: str | None = None,
    ) -> LevelMeasurement:
        """The level's measurement; keeps its records after warm-up for the prediction."""
        self.judged_by_load.setdefault(load, []).append(
            records.filter(pl.col("intended_send_s") >= warmup_s)
        )
        return LevelMeasurement(
            load=load,
            stage=f"virtual-{self.levels:02d}",
            records=records,
            duration_s=duration_s,
            warmup_s=warmup_s,
            start_s=0.0,
            abandoned=abandoned,
            unstable=unstable,
            steady=steady,
        )

    def _simulate(self, requests: list[EngineRequest]) -> pl.DataFrame:
        """One instance serving `requests` (in arrival order), as load-test records."""
        if not requests:
            return simulated_records(*(np.zeros(0) for _ in range(4))).with_columns(
                pl.lit(None, dtype=pl.Int64).alias("input_tokens"),
                pl.lit(None, dtype=pl.Int64).alias("output_tokens"),
            )
        return self._records(simulate_fleet(requests, self.config, 1), requests)

    def _simulation(self, requests: list[EngineRequest]) -> FleetSimulation | None:
        """One instance's run over `requests` (in arrival order), to advance as the level
        is watched; None where the probe simulates something else: a subclass with a
        `_simulate` of its own (a disaggregated unit, a test's queue), whose levels are then
        simulated again over a doubling span, through that `_simulate`."""
        if type(self)._simulate is not EngineProbe._simulate:
            return None
        return FleetSimulation(requests, self.config, 1)

    @staticmethod
    def _records(run: FleetRun, requests: list[EngineRequest]) -> pl.DataFrame:
        """Load-test records of `run`, whose requests are the first ones of `requests`."""
        n = len(run.arrival_s)
        return simulated_records(run.arrival_s, run.ttft_s, run.e2e_s, run.tpot_s).with_columns(
            pl.Series("input_tokens", [r.prompt_tokens for r in requests[:n]], dtype=pl.Int64),
            pl.Series("output_tokens", run.output_tokens, dtype=pl.Int64),
        )

    def _count(self, requests: list[EngineRequest]) -> None:
        self.simulated_requests += len(requests)
        seen: set[int] = set()
        bt = self.config.block_tokens
        for r in requests:
            self.prompt_tokens += r.prompt_tokens
            self.shared_prompt_tokens += bt * sum(1 for h in r.block_hashes if h in seen)
            seen.update(r.block_hashes)

    def _watch_run(
        self,
        sim: FleetSimulation,
        requests: list[EngineRequest],
        arrivals: list[float],
        load: float,
        abandon: AbandonRule | None,
        cap_s: float,
    ) -> tuple[float, LevelState | None, str | None, FleetSimulation | None]:
        """Advance `sim` and watch it as a live watcher would, up to `cap_s`: (stop time,
        last state, abandon reason), as `watch_level` over the whole level would say, and
        a copy of the run saved before the stop (None: the stop came in the first
        `save_every_s`)."""
        state: LevelState | None = None
        saved: FleetSimulation | None = None
        next_s = self.check_every_s
        until_s = saved_s = 0.0
        while True:
            if until_s >= saved_s + self.save_every_s:
                saved, saved_s = sim.fork(len(requests)), until_s
            until_s = min(cap_s, until_s + WATCH_CHUNK_S)
            sim.advance(until_s)
            run = sim.run(bisect.bisect_left(arrivals, until_s))
            frame = partial(self._records, run, requests)  # built if a check needs it
            known = KnownRecords.of_run(run, self.slo, abandon, frame)
            stop_s, now, reason, next_s = self._watch(known, load, abandon, until_s, next_s)
            state = now if now is not None else state
            if reason is not None or (now is not None and now.done) or until_s >= cap_s:
                return stop_s, state, reason, saved

    def _watch(
        self,
        full: pl.DataFrame | KnownRecords,
        load: float,
        abandon: AbandonRule | None,
        span_s: float,
        first_s: float | None = None,
    ) -> tuple[float, LevelState | None, str | None, float]:
        return watch_level(full, self.level_rules(load), self.slo, abandon, span_s=span_s,
                           check_every_s=self.check_every_s, rate_rps=load,
                           first_s=first_s)  # fmt: skip


@dataclass(frozen=True)
class KnownRecords:
    """A level's records as a watcher reads them at every check, read once: the steady
    rules' columns, each request's end (NaN: never known) and send time, and the abandon
    rule's columns (None: it reads the frame, `columns.records`)."""

    columns: RecordColumns
    end_s: np.ndarray
    sent_s: np.ndarray
    tally: AbandonColumns | None

    @classmethod
    def of(cls, full: pl.DataFrame, slo: Slo, abandon: AbandonRule | None) -> KnownRecords:
        return cls(
            RecordColumns.of(full, slo),
            full["end_s"].cast(pl.Float64).to_numpy(),  # null -> NaN
            full["intended_send_s"].cast(pl.Float64).to_numpy(),
            AbandonColumns.of(full, abandon) if abandon is not None else None,
        )

    @classmethod
    def of_run(
        cls,
        run: FleetRun,
        slo: Slo,
        abandon: AbandonRule | None,
        frame_of: Callable[[], pl.DataFrame],
    ) -> KnownRecords:
        """`of(frame_of(), ...)` for the simulated records of `run` (`EngineProbe._records`),
        read from its arrays without building the frame unless a check needs it (the same
        values: tests/planner/limit/test_steady_rows.py)."""
        # Copies: a run's arrays may be views of a simulation that goes on (`frame_of` is
        # called, if at all, by the check it was made for, before the run moves on).
        arrival, ttft, e2e, tpot = (a.copy() for a in (run.arrival_s, run.ttft_s, run.e2e_s,
                                                        run.tpot_s))  # fmt: skip
        columns = RecordColumns.of_simulated(arrival, ttft, e2e, tpot, slo, frame_of)
        measured = {"ttft": ttft, "tpot": tpot, "e2e": e2e}
        tally = None
        if abandon is not None:
            tally = AbandonColumns.of_simulated(arrival, measured, abandon)
        return cls(columns, arrival + e2e, arrival, tally)


def watch_level(
    full: pl.DataFrame | KnownRecords,
    rules: SteadyRules,
    slo: Slo,
    abandon: AbandonRule | None,
    *,
    span_s: float,
    check_every_s: float,
    rate_rps: float | None,
    first_s: float | None = None,
) -> tuple[float, LevelState | None, str | None, float]:
    """Step through a simulated level (records of every request sent up to `span_s`, known
    at least up to `span_s`) as a live watcher would, every `check_every_s` (from `first_s`,
    by default `check_every_s`) on what a client knows by then: (stop time, last state,
    abandon reason, the next check); the stop is `span_s` when nothing was decided before
    it (then the state is None if no check fell in the span). `rate_rps`: the open level's
    rate; None: a closed one (users)."""
    state: LevelState | None = None
    t = check_every_s if first_s is None else first_s
    dimension: Dimension = "rate" if rate_rps is not None else "concurrency"
    # The records' columns are read once; each check selects the rows known by then (those
    # ended, for the verdict; those sent, for the in-flight series) with numpy.
    known = full if isinstance(full, KnownRecords) else KnownRecords.of(full, slo, abandon)
    columns, end_s, sent_s, tally = known.columns, known.end_s, known.sent_s, known.tally
    while t <= span_s + 1e-9:
        known_rows = np.flatnonzero(end_s <= t)
        grid = np.arange(0.0, t + 1e-9, 0.5)
        counts = columns.in_flight(np.flatnonzero(sent_s <= t), 0.0, t)
        state = assess_rows(columns, known_rows, start_s=0.0, now_s=t, rate_rps=rate_rps,
                            rules=rules, slo=slo, in_flight=(grid, counts))  # fmt: skip
        reason = None
        if abandon is not None:
            duration_s = rules.min_warmup_s + max(rules.min_window_s, state.window_s)
            warmup_s, load = rules.min_warmup_s, rate_rps or 0.0
            if tally is None:
                reason = abandon.hopeless(columns.records[known_rows], now_s=t, start_s=0.0,
                                          duration_s=duration_s, warmup_s=warmup_s, load=load,
                                          dimension=dimension)  # fmt: skip
            else:
                reason = abandon.hopeless_rows(tally, known_rows, now_s=t, start_s=0.0,
                                               duration_s=duration_s, warmup_s=warmup_s,
                                               load=load, dimension=dimension)  # fmt: skip
        if reason is not None:
            return t, state, reason, t
        if state.done:
            return t, state, None, t
        t += check_every_s
    return span_s, state, None, t


def simulated_records(
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


def censor(records: pl.DataFrame, at_s: float) -> pl.DataFrame:
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

    Runs `planner.limit.measured.search` against `EngineProbe` with `rules` in virtual time.
    `drain_s` defaults to the SLO's longest wait plus one second (as `capplan limit`). Raises
    ConfigError for a concurrency search (the virtual probe holds rates).
    """
    if search.dimension != "rate":
        raise ConfigError("the engine model's prediction searches rates (req/s) only")
    longest = search.slo.longest_wait_s
    if drain_s is None:
        drain_s = longest + 1.0 if longest is not None else 10.0
    probe = EngineProbe(
        profile=profile,
        config=config,
        rules=rules,
        slo=search.slo,
        arrival_kind=arrival_kind,
        drain_s=drain_s,
        seed=seed,
    )
    result = run_search(probe, search)
    return build_limit_result(result, target="engine model (virtual time)", model=config.model.name)
