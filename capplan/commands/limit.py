"""`capplan limit`: find the per-instance SLO limit of a live endpoint (thin CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from capplan.cli import build_options, duration_option, handle_errors, parse_share
from capplan.commands.shared import (
    ApiKeyEnv,
    Endpoint,
    ExpectWorkers,
    MasterBind,
    NoPreflight,
    TimeScale,
)
from capplan.commands.vbench import CsvPrefix
from contracts.errors import ConfigError

if TYPE_CHECKING:
    from planner.engine import EngineConfig
    from planner.limit.options import LimitOptions

HELP = (
    "Find the highest load one instance carries while the SLO still holds.\n\n"
    "Runs load levels with Locust against the endpoint (each level one stage of the run "
    "directory) and writes OUT/limit.json and the answer in one sentence. By default "
    "(--method fast) a model of the server, characterised in closed loop and corrected on "
    "open-loop levels, answers, and two measured levels around the answer must hold and "
    "fail; --method measured brackets exponentially until a level fails and narrows until "
    "the highest passing and lowest failing levels are within the tolerance.\n\n"
    "Each level is judged in steady state only: it warms up for at least --warmup seconds, "
    "10 mean E2Es and 3 correlation times of the latencies (a queue still filling from the "
    "empty start keeps them correlated), then measures at least --level-duration seconds, "
    "5 mean E2Es, 100 requests and enough for 100 independent ones and 10 independent ones "
    "in the SLO's tail (--tail-requests; requests / correlation time), and extends itself "
    "until requests in flight stop growing (at most --max-level-duration; a level that never "
    "settles fails as unstable). A pass must be certain: its bootstrap interval (blocks of "
    "two correlation times) inside the SLO, else the level is measured again and, still "
    "uncertain, does not count as holding. A level whose schedule lag p99 exceeds a tenth "
    "of the tightest TTFT or E2E threshold is invalid (add --workers).\n\n"
    "SLO forms: percentile 'ttft:p95<=2s,tpot:p95<=100ms,e2e:p99<=30s,errors<=1%' or "
    "attainment 'attainment>=95%:ttft<=2s,tpot<=100ms' (units ms or s, thresholds "
    "inclusive). Every scheduled request counts: a failed one (HTTP error, refusal, timeout, "
    "disconnect) misses every threshold (+inf in a percentile); one still running when the "
    "window closes counts at its age. --success-only takes percentiles over successful "
    "requests alone (vLLM bench style).\n\n"
    "Example:\n\n"
    "capplan limit --host http://127.0.0.1:8000 --model llama "
    "--slo 'ttft:p95<=2s,tpot:p95<=100ms' -o runs/limit1"
)


# LimitOptions' fields (planner.limit.options) that the CLI spells otherwise than
# --field-name; the model holds every bound and default (tests/capplan/test_options_drift.py).
FLAGS = {
    "out_dir": "--output",
    "max_load": "--max",
    "level_duration_s": "--level-duration",
    "max_level_s": "--max-level-duration",
    "hold_budget_s": "--hold-budget",
    "warmup_s": "--warmup",
    "engine": "--calibration",
}


def register(app: typer.Typer) -> None:
    app.command("limit", help=HELP)(handle_errors(limit_command))


def limit_command(
    ctx: typer.Context,
    host: str | None = typer.Option(
        None, "--host", help="Base URL of the OpenAI-compatible endpoint. Required."
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Model name sent in each request (default: the first one the target's "
        "/v1/models lists).",
    ),
    slo: str | None = typer.Option(None, "--slo", help="SLO spec (see above; required)."),
    out: Path | None = typer.Option(
        None, "-o", "--output", help="Run directory to write (required)."
    ),
    profile: str | None = typer.Option(
        None, "--profile", help="Profile JSON for the traffic (default: the chat preset)."
    ),
    dimension: str = typer.Option(
        "rate", "--dimension", help="rate (open loop, req/s) or concurrency (users)."
    ),
    start: float | None = typer.Option(
        None, "--start", help="First level (default 1 req/s or 1 user)."
    ),
    max_load: float | None = typer.Option(None, "--max", help="Highest level to try."),
    level_duration: float = duration_option(
        30.0,
        "--level-duration",
        help="Shortest measured window of a level; levels extend until steady.",
    ),
    level_requests: int = typer.Option(
        100, "--level-requests", help="Fewest requests a level's measured window holds."
    ),
    effective_requests: float | None = typer.Option(
        None,
        "--effective-requests",
        help="Fewest independent requests a level's window holds: requests / their "
        "latencies' correlation time in requests (default 100).",
    ),
    tail_requests: float | None = typer.Option(
        None,
        "--tail-requests",
        help="Fewest independent requests in the SLO's tail a level's window holds: "
        "requests / their latencies' correlation time x (1 - q) (default 10).",
    ),
    max_level_duration: float = duration_option(
        900.0,
        "--max-level-duration",
        help="Longest a level may run; one not steady by then fails as unstable.",
    ),
    hold_budget: float = duration_option(
        180.0,
        "--hold-budget",
        help="Longest the level that must hold a fast answer L (0.9 L) runs; not "
        "certain by then, the search steps down to 0.85 L, then 0.8 L.",
    ),
    arrival: str = typer.Option(
        "poisson", "--arrival", help="Arrivals at a rate: poisson, constant or gamma:K."
    ),
    warmup: float | None = duration_option(
        None,
        "--warmup",
        help="Shortest warm-up excluded at a level's start (default 5 s, and 10 mean E2Es).",
    ),
    success_only: bool = typer.Option(
        False,
        "--success-only",
        help="Percentiles over successful requests only (failures do not count as misses).",
    ),
    tolerance: str = typer.Option(
        "0.05",
        "--tolerance",
        help="Stop when the pass/fail gap is within this share, a fraction (0.05) or a "
        "percent (5%) (--method fast: when the limit's 90 % interval is within 0.6 x this "
        "on either side).",
    ),
    verify_burst: bool = typer.Option(
        False,
        "--verify-burst",
        help="Then run steady-burst-recovery around the limit (burst to twice it).",
    ),
    workers: str = typer.Option(
        "0",
        "--workers",
        help="Locust worker processes (0: one), or 'auto': as many as --max needs "
        "(twice --max with --verify-burst).",
    ),
    master_bind: MasterBind = None,
    expect_workers: ExpectWorkers = 0,
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here traffic and bootstrap."
    ),
    endpoint: Endpoint = "chat",
    api_key_env: ApiKeyEnv = None,
    max_levels: int = typer.Option(24, "--max-levels", help="Most distinct levels to run."),
    min_completed: int = typer.Option(
        50, "--min-completed", help="Completed requests a passing level needs."
    ),
    time_scale: TimeScale = 1.0,
    method: str = typer.Option(
        "fast",
        "--method",
        help="fast (default; minutes where requests take under a second, about a quarter "
        "of measured's time on long ones): characterise the server in closed loop, "
        "predict the limit with a model of it, confirm on open-loop levels and correct "
        "the model by its bias measured on the same requests, then hold two measured "
        "levels, 0.9x the answer (must pass with certainty) and 1.1x (must fail); where "
        "the model misfits or those levels disagree, the measured search goes on from "
        "where they point. On --dimension concurrency the model's own closed loop "
        "answers N users, then N must hold and N+1 (5 % more when larger) must fail, "
        "measured. For SLOs the model has no metric for (a mean or max, queue...), the "
        "measured search runs. measured: "
        "bracket and narrow levels from --start, each held until steady (46-70 minutes "
        "on the project's truth servers).",
    ),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        help="cal.json of `capplan calibrate`. For this endpoint: --method fast predicts "
        "with its engine model (continuous batching, KV cache, chunked prefill) after one "
        "user's requests measure what the client and network add, instead of "
        "characterising the server as slots in closed loop.",
    ),
    no_preflight: NoPreflight = False,
    resume: Path | None = typer.Option(
        None,
        "--resume",
        metavar="RUN_DIR",
        help="Continue the search stopped in RUN_DIR (Ctrl-C, SIGTERM, a crash): its "
        "finished levels are replayed from RUN_DIR/search.json, none is measured again, "
        "and the level it stopped in is run again from its start. Every other option "
        "comes from the run; one given must match it, except --workers, --master-bind, "
        "--expect-workers and --api-key-env.",
    ),
    csv: CsvPrefix = None,
) -> None:
    from planner.limit.options import LimitOptions
    from planner.limit.run import run_limit
    from planner.loadtest.workers import choose_workers, load_capacity, parse_workers
    from planner.slo.spec import parse_slo

    if resume is None:
        for flag, given in (("--host", host), ("--slo", slo), ("-o", out)):
            if given is None:
                raise ConfigError(f"missing option {flag} (needed unless --resume RUN_DIR)")
    elif out is not None and out.resolve() != resume.resolve():
        raise ConfigError(f"-o {out} with --resume {resume}: the run directory is RUN_DIR")
    # a bad SLO fails first
    parsed_slo = None if slo is None else parse_slo(slo, success_only=success_only)
    n_workers = parse_workers(workers)  # None: auto, counted once the options hold
    # every field as the CLI gave it (LimitOptions holds the bounds and defaults)
    values: dict[str, Any] = dict(
        host=host,
        model=model or "",
        slo=parsed_slo,
        out_dir=out,
        profile=profile,
        dimension=dimension,
        start=start,
        max_load=max_load,
        level_duration_s=level_duration,
        max_level_s=max_level_duration,
        hold_budget_s=hold_budget,
        level_requests=level_requests,
        effective_requests=effective_requests,
        tail_requests=tail_requests,
        warmup_s=warmup,
        arrival=arrival,
        tolerance=parse_share("--tolerance", tolerance),
        verify_burst=verify_burst,
        workers=0 if n_workers is None else n_workers,
        seed=seed,
        endpoint=endpoint,
        api_key_env=api_key_env,
        max_levels=max_levels,
        min_completed=min_completed,
        time_scale=time_scale,
        master_bind=master_bind,
        expect_workers=expect_workers,
        method=method,
        engine=None,  # --calibration's, read once the options hold
    )
    options = (
        build_options(LimitOptions, FLAGS, **values)
        if resume is None
        else _resumed(ctx, resume, values, success_only)
    )
    if calibration is not None:
        if options.method != "fast" and resume is None:
            raise ConfigError("--calibration is for --method fast")
        options = options.model_copy(update={"engine": _engine(calibration)})
    if n_workers is None:
        peak = max_load * (2 if verify_burst else 1) if dimension == "rate" and max_load else None
        choice = choose_workers(peak, load_capacity())
        options = options.model_copy(update={"workers": choice.workers})
        typer.echo(f"--workers auto: {choice.reason}", err=True)
    if no_preflight and not model and resume is None:
        raise ConfigError("--no-preflight needs --model (the preflight finds the model)")
    run_limit(
        options,
        echo=typer.echo,
        check_target=None if no_preflight else _check_target,
        resume=resume is not None,
    )
    if csv is not None:
        from planner.loadtest.csvout import write_limit_csv

        written = write_limit_csv(options.out_dir, csv)
        typer.echo("wrote " + ", ".join(str(p) for p in written))


def _engine(calibration: Path) -> EngineConfig:
    """The endpoint's engine as `capplan calibrate` measured it (its cal.json)."""
    from contracts.calibration import load_calibration_file
    from planner.calibrate.session import calibrated_config

    return calibrated_config(load_calibration_file(calibration))


def _check_target(options: LimitOptions) -> str:
    from planner.loadtest.preflight import checked_model

    return checked_model(options, lambda line: typer.echo(line, err=True))


def _resumed(
    ctx: typer.Context, run_dir: Path, values: dict[str, Any], success_only: bool
) -> LimitOptions:
    """The options search.json recorded in `run_dir`, with those given on the command line
    (`values`: each field as the CLI gave it; planner.limit.run then checks that they are the
    same search). Raises InputError when `run_dir` holds no search."""
    from contracts.searchlog import read_search_log
    from planner.limit.options import LimitOptions, recorded_options
    from planner.slo.spec import parse_slo

    recorded = recorded_options(read_search_log(run_dir), run_dir)
    merged = {name: getattr(recorded, name) for name in type(recorded).model_fields}
    field_of = {flag: field for field, flag in FLAGS.items()}
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name or "")
        if source is None or source.name not in ("COMMANDLINE", "ENVIRONMENT"):
            continue
        if param.name == "success_only":  # --success-only alone: the recorded SLO's text
            slo = values["slo"] or parse_slo(recorded.slo.text, success_only=success_only)
            merged["slo"] = slo
            continue
        field = field_of.get(max(param.opts, key=len), param.name or "")
        if field in values and field not in ("out_dir", "engine"):
            merged[field] = values[field]
    return build_options(LimitOptions, FLAGS, **merged)
