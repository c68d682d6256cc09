"""`capplan limit` orchestration: run the limit search through a probe and write limit.json.

The search itself is pure (planner.limit.search); this module is the I/O edge: it drives a probe
(planner.limit.live.LocustProbe runs each level as a one-stage load test against a live
endpoint, appending to one run directory), prints one progress line per level, optionally
verifies the limit with a steady-burst-recovery run, and writes `limit.json`
(contracts.limit.LimitResult).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from contracts.errors import ConfigError, RunError
from contracts.jsonio import first_error
from contracts.limit import LIMIT_FILE, LimitResult, write_limit
from contracts.rundir import holds_run
from locustfiles.arrivals import validate_arrival
from locustfiles.stages import builtin_plan
from planner.capacity.floor import check_floor
from planner.limit.config import SearchConfig
from planner.limit.fast.engine_model import CURVE_REQUESTS, asked_sizes, known_engine
from planner.limit.fast.live import LiveDriver, run_fast_search
from planner.limit.fast.result import fast_limit_result, seeded
from planner.limit.fast.steps import FastConfig
from planner.limit.held import FastAnswer, with_fast
from planner.limit.ledger import ReplayDriver, ReplayProbe, SearchLedger, last_index
from planner.limit.live import LocustProbe
from planner.limit.options import LimitOptions
from planner.limit.probe import Probe
from planner.limit.progress import measured_left, progress_note
from planner.limit.result import build_limit_result
from planner.limit.search import LevelOutcome, run_search
from planner.loadtest.preflight import nothing_succeeded
from planner.loadtest.run import LoadTestConfig, check_out_dir, config_profile, run_loadtest
from planner.slo.spec import format_duration, format_share
from planner.slo.verdict import ConstraintResult
from profiles.model import Profile

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
    (the elapsed time and the estimate of the time left, planner.limit.progress)."""
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
    """
    started = clock()
    count = 0
    seen_success = answered_before
    judged: dict[float, LevelOutcome] = {}

    def on_level(outcome: LevelOutcome) -> None:
        nonlocal count, seen_success
        count += 1
        judged[outcome.load] = outcome
        elapsed_s = clock() - started
        left = measured_left(judged, config)
        note = progress_note(elapsed_s, left, elapsed_s / count)
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
        limit = _verified(limit, verify, out_dir, wall_s=lambda: clock() - started)
    if announce:
        echo(limit.sentence)
    return limit


def _verified(
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


# --------------------------------------------------------------------------- live endpoint


def _verify_burst(
    options: LimitOptions, config: LoadTestConfig, profile: Profile, echo: Echo
) -> Callable[[LimitResult], float | None]:
    # The recovery stage is half the steady one and recovery is read on a 10 s rolling
    # window, so the steady stage must be long enough for a drained queue to show:
    # 4 levels' worth, at least a minute (the plan's default 120 s for 30 s levels).
    steady_s = options.verify_steady_s or max(4 * options.level_duration_s, 60.0)

    def verify(limit: LimitResult) -> float | None:
        assert limit.feasible_max is not None
        if options.dimension == "rate":
            # Steady at the load whose 10 s peak (the profile's peak-to-mean) reaches the limit,
            # so the built-in burst -- twice that peak -- is twice the limit; recovery at half
            # the steady load. Steadying at the limit itself would burst to 2 x p2m x limit.
            peak_to_mean = max(1.0, profile.arrivals.peak_to_mean.get("10s", 1.0) or 1.0)
            plan = builtin_plan(
                "steady-burst-recovery",
                profile,
                rate_rps=limit.feasible_max / peak_to_mean,
                duration_s=steady_s,
            )
        else:
            plan = builtin_plan(
                "steady-burst-recovery",
                profile,
                users=max(1, int(round(limit.feasible_max))),
                duration_s=steady_s,
            )
        echo(f"verifying: steady-burst-recovery around {limit.feasible_max:g}")
        summaries = run_loadtest(config, plan, options.out_dir, append=True, profile=profile)
        recovery = next((s for s in summaries if s.role == "recovery"), None)
        if recovery is None or not recovery.recovered:
            echo("verify: the endpoint did not recover within the recovery stage")
            return None
        echo(f"verify: recovered {recovery.recovery_s:.1f} s after the burst")
        return recovery.recovery_s

    return verify


def run_limit(
    options: LimitOptions,
    *,
    echo: Echo = print,
    check_target: Callable[[LimitOptions], str] | None = None,
    resume: bool = False,
) -> LimitResult:
    """Find the per-instance SLO limit of a live endpoint; writes `<out_dir>/limit.json`.

    `check_target`, once every option is valid and before any load, checks the endpoint and
    returns the model to send (planner.loadtest.preflight.checked_model; its errors propagate).
    The search logs every step as it ends (search.json, planner.limit.ledger); `resume`
    continues the search logged in `out_dir`, replaying its finished steps, when `options`
    are the ones it ran with (planner.limit.options.recorded_options).
    Raises BelowFloorError (planner.capacity.floor) before any load when the server's engine
    is known (`options.engine`) and the SLO is below what its idle instance achieves;
    ConfigError for a bad SLO or option, for an out_dir that holds a run (unless
    `resume`) and for a resumed run that is not the same search; InputError when `resume`
    finds no search there; RunError/TargetError when the load test cannot run,
    FailedRunError when no request of the first levels succeeded.
    """
    slo = options.slo
    if options.level_duration_s <= 0:
        raise ConfigError(f"--level-duration must be > 0 s, got {options.level_duration_s}")
    if options.time_scale <= 0:
        raise ConfigError(f"--time-scale must be > 0, got {options.time_scale}")
    if options.warmup_s is not None and options.warmup_s < 0:
        raise ConfigError(f"--warmup must be >= 0 s, got {options.warmup_s}")
    try:
        rules = options.rules()
    except ValidationError as err:
        raise ConfigError(f"level timing: {first_error(err)}") from err
    default_start = 1.0
    search_config = SearchConfig(
        slo=slo,
        dimension=options.dimension,
        start=options.start if options.start is not None else default_start,
        max_load=options.max_load if options.max_load is not None else 4096.0,
        tolerance=options.tolerance,
        min_completed=options.min_completed,
        max_repeats=options.max_repeats,
        max_pooled_s=rules.max_level_s,  # a deciding level's runs, all together
        hold_budget_s=options.hold_budget_s,
        max_levels=options.max_levels,
        growth=options.growth,
        seed=options.seed,
    )
    if options.arrival == "replay":
        raise ConfigError(
            "--arrival replay cannot hold a chosen rate; use poisson, constant or gamma:K"
        )
    validate_arrival(options.arrival)
    check_out_dir(Path(options.out_dir))
    if not resume and holds_run(options.out_dir):
        raise ConfigError(
            f"-o {options.out_dir}: already holds a run; continue its search with "
            f"`capplan limit --resume {options.out_dir}` or choose another folder"
        )
    # After a level ends, in-flight requests get as long as the SLO's longest wait: past it
    # a request still running is a known miss, so censoring it at its age decides nothing.
    longest = slo.longest_wait_s
    drain_s = options.drain_s
    if drain_s is None:
        drain_s = longest + 1.0 if longest is not None else max(options.level_duration_s, 10.0)
    config = LoadTestConfig(
        host=options.host,
        model=options.model,
        endpoint=options.endpoint,
        profile_path=options.profile,
        api_key_env=options.api_key_env,
        seed=options.seed,
        workers=options.workers,
        master_bind=options.master_bind,
        expect_workers=options.expect_workers,
        slo_ttft_s=slo.ttft_bound_s,
        slo=options.slo,
        drain_s=drain_s,
        time_scale=options.time_scale,
    )
    profile, _ = config_profile(config)
    if options.engine is not None:  # the server's engine is known (--calibration, the demo)
        check_floor(options.engine, profile, slo)  # an SLO below its idle floor: no search
    resumed = _resumed(options, profile, echo) if resume else None  # checked before any load
    if check_target is not None:
        options = replace(options, model=check_target(options))
        config = config.model_copy(update={"model": options.model})
    ledger = resumed or _fresh(options, profile)
    verify = _verify_burst(options, config, profile, echo) if options.verify_burst else None
    fast: FastAnswer | None = None
    if options.method == "fast":
        fast = _fast_search(options, config, search_config, profile, echo, ledger)
        search_config = seeded(search_config, fast.result, echo)
    probe = LocustProbe(
        config,
        options.out_dir,
        dimension=options.dimension,
        rules=rules,
        slo=slo,
        arrival=options.arrival,
        append=fast is not None or resume,
        profile=profile,
        echo=echo,
    )
    probe.levels = last_index(options.out_dir, ["level"])  # a resumed run: after its last
    try:
        limit = search_limit(
            ReplayProbe(ledger, probe),
            search_config,
            options.out_dir,
            target=options.host,
            model=options.model,
            profile_digest=profile.digest(),
            verify=verify if fast is None else None,
            echo=echo,
            time_scale=options.time_scale,
            answered_before=fast is not None and fast.result.model is not None,
            announce=fast is None,
            clock=ledger.clock,
            recorded=lambda: ledger.replaying,
        )
    except KeyboardInterrupt:
        if fast is not None and fast.limit is not None:  # the fast answer, not yet bracketed
            stopped = f"{fast.limit.stopped}; interrupted in the measured levels around it"
            kept = fast.limit.model_copy(
                update={"stopped": stopped, "unconfirmed": _unheld(fast.limit, search_config)}
            )
            write_limit(kept, options.out_dir / LIMIT_FILE)
        raise
    if fast is not None:
        limit = with_fast(limit, fast, search_config)
        write_limit(limit, options.out_dir / LIMIT_FILE)
        if verify is not None:
            limit = _verified(limit, verify, options.out_dir, wall_s=fast.wall_s)
        echo(limit.sentence)
    ledger.finish()
    return limit


def _unheld(limit: LimitResult, config: SearchConfig) -> str:
    """Why a fast answer stopped before its measured levels ended is unconfirmed."""
    hold = f"{config.start:g} req/s (must hold)"
    fail = f"{config.start * config.growth:.4g} req/s (must fail)"
    return (
        f"interrupted before the measured levels held the fast answer "
        f"{limit.feasible_max:g} req/s: {hold} and {fail} were not both judged"
    )


def _fresh(options: LimitOptions, profile: Profile) -> SearchLedger:
    """A new search.json for the run (the model is the one the preflight found)."""
    options.out_dir.mkdir(parents=True, exist_ok=True)
    identity = options.identity(profile.digest())
    return SearchLedger.fresh(options.out_dir, identity, options.recorded())


def _resumed(options: LimitOptions, profile: Profile, echo: Echo) -> SearchLedger:
    """The run's search.json to continue, checked to be the same search (endpoint, model,
    profile digest, SLO and the options that shape its levels)."""
    identity = options.identity(profile.digest())
    ledger = SearchLedger.resumed(options.out_dir, identity, options.recorded())
    echo(ledger.resume_line())
    return ledger


def _fast_search(
    options: LimitOptions,
    config: LoadTestConfig,
    search_config: SearchConfig,
    profile: Profile,
    echo: Echo,
    ledger: SearchLedger,
) -> FastAnswer:
    """Characterise, predict, confirm, correct (planner.limit.fast) on the live endpoint; its
    limit.json when the model was adequate (written: a Ctrl-C in the measured levels that
    follow keeps it)."""
    started = ledger.clock()
    live = LiveDriver(
        config, options.out_dir, arrival=options.arrival, profile=profile, echo=echo,
        append=holds_run(options.out_dir),  # a resumed run's
    )  # fmt: skip
    live.stages = last_index(options.out_dir, ["characterise", "confirm"])  # a resumed run's
    driver = ReplayDriver(ledger, live)
    # --level-duration sets the confirmation chunks and a third of it the closed-loop steps
    known, asked = None, None
    closed_loop = options.dimension == "concurrency"  # characterised: the closed loop's model
    if options.engine is not None and closed_loop:
        echo("--calibration: not on --dimension concurrency (the closed loop runs the "
             "characterised slot model)")  # fmt: skip
    elif options.engine is not None:
        known = known_engine(options.engine, profile, seed=options.seed)
    else:  # the sizes the load test draws: the characterised model's where counted as asked
        asked = asked_sizes(profile, seed=options.seed)
    fast_config = FastConfig(
        slo=search_config.slo,
        tolerance=options.tolerance,
        half_width=0.6 * options.tolerance,  # 3 % at the default 5 %
        seed=options.seed,
        chunk_s=options.level_duration_s,
        step_s=options.level_duration_s / 3,
        curve_requests=FastConfig.curve_requests if known is None else CURVE_REQUESTS,
    )
    result = run_fast_search(
        fast_config,
        driver,
        known=known,
        asked=asked,
        echo=echo,
        clock=ledger.clock,
        recorded=lambda: ledger.replaying,
        closed_loop=closed_loop,
    )
    if not result.adequate or result.limit is None or closed_loop:
        return FastAnswer(result, None, started, ledger.clock)
    limit = fast_limit_result(
        result,
        search_config,
        driver.levels(),
        target=options.host,
        model=options.model,
        profile_digest=profile.digest(),
        wall_s=ledger.clock() - started,
        time_scale=options.time_scale,
    )
    write_limit(limit, options.out_dir / LIMIT_FILE)
    return FastAnswer(result, limit, started, ledger.clock)
