"""`capplan whatif`: predicted limit, instances and cost of engine configurations (virtual time)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from capplan.cli import (
    build_options,
    check_number,
    duration_option,
    handle_errors,
    one_growth,
    parse_share,
)
from capplan.commands.console import (
    FORMAT_HELP,
    check_format,
    counted,
    print_result,
    print_routers,
    stderr_console,
)
from capplan.commands.shared import (
    GPU_MEANING,
    GROWTH_MEANING,
    PP_MEANING,
    TP_MEANING,
    CatalogOption,
    ExecutorOption,
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
from contracts.errors import ConfigError, RunError
from contracts.executor import parse_executor
from contracts.jsonio import write_model
from contracts.whatif import Whatif, WhatifCandidate
from planner.engine.precision import precision_overrides
from planner.fleet.routing import RoutingSettings, parse_routings
from planner.slo.spec import parse_slo
from planner.whatif.knobs import parse_vary
from planner.whatif.options import WhatifOptions
from planner.whatif.run import run_whatif
from profiles.model import load_profile

HELP = """Which engine configuration serves this traffic best, before any hardware.

Runs the limit search against the engine model in virtual time for every candidate (GPUs x
--tp x the values of each --vary knob), plans instances and cost for the profile's peak,
marks the cost / p95-latency Pareto front and says which methods pay off, by how much and
why. Each level is judged under capplan limit's steady-state rules (--level-duration: fixed
levels instead, quicker and possibly optimistic). Precision as deployed, in vLLM's
spelling: --quantization (none, fp8, awq, gptq, nvfp4, mxfp4) and --kv-cache-dtype (auto,
fp8); --pp adds pipeline stages beside --tp; --model also takes a Hugging Face config.json
path, and --catalog a file of your own GPUs and models. Knobs: engine (vllm, vllm@0.6,
trtllm, sglang, tgi, llamacpp; or --engine a,b), quantization, kv_cache_dtype,
prefix_caching, kv_dtype, kv_reservation, queue_policy, speculative, max_num_seqs,
max_num_batched_tokens, gpu_memory_utilization (numeric ones take values:
max_num_seqs=64:128:256), disaggregation (off, or units of p prefill and d decode
instances: disaggregation=off:1p1d:1p3d; the KV crosses --kv-link-gbps). --routing compares
routers on the cheapest candidate's planned fleet (as capplan plan --routing).

Examples:

  capplan whatif --profile agent.json --slo "ttft:p95<=2s,tpot:p95<=100ms" \\
      --gpu H100-80GB,L40S-48GB --vary prefix_caching,kv_reservation -o whatif.json

  capplan whatif --profile chat.json --slo "ttft:p99<=2s,tpot:p99<=50ms" \\
      --model llama-3.1-70b --gpu H200-141GB --quantization fp8 --vary kv_cache_dtype \\
      -o whatif.json

  capplan whatif --profile chat.json --slo "ttft:p95<=2s" --gpu H100-80GB --tp 1,2 \\
      --measured-limit runs/h100/limit.json -o whatif.json

  capplan whatif --profile rag.json --slo "ttft:p95<=3s" --gpu H100-80GB,A100-80GB \\
      --engine trtllm,vllm -o engines.json

  capplan whatif --profile chat.json --slo "ttft:p95<=2s" --gpu H100-80GB,H200-141GB \\
      --calibration cal.json -o whatif.json

  capplan whatif --profile agent.json --slo "ttft:p95<=2s" --gpu H100-80GB \\
      --routing prefix_aware,round_robin -o whatif.json
"""

# Candidates whose problem, or note near their latency floor, is printed under the table
# (beyond: notes of the Pareto front only, problems in the output file).
NOTES_SHOWN = 10


def register(app: typer.Typer) -> None:
    app.command(name="whatif", help=HELP)(handle_errors(whatif_command))


# WhatifOptions fields whose option is named otherwise than --field-name (a nested field by its
# path); the model holds every bound and default, the parameters below only spell them.
FLAGS = {
    "profile_path": "--profile",
    "tps": "--tp",
    "pps": "--pp",
    "gpus": "--gpu",
    "kv_link_bandwidth_bytes_per_s": "--kv-link-gbps",
    "gpu_hour_price_usd": "--gpu-hour-price",
    "routings": "--routing",
    "level_s": "--level-duration",
    "routing_settings.prefix_threshold": "--prefix-threshold",
}


def _wholes(option: str, text: str) -> tuple[int, ...]:
    """`1,2` -> (1, 2); ConfigError naming the option for anything but whole numbers (the
    model holds the bound)."""
    try:
        values = tuple(int(p) for p in _split(text))
    except ValueError:
        values = ()
    if not values:
        raise ConfigError(f"{option}: expected whole numbers, e.g. 1,2 (got {text!r})")
    return values


def _split(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def whatif_command(
    profile: Path = typer.Option(..., "--profile", help="Profile JSON (capplan profile)."),
    slo: str = typer.Option(..., "--slo", help='SLO spec, e.g. "ttft:p95<=2s,tpot:p95<=100ms".'),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write whatif.json."),
    model: str = typer.Option("llama-3.1-8b", "--model", help="Model (engine catalog)."),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="Serving engine(s), comma-separated: vllm, vllm@0.6, trtllm, sglang, tgi, "
        "llamacpp. Several are compared like a varied knob. Default: the --calibration's "
        "engine, else vllm; with --calibration only its engine is accepted.",
    ),
    gpu: str = typer.Option(
        "H100-80GB", "--gpu", help=f"{GPU_MEANING} Several, comma-separated, are compared."
    ),
    tp: str = typer.Option(
        "1", "--tp", help=f"{TP_MEANING} Several, comma-separated, are compared."
    ),
    pp: str = typer.Option(
        "1", "--pp", help=f"{PP_MEANING} Several, comma-separated, are compared."
    ),
    quantization: QuantizationOption = "none",
    kv_cache_dtype: KvCacheDtypeOption = "auto",
    catalog: CatalogOption = None,
    vary: str = typer.Option("", "--vary", help="Knobs to vary, comma-separated."),
    tp_link: str = typer.Option(
        "auto", "--tp-link", help="Link between an instance's GPUs: auto, nvlink or pcie."
    ),
    kv_link_gbps: float = typer.Option(
        50.0, "--kv-link-gbps", help="P/D disaggregation: per-GPU KV link, GB/s one way."
    ),
    max_model_len: int | None = typer.Option(
        None,
        "--max-model-len",
        help="Longest request (tokens) the engine admits. Default: the profile's longest.",
    ),
    peak_rps: PeakRps = None,
    peak_window: PeakWindow = "60s",
    peak_quantile: PeakQuantile = "0.99",
    growth: str = typer.Option(
        "1.0", "--growth", help=f"{GROWTH_MEANING} One: whatif compares at one growth."
    ),
    headroom: Headroom = "0.2",
    redundancy: Redundancy = 1,
    gpu_hour_price: GpuHourPrice = None,
    calibrate: Path | None = typer.Option(
        None,
        "--measured-limit",
        help="limit.json of `capplan limit` on the first GPU's baseline: the engine model's "
        "factors are fitted to it.",
    ),
    calibration: Path | None = typer.Option(
        None, "--calibration", help="cal.json of `capplan calibrate`. Its factors for every GPU."
    ),
    level_s: float | None = duration_option(
        None,
        "--level-duration",
        help="Fixed virtual time per level instead of the steady-state rules (quicker; "
        "may be optimistic: it skips the warm-up and settling checks). With --steady: the "
        "rules' shortest measured window.",
    ),
    steady: bool = typer.Option(
        False,
        "--steady",
        help="With --level-duration: keep capplan limit's steady-state rules (the default without "
        "--level-duration).",
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here the simulated traffic."
    ),
    routing: RoutingOption = None,
    prefix_threshold: PrefixThreshold = f"{RoutingSettings.prefix_threshold:g}",
    output_format: str = typer.Option("table", "--format", help=FORMAT_HELP),
    executor: ExecutorOption = "local",
) -> None:
    check_format(output_format)
    check_number("--kv-link-gbps", kv_link_gbps, gt=0)  # as typed, before it becomes bytes/s
    from contracts.calibration import load_calibration_file
    from contracts.limit import load_limit
    from planner.calibrate import calibration_overrides

    options = build_options(
        WhatifOptions,
        FLAGS,
        profile_path=str(profile),
        slo=parse_slo(slo),
        model=model,
        gpus=_split(gpu),
        tps=_wholes("--tp", tp),
        pps=_wholes("--pp", pp),
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        catalog=str(catalog) if catalog is not None else None,
        tp_link=tp_link,
        kv_link_bandwidth_bytes_per_s=kv_link_gbps * 1e9,
        max_model_len=max_model_len,
        peak_window=peak_window,
        peak_quantile=parse_share("--peak-quantile", peak_quantile),
        peak_rps=peak_rps,
        growth=one_growth("whatif", growth),
        headroom=parse_share("--headroom", headroom),
        redundancy=redundancy,
        gpu_hour_price_usd=gpu_hour_price,
        level_s=level_s,
        steady=steady,
        seed=seed,
        routings=parse_routings(routing) if routing is not None else None,
        routing_settings={
            "prefix_threshold": parse_share("--prefix-threshold", prefix_threshold),
            "seed": seed,
        },
        executor=parse_executor(executor),
    )
    precision_overrides(quantization, kv_cache_dtype)  # checks both names
    cal = load_calibration_file(calibration) if calibration else None
    engines = _split(engine if engine is not None else (cal.engine if cal else "vllm"))
    if not engines:
        raise ConfigError("--engine: give at least one engine, e.g. vllm or trtllm,vllm")
    varied = parse_vary(vary)
    one_engine = engines[0] if len(engines) == 1 else "vllm"
    given = (("--quantization", "quantization", quantization, "none"),
             ("--kv-cache-dtype", "kv_cache_dtype", kv_cache_dtype, "auto"),
             ("--engine", "engine", one_engine, "vllm"))  # fmt: skip
    for flag, knob, value, default in given:
        if knob in varied and value != default and value not in varied[knob]:
            raise ConfigError(
                f"{flag} {value} is not among --vary {knob}={':'.join(varied[knob])}: where "
                f"--vary sets {knob}, only its values run; add {value} to them"
            )
    if len(engines) > 1:
        if "engine" in varied:
            raise ConfigError("give the engines either with --engine or with --vary engine=...")
        varied = {"engine": tuple(engines), **varied}
        parse_vary("engine=" + ":".join(engines))  # checks each name
    overrides = calibration_overrides(
        cal, model, options.catalog, engines=[*engines, *varied.get("engine", ())]
    )
    options = options.model_copy(
        update={"engine": engines[0], "vary": varied, "engine_overrides": overrides}
    )
    the_profile = load_profile(profile)
    measured = load_limit(calibrate) if calibrate is not None else None
    stderr = stderr_console()
    result = run_whatif(
        the_profile,
        options,
        calibration=measured,
        progress=lambda m: stderr.print(f"[dim]{m}[/dim]"),
    )
    write_model(output, result)
    print_result(result, output, output_format, lambda console: print_whatif(result, console))
    if not any(c.limit_rps for c in result.candidates):
        # the file and the reasons are out; a script or CI job must not read this as an answer
        raise RunError(
            f"no candidate met the SLO at any load tested: each one's reason is above and "
            f"in {output}"
        )


def _no_cost(c: WhatifCandidate) -> str:
    return "no price" if c.cost_note else "-"


def print_whatif(result: Whatif, console: Console) -> None:
    """The candidates ranked by cost, then the lessons."""
    table = Table(title=f"What if: {result.slo}, peak {result.peak_rps:.3g} req/s")
    for col in ("rank", "candidate", "limit req/s", "out tok/s", "binding", "e2e p95", "n",
                "GPUs", "$/month", "$/M out", "Pareto"):  # fmt: skip
        table.add_column(col, justify="right" if col != "candidate" else "left")
    ordered = sorted(result.candidates, key=lambda c: c.rank or 10**9)
    for c in ordered:
        table.add_row(
            str(c.rank or "-"),
            c.label,
            f"{c.limit_rps:.3g}"
            if c.limit_rps
            else "cannot run (below)"
            if c.cannot_run is not None
            else (c.problem or "-")[:40],
            f"{c.output_tokens_per_s:,.0f}" if c.output_tokens_per_s else "-",
            c.binding or "-",
            f"{c.e2e_p95_s:.1f} s" if c.e2e_p95_s is not None else "-",
            str(c.instances or "-"),
            str(c.gpus or "-"),
            f"{c.monthly_cost_usd:,.0f}" if c.monthly_cost_usd else _no_cost(c),
            f"{c.usd_per_million_output_tokens:.2f}" if c.usd_per_million_output_tokens else "-",
            "*" if c.pareto else "",
        )
    console.print(table)
    for c in ordered:
        if c.limit_rps and c.limit_low_rps is not None and c.limit_high_rps is not None:
            above = (
                " — above its interval: published servers of this class mostly held less than "
                "the model predicts, so measure before sizing on it"
                if c.limit_rps > c.limit_high_rps
                else ""
            )
            console.print(
                f"{c.label}: predicted, not measured: {c.limit_rps:.3g} req/s (interval "
                f"{c.limit_low_rps:.3g}-{c.limit_high_rps:.3g}; {c.limit_interval_basis}){above}",
                highlight=False,
            )
    failed = [c for c in ordered if c.problem]
    for c in failed[:NOTES_SHOWN]:  # the table's cell holds only its start
        console.print(f"[bold]{c.label}[/bold]: {c.problem}", highlight=False)
    if len(failed) > NOTES_SHOWN:
        console.print(f"{len(failed) - NOTES_SHOWN} more without a prediction: problem in the file")
    noted = [c for c in ordered if c.limit_note]
    shown = noted if len(noted) <= NOTES_SHOWN else [c for c in noted if c.pareto]
    for c in shown:
        console.print(f"[bold]{c.label}[/bold]: {c.limit_note}", highlight=False)
    if len(shown) < len(noted):
        console.print(
            f"{len(noted) - len(shown)} more candidates sit near their latency floor: "
            "limit_note in the output file"
        )
    for note in dict.fromkeys(c.cost_note for c in ordered if c.cost_note):
        console.print(f"[bold]Cost[/bold]: {note}", highlight=False)
    for too_long in (a for a in result.assumptions if a.startswith("too long:")):
        console.print(f"[bold yellow]Note[/bold yellow]: {too_long}", highlight=False)
    if result.level_s is not None:
        search = next((a for a in result.assumptions if a.startswith("search:")), "")
        console.print(f"[bold yellow]Note[/bold yellow]: {search}")
    if result.calibration_note:
        console.print(f"[bold]Calibration[/bold]: {result.calibration_note}")
    for lesson in result.lessons:
        console.print(f"- {lesson.sentence}")
    if result.routing is not None:
        console.print(f"[bold]Routers[/bold] on the fleet of {result.routing_candidate}:")
        print_routers(result.routing, console)
    console.print(
        f"{counted(len(result.candidates), 'candidate')}, "
        f"{counted(result.simulated_requests, 'simulated request')} "
        f"in {result.wall_s:.1f} s"
    )
