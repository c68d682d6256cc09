"""Options that several commands take, defined once: the same flag, type and help wherever
it appears (typer reads them from `Annotated` parameter types)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.fleet.executor import EXECUTOR_HELP
from planner.fleet.routing import known_routings

# --- reaching the endpoint: loadtest, limit, calibrate

ApiKeyEnv = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        help="Environment variable holding the API key (the key itself is never written).",
    ),
]
Endpoint = Annotated[
    str, typer.Option("--endpoint", help="OpenAI API to call: chat (completions) or completions.")
]
NoPreflight = Annotated[
    bool,
    typer.Option(
        "--no-preflight",
        help="Skip the check before load (the target answers, lists --model, streams one "
        "request); --model is then required.",
    ),
]
TimeScale = Annotated[
    float,
    typer.Option(
        "--time-scale",
        help="The endpoint runs this many times faster than wall time (capplan emulate "
        "--speed S): loads, records and latencies are kept in its time.",
    ),
]

# --- load from other hosts: loadtest, limit

MasterBind = Annotated[
    str | None,
    typer.Option(
        "--master-bind",
        help="HOST:PORT: run the Locust master there and take load from remote workers "
        "(capplan worker --master HOST:PORT on each host) instead of local processes.",
    ),
]
ExpectWorkers = Annotated[
    int,
    typer.Option(
        "--expect-workers", help="With --master-bind: start once this many workers joined."
    ),
]

# --- the planning peak and margins: plan, whatif, compare

PeakRps = Annotated[
    float | None,
    typer.Option("--peak-rps", help="Planning peak in req/s (default: from the profile)."),
]
PeakWindow = Annotated[str, typer.Option("--peak-window", help="Window of the peak rate.")]
PeakQuantile = Annotated[
    float,
    typer.Option("--peak-quantile", help="Quantile of window rates taken as the peak (0-1)."),
]
Headroom = Annotated[
    str,
    typer.Option(
        "--headroom", help="Spare share above the peak: a fraction (0.2) or a percent (20%)."
    ),
]
Redundancy = Annotated[
    int, typer.Option("--redundancy", help="Spare instances beyond the peak's count (N+k).")
]
GpuHourPrice = Annotated[
    float | None,
    typer.Option(
        "--gpu-hour-price", help="USD per GPU-hour for every GPU (default: public on-demand table)."
    ),
]

# --- the fleet simulation's routers: plan, whatif

RoutingOption = Annotated[
    str | None,
    typer.Option(
        "--routing",
        help="Routers to compare in the fleet simulation, comma-separated (the first is the "
        f"one the count assumes), or all: {', '.join(known_routings())}. Each gets its "
        "fewest instances meeting the SLO and the prefix-hit ratio it reaches.",
    ),
]
PrefixThreshold = Annotated[
    float,
    typer.Option(
        "--prefix-threshold",
        help="The prefix router's threshold: the share of a prompt's blocks its best match "
        "must cover, in (0, 1]; below it the request goes to the least-loaded instance.",
    ),
]

# --- the configuration as deployed: whatif, plan, emulate, calibrate

QuantizationOption = Annotated[
    str,
    typer.Option(
        "--quantization",
        help="Weight format, as vLLM's --quantization: none (the checkpoint's bf16), fp8, "
        "awq, gptq (int4 weight-only), nvfp4 (FP4 tensor cores only: B200), mxfp4.",
    ),
]
KvCacheDtypeOption = Annotated[
    str,
    typer.Option(
        "--kv-cache-dtype", help="KV-cache format, as vLLM's: auto (the model's dtype) or fp8."
    ),
]
CatalogOption = Annotated[
    Path | None,
    typer.Option(
        "--catalog",
        help="GPU/model catalog YAML or JSON (gpus:, models:) extending the built-in one; "
        "--model also takes a Hugging Face config.json path.",
    ),
]
PpOption = Annotated[
    int, typer.Option("--pp", help="Pipeline-parallel stages (an instance holds tp x pp GPUs).")
]

ExecutorOption = Annotated[str, typer.Option("--executor", help=EXECUTOR_HELP)]
FleetFull = Annotated[
    bool,
    typer.Option(
        "--fleet-full",
        help="Simulate every instance of each fleet size, not a few instances' share of the "
        "traffic under round-robin, least-outstanding and power-of-two routing (slower at "
        "hundreds of instances; the shortcut falls back to it where its bound fails).",
    ),
]
