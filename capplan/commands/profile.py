"""`capplan profile`: request logs (or a preset) -> profile JSON, a summary table, charts."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from capplan.cli import build_options, handle_errors, parse_share
from contracts.errors import ConfigError, InputError

if TYPE_CHECKING:
    from profiles.model import Profile
    from profiles.options import ProfileOptions
    from profiles.prometheus.build import PromSource

HELP = """Profile request logs: arrivals, lengths, prefix reuse, sessions -> PROFILE.json.

Reads Azure LLM inference traces, BurstGPT, Mooncake JSONL, OpenAI-style JSONL request \
logs, OpenTelemetry GenAI traces (OTLP JSON) and generic CSV/Parquet/JSONL tables \
(auto-detected; gzip and zstd too; several files and globs), on this machine or in object \
storage (s3://, gs://, az://, https://, read in place with the provider's environment \
credentials). Without logs, --preset writes a built-in profile adjusted by your figures.

Examples:

  capplan profile logs/*.jsonl.gz -o profile.json --plots charts/

  capplan profile sample:azure_conv -o profile.json

  capplan profile 's3://bucket/q4/*.parquet' -o profile.json   (AWS_* environment variables)

  capplan profile otel/traces.jsonl --group-by model -o p.json   (OTLP file exporter output)

  capplan profile requests.parquet --columns arrival=ts,input=prompt,output=completion -o p.json

  capplan profile --preset chat --rate-rps 40 --peak-to-mean 2.5 -o prelaunch.json

  capplan profile dataset_lengths.csv --rate-rps 8 -o p.json   (lengths only: Poisson arrivals)

  capplan profile --merge 'days/day-*.json' -o quarter.json   (partial profiles -> one)

  capplan profile prometheus:http://prom:9090 --match '{job="vllm"}' --since 7d -o p.json

  (the engines' own metrics, read from Prometheus: vLLM, SGLang or TGI; what metrics cannot \
tell is listed with the assumption used, under source.limitations)
"""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k|ki|m|mi|g|gi)?\s*$", re.IGNORECASE)
_MULT = {None: 1, "k": 1000, "ki": 1024, "m": 10**6, "mi": 1 << 20, "g": 10**9, "gi": 1 << 30}


def parse_cache_tokens(spec: str | None) -> list[int] | None:
    """'4096,64Ki,1M' -> [4096, 65536, 1000000]; ConfigError on an entry that is no size
    (ProfileOptions refuses one below 1 token)."""
    if spec is None or not spec.strip():
        return None
    sizes = []
    for part in spec.split(","):
        m = _SIZE.match(part)
        if not m:
            raise ConfigError(
                f"--cache-tokens: {part!r} is not a token count (e.g. 65536, 64Ki, 2M)"
            )
        unit = m.group(2).lower() if m.group(2) else None
        sizes.append(int(float(m.group(1)) * _MULT[unit]))  # ProfileOptions: each >= 1
    return sizes


# ProfileOptions' fields (profiles.options) named otherwise than --field-name; the model
# holds every bound and default (tests/capplan/test_options_drift.py)
FLAGS = {
    "figures.rate_rps": "--rate-rps",
    "figures.peak_to_mean": "--peak-to-mean",
    "figures.input_mean": "--input-mean",
    "figures.output_mean": "--output-mean",
    "figures.shared_prefix_tokens": "--shared-prefix-tokens",
    "figures.shared_prefix_share": "--shared-prefix-share",
}


def _resolve_samples(logs: list[str]) -> list[str]:
    from profiles.samples import sample_path

    return [str(sample_path(x[7:])) if x.startswith("sample:") else x for x in logs]


def profile_command(
    logs: list[str] = typer.Argument(
        None,
        help="log files or globs, local or s3://, gs://, az://, https:// URLs; "
        "'sample:azure_conv' for the shipped sample",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="where to write PROFILE.json"),
    log_format: str = typer.Option(
        "auto",
        "--log-format",
        help="format of the logs: auto|openai-jsonl|otlp|azure|burstgpt|mooncake|table",
    ),
    columns: str = typer.Option(
        None,
        "--columns",
        help="table columns: arrival=..,input=..,output=..,session=..,model=..,tenant=..,ok=..",
    ),
    group_by: str = typer.Option(
        None,
        "--group-by",
        help="also profile each value of this column (model, tenant, or a table column)",
    ),
    tokenizer: Path = typer.Option(
        None,
        "--tokenizer",
        help="Hugging Face tokenizer.json for prompt text (default: approximate)",
    ),
    block_tokens: int = typer.Option(
        16,
        "--block-tokens",
        help="prefix-cache block size in tokens (Mooncake hash_ids are 512)",
    ),
    cache_tokens: str = typer.Option(
        None,
        "--cache-tokens",
        help="cache sizes for the LRU hit-ratio curve, comma-separated, e.g. 64Ki,1Mi,16Mi",
    ),
    time_unit: str = typer.Option(
        "auto", "--time-unit", help="unit of numeric timestamps: auto|s|ms|us|ns"
    ),
    plots: Path = typer.Option(None, "--plots", help="write PNG charts into this folder"),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here the (input, output) pair sampler."
    ),
    preset: str = typer.Option(
        None, "--preset", help="chat|rag|agent|batch: a built-in profile instead of logs"
    ),
    rate_rps: float = typer.Option(
        None,
        "--rate-rps",
        help="preset: mean request rate; a table of lengths without arrival times (a "
        "benchmark dataset): send it at this rate as a Poisson process",
    ),
    peak_to_mean: float = typer.Option(
        None, "--peak-to-mean", help="preset: 60 s peak rate over the mean"
    ),
    input_mean: float = typer.Option(None, "--input-mean", help="preset: mean input tokens"),
    output_mean: float = typer.Option(None, "--output-mean", help="preset: mean output tokens"),
    shared_prefix_tokens: int = typer.Option(
        None, "--shared-prefix-tokens", help="preset: tokens of a shared prompt prefix"
    ),
    shared_prefix_share: str = typer.Option(
        None,
        "--shared-prefix-share",
        help="preset: share of requests that start with it, a fraction (0.8) or a percent (80%)",
    ),
    chunk_rows: int = typer.Option(
        None,
        "--chunk-rows",
        help="read tabular logs (CSV, Parquet, JSONL), Mooncake traces and OpenAI-style logs "
        "in chunks of this many rows, in bounded memory (default: 1 M-row chunks for "
        "Parquet logs over 4 M rows and other files over 256 MB, 50 k for OpenAI-style "
        "logs; --group-by too, up to 200 values)",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no summary table"),
    match: str = typer.Option(
        "", "--match", help="prometheus: label selector of the engines, e.g. '{job=\"vllm\"}'"
    ),
    since: str = typer.Option(
        "7d",
        "--since",
        help="prometheus: start, as a duration before --until (7d, 13w), ISO-8601 or epoch seconds",
    ),
    until: str = typer.Option(
        None, "--until", help="prometheus: end (default now; ISO-8601, epoch s or 1d ago)"
    ),
    step: str = typer.Option(
        "15s", "--step", help="prometheus: query resolution, the scrape interval (divides 60s)"
    ),
    metric_names: str = typer.Option(
        "auto",
        "--metric-names",
        help="prometheus: whose metric names the engines export: auto|vllm|vllm-v0|sglang|tgi",
    ),
    token_env: str = typer.Option(
        None, "--token-env", help="prometheus: environment variable holding a bearer token"
    ),
    basic_auth_env: str = typer.Option(
        None,
        "--basic-auth-env",
        help="prometheus: environment variable holding USER:PASSWORD for basic auth",
    ),
    burstiness: float = typer.Option(
        None,
        "--burstiness",
        help="with --rate-rps on a lengths table: gamma-distributed gaps of this shape, as "
        "vLLM's benchmark draws them (1: Poisson; below 1 burstier, above 1 more even)",
    ),
    merge: bool = typer.Option(
        False,
        "--merge",
        help="the arguments are partial profiles (say one per day) to merge into one; the "
        "merged profile's 'merge' section says which statistics are exact and bounds the rest",
    ),
) -> None:
    from profiles.options import ProfileOptions

    options = build_options(
        ProfileOptions, FLAGS, logs=logs or [], output=output, log_format=log_format,
        columns=columns, group_by=group_by, tokenizer=tokenizer, block_tokens=block_tokens,
        cache_tokens=parse_cache_tokens(cache_tokens), time_unit=time_unit, plots=plots,
        seed=seed, preset=preset, chunk_rows=chunk_rows, quiet=quiet, match=match,
        since=since, until=until, step=step, metric_names=metric_names, token_env=token_env,
        basic_auth_env=basic_auth_env, merge=merge, burstiness=burstiness,
        figures={
            "rate_rps": rate_rps, "peak_to_mean": peak_to_mean, "input_mean": input_mean,
            "output_mean": output_mean, "shared_prefix_tokens": shared_prefix_tokens,
            "shared_prefix_share": None
            if shared_prefix_share is None
            else parse_share("--shared-prefix-share", shared_prefix_share),
        },
    )  # fmt: skip
    source = options.prom_source()
    if options.burstiness is not None and (options.preset or options.merge or source):
        raise ConfigError("--burstiness applies to a table of lengths sent at --rate-rps")
    if source is not None:
        _write(_from_metrics(source, options.seed), options)
        return
    logs = options.logs
    if logs and not options.merge and options.preset is None:
        # The files' sha256 (source.digest) starts now, on a thread of its own, while the
        # profiler's modules import on this one (profiles.digest).
        from profiles.digest import start_digest

        start_digest(_resolve_samples(logs))

    if options.merge:
        if options.preset is not None or not logs:
            raise InputError("--merge takes partial profile JSON files (and no --preset)")
        from profiles.merge import load_shards, merge_profiles

        prof = merge_profiles(*load_shards(logs), seed=options.seed)
    elif options.preset is not None:
        if logs:
            raise InputError("give either log files or --preset, not both")
        from profiles.presets import preset_profile

        prof = preset_profile(options.preset, seed=options.seed, **options.figures.model_dump())
    else:
        used = [f for f in options.figures.given() if f != "rate_rps"]
        if used:
            raise ConfigError(f"--{used[0].replace('_', '-')} only applies with --preset")
        if not logs:
            raise InputError("no log files given (or use --preset chat|rag|agent|batch)")
        from profiles.build import build_profile

        if options.burstiness is not None and options.figures.rate_rps is None:
            raise ConfigError("--burstiness shapes the gaps of --rate-rps: give both")
        prof = build_profile(_resolve_samples(logs), **options.read_args())
    _write(prof, options)


def register(app: typer.Typer) -> None:
    app.command("profile", help=HELP)(handle_errors(profile_command))


def _from_metrics(source: PromSource, seed: int) -> Profile:
    from profiles.prometheus.build import build_prometheus_profile

    return build_prometheus_profile(source, seed=seed)


def _write(prof: Profile, options: ProfileOptions) -> None:
    """Save the profile, then print skips, warnings, limitations and the summary."""
    from profiles.model import save_profile

    output, plots = options.output, options.plots

    try:
        save_profile(prof, output)
    except OSError as e:
        raise InputError(f"{output}: cannot write the profile ({e})") from e
    src = prof.source
    if src.rows_skipped:
        typer.echo(f"skipped {src.rows_skipped:,} row(s):", err=True)
        for ex in src.skip_examples:
            typer.echo(f"  {ex}", err=True)
        shown = len(src.skip_examples)
        if src.rows_skipped > shown:
            reasons = "; ".join(f"{why}: {n:,}" for why, n in src.skip_reasons.items())
            typer.echo(f"  ... and {src.rows_skipped - shown:,} more ({reasons})", err=True)
    for w in src.warnings:
        typer.echo(f"warning: {w}", err=True)
    for lim in src.limitations:
        typer.echo(f"not in the source: {lim.unknown}; assumed: {lim.assumption}", err=True)
    if not options.quiet:
        from capplan.commands.console import stdout_console
        from profiles.summary import summary_table

        stdout_console().print(summary_table(prof))
    if plots is not None:
        from profiles.plots import write_plots

        files = write_plots(prof, plots)
        typer.echo(f"charts: {len(files)} PNG files in {plots}")
    typer.echo(f"wrote {output}")
    # Everything is written and closed: the exit need not collect every object the
    # imports made (a full collection, about 60 ms at exit).
    gc.freeze()
