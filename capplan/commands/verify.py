"""`capplan verify`: load the planned fleet behind a real load balancer (thin CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from capplan.cli import build_options, duration_option, handle_errors
from capplan.commands.shared import (
    ApiKeyEnv,
    Endpoint,
    ExpectWorkers,
    MasterBind,
    NoPreflight,
    ReplaySpeed,
    TimeScale,
)
from planner.fleet.routing import load_only_routings

if TYPE_CHECKING:
    from planner.fleet.routing import Routing
    from planner.loadtest.run import LoadTestConfig

HELP = """Measure the planned fleet behind a real load balancer: does N hold the SLO at the \
plan's design peak, through a burst, and recover; and does N-K not?

Sends the profile's traffic at the plan's design peak (steady), then --burst-factor x that \
rate for --burst-duration, then the peak again until the SLO's TTFT recovers, through --host (your \
load balancer: a Kubernetes Service, an ingress, nginx) or through capplan's own router over \
--hosts. The steady stage is judged by the limit search's steady-state rules and SLO \
verdict, beside the engine model's simulation of the same stages. Each instance's \
Prometheus /metrics (vLLM, SGLang, TGI, llama.cpp) gives the load spread. Writes \
verify.json into -o. Exit 0: the fleet held; 1: it did not (or the test was not valid); \
2: bad input.

Examples:

  capplan verify --plan plan.json --profile profile.json --host http://lb:8080 -o runs/verify-n

  capplan verify --plan plan.json --profile profile.json --host http://lb:8080 \\
      --instances http://10.0.0.1:8000,http://10.0.0.2:8000,http://10.0.0.3:8000 \\
      --instances-down 1 -o runs/verify-n-1

  capplan verify --plan plan.json --profile profile.json \\
      --hosts http://10.0.0.1:8000,http://10.0.0.2:8000 --routing least_outstanding -o runs/v

  capplan verify --plan plan.json --profile profile.json --host http://lb:8080 \\
      --master-bind 10.0.0.5:5557 --expect-workers 3 -o runs/v   (then on 3 hosts: capplan
      worker --master 10.0.0.5:5557)
"""


def _urls(text: str | None) -> list[str]:
    return [u for u in (text or "").split(",") if u.strip()]


# VerifyOptions' fields (planner.verify.options) that the CLI spells otherwise than
# --field-name; the model holds every bound and default (tests/capplan/test_options_drift.py).
FLAGS = {
    "plan_path": "--plan",
    "profile_path": "--profile",
    "out_dir": "--output",
    "replay_path": "--replay",
    "preflight": "--no-preflight",
    "steady_s": "--steady-duration",
    "burst_s": "--burst-duration",
    "recovery_s": "--recovery-timeout",
    "wait_s": "--wait-timeout",
}


def register(app: typer.Typer) -> None:
    app.command("verify", help=HELP)(handle_errors(verify_command))


def verify_command(
    plan: Path = typer.Option(..., "--plan", help="plan.json of `capplan plan`."),
    profile: Path = typer.Option(..., "--profile", help="The profile the plan was made on."),
    out: Path = typer.Option(..., "-o", "--output", help="Run folder; verify.json goes in it."),
    host: str | None = typer.Option(
        None,
        "--host",
        help="Base URL of the OpenAI-compatible endpoint. Here your load balancer's.",
    ),
    hosts: str | None = typer.Option(
        None, "--hosts", help="Comma-separated instance URLs: capplan routes itself."
    ),
    instances: str | None = typer.Option(
        None,
        "--instances",
        help="With --host: the pool's instance URLs, comma-separated, for their /metrics.",
    ),
    instances_down: int = typer.Option(
        0,
        "--instances-down",
        help="Instances out of the pool (N-K). With --hosts capplan leaves out the last K "
        "listed; with --host you take them out and verify checks they take nothing.",
    ),
    routing: str = typer.Option(
        "round_robin",
        "--routing",
        help="capplan's routing over --hosts, by load alone "
        f"({', '.join(load_only_routings())}); with --host, the balancer's (any of the "
        "plan's routings), for the simulation.",
    ),
    model: str = typer.Option("", "--model", help="Model to send (default: first served)."),
    endpoint: Endpoint = "chat",
    api_key_env: ApiKeyEnv = None,
    slo: str | None = typer.Option(None, "--slo", help="SLO spec (default: the plan's)."),
    steady_s: float = duration_option(
        120.0,
        "--steady-duration",
        help="Steady stage at the peak.",
    ),
    burst_s: float = duration_option(
        30.0,
        "--burst-duration",
        help="Burst stage length.",
    ),
    burst_factor: float = typer.Option(2.0, "--burst-factor", help="Burst rate / peak."),
    recovery_s: float = duration_option(
        120.0,
        "--recovery-timeout",
        help="Longest wait for the TTFT to recover after the burst.",
    ),
    replay: Path | None = typer.Option(
        None, "--replay", help="Request log whose arrivals are replayed. By the steady stage."
    ),
    replay_speed: ReplaySpeed = 1.0,
    workers: int = typer.Option(0, "--workers", help="Local Locust worker processes."),
    master_bind: MasterBind = None,
    expect_workers: ExpectWorkers = 0,
    time_scale: TimeScale = 1.0,
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here the load and the simulation."
    ),
    no_preflight: NoPreflight = False,
    wait_s: float = duration_option(
        0.0,
        "--wait-timeout",
        help="Longest wait for the servers to accept connections. Here --host/--hosts (a "
        "fleet or balancer just started); 0: refuse at once.",
    ),
) -> None:
    from planner.slo.spec import parse_slo
    from planner.verify import VerifyOptions, run_verify
    from planner.verify.nginx import wait_for_upstreams

    options = build_options(
        VerifyOptions,
        FLAGS,
        plan_path=plan,
        profile_path=profile,
        out_dir=out,
        host=host,
        hosts=_urls(hosts),
        instances=_urls(instances),
        instances_down=instances_down,
        routing=_routing(routing),
        model=model,
        endpoint=endpoint,
        api_key_env=api_key_env,
        slo=parse_slo(slo) if slo else None,
        steady_s=steady_s,
        burst_s=burst_s,
        burst_factor=burst_factor,
        recovery_s=recovery_s,
        replay_path=str(replay) if replay else None,
        replay_speed=replay_speed,
        workers=workers,
        master_bind=master_bind,
        expect_workers=expect_workers,
        time_scale=time_scale,
        seed=seed,
        preflight=not no_preflight,
        wait_s=wait_s,
    )
    if options.wait_s > 0:
        wait_for_upstreams([host] if host else options.hosts, options.wait_s)
    result = run_verify(
        options,
        echo=lambda line: typer.echo(line, err=True),
        check_target=_check_target if options.preflight else None,
    )
    for flag in result.spread.flagged if result.spread else []:
        typer.echo(f"flagged: {flag}", err=True)
    typer.echo(result.sentence)
    typer.echo(str(out / "verify.json"))
    if not result.holds:
        raise typer.Exit(1)


def _routing(text: str) -> Routing:
    from planner.fleet.routing import check_routing

    return check_routing(text)


def _check_target(config: LoadTestConfig) -> str:
    from planner.loadtest.preflight import checked_model

    return checked_model(config, lambda line: typer.echo(line, err=True))
