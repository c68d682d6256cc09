"""The per-instance SLO-limit search: which load (req/s or users) still meets the SLO.

Pure: the search never runs load itself. It is a generator (`limit_search`) that yields the
next load level and is sent back the `LevelMeasurement` a `Probe` took there — Locust
against a real endpoint, the fleet simulator, or a fake in tests — so one loop serves them
all (`run_search` drives it). It brackets exponentially from a start level until a level
fails, then narrows: the crossing of each constraint is interpolated on an isotonic fit of
the constraint's value against load (bisection as the fallback and safeguard), until the
highest passing and the lowest failing level are within a relative tolerance.

Noise handling: each level is measured once; the two levels the answer rests on (the highest
pass and the lowest fail) are measured again, up to `max_repeats` times and while their runs
total under `max_pooled_s`, and pooled while their verdict sits inside the bootstrap
intervals or a pass has fewer than `min_completed` completed requests — a flipped verdict
reopens the search. A probe may stop a level early
when `AbandonRule` finds it hopeless (the error rate, or requests already past a latency
threshold because the queue grows); a level where half of the requests failed never passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import polars as pl
from sklearn.isotonic import IsotonicRegression

from contracts.errors import RunError
from planner.limit.measured.config import HELD_ANSWER, SearchConfig
from planner.limit.measured.levels import abandonable_again, hold_levels, snap_load
from planner.limit.measured.steady import correlation_requests
from planner.limit.probe import LevelMeasurement, Probe
from planner.slo.spec import Slo
from planner.slo.verdict import TIME_COLUMNS, SloEvaluation, evaluate, exclude_warmup


@dataclass(frozen=True, kw_only=True)
class LevelOutcome:
    """One level after its measurements were pooled and judged.

    `certain`: the verdict holds across the bootstrap intervals and, for a pass, enough
    requests completed; `settled`: it will not be measured again (certain, abandoned, or out
    of repeats). `unstable`: it never settled (a fail); `invalid`: the load generator could
    not offer the load (not a pass, and no verdict on the endpoint).
    """

    load: float
    stages: tuple[str, ...]
    evaluation: SloEvaluation
    passed: bool
    certain: bool
    settled: bool
    abandoned: str | None = None
    unstable: str | None = None
    invalid: str | None = None
    steady: str | None = None

    @property
    def verdict(self) -> Literal["pass", "fail", "invalid"]:
        if self.invalid is not None:
            return "invalid"
        return "pass" if self.passed else "fail"

    @property
    def repeats(self) -> int:
        return len(self.stages) - 1


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    config: SearchConfig
    levels: tuple[LevelOutcome, ...]
    feasible_max: float | None
    infeasible_min: float | None
    stopped: str = ""
    # the levels held SearchConfig.answered between a certain pass and a fail one step apart
    held_answer: bool = False

    @property
    def interrupted(self) -> bool:
        return self.stopped == "interrupted"

    def outcome(self, load: float | None) -> LevelOutcome | None:
        if load is None:
            return None
        return next((o for o in self.levels if o.load == load), None)

    @property
    def binding(self) -> str | None:
        """The constraint that fails first above the limit (least headroom where it fails)."""
        failing = self.outcome(self.infeasible_min)
        if failing is not None:
            violated = [c for c in failing.evaluation.constraints if not c.passed]
            if violated:
                return min(violated, key=lambda c: c.headroom).name
        passing = self.outcome(self.feasible_max)
        return passing.evaluation.binding if passing is not None else None


def _pool(measurements: list[LevelMeasurement]) -> tuple[pl.DataFrame, float]:
    frames = [exclude_warmup(m.records, m.warmup_s, start_s=m.start_s) for m in measurements]
    duration_s = sum(max(m.duration_s - m.warmup_s, 1e-9) for m in measurements)
    return pl.concat(frames, how="diagonal_relaxed"), duration_s


def judge_level(
    config: SearchConfig,
    load: float,
    measurements: list[LevelMeasurement],
    rng: np.random.Generator,
    *,
    time_capped: bool = False,
) -> LevelOutcome:
    """Pool a level's measurements and judge them against the SLO.

    A run stopped early as hopeless holds partial records (its in-flight requests were
    cancelled), so once the level has a full run, only full runs are pooled. `time_capped`:
    only `max_pooled_s` ends the level's repeats, not `max_repeats` (where it is not 0).
    """
    full = [m for m in measurements if m.abandoned is None]
    records, duration_s = _pool(full or measurements)
    block = None
    if config.correlated_blocks:
        block = _correlated_block(records, config.slo)
    evaluation = evaluate(
        records,
        config.slo,
        duration_s=duration_s,
        rng=rng,
        resamples=config.resamples,
        confidence=config.confidence,
        block=block,
    )
    stages = tuple(m.stage for m in measurements)
    steady = measurements[-1].steady
    lag_p99 = evaluation.metrics.get("schedule_lag_p99_s")
    bound = config.slo.lag_bound_s
    if full and lag_p99 is not None and bound is not None:
        allowed = config.max_lag_share * bound
        if lag_p99 > allowed:
            invalid = (
                f"the load generator fell behind its schedule: lag p99 {lag_p99 * 1000:.0f} ms "
                f"> {allowed * 1000:.0f} ms ({config.max_lag_share:g} x the tightest TTFT or "
                "E2E threshold); add load-generator processes (--workers N)"
            )
            return _settled_fail(load, stages, evaluation, steady, invalid=invalid)
    unstable = next((m.unstable for m in full if m.unstable), None)
    if unstable is not None:
        return _settled_fail(load, stages, evaluation, steady, unstable=unstable)
    abandoned = None if full else measurements[-1].abandoned
    failing_errors = (evaluation.error_rate or 0.0) >= config.abandon_error_rate
    if abandoned is None and failing_errors:
        # A level where most requests fail must not pass on its few survivors, whatever the
        # SLO says about errors (success-only percentiles would let it).
        abandoned = (
            f"{evaluation.errors} of {evaluation.scheduled} requests failed "
            f"(>= {config.abandon_error_rate:.0%})"
        )
    if abandoned is not None:
        # Certain when the partial records already fail beyond their bootstrap interval
        # (far above the limit); a level stopped near the limit is measured again if it
        # ends up deciding the answer.
        certain = (
            failing_errors
            or evaluation.completed == 0
            or (not evaluation.passed and evaluation.certain)
        )
        settled = certain or _out_of_runs(config, measurements, time_capped)
        return LevelOutcome(
            load=load,
            stages=stages,
            evaluation=evaluation,
            passed=False,
            certain=certain,
            abandoned=abandoned,
            settled=settled,
            steady=steady,
        )
    thin = evaluation.passed and evaluation.completed < config.min_completed
    certain = evaluation.certain and not thin
    settled = certain or _out_of_runs(config, measurements, time_capped)
    passed = evaluation.passed
    if config.certain_pass and passed and settled and not certain:
        passed = False
    return LevelOutcome(
        load=load,
        stages=stages,
        evaluation=evaluation,
        passed=passed,
        certain=certain,
        settled=settled,
        steady=steady,
    )


def _settled_fail(
    load: float,
    stages: tuple[str, ...],
    evaluation: SloEvaluation,
    steady: str | None,
    *,
    invalid: str | None = None,
    unstable: str | None = None,
) -> LevelOutcome:
    """A level that is over whatever more it is measured: invalid or unstable."""
    return LevelOutcome(
        load=load,
        stages=stages,
        evaluation=evaluation,
        passed=False,
        certain=True,
        settled=True,
        invalid=invalid,
        unstable=unstable,
        steady=steady,
    )


def _out_of_runs(
    config: SearchConfig, measurements: list[LevelMeasurement], time_capped: bool = False
) -> bool:
    """No more runs of this level: `max_repeats` done (unless `time_capped` and repeats are
    allowed at all, with a time cap to end them), or its runs total `max_pooled_s`."""
    by_time = time_capped and config.max_repeats > 0 and config.max_pooled_s is not None
    if len(measurements) > config.max_repeats and not by_time:
        return True
    held_s = sum(m.duration_s for m in measurements)
    return config.max_pooled_s is not None and held_s >= config.max_pooled_s


def _correlated_block(records: pl.DataFrame, slo: Slo) -> int | None:
    """Bootstrap blocks of twice the latencies' correlation time in requests (at least
    sqrt(n)): a queue's busy periods stay whole inside a block."""
    time_col = next((c for c in TIME_COLUMNS if c in records.columns), None)
    if time_col is None or records.height < 2:
        return None
    tau = correlation_requests(records.sort(time_col, nulls_last=True), slo)
    return max(math.ceil(math.sqrt(records.height)), math.ceil(2.0 * tau))


def _crossing_estimate(
    outcomes: dict[float, LevelOutcome], slo: Slo, lo: float, hi: float
) -> float | None:
    """Lowest load in (lo, hi) where a constraint's isotonic fit crosses its threshold."""
    loads = np.array(sorted(outcomes))
    estimates: list[float] = []
    for name in slo.constraint_names:
        xs: list[float] = []
        ys: list[float] = []
        higher_is_better = False
        for load in loads:
            result = outcomes[float(load)].evaluation.constraint(name)
            higher_is_better = result.higher_is_better
            if result.value is None:
                continue
            xs.append(float(load))
            # A percentile reached by failures is +inf: far above any threshold will do.
            ys.append(min(result.value, 1e6 * max(result.threshold, 1e-9)))
        if len(xs) < 2:
            continue
        threshold = outcomes[float(loads[0])].evaluation.constraint(name).threshold
        fit = IsotonicRegression(increasing=not higher_is_better, out_of_bounds="clip")
        fitted = fit.fit_transform(np.array(xs), np.array(ys))
        if higher_is_better:
            excess = threshold - np.asarray(fitted)  # > 0 fails
        elif threshold > 0:
            # Latency climbs like a queue's 1 / (1 - load / capacity): interpolating its
            # logarithm follows the curve's bend far better than a straight chord.
            excess = np.log(np.maximum(np.asarray(fitted), 1e-12) / threshold)
        else:
            excess = np.asarray(fitted) - threshold
        for i in range(len(xs) - 1):
            if excess[i] <= 0 < excess[i + 1]:
                x0, x1 = xs[i], xs[i + 1]
                crossing = x0 + (x1 - x0) * (-excess[i]) / (excess[i + 1] - excess[i])
                if lo < crossing < hi:
                    estimates.append(crossing)
                break
    return min(estimates) if estimates else None


class _StopSearch(Exception):
    """Thrown into the search generator to end it early (Ctrl-C)."""


def limit_search(
    config: SearchConfig,
    *,
    on_level: Callable[[LevelOutcome], None] | None = None,
) -> Generator[float, LevelMeasurement, SearchResult]:
    """The search as a generator: yields the next load, is sent its LevelMeasurement.

    Returns (as StopIteration.value) the SearchResult; `on_level` is told each level's
    outcome after every measurement of it. Each level is measured once when first visited;
    only the levels that end up deciding the answer (the highest pass and the lowest fail)
    are measured again, while their verdict is uncertain or too thin, up to
    `max_repeats` times — a flip reopens the search.
    """
    rng = np.random.default_rng(config.seed)
    integer = config.dimension == "concurrency"
    measured: dict[float, list[LevelMeasurement]] = {}
    outcomes: dict[float, LevelOutcome] = {}
    order: list[float] = []
    holds = hold_levels(config)
    hold = holds[0] if holds else None
    given_up: set[float] = set()  # hold levels not certain within their budget: no verdict

    def snap(load: float, upward: bool) -> float:
        return snap_load(config, load, upward)

    def take(load: float) -> Generator[float, LevelMeasurement, LevelOutcome]:
        measurement = yield load
        measured.setdefault(load, []).append(measurement)
        if load not in outcomes:
            order.append(load)
        # the level that must hold a fast answer with certainty is worth its whole time cap:
        # given up uncertain, it sends the search below it to a certain pass further down
        capped = load in holds
        outcomes[load] = judge_level(config, load, measured[load], rng, time_capped=capped)
        if on_level is not None:
            on_level(outcomes[load])
        return outcomes[load]

    def bounds() -> tuple[float | None, float | None]:
        judged = {x: o for x, o in outcomes.items() if x not in given_up}
        fails = [x for x, o in judged.items() if not o.passed]
        hi = min(fails) if fails else None
        passes = [x for x, o in judged.items() if o.passed and (hi is None or x < hi)]
        return (max(passes) if passes else None), hi

    def holds_answer(lo: float, hi: float) -> bool:
        answered = config.answered
        step = config.growth * (1 + 1e-3)  # levels are snapped to 4 significant digits
        # a lower hold level the search stepped down to holds it below with a wider gap
        top = max(lo, holds[0]) if lo in holds else lo
        return answered is not None and lo <= answered < hi and hi <= top * step

    def step_down(load: float) -> float | None:
        """The next hold level when `load`, a hold level, is uncertain after its budget."""
        budget_s = config.hold_budget_s
        if budget_s is None or load != hold or outcomes[load].certain:
            return None
        if sum(m.duration_s for m in measured[load]) < budget_s * (1 - 1e-6):
            return None
        lower = holds.index(load) + 1
        return holds[lower] if lower < len(holds) else None

    def converged(lo: float, hi: float) -> bool:
        if integer:
            return hi - lo <= max(1.0, math.floor(config.tolerance * lo))
        return hi - lo <= config.tolerance * lo

    def narrow(lo: float, hi: float, interpolate: bool, last_passed: bool | None) -> float | None:
        gap = hi - lo
        midpoint = (lo + hi) / 2
        candidate = midpoint
        if config.narrowing == "isotonic" and interpolate:
            estimate = _crossing_estimate(outcomes, config.slo, lo, hi)
            if estimate is not None:
                # Probe just below or above the estimate so that two good guesses close the
                # gap; aim for the side that is farther from its end of the bracket.
                width = 0.4 * config.tolerance * estimate
                below, above = estimate - width, estimate + width
                if last_passed is None:
                    candidate = below if below - lo >= hi - above else above
                else:
                    candidate = above if last_passed else below
                candidate = min(max(candidate, lo + 0.05 * gap), hi - 0.05 * gap)
        candidate = snap(candidate, upward=candidate >= midpoint)
        if lo < candidate < hi and candidate not in outcomes:
            return candidate
        candidate = snap(midpoint, upward=False)
        if lo < candidate < hi and candidate not in outcomes:
            return candidate
        return None  # whole users: nothing left between them

    def result(lo: float | None, hi: float | None, stopped: str) -> SearchResult:
        return SearchResult(
            config=config,
            levels=tuple(outcomes[x] for x in order),
            feasible_max=lo,
            infeasible_min=hi,
            stopped=stopped,
            held_answer=stopped.startswith(HELD_ANSWER),
        )

    try:
        yield from take(snap(config.start, upward=True))
        slow_steps = 0
        last_passed: bool | None = None
        while True:
            # The level that must hold a fast answer is run again while it does not pass and
            # is not settled, before the search looks below it: an unlucky run there (stopped
            # early by a burst, or a loss server's refusals bunched above the SLO's share)
            # sent the search down three to five levels before its repeats held it after all
            # (bench/search_truth.py --method default: 10-46 virtual minutes a seed).
            if hold is not None and not (outcomes[hold].passed or outcomes[hold].settled):
                lower = step_down(hold)
                if lower is not None:
                    given_up.add(hold)
                    hold = lower
                yield from take(hold)
                continue
            lo, hi = bounds()
            nxt: float | None = None
            stopped = ""
            if lo is not None and hi is not None and holds_answer(lo, hi):
                stopped = f"{HELD_ANSWER} {config.answered:g} between {lo:g} and {hi:g}"
            elif lo is not None and hi is not None and converged(lo, hi):
                stopped = "converged"
            elif len(outcomes) >= config.max_levels:
                stopped = f"stopped at {config.max_levels} levels"
            elif hi is None:
                assert lo is not None
                if lo >= config.max_load:
                    stopped = f"passed at the maximum load {config.max_load:g}"
                else:
                    nxt = snap(lo * config.growth, upward=True)
                    if nxt <= lo:
                        nxt = snap(lo + 1, upward=True)
            elif lo is None:
                nxt = snap(hi / config.growth, upward=False)
                if nxt >= hi or hi <= config.lowest:
                    stopped = f"failed at the lowest load {hi:g}"
                    nxt = None
            else:
                nxt = narrow(lo, hi, slow_steps < 2, last_passed)
                if nxt is None:
                    stopped = "converged"
            if nxt is None:
                # Before answering, settle the two levels the answer rests on; an answer held
                # between them needs its pass certain, and a fail above it (a queue that an
                # overloaded level grows fails it early, as hopeless, before it is certain)
                held = stopped.startswith(HELD_ANSWER)
                ends = (lo,) if held else (lo, hi)
                end = next((x for x in ends if x is not None and not outcomes[x].settled), None)
                if end is None:
                    return result(lo, hi, stopped)
                lower = step_down(end)
                if lower is not None:  # the answer's hold level, uncertain after its budget
                    given_up.add(end)
                    hold = end = lower
                yield from take(end)
                continue
            gap_before = (hi - lo) if lo is not None and hi is not None else None
            outcome = yield from take(nxt)
            last_passed = outcome.passed
            lo_after, hi_after = bounds()
            if gap_before is not None and lo_after is not None and hi_after is not None:
                shrunk = hi_after - lo_after <= 0.6 * gap_before
                slow_steps = 0 if shrunk or slow_steps >= 2 else slow_steps + 1
    except _StopSearch:
        return result(*bounds(), "interrupted")


def run_search(
    probe: Probe,
    config: SearchConfig,
    *,
    on_level: Callable[[LevelOutcome], None] | None = None,
) -> SearchResult:
    """Drive `limit_search` with `probe`; `on_level` is told each judged level.

    Only a level's first run may be abandoned early. Ctrl-C while a level runs ends the
    search with the levels judged so far (`SearchResult.interrupted`); the caller decides
    whether to re-raise. Raises RunError when the probe measures a different load than
    asked.
    """
    search = limit_search(config, on_level=on_level)
    rule = config.abandon_rule()
    runs: dict[float, list[LevelMeasurement]] = {}
    budgeted = hold_levels(config)[:-1]  # the lowest hold level is pooled as before
    try:
        load = next(search)
        while True:
            # A level measured again is settling a close verdict: hold it to its end (but a
            # fast answer's hold level, stopped early on every run so far, may stop early).
            before = runs.setdefault(load, [])
            first = not before or abandonable_again(config, load, before)
            abandon = rule if first else None
            if load in budgeted and config.hold_budget_s is not None:
                left_s = config.hold_budget_s - sum(m.duration_s for m in before)
                abandon = replace(abandon or rule, budget_s=max(left_s, 1.0),
                                  hopeless_checks=first)  # fmt: skip
            try:
                measurement = probe.measure(load, abandon=abandon)
            except KeyboardInterrupt:
                # Keep what was measured: the search answers from the levels it has.
                search.throw(_StopSearch())
            if not math.isclose(measurement.load, load, rel_tol=1e-9):
                raise RunError(f"probe measured load {measurement.load}, asked for {load}")
            before.append(measurement)
            load = search.send(measurement)
    except StopIteration as stop:
        final: SearchResult = stop.value
        return final
