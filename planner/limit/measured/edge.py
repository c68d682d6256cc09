"""The measured search's I/O edge: run the pure search (planner.limit.measured.search) through a
probe, print one progress line per level, write limit.json (contracts.limit.LimitResult) and record
the burst check's recovery in it. `capplan limit`'s methods (planner.limit.methods) run their
measured levels here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

from contracts.errors import RunError
from contracts.limit import LIMIT_FILE, LimitResult, write_limit
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.progress import measured_left, progress_note
from planner.limit.measured.result import build_limit_result
from planner.limit.measured.search import LevelOutcome, run_search
from planner.limit.probe import Probe
from planner.loadtest.preflight import nothing_succeeded
from planner.slo.spec import format_duration, format_share
from planner.slo.verdict import ConstraintResult

Echo = Callable[[str], None]


def _format_value(result: ConstraintResult) -> str:
    value = result.value
    if value is None:
        return "n/a"
    if value == math.inf:
        return "inf"  # failed requests reach the percentile
    if result.name in ("errors", "attainment"):
        return f"{value * 100:.3g}%"
    return f"{value * 1000:.3g}ms" if value < 1.0 else f"{value:.3g}s"


def _format_threshold(result: ConstraintResult) -> str:
    if result.name in ("errors", "attainment"):
        return format_share(result.threshold).replace(" ", "")
    return format_duration(result.threshold).replace(" ", "")


def format_level(index: int, outcome: LevelOutcome, config: SearchConfig, note: str = "") -> str:
    """One progress line after run `index`: the level's load, its (pooled) verdict — '?'
    when within the noise — each constraint against its threshold, goodput, then `note`
    (the elapsed time and the estimate of the time left, planner.limit.measured.progress)."""
    evaluation = outcome.evaluation
    load = f"{outcome.load:g} req/s" if config.dimension == "rate" else f"{outcome.load:g} users"
    verdict = {"pass": "pass", "fail": "FAIL", "invalid": "INVALID"}[outcome.verdict]
    if not outcome.certain:
        verdict += "?"
    parts = [f"run {index:2d}  {load:>12}  {verdict:5}"]
    for c in evaluation.constraints:
        op = ">=" if c.higher_is_better else "<="
        parts.append(f"{c.name} {_format_value(c)} {op} {_format_threshold(c)}")
    parts.append(f"goodput {evaluation.goodput_rps:.3g} req/s")
    parts.append(f"{evaluation.completed}/{evaluation.scheduled} ok")
    if outcome.repeats:
        parts.append(f"{len(outcome.stages)} runs pooled")
    if outcome.abandoned:
        parts.append(f"abandoned: {outcome.abandoned}")
    if outcome.unstable:
        parts.append(f"unstable: {outcome.unstable}")
    if outcome.invalid:
        parts.append(outcome.invalid)
    elif outcome.steady:
        parts.append(f"[{outcome.steady}]")
    if note:
        parts.append(note)
    return "  ".join(parts)


def search_limit(
    probe: Probe,
    config: SearchConfig,
    out_dir: Path,
    *,
    target: str = "",
    model: str = "",
    profile_digest: str = "",
    verify: Callable[[LimitResult], float | None] | None = None,
    echo: Echo = print,
    clock: Callable[[], float] = time.perf_counter,
    time_scale: float = 1.0,
    answered_before: bool = False,
    announce: bool = True,
    recorded: Callable[[], bool] = lambda: False,
    started_s: float | None = None,
) -> LimitResult:
    """Run the search with `probe`, print a line per level, write and return limit.json;
    `announce`: print its sentence (the caller prints its own when False).

    `verify`, when given, is called with the result once the limit is known and returns the
    recovery time in seconds (None when the endpoint did not recover); it is recorded in
    limit.json. Raises RunError when the search measured nothing, FailedRunError (exit 3) as
    soon as a level ends without one successful request while none has succeeded before: a
    target that fails everything (a wrong model, a dead endpoint) has no limit to search for.
    `answered_before`: the target answered before this search (the fast search's steps), so
    a first level where nothing ended in time is overloaded, not dead. Each line ends with
    the elapsed time on `clock` and the estimate of the time left; `recorded()` true: the
    level was answered from the run's log (a resumed run), and its line says so.
    `started_s`: when the command's search began on `clock` (the fast search's start, when
    this search takes over from it; None: now): the elapsed time and limit.json's wall_s
    count from it, the time a level takes from this search's own start.
    """
    own_start = clock()
    started = own_start if started_s is None else started_s
    count = 0
    seen_success = answered_before
    judged: dict[float, LevelOutcome] = {}

    def on_level(outcome: LevelOutcome) -> None:
        nonlocal count, seen_success
        count += 1
        judged[outcome.load] = outcome
        elapsed_s = clock() - started
        left = measured_left(judged, config)
        note = progress_note(elapsed_s, left, (clock() - own_start) / count)
        echo(format_level(count, outcome, config, note) + ("  (recorded)" if recorded() else ""))
        ev = outcome.evaluation
        seen_success = seen_success or ev.completed > 0
        if not seen_success and ev.scheduled:
            raise nothing_succeeded(
                f" at level {outcome.load:g}", ev.scheduled, ev.errors, ev.errors_by_class, {}
            )

    result = run_search(probe, config, on_level=on_level)
    if not result.levels:
        if result.interrupted:
            raise KeyboardInterrupt
        raise RunError("the limit search measured no level")
    limit = build_limit_result(
        result,
        target=target,
        model=model,
        profile_digest=profile_digest,
        wall_s=clock() - started,
        time_scale=time_scale,
    )
    write_limit(limit, out_dir / LIMIT_FILE)
    if result.interrupted:
        echo(limit.sentence)
        raise KeyboardInterrupt  # limit.json holds the levels measured so far
    if verify is not None:
        limit = verified(limit, verify, out_dir, wall_s=lambda: clock() - started)
    if announce:
        echo(limit.sentence)
    return limit


def verified(
    limit: LimitResult,
    verify: Callable[[LimitResult], float | None],
    out_dir: Path,
    *,
    wall_s: Callable[[], float],
) -> LimitResult:
    """limit.json with the burst check's recovery time (None: did not recover), rewritten."""
    if limit.feasible_max is None:
        return limit
    recovery_s = verify(limit)
    limit = limit.model_copy(
        update={"recovery_s": recovery_s, "recovered": recovery_s is not None, "wall_s": wall_s()}
    )
    write_limit(limit, out_dir / LIMIT_FILE)
    return limit
