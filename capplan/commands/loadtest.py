"""`capplan loadtest`: profile-driven Locust load test of an OpenAI-compatible endpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.live import Live
from rich.table import Table
from rich.text import Text

from capplan.cli import build_options, duration_option, handle_errors, parse_fraction
from capplan.commands.console import stderr_console, stdout_console
from capplan.commands.shared import (
    ApiKeyEnv,
    Endpoint,
    ExpectWorkers,
    MasterBind,
    NoPreflight,
    ReplaySpeed,
    TimeScale,
)
from capplan.commands.vbench import (
    BenchArgs,
    Burstiness,
    CsvPrefix,
    DatasetName,
    GuidellmData,
    MetricPercentiles,
    NumPrompts,
    PercentileMetrics,
    RandomInputLen,
    RandomOutputLen,
    RandomRangeRatio,
    RequestRate,
    ServingBench,
    serving_bench,
)
from contracts.errors import ConfigError
from contracts.run import Percentiles, StageSummary

if TYPE_CHECKING:
    from contracts.run import StagePlan
    from planner.loadtest.run import LoadTestConfig

HELP = """Load-test an OpenAI-compatible endpoint with traffic drawn from a profile.

Runs Locust headless on a stage plan (open-loop arrivals that never wait for the server),
shows live progress, writes run.json, records.parquet, stages.json and
server_metrics.parquet to the output folder, and prints a per-stage table.

Examples:

  capplan loadtest --host http://127.0.0.1:8000 --model llama --profile profile.json -o runs/sbr

  capplan loadtest --host http://127.0.0.1:8000 --model llama --rate 20 --duration 60 -o runs/r20

  capplan loadtest --host http://127.0.0.1:8000 --model llama --rate 900 --duration 60 \
  --workers auto -o runs/r900

  capplan loadtest --host http://10.0.0.9:8000 --model llama --rate 3000 --duration 60 \
  --master-bind 0.0.0.0:5557 --expect-workers 3 -o runs/r3000   (then on 3 hosts: capplan
  worker --master 10.0.0.5:5557)

  capplan loadtest --host http://127.0.0.1:8000 --model llama --replay trace.csv --replay-speed 10
  --duration 30 -o runs/replay

  capplan loadtest --host http://127.0.0.1:8000 --dataset-name random --random-input-len 512 \
  --random-output-len 128 --num-prompts 200 --percentile-metrics ttft,tpot,itl,e2el \
  --metric-percentiles 50,90,99 --csv runs/rnd/bench -o runs/rnd   (vllm bench serve's spelling)
"""


class StageLines:
    """Progress for a pipe or a CI log (no terminal): one plain line per stage (and one for
    the drain of requests in flight after the last), the stage's last progress line, written
    as the run moves past it; other lines (waiting for workers) at once. `close` writes the
    last stage's line."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self._echo = echo
        self._stage: str | None = None
        self._last: str | None = None

    def __call__(self, line: str) -> None:
        stage, sep, _ = line.partition("  t=")  # planner.loadtest.processes.format_progress
        if not sep:
            self._echo(line)
            return
        if not stage:  # before the first stage starts
            return
        if self._last is not None and stage != self._stage:
            self._echo(self._last)
        self._stage, self._last = stage, line

    def close(self) -> None:
        if self._last is not None:
            self._echo(self._last)
            self._last = None


def _ms(p: Percentiles, attr: str) -> str:
    v = getattr(p, attr)
    return "-" if v is None else f"{v * 1000:.0f}"


def stage_table(stages: list[StageSummary]) -> Table:
    """The per-stage table printed at the end of a run."""
    table = Table(title="stages", title_justify="left")
    judged = any(s.attainment is not None for s in stages)  # run with --slo
    for col in (
        "stage",
        "role",
        "load",
        "offered req/s",
        "achieved req/s",
        "out tok/s",
        "TTFT p50/p95 ms",
        "TPOT p50/p95 ms",
        "ITL p99 ms",
        "E2E p95 ms",
        "lag p99 ms",
        "errors",
        "recovery s",
        *(("goodput req/s", "attainment") if judged else ()),
    ):
        table.add_column(col, justify="left" if col in ("stage", "role") else "right")
    for s in stages:
        load = (
            f"{s.target_rate_rps:g} req/s"
            if s.target_rate_rps
            else (f"{s.target_users} users" if s.target_users else "replay")
        )
        errors = ", ".join(f"{k}:{v}" for k, v in s.errors_by_class.items()) or "0"
        recovery = (
            "-"
            if s.recovered is None
            else (f"{s.recovery_s:.1f}" if s.recovered else "not recovered")
        )
        table.add_row(
            s.name,
            s.role,
            load,
            f"{s.offered_rps:.2f}",
            f"{s.achieved_rps:.2f}",
            f"{s.output_tokens_per_s:.0f}",
            f"{_ms(s.ttft_s, 'p50')}/{_ms(s.ttft_s, 'p95')}",
            f"{_ms(s.tpot_s, 'p50')}/{_ms(s.tpot_s, 'p95')}",
            _ms(s.itl_s, "p99"),
            _ms(s.e2e_s, "p95"),
            _ms(s.schedule_lag_s, "p99"),
            errors,
            recovery,
            *(_judged(s) if judged else ()),
        )
    return table


def _judged(s: StageSummary) -> tuple[str, str]:
    """Goodput and attainment under the run's --slo."""
    goodput = "-" if s.goodput_rps is None else f"{s.goodput_rps:.2f}"
    return goodput, "-" if s.attainment is None else f"{s.attainment:.1%}"


# LoadTestOptions' fields (planner.loadtest.options) that the CLI spells otherwise than
# --field-name; the model holds every bound and default (tests/capplan/test_options_drift.py).
FLAGS = {
    "out_dir": "--output",
    "profile_path": "--profile",
    "duration_s": "--duration",
    "replay_path": "--replay",
    "ignore_eos": "--no-ignore-eos",
    "slo_ttft_s": "--slo-ttft",
    "request_timeout_s": "--timeout",
    "scrape_metrics": "--no-metrics",
    "max_error_share": "--max-errors",
    "preflight": "--no-preflight",
}


@handle_errors
def loadtest(
    host: str = typer.Option(
        ...,
        "--host",
        help="Base URL of the OpenAI-compatible endpoint. E.g. http://127.0.0.1:8000.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Model name sent in each request (default: the first one the target's "
        "/v1/models lists).",
    ),
    out: Path = typer.Option(..., "-o", "--output", help="Run folder to write (runs/NAME)."),
    profile: str | None = typer.Option(
        None, "--profile", help="Profile JSON (default: built-in chat preset)."
    ),
    stage_plan: str | None = typer.Option(
        None,
        "--stage-plan",
        help="steady-burst-recovery | steps | steady | a YAML/JSON stage plan file.",
    ),
    rate: float | None = typer.Option(
        None, "--rate", help="Open-loop rate in req/s (steady load of built-in plans)."
    ),
    users: int | None = typer.Option(None, "--users", help="Closed-loop users instead of a rate."),
    arrival: str = typer.Option(
        "poisson", "--arrival", help="Arrivals at a rate: poisson, constant or gamma:K."
    ),
    duration: float | None = duration_option(
        None,
        "--duration",
        help="Stage length (steady stage of built-in plans).",
    ),
    replay: Path | None = typer.Option(
        None, "--replay", help="Request log whose arrivals are replayed. At their own timestamps."
    ),
    replay_speed: ReplaySpeed = 1.0,
    endpoint: Endpoint = "chat",
    workers: str = typer.Option(
        "0",
        "--workers",
        help="Local Locust worker processes (0: one process), or 'auto': as many as the "
        "plan's peak rate needs (see bench/loadgen_capacity.py --save).",
    ),
    master_bind: MasterBind = None,
    expect_workers: ExpectWorkers = 0,
    api_key_env: ApiKeyEnv = None,
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here requests and arrivals."
    ),
    max_concurrency: int | None = typer.Option(
        None, "--max-concurrency", help="Client cap on requests in flight (reported)."
    ),
    no_ignore_eos: bool = typer.Option(
        False,
        "--no-ignore-eos",
        help="Do not send ignore_eos/min_tokens (for servers that reject them).",
    ),
    slo_ttft: float | None = duration_option(
        None,
        "--slo-ttft",
        help="TTFT the recovery stage must get back under.",
    ),
    slo: str | None = typer.Option(
        None,
        "--slo",
        help="SLO in capplan limit's grammar, e.g. 'ttft:p95<=2s,tpot:p95<=100ms': each stage "
        "in stages.json gets its goodput and attainment under it.",
    ),
    timeout: float = duration_option(
        300.0,
        "--timeout",
        help="Time before a request counts as timed out.",
    ),
    no_metrics: bool = typer.Option(
        False, "--no-metrics", help="Do not scrape the target's /metrics."
    ),
    time_scale: TimeScale = 1.0,
    max_errors: str | None = typer.Option(
        None,
        "--max-errors",
        help="Exit 3 when more than this share of the scheduled requests failed, a fraction "
        "(0.01) or a percent (1%) (default: only when none succeeded). The run folder is "
        "written either way.",
    ),
    no_preflight: NoPreflight = False,
    dataset_name: DatasetName = None,
    data: GuidellmData = None,
    random_input_len: RandomInputLen = None,
    random_output_len: RandomOutputLen = None,
    random_range_ratio: RandomRangeRatio = None,
    num_prompts: NumPrompts = None,
    request_rate: RequestRate = None,
    burstiness: Burstiness = None,
    percentile_metrics: PercentileMetrics = None,
    metric_percentiles: MetricPercentiles = None,
    csv: CsvPrefix = None,
) -> None:
    from contracts.run import Stage, StagePlan
    from locustfiles.stages import resolve_plan
    from planner.loadtest.options import LoadTestOptions
    from planner.loadtest.run import config_profile, run_loadtest
    from planner.loadtest.workers import parse_workers
    from planner.slo.spec import parse_slo

    options = build_options(
        LoadTestOptions,
        FLAGS,
        host=host,
        model=model,
        out_dir=out,
        profile_path=profile,
        stage_plan=stage_plan,
        rate=rate,
        users=users,
        arrival=arrival,
        duration_s=duration,
        replay_path=None if replay is None else str(replay),
        replay_speed=replay_speed,
        endpoint=endpoint,
        workers=parse_workers(workers),
        master_bind=master_bind,
        expect_workers=expect_workers,
        api_key_env=api_key_env,
        seed=seed,
        max_concurrency=max_concurrency,
        ignore_eos=not no_ignore_eos,
        slo_ttft_s=slo_ttft,
        slo=parse_slo(slo) if slo else None,
        request_timeout_s=timeout,
        scrape_metrics=not no_metrics,
        time_scale=time_scale,
        max_error_share=None if max_errors is None else parse_fraction("--max-errors", max_errors),
        preflight=not no_preflight,
    )
    bench = serving_bench(
        BenchArgs(
            dataset_name=dataset_name,
            data=data,
            input_len=random_input_len,
            output_len=random_output_len,
            range_ratio=None
            if random_range_ratio is None
            else parse_fraction("--random-range-ratio", random_range_ratio, below_one=True),
            prompts=num_prompts,
            rate_rps=request_rate,
            burstiness=burstiness,
            metrics=percentile_metrics,
            percentiles=metric_percentiles,
        )
    )
    if bench is not None:
        _check_bench_alone(
            profile=options.profile_path,
            stage_plan=options.stage_plan,
            rate=options.rate,
            users=options.users,
            duration=options.duration_s,
            replay=options.replay_path,
        )
        if options.workers != 0 or options.master_bind:
            raise ConfigError("--dataset-name/--data runs in one process: drop --workers")

    config = options.load_test_config()
    if bench is not None:
        prof, stages = bench.profile(options.seed), bench.plan()
        # Like vLLM, wait for every request (up to its timeout) rather than cancel at a drain.
        config = config.model_copy(
            update={
                "drain_s": options.request_timeout_s + 1.0,
                "profile_label": bench.dataset.describe(),
            }
        )
    elif options.replay_path and options.stage_plan is None:
        stage = Stage(
            name="replay",
            role="replay",
            duration_s=60.0 if options.duration_s is None else options.duration_s,
            arrival="replay",
        )
        stages = StagePlan(name="replay", stages=[stage])
        prof = None
    else:
        prof, _ = config_profile(config)
        stages = resolve_plan(
            options.stage_plan,
            prof,
            rate_rps=options.rate,
            users=options.users,
            duration_s=options.duration_s,
            arrival=options.arrival,
        )
    if not options.preflight and not options.model:
        raise ConfigError("--no-preflight needs --model (the preflight finds the model)")
    console = stderr_console()
    if options.workers is None:
        config = _auto_workers(config, stages)
    check = _check_target if options.preflight else None
    if console.is_terminal:
        with Live(
            Text("starting Locust ..."), console=console, refresh_per_second=4, transient=True
        ) as live:
            summaries = run_loadtest(
                config,
                stages,
                options.out_dir,
                progress=lambda s: live.update(Text(s)),
                check_target=check,
                profile=prof,
            )
    else:
        plain = StageLines(lambda line: typer.echo(line, err=True))
        try:
            summaries = run_loadtest(
                config,
                stages,
                options.out_dir,
                progress=plain,
                check_target=check,
                profile=prof,
            )
        finally:
            plain.close()
    _print_results(out, summaries, bench, csv)
    from contracts.rundir import read_run_info

    for lost in read_run_info(out).lost_workers:
        typer.echo(
            f"warning: worker {lost.worker} (slot {lost.slot} of {lost.of}) was lost at "
            f"t={lost.lost_at_s:.1f} s: {lost.lost_requests} requests recorded as 'lost'",
            err=True,
        )
    typer.echo(f"wrote {out}/run.json, records.parquet, stages.json, server_metrics.parquet")
    _end_with_errors(summaries, options.max_error_share)


def _check_bench_alone(**given: object) -> None:
    """--dataset-name/--data set the traffic and the load: refuse the options that would too."""
    clash = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
    if clash:
        raise ConfigError(
            f"{', '.join(clash)}: not with --dataset-name/--data, which set the requests and "
            "their count (use --request-rate and --max-concurrency for the load)"
        )


def _print_results(
    out: Path, summaries: list[StageSummary], bench: ServingBench | None, csv: str | None
) -> None:
    """The stage table, or vLLM's summary for a --dataset-name/--data run; the CSV files."""
    if bench is None:
        stdout_console().print(stage_table(summaries))
    else:
        from capplan.commands.vbench import summary_lines
        from contracts.rundir import read_records
        from planner.loadtest.benchmark import serving_summary

        summary = serving_summary(read_records(out), bench.metrics, bench.percentiles)
        typer.echo(f"dataset {bench.dataset.describe()}, {bench.prompts} prompts")
        for line in summary_lines(summary):
            typer.echo(line)
    if csv is not None:
        from planner.loadtest.csvout import write_run_csv

        written = write_run_csv(out, csv)
        typer.echo("wrote " + ", ".join(str(p) for p in written))


def _end_with_errors(summaries: list[StageSummary], max_error_share: float | None) -> None:
    """Raise FailedRunError (exit 3) when no request succeeded or failures passed
    `max_error_share`; else name any errors on stderr."""
    from planner.loadtest.preflight import error_line, failed_run

    failed = failed_run(summaries, max_error_share)
    if failed is not None:
        raise failed
    line = error_line(summaries)
    if line:
        typer.echo(f"warning: {line}", err=True)


def _check_target(config: LoadTestConfig) -> str:
    """The preflight (planner.loadtest.preflight): the model to send, said on stderr."""
    from planner.loadtest.preflight import checked_model

    return checked_model(config, lambda line: typer.echo(line, err=True))


def _auto_workers(config: LoadTestConfig, plan: StagePlan) -> LoadTestConfig:
    """`--workers auto`: the count for the plan's peak rate, said on stderr."""
    from planner.loadtest.workers import choose_workers, load_capacity, plan_peak_rps

    choice = choose_workers(plan_peak_rps(plan), load_capacity())
    typer.echo(f"--workers auto: {choice.reason}", err=True)
    return config.model_copy(update={"workers": choice.workers})


def register(app: typer.Typer) -> None:
    app.command("loadtest", help=HELP)(loadtest)
