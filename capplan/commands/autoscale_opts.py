"""`capplan plan --autoscale`: its options, the step that adds the study, and its tables.

Kept out of plan.py so the plan command gains a handful of lines: the options are
`Annotated` types (typer reads them), `apply_autoscale` parses them once and calls the
planner, `print_autoscale` prints the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, get_args

import typer
from rich.console import Console
from rich.table import Table

from capplan.cli import duration_option
from contracts.autoscale import AutoscaleResult, ReactiveMetric
from contracts.plan import Plan
from planner.autoscale.attach import autoscale_plan, manifest_target
from planner.autoscale.manifests import MAX_DEPLOYMENT_NAME, DeploymentRef
from planner.autoscale.policies import DEFAULT_POLICIES, POLICIES
from planner.autoscale.run import AutoscaleOptions, autoscale_options, why_not
from profiles.model import Profile

Autoscale = Annotated[
    bool,
    typer.Option(
        "--autoscale",
        help="Simulate autoscaling policies over the profile's day and bursts against the "
        "static count, recommend one, write its KEDA ScaledObject and HPA next to the plan.",
    ),
]
AutoscalePolicy = Annotated[
    list[str] | None,
    typer.Option(
        "--autoscale-policy",
        help="A policy KIND[:key=value,...] (repeat for several; default: "
        f"{', '.join(DEFAULT_POLICIES)}). Kinds: {', '.join(POLICIES)} (reactive: "
        f"metric={'|'.join(get_args(ReactiveMetric))}); "
        "keys: target (kv: a share of the KV cache in (0, 1]), window (0..3600 s), cooldown "
        "(1..1800 s), poll (>= 1 s), min, max (default 2 x the plan), tolerance, name; times "
        "in whole seconds, as KEDA and the HPA take them.",
    ),
]
ColdStart = Annotated[
    float,
    duration_option(
        "--cold-start",
        help="Time from a scale-up until the new instance serves (model load).",
    ),
]
AutoscaleOut = Annotated[
    Path | None,
    typer.Option(
        "--autoscale-out",
        help="Folder for keda-scaledobject.yaml and hpa.yaml (default: PLAN-autoscale/ "
        "beside the plan).",
    ),
]
Deployment = Annotated[
    str,
    typer.Option(
        "--deployment",
        help="The Deployment the manifests scale, NAMESPACE/NAME (a bare NAME: namespace "
        "default); the alert rules go into its namespace. Kubernetes' rules: the namespace a "
        "DNS-1123 label, the name a DNS-1123 "
        f"subdomain of at most {MAX_DEPLOYMENT_NAME} characters (KEDA names its HPA "
        "keda-hpa-NAME-autoscale).",
    ),
]


def parse_autoscale(policies: list[str] | None, cold_start_s: float, seed: int) -> AutoscaleOptions:
    """The study's options, checked before the plan is built (a bad policy fails at once)."""
    return autoscale_options(cold_start_s, policies, seed=seed)


def apply_autoscale(
    profile: Profile,
    plan: Plan,
    output: Path,
    options: AutoscaleOptions,
    *,
    folder: Path | None,
    deployment: DeploymentRef,
) -> Plan:
    """The plan with its autoscaling study (`capplan plan --autoscale`)."""
    target = manifest_target(profile, deployment.name, deployment.namespace)
    where = folder or output.with_name(output.stem + "-autoscale")
    return autoscale_plan(profile, plan, options, where, target)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def print_autoscale(result: AutoscaleResult, console: Console) -> None:
    """The policies against the static plan, the recommendation and the manifests."""
    console.print(
        f"[bold]Autoscaling[/bold] over {result.horizon_s / 86400:.3g} days "
        f"({result.trace}); cold start {result.cold_start_s:g} s; {result.good_rule}"
    )
    table = Table(title="Policies against the static plan")
    for col in (
        "policy",
        "attainment",
        "worst hour",
        "worst burst minute",
        "GPU-h/month",
        "vs static",
        "mean inst.",
        "max inst.",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    for o in (result.static, *result.policies):
        worst_hour = min((x for x in o.hourly_worst if x is not None), default=None)
        burst = o.worst_burst_minute
        table.add_row(
            f"[bold]{o.label}[/bold]" if o.label == result.recommended else o.label,
            _pct(o.attainment),
            _pct(worst_hour),
            "-" if burst is None else f"{burst.attainment:.1%} ({burst.instances} inst.)",
            f"{o.gpu_hours_per_month:,.0f}",
            f"{o.cost_vs_static:.0%}",
            f"{o.mean_instances:.1f}",
            str(o.max_instances),
        )
    console.print(table)
    console.print(f"  recommended: [bold]{result.recommended}[/bold]: {result.recommended_reason}")
    for o in result.policies:
        if o.label != result.recommended:
            console.print(f"  not {o.label}: {why_not(o, result)}")
    m = result.manifests
    if m is not None:
        console.print(
            f"  manifests for {m.policy}: {m.keda_path}, {m.hpa_path or 'no HPA (min 0)'} "
            f"({m.query} at "
            f"{m.threshold:.3g} per replica)"
        )
