"""`capplan calibrate`: fit the engine model to a live server in minutes (thin CLI)."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from capplan.cli import ONE_WHOLE, build_options, duration_option, handle_errors, parse_fraction
from capplan.commands.console import stderr_console, stdout_console
from capplan.commands.shared import (
    GPU_MEANING,
    TP_MEANING,
    ApiKeyEnv,
    CatalogOption,
    KvCacheDtypeOption,
    PpOption,
    QuantizationOption,
)
from contracts.calibration import CalibrationFile
from contracts.errors import InputError
from contracts.jsonio import write_model

HELP = """Characterise a live OpenAI-compatible server and fit the engine model to it.

A closed loop of single requests and small groups of concurrent streams, a minute or two:
prefill time against prompt length (TTFT of one-token answers), decode step time against
batch size and context (chunk times of concurrent streams, ignore_eos), the front end (a
one-token prompt's TTFT minus the model's step for it), the KV cache (llama.cpp's /props,
vLLM's /metrics) and the prefix cache (one prompt twice). Every probe runs once per round,
rounds repeat (A B C A B C) within --budget; the repeats' spread and trend are the drift,
and a calibration beyond --max-drift is refused (exit 1, no file), as is one whose probes the
server's prefix cache answered (vLLM's hit counter grew). Prefill (mfu, and the
attention rate where the GPU spec has its own) and decode (mbu, step and per-sequence
overheads) are fitted apart; some probes are held out of the fit and their error is
reported, with a warning (stderr and cal.json) when it is large or a factor sits at its
bound. Against capplan's emulator, --quantization and --kv-cache-dtype must be the ones it
states (exit 2 otherwise). Use the file with `capplan whatif|plan --calibration cal.json`.

Example:

  capplan calibrate --host http://127.0.0.1:8000 --model llama --gpu H100-80GB \\
      --engine vllm -o cal.json
"""


# CalibrateOptions' fields named otherwise than --field-name
FLAGS = {"served_model": "--model", "budget_s": "--budget"}


def register(app: typer.Typer) -> None:
    app.command(name="calibrate", help=HELP)(handle_errors(calibrate_command))


def calibrate_command(
    host: str = typer.Option(..., "--host", help="Base URL of the OpenAI-compatible endpoint."),
    model: str = typer.Option(..., "--model", help="Model name sent in each request."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write cal.json."),
    engine: str = typer.Option(
        "vllm", "--engine", help="Engine profile: vllm, trtllm, sglang, tgi, llamacpp."
    ),
    gpu: str = typer.Option("H100-80GB", "--gpu", help=f"{GPU_MEANING} The server's."),
    catalog_model: str | None = typer.Option(
        None, "--catalog-model", help="The model's catalog name (default: --model)."
    ),
    catalog: CatalogOption = None,
    tp: int = typer.Option(1, "--tp", parser=ONE_WHOLE, help=f"{TP_MEANING} The server's."),
    pp: PpOption = 1,
    quantization: QuantizationOption = "none",
    kv_cache_dtype: KvCacheDtypeOption = "auto",
    api_key_env: ApiKeyEnv = None,
    budget_s: float = duration_option(
        300.0,
        "--budget",
        help="Time for the probe rounds.",
    ),
    max_drift: str = typer.Option(
        "0.25",
        "--max-drift",
        help="Largest drift of the repeats accepted (median spread or trend, as a share of the "
        "median): a fraction (0.25) or a percent (25%).",
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="Seed of the random draws. Here the random prompts (default: a fresh seed per "
        "run, recorded in cal.json; the same seed twice against one server is refused, its "
        "prefix cache answers the prompts).",
    ),
) -> None:
    from planner.calibrate import CalibrateOptions, run_calibration

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env {api_key_env}: the variable is not set")
    options = build_options(
        CalibrateOptions,
        FLAGS,
        host=host,
        served_model=model,
        api_key=api_key,
        gpu=gpu,
        catalog_model=catalog_model,
        tp=tp,
        pp=pp,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        catalog=str(catalog.resolve()) if catalog is not None else None,
        engine=engine,
        budget_s=budget_s,
        max_drift=parse_fraction("--max-drift", max_drift, positive=True),
        seed=seed,
    )
    stderr = stderr_console()
    cal = run_calibration(options, echo=lambda m: stderr.print(f"[dim]{m}[/dim]"))
    write_model(output, cal, "the calibration")
    print_calibration(cal, stdout_console())
    for warning in cal.warnings:
        stderr.print(f"[bold yellow]warning[/bold yellow]: {warning}", highlight=False)
    typer.echo(f"wrote {output}")


def print_calibration(cal: CalibrationFile, console: Console) -> None:
    """The factors with their sources, then the probes, drift and held-out error."""
    table = Table(title=f"Calibration of {cal.served_model} at {cal.host} ({cal.engine})")
    for col in ("factor", "value", "source"):
        table.add_column(col)
    for name, f in cal.factors.items():
        value = f"{f.value:.4g}" if isinstance(f.value, float) else str(f.value)
        table.add_row(name, value, f.source)
    console.print(table)
    probes = Table(title="Probes (median of the repeats; * held out of the fit)")
    for col in ("probe", "measured", "predicted", "error", "spread"):
        probes.add_column(col, justify="left" if col == "probe" else "right")
    for p in cal.probes:
        pred = f"{p.predicted_s * 1e3:.2f} ms" if p.predicted_s is not None else "-"
        err = f"{p.error:+.1%}" if p.error is not None else "-"
        name = p.name + (" *" if p.held_out else "")
        probes.add_row(name, f"{p.median_s * 1e3:.2f} ms", pred, err, f"{p.spread:.1%}")
    console.print(probes)
    d, h = cal.drift, cal.held_out
    console.print(
        f"drift over {d.rounds} rounds: median spread {d.median_spread:.1%} (worst "
        f"{d.worst_spread:.1%}, {d.worst_probe}), trend {d.trend:+.1%}, bound {d.bound:.0%}; "
        f"held-out error: median {h.median_abs_error:.1%}, worst {h.worst_abs_error:.1%} "
        f"({', '.join(h.probes)})"
    )
    if cal.prefix_cache is not None:
        pc = cal.prefix_cache
        console.print(
            f"prefix cache: a {pc.prompt_tokens}-token prompt again took {pc.ratio:.0%} of its "
            f"first TTFT ({pc.repeat_ttft_s * 1e3:.1f} vs {pc.first_ttft_s * 1e3:.1f} ms)"
        )
