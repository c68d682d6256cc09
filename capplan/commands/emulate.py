"""`capplan emulate`: serve the engine model as an OpenAI-compatible endpoint in real time."""

from __future__ import annotations

from pathlib import Path

import typer

from capplan.cli import ONE_WHOLE, build_options, duration_option, handle_errors, parse_fraction
from capplan.commands.shared import (
    GPU_MEANING,
    TIME_SCALE_MEANING,
    TP_MEANING,
    CatalogOption,
    KvCacheDtypeOption,
    PpOption,
    QuantizationOption,
)

HELP = """Serve an emulated LLM engine (no GPU) behind an OpenAI-compatible API.

Latencies come from the engine model: continuous batching, a finite KV cache, prefix \
caching and preemption, timed by a roofline of the chosen GPU and model. Endpoints: \
/v1/completions, /v1/chat/completions (stream and non-stream), /v1/models, /health, \
/metrics (vLLM metric names).

Example:

  capplan emulate --gpu H100-80GB --model llama-3.1-8b --port 8000 --time-scale 1

  capplan emulate --gpu H200-141GB --model llama-3.1-70b --quantization fp8 \\
      --kv-cache-dtype fp8 --port 8000
"""

# EmulateOptions' fields named otherwise than --field-name (a fault by its path)
FLAGS = {
    "host": "--bind",
    "step_overhead_s": "--step-overhead",
    "faults.error_rate": "--error-rate",
    "faults.reject_when_waiting": "--reject-when-waiting",
    "faults.drop_rate": "--drop-rate",
    "faults.stall_rate": "--stall-rate",
}


def emulate_command(
    gpu: str = typer.Option("H100-80GB", help=f"{GPU_MEANING} The GPU emulated."),
    model: str = typer.Option("llama-3.1-8b", help="Model name from the catalog."),
    tp: int = typer.Option(1, "--tp", parser=ONE_WHOLE, help=TP_MEANING),
    pp: PpOption = 1,
    quantization: QuantizationOption = "none",
    kv_cache_dtype: KvCacheDtypeOption = "auto",
    host: str = typer.Option("127.0.0.1", "--bind", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on. 0: a free one."),
    engine: str = typer.Option(
        "vllm", help="Engine profile: vllm, vllm@0.6, trtllm, sglang, tgi, llamacpp."
    ),
    max_num_seqs: int | None = typer.Option(
        None, help="Most requests running at once (default: the engine's, vLLM 256)."
    ),
    max_num_batched_tokens: int | None = typer.Option(
        None, help="Token budget of one step (default: the engine's, vLLM 8192)."
    ),
    prefix_caching: bool | None = typer.Option(
        None, help="Reuse cached prompt blocks (default: the engine's, on for vLLM)."
    ),
    queue_policy: str = typer.Option("fcfs", help="Waiting-queue order: fcfs or spf."),
    gpu_memory_utilization: str | None = typer.Option(
        None,
        help="Share of GPU memory used, a fraction (0.9) or a percent (90%) (default: the "
        "engine's, vLLM 0.9).",
    ),
    time_scale: float = typer.Option(
        1.0,
        "--time-scale",
        help=f"{TIME_SCALE_MEANING} Here the engine model's clock (demos: 10); give the "
        "same --time-scale to the commands that load it.",
    ),
    stream_interval: int = typer.Option(
        1, help="Tokens per streamed chunk after the first (as vLLM's --stream-interval)."
    ),
    seed: int = typer.Option(
        0, help="Seed of the random draws. Here output lengths and injected faults."
    ),
    error_rate: str = typer.Option(
        "0", help="Share of requests answered HTTP 500: a fraction (0.01) or a percent (1%)."
    ),
    reject_when_waiting: int | None = typer.Option(
        None, help="Answer HTTP 429 while this many requests wait."
    ),
    drop_rate: str = typer.Option(
        "0", help="Share of streams cut mid-stream: a fraction (0.01) or a percent (1%)."
    ),
    stall_rate: str = typer.Option(
        "0", help="Share of streams that stop sending: a fraction (0.01) or a percent (1%)."
    ),
    mfu: str | None = typer.Option(
        None,
        help="Override the compute efficiency factor: a fraction (0.4) or a percent (40%).",
    ),
    mbu: str | None = typer.Option(
        None,
        help="Override the memory-bandwidth efficiency factor: a fraction (0.8) or a percent "
        "(80%).",
    ),
    step_overhead_s: float | None = duration_option(
        None,
        "--step-overhead",
        help="Override the step overhead.",
    ),
    catalog: CatalogOption = None,
    served_model_name: str | None = typer.Option(None, help="Model id clients must send."),
    engine_config: Path | None = typer.Option(
        None, help="A full EngineConfig JSON (overrides the options above)."
    ),
) -> None:
    from planner.emulator import serve
    from planner.emulator.options import EmulateOptions

    def share(option: str, text: str | None, positive: bool = False) -> float | None:
        return None if text is None else parse_fraction(option, text, positive=positive)

    options = build_options(
        EmulateOptions,
        FLAGS,
        gpu=gpu,
        model=model,
        tp=tp,
        pp=pp,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        host=host,
        port=port,
        engine=engine,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        prefix_caching=prefix_caching,
        queue_policy=queue_policy,
        gpu_memory_utilization=share(
            "--gpu-memory-utilization", gpu_memory_utilization, positive=True
        ),
        time_scale=time_scale,
        stream_interval=stream_interval,
        seed=seed,
        faults={
            "error_rate": parse_fraction("--error-rate", error_rate),
            "reject_when_waiting": reject_when_waiting,
            "drop_rate": parse_fraction("--drop-rate", drop_rate),
            "stall_rate": parse_fraction("--stall-rate", stall_rate),
        },
        mfu=share("--mfu", mfu, positive=True),
        mbu=share("--mbu", mbu, positive=True),
        step_overhead_s=step_overhead_s,
        catalog=catalog,
        served_model_name=served_model_name,
        engine_config=engine_config,
    )
    serve(
        options.config(),
        host=options.host,
        port=options.port,
        speed=options.time_scale,
        seed=options.seed,
        faults=options.faults,
        model_name=options.served_model_name,
        announce=lambda line: typer.echo(line),
        stream_interval=options.stream_interval,
    )


def register(app: typer.Typer) -> None:
    """Add the `emulate` command to `app`."""
    app.command("emulate", help=HELP)(handle_errors(emulate_command))
