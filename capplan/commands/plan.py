"""`capplan plan`: instances, GPUs, memory, CPU, cost for a profile's peak, simulation-checked."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from capplan.cli import (
    build_options,
    duration_option,
    handle_errors,
    one_value,
    parse_share,
)
from capplan.commands.autoscale_opts import (
    Autoscale,
    AutoscaleOut,
    AutoscalePolicy,
    ColdStart,
    Deployment,
    apply_autoscale,
    parse_autoscale,
    print_autoscale,
)
from capplan.commands.console import (
    FORMAT_HELP,
    check_format,
    print_result,
    print_routers,
    stderr_console,
)
from capplan.commands.shared import (
    GPU_MEANING,
    GROWTH_MEANING,
    ONE_CONFIGURATION,
    ONE_CONFIGURATION_HELP,
    PP_MEANING,
    TP_MEANING,
    CatalogOption,
    ExecutorOption,
    FleetFull,
    GpuHourPrice,
    Headroom,
    KvCacheDtypeOption,
    PeakQuantile,
    PeakRps,
    PeakWindow,
    PrefixThreshold,
    QuantizationOption,
    Redundancy,
    RoutingOption,
)
from contracts.calibration import load_calibration_file
from contracts.errors import ConfigError
from contracts.executor import parse_executor
from contracts.jsonio import write_model
from contracts.limit import unconfirmed_reason, unit_label
from contracts.plan import LimitInput, Plan
from planner.autoscale.manifests import parse_deployment
from planner.autoscale.run import DEFAULT_COLD_START_S
from planner.calibrate import calibration_overrides
from planner.capacity.arithmetic import (
    HostRule,
    parse_float_list,
    parse_limit,
)
from planner.capacity.plan import PlanOptions, build_plan
from planner.engine.precision import precision_overrides
from planner.fleet.routing import RoutingSettings, parse_routings
from planner.ops.replan import replan_command
from planner.ops.write import write_ops
from planner.slo.spec import parse_slo
from planner.whatif.interval import source_note
from profiles.model import load_profile

HELP = """Turn a profile's peak and the per-instance SLO limit into a capacity plan.

n = ceil(peak x growth x (1 + headroom) / per-instance limit) + redundancy, for each growth
scenario, with GPUs, GPU memory (weights + KV cache), CPU cores, host RAM and monthly cost;
cross-checked by an Erlang-C / Allen-Cunneen queueing estimate and by simulating the fleet
(n-1, n, n+1 instances of the engine model, round-robin and least-outstanding routing).
--routing compares routers instead (prefix-aware, session affinity, power of two, ...):
each one's fewest instances meeting the SLO and the prefix-hit ratio it reaches against the
profile's ideal one.

Examples:

  capplan plan --profile conv.json --limit runs/h100/limit.json --growth 1.0,1.3 -o plans/q3.json

  capplan plan --profile conv.json --limit 17.4rps --slo "ttft:p95<=2s" -o plans/quick.json

  capplan plan --profile conv.json --limit runs/h100/limit.json --calibration cal.json \\
      -o plans/cal.json

  capplan plan --profile agent.json --limit 4rps --slo "ttft:p95<=2s" \\
      --routing prefix_aware,round_robin -o plans/routing.json

  capplan plan --profile big.json --limit 17.7rps --slo "ttft:p95<=2s" \\
      --executor dask://127.0.0.1:8786 -o plans/big.json

  capplan plan --profile conv.json --limit 17.4rps --slo "ttft:p95<=2s" --autoscale \\
      --cold-start 2m -o plans/auto.json
"""


def register(app: typer.Typer) -> None:
    app.command(name="plan", help=HELP)(handle_errors(plan_command))


# PlanOptions fields whose option is named otherwise than --field-name (a nested field by its
# path); the model holds every bound and default, the parameters below only spell them.
FLAGS = {
    "profile_path": "--profile",
    "gpu_hour_price_usd": "--gpu-hour-price",
    "fleet": "--no-fleet-check",
    "calibrate": "--no-calibrate",
    "fleet_span_s": "--fleet-span",
    "routings": "--routing",
    "fleet_shortcut": "--fleet-full",
    "host_rule.cpu_cores_per_gpu": "--cpu-cores-per-gpu",
    "host_rule.host_ram_per_gpu_memory": "--host-ram-per-gpu-memory",
    "routing_settings.prefix_threshold": "--prefix-threshold",
}


def _whole(option: str, text: str) -> int:
    """`2` -> 2; ConfigError naming the option for anything else (the model holds the bound)."""
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{option}: expected a whole number (got {text!r})") from None


def _one(option: str, text: str) -> str:
    """One value of a list option of whatif; a list refused with the reason."""
    return one_value(option, text, ONE_CONFIGURATION.format(option=option, text=text))


def plan_command(
    profile: Path = typer.Option(..., "--profile", help="Profile JSON (capplan profile)."),
    limit: str = typer.Option(
        ...,
        "--limit",
        help="limit.json of `capplan limit`, or a number with unit: 17.4rps, 50users.",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write plan.json."),
    accept_unconfirmed: bool = typer.Option(
        False,
        "--accept-unconfirmed",
        help="Plan with a limit.json whose answer is unconfirmed (a search stopped before "
        "the measured levels around it held it); refused without this.",
    ),
    slo: str | None = typer.Option(
        None, "--slo", help="SLO spec; must match the limit.json's (default: the limit's)."
    ),
    peak_rps: PeakRps = None,
    peak_users: float | None = typer.Option(
        None, "--peak-users", help="Planning peak as concurrent requests."
    ),
    peak_window: PeakWindow = "60s",
    peak_quantile: PeakQuantile = "0.99",
    growth: str = typer.Option(
        "1.0",
        "--growth",
        help=f"{GROWTH_MEANING} Several, comma-separated (1.0,1.3,2.0), are growth scenarios.",
    ),
    headroom: Headroom = "0.2",
    redundancy: Redundancy = 1,
    gpu: str = typer.Option(
        "H100-80GB", "--gpu", help=f"{GPU_MEANING} One: {ONE_CONFIGURATION_HELP}."
    ),
    model: str = typer.Option("llama-3.1-8b", "--model", help="Model (engine catalog)."),
    tp: str = typer.Option("1", "--tp", help=f"{TP_MEANING} One: {ONE_CONFIGURATION_HELP}."),
    pp: str = typer.Option("1", "--pp", help=f"{PP_MEANING} One: {ONE_CONFIGURATION_HELP}."),
    quantization: QuantizationOption = "none",
    kv_cache_dtype: KvCacheDtypeOption = "auto",
    catalog: CatalogOption = None,
    gpu_hour_price: GpuHourPrice = None,
    cpu_cores_per_gpu: int = typer.Option(
        HostRule.cpu_cores_per_gpu, "--cpu-cores-per-gpu", help="Host rule: CPU cores per GPU."
    ),
    host_ram_per_gpu_memory: float = typer.Option(
        HostRule.host_ram_per_gpu_memory,
        "--host-ram-per-gpu-memory",
        help="Host rule: host RAM as a multiple of GPU memory.",
    ),
    no_fleet_check: bool = typer.Option(
        False, "--no-fleet-check", help="Skip the fleet simulation."
    ),
    no_calibrate: bool = typer.Option(
        False,
        "--no-calibrate",
        help="Simulate with the engine's catalog factors, not ones fitted to the limit.json.",
    ),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        help="cal.json of `capplan calibrate`. The engine model's factors (no limit.json fit).",
    ),
    fleet_span_s: float = duration_option(
        300.0,
        "--fleet-span",
        help="Simulated time of traffic per fleet size.",
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here the simulated traffic."
    ),
    routing: RoutingOption = None,
    prefix_threshold: PrefixThreshold = f"{RoutingSettings.prefix_threshold:g}",
    output_format: str = typer.Option("table", "--format", help=FORMAT_HELP),
    autoscale: Autoscale = False,
    autoscale_policy: AutoscalePolicy = None,
    cold_start_s: ColdStart = DEFAULT_COLD_START_S,
    autoscale_out: AutoscaleOut = None,
    deployment: Deployment = "default/vllm",
    ops_out: Path | None = typer.Option(
        None,
        "--ops-out",
        help="Folder for the alert rules (rules.yaml, prometheus-rule.yaml) and the Grafana "
        "dashboard (default: PLAN-ops/ beside the plan; written when the plan has an SLO).",
    ),
    executor: ExecutorOption = "local",
    fleet_full: FleetFull = False,
) -> None:
    check_format(output_format)
    executor_spec = parse_executor(executor)
    gpu = _one("--gpu", gpu)
    options = build_options(
        PlanOptions,
        FLAGS,
        profile_path=str(profile),
        peak_window=peak_window,
        peak_quantile=parse_share("--peak-quantile", peak_quantile),
        peak_rps=peak_rps,
        peak_users=peak_users,
        growth=tuple(parse_float_list(growth, "--growth")),
        headroom=parse_share("--headroom", headroom),
        redundancy=redundancy,
        gpu=gpu,
        model=model,
        tp=_whole("--tp", _one("--tp", tp)),
        pp=_whole("--pp", _one("--pp", pp)),
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        catalog=str(catalog) if catalog is not None else None,
        gpu_hour_price_usd=gpu_hour_price,
        fleet=not no_fleet_check,
        calibrate=not no_calibrate and calibration is None,
        fleet_span_s=fleet_span_s,
        seed=seed,
        host_rule={
            "cpu_cores_per_gpu": cpu_cores_per_gpu,
            "host_ram_per_gpu_memory": host_ram_per_gpu_memory,
        },
        name=output.stem,
        routings=parse_routings(routing) if routing is not None else None,
        routing_settings={"prefix_threshold": parse_share("--prefix-threshold", prefix_threshold),
                          "seed": seed},
        executor=executor_spec,
        fleet_shortcut=not fleet_full,
    )  # fmt: skip
    precision_overrides(quantization, kv_cache_dtype)  # checks both names
    where = parse_deployment(deployment)
    auto = parse_autoscale(autoscale_policy, cold_start_s, seed) if autoscale else None
    console = stderr_console()
    the_profile = load_profile(profile)
    the_slo = parse_slo(slo) if slo else None
    the_limit = parse_limit(limit, the_slo, accept_unconfirmed=accept_unconfirmed)
    if the_limit.result is not None and (reason := unconfirmed_reason(the_limit.result)):
        console.print(f"[yellow]planning with an unconfirmed limit: {reason}[/yellow]")
    overrides = calibration_overrides(
        load_calibration_file(calibration) if calibration else None, model, options.catalog
    )
    options = options.model_copy(update={"slo": the_slo, "engine_overrides": overrides})
    plan = build_plan(
        the_profile,
        the_limit,
        options,
        progress=lambda m: console.print(f"[dim]{m}[/dim]"),
        check_instances=None if auto is None else auto.check_replicas,
    )
    if auto is not None:
        plan = apply_autoscale(
            the_profile, plan, output, auto, folder=autoscale_out, deployment=where
        )
    if plan.inputs.slo is not None:
        folder = ops_out or output.with_name(output.stem + "-ops")
        plan = write_ops(
            plan,
            folder,
            replan=replan_command(
                plan,
                str(output),
                calibration=None if calibration is None else str(calibration),
                accept_unconfirmed=accept_unconfirmed,
            ),
            name=output.stem,
            namespace=where.namespace,
        )
    write_model(output, plan, "the plan")
    print_result(plan, output, output_format, lambda console: print_plan(plan, console))


def limit_line(limit: LimitInput) -> str:
    """Where the per-instance limit came from: a limit.json capplan measured, one whose endpoint
    was the engine model (predicted, not measured, with its interval), or a number given with
    --limit (from vLLM bench, guidellm or elsewhere), named as such."""
    per = f"[bold]Limit[/bold]: {limit.value:g} {unit_label(limit.unit)} per instance"
    iv, unit = limit.predicted, unit_label(limit.unit)
    if iv is not None:
        return (
            f"{per}, predicted, not measured: the engine model's ({limit.source}, a load test of "
            f"capplan's emulator) under {limit.slo}; a GPU's is expected between {iv.low:.3g} "
            f"and {iv.high:.3g} {unit} ({source_note(iv.source)})"
        )
    if Path(limit.source).is_file():
        return f"{per}, measured by capplan limit ({limit.source}) under {limit.slo}"
    slo = f" for {limit.slo}" if limit.slo else ""
    return f"{per}, given as --limit {limit.source}{slo}: measured elsewhere, not checked here"


def print_plan(plan: Plan, console: Console) -> None:
    """The plan as rich tables: the limit's source, scenarios, resources, checks, then the
    sentence."""
    d = plan.demand
    console.print(limit_line(plan.inputs.limit))
    console.print(
        f"[bold]Demand, whole fleet[/bold]: peak {d.peak_rps:.3g} req/s ({d.peak_definition})"
        + (f", burst factor {d.burst_factor:.2f}" if d.burst_factor else "")
        + (
            f", {d.peak_concurrency:.1f} requests in flight across the fleet at the peak"
            if d.peak_concurrency
            else ""
        )
        + (f", e2e {d.mean_e2e_s:.2f} s" if d.mean_e2e_s else "")
    )
    table = Table(title="Instances per growth scenario")
    # Demand, instances, GPUs and cost are the fleet's; the limit is one instance's.
    for col in (
        "growth",
        "fleet demand",
        "w/ headroom",
        "limit per instance",
        "for load",
        "+k",
        "instances",
        "GPUs",
        "fleet $/month",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    for s in plan.scenarios:
        table.add_row(
            f"{s.growth:g}x",
            f"{s.demand:.3g} {unit_label(s.unit)}",
            f"{s.demand_with_headroom:.3g}",
            f"{s.per_instance_limit:.3g}",
            str(s.instances_for_load),
            f"+{s.redundancy}",
            f"[bold]{s.instances}[/bold]",
            str(s.gpus),
            f"{s.monthly_cost_usd:,.0f}",
        )
    console.print(table)
    for s in plan.scenarios:
        console.print(f"  {s.growth:g}x: {s.arithmetic}")
    if plan.sensitivity:
        headrooms = sorted({c.headroom for c in plan.sensitivity})
        growths = sorted({c.growth for c in plan.sensitivity})
        cells = {(c.growth, c.headroom): c.instances for c in plan.sensitivity}
        sens = Table(title=f"Sensitivity: instances (N+{plan.inputs.redundancy} included)")
        sens.add_column("growth \\ headroom", justify="right")
        for h in headrooms:
            sens.add_column(f"{h:.0%}", justify="right")
        for g in growths:
            sens.add_row(f"{g:g}x", *(str(cells[(g, h)]) for h in headrooms))
        console.print(sens)
    r, m = plan.resources, plan.resources.gpu_memory
    console.print(
        f"[bold]Resources, whole fleet[/bold] ({plan.scenarios[0].growth:g}x): {r.instances} "
        f"x {r.gpu} x tp={r.tp}{f' x pp={r.pp}' if r.pp > 1 else ''} = {r.gpus} GPUs; "
        f"{r.cpu_cores_total} CPU cores, "
        f"{r.host_ram_gib_total:,.0f} GiB host RAM"
    )
    console.print(
        f"[bold]Resources, per instance[/bold]: {m.weights_bytes_per_gpu / 2**30:.1f} GiB "
        f"weights per GPU; KV cache {m.kv_capacity_tokens:,} tokens, "
        f"{m.kv_needed_tokens_at_limit:,.0f} needed at the limit's "
        f"{m.concurrency_at_limit:.1f} requests in flight x {m.mean_context_tokens:.0f} tokens "
        f"(KV headroom {_headroom(m.kv_headroom_frac)}); {r.cpu_cores_per_instance} CPU cores, "
        f"{r.host_ram_gib_per_instance:,.0f} GiB host RAM ({r.rule})"
    )
    c = plan.cost
    console.print(
        f"[bold]Cost, whole fleet[/bold]: ${c.monthly_usd:,.0f}/month at "
        f"${c.gpu_hour_price_usd:g}/GPU-hour ({c.price_source})"
    )
    q = plan.checks.queueing
    if q is not None:
        console.print(f"[bold]Queueing[/bold]: {q.note}")
    f = plan.checks.fleet
    if f is not None:
        ft = Table(title=f"Fleet simulation at {f.rate_rps:.3g} req/s, {f.simulated_s:g} s")
        for col in ("instances", "routing", "attainment", "TTFT p95", "TPOT p95", "meets SLO"):
            ft.add_column(col, justify="right")
        for p in f.points:
            ft.add_row(
                str(p.instances),
                p.routing,
                f"{p.attainment:.1%}",
                "-" if p.ttft_p95_s is None else f"{p.ttft_p95_s:.3f} s",
                "-" if p.tpot_p95_s is None else f"{p.tpot_p95_s * 1e3:.1f} ms",
                "yes" if p.meets_slo else "[red]no[/red]",
            )
        console.print(ft)
        console.print(f"  {f.verdict}")
        print_routers(f, console)
        if f.calibration:
            console.print(f"  calibration: {f.calibration}")
    if plan.observed is not None:
        console.print(f"observed in production: {plan.observed.sentence}")
    if plan.autoscale is not None:
        print_autoscale(plan.autoscale, console)
    if plan.ops is not None:
        console.print(
            f"[bold]Alerts and dashboard[/bold]: {len(plan.ops.alerts)} alerts in "
            f"{plan.ops.rule_groups} and {plan.ops.prometheus_rule}; {plan.ops.dashboard}"
        )
    for note in plan.notes:
        console.print(f"[yellow]note[/yellow]: {note}")
    console.print(f"[bold]{plan.sentence}[/bold]")


def _headroom(frac: float) -> str:
    """A share as a percent, a small shortfall shown as one ("-0.4%", not "-0%")."""
    return f"{frac:.1%}" if -0.005 < frac < 0 else f"{frac:.0%}"
