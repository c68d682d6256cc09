"""`capplan limit`'s search methods by name, peers behind one registry (`METHODS`), each a
`Runner` with one signature: "measured" brackets and narrows on measured levels
(planner.limit.measured.search); "fast" characterises a model of the server and confirms it on warm
levels (planner.limit.fast), then holds its answer between measured levels, which search on
their own where the model is inadequate. Both run their measured levels through the same
probe (planner.limit.measured.live.LocustProbe, replayed from the run's ledger).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.errors import ConfigError
from contracts.limit import LIMIT_FILE, LimitResult, write_limit
from contracts.rundir import holds_run
from planner.limit.fast.engine_model import CURVE_REQUESTS, asked_sizes, known_engine
from planner.limit.fast.live import LiveDriver, run_fast_search
from planner.limit.fast.result import fast_limit_result, seeded
from planner.limit.held import FastAnswer, with_fast
from planner.limit.ledger import ReplayDriver, ReplayProbe, SearchLedger, last_index
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.edge import Echo, search_limit, verified
from planner.limit.measured.live import LocustProbe
from planner.limit.measured.steady import SteadyRules
from planner.limit.options import LimitOptions
from planner.loadtest.run import LoadTestConfig
from profiles.model import Profile


@dataclass(frozen=True, kw_only=True)
class MethodRun:
    """What a method runs with, checked by planner.limit.run.run_limit before any load: the
    options, the load test's and the measured search's configs, the profile, the level
    rules, the run's ledger (search.json), the burst check (None: not asked; called with
    the answer, it returns the recovery time), where progress lines go, and whether the
    run resumes a logged one."""

    options: LimitOptions
    config: LoadTestConfig
    search_config: SearchConfig
    profile: Profile
    rules: SteadyRules
    ledger: SearchLedger
    verify: Callable[[LimitResult], float | None] | None
    echo: Echo
    resume: bool


Runner = Callable[[MethodRun], LimitResult]


def run_measured(run: MethodRun) -> LimitResult:
    """The measured search from the configured start; writes and returns limit.json."""
    return _measured_levels(run, run.search_config, None)


def run_fast(run: MethodRun) -> LimitResult:
    """The fast search, then measured levels that hold its answer between them (from just
    below it, planner.limit.fast.result.seeded), or search on their own where the model was
    inadequate; writes and returns limit.json."""
    fast = _fast_search(run)
    return _measured_levels(run, seeded(run.search_config, fast.result, run.echo), fast)


METHODS: dict[str, Runner] = {"measured": run_measured, "fast": run_fast}


def runner(name: str) -> Runner:
    """The method called `name`; ConfigError naming the known ones for any other."""
    try:
        return METHODS[name]
    except KeyError:
        known = ", ".join(METHODS)
        raise ConfigError(f"--method {name!r}: expected one of {known}") from None


def _measured_levels(
    run: MethodRun, search_config: SearchConfig, fast: FastAnswer | None
) -> LimitResult:
    """The measured levels through the live probe, after the fast answer `fast` (None: the
    measured method)."""
    probe = LocustProbe(
        run.config,
        run.options.out_dir,
        dimension=run.options.dimension,
        rules=run.rules,
        slo=run.options.slo,
        arrival=run.options.arrival,
        append=fast is not None or run.resume,
        profile=run.profile,
        echo=run.echo,
    )
    probe.levels = last_index(run.options.out_dir, ["level"])  # a resumed run: after its last
    try:
        limit = search_limit(
            ReplayProbe(run.ledger, probe),
            search_config,
            run.options.out_dir,
            target=run.options.host,
            model=run.options.model,
            profile_digest=run.profile.digest(),
            verify=run.verify if fast is None else None,
            echo=run.echo,
            time_scale=run.options.time_scale,
            answered_before=fast is not None and fast.result.model is not None,
            announce=fast is None,
            clock=run.ledger.clock,
            recorded=lambda: run.ledger.replaying,
            started_s=fast.started_s if fast is not None else None,
        )
    except KeyboardInterrupt:
        if fast is not None and fast.limit is not None:  # the fast answer, not yet bracketed
            stopped = f"{fast.limit.stopped}; interrupted in the measured levels around it"
            kept = fast.limit.model_copy(
                update={"stopped": stopped, "unconfirmed": _unheld(fast.limit, search_config)}
            )
            write_limit(kept, run.options.out_dir / LIMIT_FILE)
        raise
    if fast is not None:
        limit = with_fast(limit, fast, search_config)
        write_limit(limit, run.options.out_dir / LIMIT_FILE)
        if run.verify is not None:
            limit = verified(limit, run.verify, run.options.out_dir, wall_s=fast.wall_s)
        run.echo(limit.sentence)
    return limit


def _unheld(limit: LimitResult, config: SearchConfig) -> str:
    """Why a fast answer stopped before its measured levels ended is unconfirmed."""
    hold = f"{config.start:g} req/s (must hold)"
    fail = f"{config.start * config.growth:.4g} req/s (must fail)"
    return (
        f"interrupted before the measured levels held the fast answer "
        f"{limit.feasible_max:g} req/s: {hold} and {fail} were not both judged"
    )


def _fast_search(run: MethodRun) -> FastAnswer:
    """Characterise, predict, confirm, correct (planner.limit.fast) on the live endpoint; its
    limit.json when the model was adequate (written: a Ctrl-C in the measured levels that
    follow keeps it)."""
    options, config, profile = run.options, run.config, run.profile
    echo, ledger = run.echo, run.ledger
    started = ledger.clock()
    live = LiveDriver(
        config, options.out_dir, arrival=options.arrival, profile=profile, echo=echo,
        append=holds_run(options.out_dir),  # a resumed run's
    )  # fmt: skip
    live.stages = last_index(options.out_dir, ["characterise", "confirm"])  # a resumed run's
    driver = ReplayDriver(ledger, live)
    known, asked = None, None
    closed_loop = options.dimension == "concurrency"  # characterised: the closed loop's model
    if options.engine is not None and closed_loop:
        echo("--calibration: not on --dimension concurrency (the closed loop runs the "
             "characterised slot model)")  # fmt: skip
    elif options.engine is not None:
        known = known_engine(options.engine, profile, seed=options.seed)
    else:  # the sizes the load test draws: the characterised model's where counted as asked
        asked = asked_sizes(profile, seed=options.seed)
    fast_config = options.fast_config(None if known is None else CURVE_REQUESTS)
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
        run.search_config,
        driver.levels(),
        target=options.host,
        model=options.model,
        profile_digest=profile.digest(),
        wall_s=ledger.clock() - started,
        time_scale=options.time_scale,
    )
    write_limit(limit, options.out_dir / LIMIT_FILE)
    return FastAnswer(result, limit, started, ledger.clock)
