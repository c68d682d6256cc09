"""`capplan verify`: the planned fleet measured behind a real load balancer.

`run_verify` checks the inputs (planner.verify.options), starts capplan's own router when
given instances instead of a load balancer (planner.verify.router), watches each instance's
metrics (planner.verify.instances), runs the steady / burst / recovery stages through Locust
(planner.loadtest.run, the load test of every other command), judges them
(planner.verify.result) beside the engine model's simulation of the same stages, and writes
verify.json into the run directory. A line per stage says how far it is
(planner.verify.progress). On Ctrl-C or SIGTERM the load test writes what it
measured; verify.json is written from it, marked not valid, and the interrupt goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from contracts.errors import ConfigError
from contracts.jsonio import write_model
from contracts.plan import Plan
from contracts.run import StagePlan
from contracts.rundir import dist_version, now_iso, read_records
from contracts.verify import VERIFY_FILE, Verify
from planner.loadtest.run import LoadTestConfig, check_out_dir, run_loadtest
from planner.slo.recorded import plan_slo
from planner.slo.spec import Slo
from planner.verify.instances import IDLE_SHARE, InstanceWatch, instance_loads
from planner.verify.options import (
    VerifyOptions,
    checked,
    design_rate_rps,
    load_inputs,
    router_host,
    verify_stages,
)
from planner.verify.progress import StageLines
from planner.verify.result import Judged, judge_run, plan_points, verdict_finding
from planner.verify.router import Router, RouterProxy
from planner.verify.simulate import plan_engine, simulate_stages
from profiles.model import Profile

Echo = Callable[[str], None]


def _slo(options: VerifyOptions, plan: Plan) -> Slo:
    slo = options.slo if options.slo is not None else plan_slo(plan)
    if slo is None:
        raise ConfigError(f"{options.plan_path} holds no SLO (inputs.slo): give --slo")
    return slo


def _loadtest_config(options: VerifyOptions, target: str, slo: Slo) -> LoadTestConfig:
    return LoadTestConfig(
        host=target,
        model=options.model,
        endpoint=options.endpoint,  # type: ignore[arg-type]
        profile_path=str(options.profile_path),
        api_key_env=options.api_key_env,
        seed=options.seed,
        workers=options.workers,
        master_bind=options.master_bind,
        expect_workers=options.expect_workers,
        request_timeout_s=options.request_timeout_s,
        scrape_metrics=False,  # a balancer's /metrics is one instance's: each is read instead
        slo_ttft_s=slo.ttft_bound_s,
        slo=slo,
        replay_path=options.replay_path,
        replay_speed=options.replay_speed,
        time_scale=options.time_scale,
        drain_s=_drain_s(options),
    )


def _drain_s(options: VerifyOptions) -> float:
    """How long the load test waits for requests in flight after the last stage."""
    return min(30.0, options.request_timeout_s)


def _down_hosts(options: VerifyOptions) -> list[str]:
    """With --hosts, the last `instances_down` listed are left out of capplan's routing."""
    if not options.hosts or not options.instances_down:
        return []
    return options.hosts[len(options.hosts) - options.instances_down :]


def run_verify(
    options: VerifyOptions,
    *,
    echo: Echo = print,
    check_target: Callable[[LoadTestConfig], str] | None = None,
) -> Verify:
    """Run the test and write `<out_dir>/verify.json`; returns it.

    Raises ConfigError/InputError for bad input (a plan and profile that do not belong
    together, a duplicate instance, ...), PreflightError when the target does not answer or
    streams nothing (`check_target`, e.g. planner.loadtest.preflight.checked_model), what
    run_loadtest raises, and KeyboardInterrupt after writing what was measured.
    """
    plan, profile = load_inputs(options)
    options = checked(options, plan)
    slo = _slo(options, plan)
    check_out_dir(options.out_dir)
    rate = design_rate_rps(plan)
    stages = verify_stages(options, rate)
    serving = plan.instances - options.instances_down
    down = _down_hosts(options)
    lines = StageLines(stages, echo, time_scale=options.time_scale, drain_s=_drain_s(options))
    proxy = None
    target = options.host or ""
    if options.hosts:
        router = Router([h for h in options.hosts if h not in down], options.routing)
        proxy = RouterProxy(
            router, timeout_s=options.request_timeout_s, bind_host=router_host(options)
        )
        target = proxy.start()
        echo(f"routing {options.routing} over {serving} instance(s) at {target}")
    watch = InstanceWatch(options.hosts or options.instances)
    watch.start()
    interrupted = False
    try:
        run_loadtest(
            _loadtest_config(options, target, slo),
            stages,
            options.out_dir,
            progress=lines.note,
            check_target=check_target,
            profile=profile,
            on_stage=lines,
        )
        lines.done("judging them beside the engine model's simulation of the same stages")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        watch.stop()
        if proxy is not None:
            proxy.stop()
    routed = proxy.router.counts() if proxy is not None else None
    verify = _result(
        options, plan, profile, slo, stages, serving, down, watch, routed, target, interrupted
    )
    write_model(options.out_dir / VERIFY_FILE, verify, "verify")
    if interrupted:
        raise KeyboardInterrupt
    return verify


def _result(
    options: VerifyOptions,
    plan: Plan,
    profile: Profile,
    slo: Slo,
    stages: StagePlan,
    serving: int,
    down: list[str],
    watch: InstanceWatch,
    routed: dict[str, int] | None,
    target: str,
    interrupted: bool,
) -> Verify:
    routing = options.routing
    replay = (options.replay_path, options.replay_speed) if options.replay_path else None
    sent = read_records(options.out_dir)["request_id"].to_list()
    simulated = simulate_stages(
        profile, plan_engine(plan), stages, serving, routing, seed=options.seed,
        replay=replay, sent=sent,
    )  # fmt: skip
    judged = judge_run(options.out_dir, stages, slo, options.rules, simulated)
    rows, spread = instance_loads(watch.series, _taken_out(watch, down, options), routed=routed)
    reason = judged.invalid_reason or _pool_problem(spread.flagged)
    if interrupted:
        reason = "interrupted (SIGTERM or Ctrl-C) before the stages ended"
    judged = Judged(**{**judged.__dict__, "invalid_reason": reason})
    rate = stages.stages[0].rate_rps
    assert rate is not None and stages.stages[1].rate_rps is not None
    finding = verdict_finding(
        judged, serving=serving, planned=plan.instances, slo=slo, rate_rps=rate,
        burst_s=options.burst_s,
    )  # fmt: skip
    return Verify(
        created_at=now_iso(),
        capplan_version=dist_version("llm-capacity-planner"),
        plan=str(options.plan_path),
        plan_digest=_digest(options.plan_path),
        profile=str(options.profile_path),
        profile_digest=profile.digest(),
        target=target,
        routing=f"capplan {routing}" if options.hosts else f"the load balancer at {target}",
        hosts=options.hosts or options.instances,
        slo=slo.text,
        time_scale=options.time_scale,
        arrivals=_arrivals(options),
        instances_planned=plan.instances,
        instances_down=options.instances_down,
        instances_serving=serving,
        rate_rps=rate,
        burst_rps=stages.stages[1].rate_rps,
        stages=stages,
        run_dir=str(options.out_dir),
        steady_state=judged.state.evidence() if judged.state is not None else "",
        valid=reason is None,
        invalid_reason=reason,
        phases=judged.phases,
        recovery_s=judged.recovery_s,
        recovery_simulated_s=judged.recovery_simulated_s,
        held_peak=judged.held_peak,
        held_burst=judged.held_burst,
        recovered=judged.recovered,
        holds=reason is None and judged.held_peak and judged.recovered,
        plan_points=plan_points(plan, serving),
        instances=rows,
        spread=spread,
        sentence=finding.english(),
        finding=finding,
    )


def _taken_out(watch: InstanceWatch, down: list[str], options: VerifyOptions) -> list[str]:
    """The instances out of the pool: capplan's own (--hosts), else the `instances_down`
    least loaded of the listed pool (the user took them out; their load must be nothing)."""
    if down or not options.instances_down or not options.instances:
        return down
    rows, _ = instance_loads(watch.series, [])
    ranked = sorted(rows, key=lambda r: r.share if r.share is not None else 0.0)
    return [r.url for r in ranked[: options.instances_down]]


def _pool_problem(flagged: list[str]) -> str | None:
    """The test is not of the fleet asked when the balancer sent traffic to an instance taken
    out, or none to one in the pool (ejected: N became N-1)."""
    bad = [f for f in flagged if ": not_down" in f or ": idle" in f]
    if not bad:
        return None
    return (
        "the load balancer's pool was not the one asked (an instance taken out took traffic, "
        f"or one in the pool took under {IDLE_SHARE:.0%} of its share): " + "; ".join(bad)
    )


def _arrivals(options: VerifyOptions) -> str:
    if options.replay_path:
        return (
            f"steady stage: the log {options.replay_path} replayed at {options.replay_speed:g}x; "
            "burst and recovery: Poisson arrivals, lengths drawn from the profile (the "
            "simulation sends the same requests)"
        )
    return "Poisson arrivals, lengths drawn from the profile (the simulation sends the same)"


def _digest(path: Path) -> str:
    from contracts.digest import sha256_of

    return sha256_of(path)
