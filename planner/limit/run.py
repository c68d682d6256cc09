"""`capplan limit` orchestration: check the options, the profile and the run folder before
any load, open or resume the run's ledger (search.json), then run the chosen method
(planner.limit.methods: its measured levels through planner.limit.measured.edge, which
writes `limit.json`, contracts.limit.LimitResult), optionally verifying the limit with a
steady-burst-recovery run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from contracts.errors import ConfigError
from contracts.limit import LIMIT_FILE, LimitResult, load_limit, unit_label, write_limit
from contracts.rundir import holds_run
from locustfiles.arrivals import validate_arrival
from locustfiles.stages import builtin_plan
from planner.capacity.floor import check_floor
from planner.limit.ledger import SearchLedger
from planner.limit.measured.edge import Echo
from planner.limit.methods import MethodRun, runner
from planner.limit.options import LimitOptions
from planner.loadtest.emulated import EmulatedEngine, emulated_engine
from planner.loadtest.run import LoadTestConfig, check_out_dir, config_profile, run_loadtest
from planner.whatif.interval import limit_interval
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
    slo = options.slo  # every option was checked where LimitOptions was built
    rules = options.rules()
    search_config = options.search_config()
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
    config = options.load_test_config()
    profile, _ = config_profile(config)
    if options.engine is not None:  # the server's engine is known (--calibration, the demo)
        check_floor(options.engine, profile, slo)  # an SLO below its idle floor: no search
    resumed = _resumed(options, profile, echo) if resume else None  # checked before any load
    if check_target is not None:
        options = options.model_copy(update={"model": check_target(options)})
        config = options.load_test_config()
    ledger = resumed or _fresh(options, profile)
    verify = _verify_burst(options, config, profile, echo) if options.verify_burst else None
    run = MethodRun(
        options=options, config=config, search_config=search_config, profile=profile,
        rules=rules, ledger=ledger, verify=verify, echo=echo, resume=resume,
    )  # fmt: skip
    # asked before any load, while the endpoint answers: an interrupted search is marked too
    api_key = os.environ.get(options.api_key_env) if options.api_key_env else None
    engine = emulated_engine(options.host, api_key)
    written = Path(options.out_dir) / LIMIT_FILE
    try:
        limit = runner(options.method)(run)  # planner.limit.methods: measured or fast
    except KeyboardInterrupt:  # the runner wrote what it found (unconfirmed): mark that
        if engine is not None and written.exists():
            _marked_if_emulated(load_limit(written), options, echo, engine)
        raise
    ledger.finish()
    return _marked_if_emulated(limit, options, echo, engine)


def _marked_if_emulated(
    limit: LimitResult, options: LimitOptions, echo: Echo, engine: EmulatedEngine | None
) -> LimitResult:
    """`limit`, marked predicted (with the validation's interval for the engine and GPU the
    emulator names) when the endpoint is capplan's emulator (`engine`, planner.loadtest.
    emulated): its limit is the engine model's, not a GPU's. limit.json is written again
    with the mark."""
    if limit.feasible_max is None or limit.predicted is not None or engine is None:
        return limit
    interval = limit_interval(limit.feasible_max, engine.runtime, engine.gpu)
    limit = limit.model_copy(update={"predicted": interval.contract()})
    write_limit(limit, Path(options.out_dir) / LIMIT_FILE)
    unit = unit_label(limit.unit)
    echo(
        f"predicted, not measured on a GPU: {options.host} is capplan's emulator "
        f"({engine.words()}); a real {engine.gpu} is expected between "
        f"{interval.low_rps:.3g} and {interval.high_rps:.3g} {unit} ({interval.note})"
    )
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
