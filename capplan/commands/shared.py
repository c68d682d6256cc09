"""Options that several commands take, defined once: the same flag, type and help wherever
it appears (typer reads them from `Annotated` parameter types)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from capplan.cli import ONE_WHOLE
from contracts.executor import EXECUTOR_HELP
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
TIME_SCALE_MEANING = "The endpoint's clock runs this many times faster than wall time."
TimeScale = Annotated[
    float,
    typer.Option(
        "--time-scale",
        help=f"{TIME_SCALE_MEANING} Give capplan emulate's --time-scale S: loads, records and "
        "latencies are kept in its time.",
    ),
]
ReplaySpeed = Annotated[
    float,
    typer.Option(
        "--replay-speed",
        help="Replay the log's arrivals this many times faster than they were logged.",
    ),
]

# --- load from other hosts: loadtest, limit, verify

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
    str,
    typer.Option(
        "--peak-quantile",
        help="Quantile of window rates taken as the peak: a fraction (0.99) or a percent (99%).",
    ),
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
        "--gpu-hour-price",
        help="USD per GPU-hour for every GPU, > 0: for owned GPUs, their amortised cost per "
        "hour (default: public on-demand table).",
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
    str,
    typer.Option(
        "--prefix-threshold",
        help="The prefix router's threshold: the share of a prompt's blocks its best match "
        "must cover, in (0, 1], a fraction (0.5) or a percent (50%); below it the request goes "
        "to the least-loaded instance.",
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
GPU_MEANING = "GPU type from the engine catalog, such as H100-80GB."
TP_MEANING = "Tensor-parallel degree: GPUs per pipeline stage."
PP_MEANING = "Pipeline-parallel stages: an instance holds tp x pp GPUs."
GROWTH_MEANING = "Growth factor of the peak."
PpOption = Annotated[int, typer.Option("--pp", parser=ONE_WHOLE, help=PP_MEANING)]

# plan sizes one configuration; whatif compares several (the reason a list is refused)
ONE_CONFIGURATION_HELP = "plan sizes one configuration (compare several with capplan whatif)"
ONE_CONFIGURATION = "plan sizes one configuration; use `capplan whatif {option} {text}` to compare"

# escaped: rich reads "[dask]" as a style tag and dropped it from the help it printed
ExecutorOption = Annotated[str, typer.Option("--executor", help=escape(EXECUTOR_HELP))]
FleetFull = Annotated[
    bool,
    typer.Option(
        "--fleet-full",
        help="Simulate every instance of each fleet size, not a few instances' share of the "
        "traffic under round-robin, least-outstanding and power-of-two routing (slower at "
        "hundreds of instances; the shortcut falls back to it where its bound fails).",
    ),
]

# --- one name, one concept (scripts/gen_cli_docs.py's table of every option)

# Options whose help differs between commands (or that are a list in one command and one value
# in another) while naming one concept: the table shows the concept once with this meaning.
# Any other option name must mean the same in every command
# (tests/docs/test_vocabulary.py).
SHARED_CONCEPTS: dict[str, str] = {
    # what each command reads or writes
    "--output": "Where the command writes its result: a file, or a run folder for the commands "
    "that load an endpoint.",
    "--profile": "Profile JSON of `capplan profile`: the traffic.",
    "--slo": "SLO in capplan's grammar, e.g. ttft:p95<=2s,tpot:p95<=100ms (docs/reference/slo.md).",
    "--limit": "The per-instance limit: limit.json of `capplan limit` (plan also takes a number "
    "with its unit, 17.4rps).",
    "--previous": "The last document of this kind (report: a plan.json; review: a review.json), "
    "for the change since.",
    # as vLLM spells it: the model's catalog name where capplan models or serves it, the name
    # sent in requests where it loads an endpoint (calibrate has both: --catalog-model)
    "--model": "The model: its catalog name in emulate, plan and whatif; the name sent in each "
    "request in loadtest, limit, calibrate and verify (as vllm serve and vllm bench serve).",
    "--routing": "How requests reach instances: plan and whatif compare routers (a list), "
    "verify routes with one.",
    "--workers": "Local Locust worker processes (loadtest and limit also take 'auto').",
    # a list where the command compares configurations (whatif, compare), one value where it
    # sizes one (plan refuses a list and names whatif; tests/capplan/test_vocabulary.py)
    "--gpu": GPU_MEANING,
    "--tp": TP_MEANING,
    "--pp": PP_MEANING,
    "--growth": GROWTH_MEANING,
    "--engine": "Serving engine: vllm, vllm@0.6, trtllm, sglang, tgi, llamacpp.",
    # vLLM's benchmark flag: loadtest sends with it, profile draws a dataset's arrivals with it
    "--burstiness": "Gamma shape of the gaps between requests, as vLLM's benchmark draws them: "
    "1 is Poisson, < 1 burstier (loadtest: at --request-rate; profile: a lengths table sent "
    "at --rate-rps).",
    # a level of the limit search: measured on the server (limit) or simulated (whatif)
    "--level-duration": "A level's measured window: in limit the shortest (a level extends "
    "until steady); in whatif a fixed window of virtual time instead of the steady-state "
    "rules (with --steady, the shortest, as in limit).",
}
