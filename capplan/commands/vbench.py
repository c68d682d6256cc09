"""`capplan loadtest` in the spellings of `vllm bench serve` and guidellm: the options of a
fixed-length synthetic run with a request count, their checks, and vLLM's summary printout.

The options are declared once here (typer reads the `Annotated` types); `serving_bench` turns
what was given into one typed `ServingBench` (or None when none of them was given), and
`summary_lines` prints a `planner.loadtest.benchmark.ServingSummary` as vLLM does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import typer

from capplan.cli import check_number
from contracts.errors import ConfigError
from contracts.run import StagePlan
from planner.loadtest.benchmark import (
    ServingSummary,
    count_plan,
    parse_metric_percentiles,
    parse_percentile_metrics,
)
from profiles.model import Profile
from profiles.synthetic import RandomDataset, parse_guidellm_data, random_dataset_profile

DATASETS = ("random",)

DatasetName = Annotated[
    str | None,
    typer.Option(
        "--dataset-name",
        help="vLLM's spelling: 'random' sends fixed-length synthetic prompts (see "
        "--random-input-len) instead of a profile's traffic; exactly --num-prompts requests.",
    ),
]
RandomInputLen = Annotated[
    int | None, typer.Option("--random-input-len", help="Prompt tokens of each random request.")
]
RandomOutputLen = Annotated[
    int | None,
    typer.Option("--random-output-len", help="Output tokens (max_tokens) of each random request."),
]
RandomRangeRatio = Annotated[
    str | None,
    typer.Option(
        "--random-range-ratio",
        help="Lengths drawn uniformly from [len x (1 - r), len x (1 + r)]; 0 <= r < 1, a "
        "fraction (0.1) or a percent (10%).",
    ),
]
NumPrompts = Annotated[
    int | None, typer.Option("--num-prompts", help="Requests to send with --dataset-name/--data.")
]
RequestRate = Annotated[
    float | None,
    typer.Option(
        "--request-rate",
        help="Requests per second with --dataset-name/--data; inf (the default) sends them "
        "all at once (bounded by --max-concurrency).",
    ),
]
Burstiness = Annotated[
    float | None,
    typer.Option(
        "--burstiness",
        help="Gamma shape of the gaps at --request-rate: 1 is Poisson, < 1 burstier.",
    ),
]
PercentileMetrics = Annotated[
    str | None,
    typer.Option(
        "--percentile-metrics",
        help="Metrics whose percentiles the summary prints, comma-separated: ttft, tpot, itl, "
        "e2el.",
    ),
]
MetricPercentiles = Annotated[
    str | None,
    typer.Option(
        "--metric-percentiles", help="Percentiles to print, comma-separated, e.g. 50,90,99."
    ),
]
GuidellmData = Annotated[
    str | None,
    typer.Option(
        "--data",
        help="guidellm's spelling of fixed-length synthetic data: "
        "prompt_tokens=512,output_tokens=128 (same as --dataset-name random).",
    ),
]
CsvPrefix = Annotated[
    str | None,
    typer.Option(
        "--csv",
        help="Also write PREFIX_records.csv and PREFIX_stages.csv (as Locust's --csv); "
        "capplan limit also PREFIX_levels.csv, one row per level of limit.json.",
    ),
]


@dataclass(frozen=True, kw_only=True)
class ServingBench:
    """A `vllm bench serve`-style run: what to send, how fast, and what to print."""

    dataset: RandomDataset
    prompts: int
    rate_rps: float | None  # None: all at once
    arrival: str
    metrics: tuple[str, ...]
    percentiles: tuple[float, ...]

    def plan(self) -> StagePlan:
        return count_plan(self.prompts, self.rate_rps, self.arrival)

    def profile(self, seed: int) -> Profile:
        return random_dataset_profile(self.dataset, self.prompts, seed)


@dataclass(frozen=True, kw_only=True)
class BenchArgs:
    """The options as given (None: not given), before their checks."""

    dataset_name: str | None
    data: str | None
    input_len: int | None
    output_len: int | None
    range_ratio: float | None
    prompts: int | None
    rate_rps: float | None
    burstiness: float | None
    metrics: str | None
    percentiles: str | None


def serving_bench(args: BenchArgs) -> ServingBench | None:
    """The run asked by vLLM's/guidellm's options, or None when neither --dataset-name nor
    --data was given (the others then must not be given either). Raises ConfigError naming
    the option at fault."""
    if args.dataset_name is None and args.data is None:
        given = [name for name, value in _dependents(args) if value is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: need --dataset-name random (or --data)")
        return None
    if args.dataset_name is not None and args.data is not None:
        raise ConfigError("--dataset-name and --data: give one of them")
    check_number("--num-prompts", args.prompts, ge=1)
    check_number("--random-input-len", args.input_len, ge=1)
    check_number("--random-output-len", args.output_len, ge=1)
    check_number("--random-range-ratio", args.range_ratio, ge=0, lt=1)
    check_number("--burstiness", args.burstiness, gt=0)
    rate = 1.0 if args.rate_rps is None else args.rate_rps
    if math.isnan(rate) or rate <= 0:
        raise ConfigError(f"--request-rate {args.rate_rps}: expected a number > 0 or inf")
    burstiness = 1.0 if args.burstiness is None else args.burstiness
    return ServingBench(
        dataset=_dataset(args),
        prompts=1000 if args.prompts is None else args.prompts,
        rate_rps=None if args.rate_rps is None or math.isinf(rate) else rate,
        arrival="poisson" if burstiness == 1.0 else f"gamma:{burstiness:g}",
        metrics=parse_percentile_metrics(args.metrics or "ttft,tpot,itl"),
        percentiles=parse_metric_percentiles(args.percentiles or "99"),
    )


def _dependents(args: BenchArgs) -> list[tuple[str, object]]:
    return [
        ("--random-input-len", args.input_len),
        ("--random-output-len", args.output_len),
        ("--random-range-ratio", args.range_ratio),
        ("--num-prompts", args.prompts),
        ("--request-rate", args.rate_rps),
        ("--burstiness", args.burstiness),
        ("--percentile-metrics", args.metrics),
        ("--metric-percentiles", args.percentiles),
    ]


def _dataset(args: BenchArgs) -> RandomDataset:
    if args.data is not None:
        if args.input_len is not None or args.output_len is not None:
            raise ConfigError("--data sets the lengths: drop --random-input-len/-output-len")
        data = parse_guidellm_data(args.data)
        return data.model_copy(update={"range_ratio": args.range_ratio or 0.0})
    if args.dataset_name not in DATASETS:
        raise ConfigError(
            f"--dataset-name {args.dataset_name!r}: expected one of {', '.join(DATASETS)} "
            "(for traffic like a log's, use --profile or --replay)"
        )
    return RandomDataset(
        input_tokens=1024 if args.input_len is None else args.input_len,
        output_tokens=128 if args.output_len is None else args.output_len,
        range_ratio=args.range_ratio or 0.0,
    )


_HEADERS = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
}


def _line(label: str, value: float | int | None, digits: int = 2) -> str:
    shown = (
        "-" if value is None else (f"{value}" if isinstance(value, int) else f"{value:.{digits}f}")
    )
    return f"{label:<40} {shown:<10}"


def summary_lines(summary: ServingSummary) -> list[str]:
    """`summary` laid out as `vllm bench serve` prints its result (plus the input-token
    throughput and the failed requests)."""
    lines = [
        f"{' Serving Benchmark Result ':=^50}",
        _line("Successful requests:", summary.successful),
        _line("Failed requests:", summary.failed),
        _line("Benchmark duration (s):", summary.duration_s),
        _line("Total input tokens:", summary.input_tokens),
        _line("Total generated tokens:", summary.output_tokens),
        _line("Request throughput (req/s):", summary.request_throughput_rps),
        _line("Input token throughput (tok/s):", summary.input_tokens_per_s),
        _line("Output token throughput (tok/s):", summary.output_tokens_per_s),
        _line("Total Token throughput (tok/s):", summary.total_tokens_per_s),
    ]
    for metric in summary.metrics:
        short, header = _HEADERS[metric.name]
        lines.append(f"{header:-^50}")
        lines.append(_line(f"Mean {short} (ms):", metric.mean_ms))
        lines.append(_line(f"Median {short} (ms):", metric.median_ms))
        for p, value in metric.percentiles_ms.items():
            word = str(int(p)) if int(p) == p else str(p)
            lines.append(_line(f"P{word} {short} (ms):", value))
    lines.append("=" * 50)
    return lines
