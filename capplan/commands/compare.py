"""`capplan compare`: rank measured limit runs of several candidates on one profile."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from capplan.cli import (
    ONE_WHOLE,
    build_options,
    handle_errors,
    one_growth,
    parse_fraction,
    parse_share,
)
from capplan.commands.console import stdout_console
from capplan.commands.shared import (
    GPU_MEANING,
    GROWTH_MEANING,
    PP_MEANING,
    TP_MEANING,
    GpuHourPrice,
    Headroom,
    PeakQuantile,
    PeakRps,
    PeakWindow,
    Redundancy,
)
from contracts.jsonio import write_model
from contracts.limit import unit_label
from contracts.whatif import Compare
from planner.whatif.compare import CompareOptions, compare_runs
from profiles.model import load_profile

HELP = """Rank measured configurations (each a `capplan limit` run) for one profile's peak.

One row per run: the limit, the binding constraint, the burst recovery, the instances and
GPUs for the peak (the planner's arithmetic), cost per month, cost per million output
tokens at the SLO, and the rank. Runs measured on another profile or SLO are refused (exit
2) unless --force, which marks the table.

Example:

  capplan compare runs/vllm-h100 runs/sglang-h100 --profile chat.json --gpu H100-80GB \\
      --label vllm,sglang -o compare.json
"""


# CompareOptions' fields (planner.whatif.compare) that the CLI spells otherwise than
# --field-name; the model holds every bound and default (tests/capplan/test_options_drift.py).
FLAGS = {
    "profile_path": "--profile",
    "labels": "--label",
    "gpus": "--gpu",
    "gpu_hour_price_usd": "--gpu-hour-price",
}


def register(app: typer.Typer) -> None:
    app.command(name="compare", help=HELP)(handle_errors(compare_command))


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def compare_command(
    runs: list[Path] = typer.Argument(..., help="Run directories with a limit.json."),
    profile: Path = typer.Option(..., "--profile", help="Profile JSON the runs measured."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write compare.json."),
    label: str | None = typer.Option(None, "--label", help="Labels, one per run, comma-separated."),
    gpu: str = typer.Option(
        "H100-80GB",
        "--gpu",
        help=f"{GPU_MEANING} One for every run, or one per run, comma-separated.",
    ),
    tp: int = typer.Option(
        1, "--tp", parser=ONE_WHOLE, help=f"{TP_MEANING} The same for every run."
    ),
    pp: int = typer.Option(
        1, "--pp", parser=ONE_WHOLE, help=f"{PP_MEANING} The same for every run."
    ),
    gpu_hour_price: GpuHourPrice = None,
    peak_rps: PeakRps = None,
    peak_window: PeakWindow = "60s",
    peak_quantile: PeakQuantile = "0.99",
    growth: str = typer.Option(
        "1.0", "--growth", help=f"{GROWTH_MEANING} One: compare ranks at one growth."
    ),
    headroom: Headroom = "0.2",
    redundancy: Redundancy = 1,
    force: bool = typer.Option(False, "--force", help="Compare mismatched runs anyway."),
) -> None:
    options = build_options(
        CompareOptions,
        FLAGS,
        profile_path=str(profile),
        runs=tuple(str(r) for r in runs),
        labels=_split(label),
        gpus=_split(gpu),
        tp=tp,
        pp=pp,
        gpu_hour_price_usd=gpu_hour_price,
        peak_window=peak_window,
        peak_quantile=parse_fraction("--peak-quantile", peak_quantile, positive=True),
        peak_rps=peak_rps,
        growth=one_growth("compare", growth),
        headroom=parse_share("--headroom", headroom),
        redundancy=redundancy,
        force=force,
    )
    result = compare_runs(load_profile(profile), options)
    write_model(output, result)
    print_compare(result, stdout_console())
    typer.echo(f"wrote {output}")


def print_compare(result: Compare, console: Console) -> None:
    title = f"Compare: {result.slo}, peak {result.peak_rps:.3g} req/s"
    if result.forced:
        title += "  [NOT COMPARABLE: --force]"
    table = Table(title=title)
    for col in ("rank", "run", "limit", "binding", "recovery", "n", "GPUs", "$/month", "$/M out"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for r in sorted(result.rows, key=lambda x: x.rank or 10**9):
        table.add_row(
            str(r.rank or "-"),
            r.label,
            f"{r.limit:.3g} {unit_label(r.unit)}" if r.limit else "none",
            r.binding or "-",
            f"{r.recovery_s:.0f} s" if r.recovery_s is not None else "-",
            str(r.instances or "-"),
            str(r.gpus or "-"),
            f"{r.monthly_cost_usd:,.0f}" if r.monthly_cost_usd else "-",
            f"{r.usd_per_million_output_tokens:.2f}" if r.usd_per_million_output_tokens else "-",
        )
    console.print(table)
    for m in result.mismatches:
        console.print(f"[red]mismatch[/red]: {m}")
    console.print(result.sentence)
