"""`capplan limit` orchestration: check the options, the profile and the run folder before
any load, open or resume the run's ledger (search.json), then run the chosen method
(planner.limit.methods: its measured levels through planner.limit.measured.edge, which
writes `limit.json`, contracts.limit.LimitResult), optionally verifying the limit with a
steady-burst-recovery run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from contracts.errors import ConfigError
from contracts.jsonio import first_error
from contracts.limit import LimitResult
from contracts.rundir import holds_run
from locustfiles.arrivals import validate_arrival
from locustfiles.stages import builtin_plan
from planner.capacity.floor import check_floor
from planner.limit.ledger import SearchLedger
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.edge import Echo
from planner.limit.methods import MethodRun, runner
from planner.limit.options import LimitOptions
from planner.loadtest.run import LoadTestConfig, check_out_dir, config_profile, run_loadtest
from profiles.model import Profile


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
    run = MethodRun(
        options=options, config=config, search_config=search_config, profile=profile,
        rules=rules, ledger=ledger, verify=verify, echo=echo, resume=resume,
    )  # fmt: skip
    limit = runner(options.method)(run)  # planner.limit.methods: measured or fast
    ledger.finish()
    return limit


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
