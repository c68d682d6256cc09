"""Serving engines' Prometheus metric names, by engine kind, and telling the engine from the names.

Each role (the request counter, the length and latency histograms, the gauges, the prefix cache)
lists its candidate names, newest first; the first one present on the server is used. An engine
is chosen by `--metric-names` or detected from the metric names the match selects; a missing
required role is one InputError that names what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from contracts.errors import InputError

REQUIRED = ("requests", "input_tokens", "output_tokens")


@dataclass(frozen=True, kw_only=True)
class EngineMetrics:
    """One engine's metric names by role; histograms are named without `_bucket`."""

    kind: str
    requests: tuple[str, ...]  # a counter of finished requests (or a histogram's _count)
    input_tokens: tuple[str, ...]  # histogram of prompt tokens per request
    output_tokens: tuple[str, ...]  # histogram of generated tokens per request
    latency_s: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ttft/tpot/e2e
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    prefix_queries: tuple[str, ...] = ()  # token counters: queries and hits
    prefix_hits: tuple[str, ...] = ()
    prefix_hit_rate: tuple[str, ...] = ()  # a gauge of the hit ratio (older engines)
    kv_usage: tuple[str, ...] = ()  # a gauge of the KV cache's used share (0-1)
    marker: str = ""  # a metric name only this engine exports (detection)

    def role(self, name: str) -> tuple[str, ...]:
        if name in ("ttft", "tpot", "e2e"):
            return self.latency_s.get(name, ())
        value: tuple[str, ...] = getattr(self, name)
        return value


_VLLM_LATENCY = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "tpot": (
        "vllm:request_time_per_output_token_seconds",
        "vllm:time_per_output_token_seconds",
        "vllm:inter_token_latency_seconds",
    ),
    "e2e": ("vllm:e2e_request_latency_seconds",),
}

_VLLM = EngineMetrics(
    kind="vllm",
    requests=("vllm:request_success_total",),
    input_tokens=("vllm:request_prompt_tokens",),
    output_tokens=("vllm:request_generation_tokens",),
    latency_s=_VLLM_LATENCY,
    running=("vllm:num_requests_running",),
    waiting=("vllm:num_requests_waiting",),
    # Counters vllm:prefix_cache_queries / _hits (stored with _total); earlier V1 releases
    # named them vllm:gpu_prefix_cache_*; a bare name where an exporter dropped the suffix.
    prefix_queries=(
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:prefix_cache_queries",
    ),
    prefix_hits=(
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:prefix_cache_hits",
    ),
    # vllm:gpu_cache_usage_perc is deprecated and no longer emitted by default.
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    marker="vllm:prefix_cache_queries_total",
)

ENGINES: dict[str, EngineMetrics] = {
    "vllm": _VLLM,
    # V0 named everything alike but kept the prefix cache as a hit-rate gauge
    "vllm-v0": replace(
        _VLLM,
        kind="vllm-v0",
        prefix_queries=(),
        prefix_hits=(),
        prefix_hit_rate=("vllm:gpu_prefix_cache_hit_rate",),
        marker="vllm:gpu_prefix_cache_hit_rate",
    ),
    "sglang": EngineMetrics(
        kind="sglang",
        requests=("sglang:num_requests_total", "sglang:e2e_request_latency_seconds_count"),
        input_tokens=("sglang:prompt_tokens_histogram",),
        output_tokens=("sglang:generation_tokens_histogram",),
        latency_s={
            "ttft": ("sglang:time_to_first_token_seconds",),
            "tpot": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
            "e2e": ("sglang:e2e_request_latency_seconds",),
        },
        running=("sglang:num_running_reqs",),
        waiting=("sglang:num_queue_reqs",),
        prefix_hit_rate=("sglang:cache_hit_rate",),
        kv_usage=("sglang:token_usage",),
        marker="sglang:num_running_reqs",
    ),
    "tgi": EngineMetrics(
        kind="tgi",
        requests=("tgi_request_success",),
        input_tokens=("tgi_request_input_length",),
        output_tokens=("tgi_request_generated_tokens",),
        latency_s={
            "tpot": ("tgi_request_mean_time_per_token_duration",),
            "e2e": ("tgi_request_duration",),
        },
        running=("tgi_batch_current_size",),
        waiting=("tgi_queue_size",),
        marker="tgi_request_success",
    ),
}


def known_engines() -> str:
    return ", ".join(ENGINES)


def series_names(name: str, histogram: bool) -> set[str]:
    """The names Prometheus stores for a metric: a histogram's _bucket, _sum and _count."""
    return {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if histogram else {name}


def detect_engine(names: set[str]) -> EngineMetrics:
    """The engine whose marker (else whose request counter) is among `names`; InputError else."""
    for engine in ENGINES.values():
        if engine.marker in names:
            return engine
    for engine in ENGINES.values():
        if any(n in names for n in engine.requests):
            return engine
    sample = ", ".join(sorted(names)[:8]) or "none"
    raise InputError(
        "no serving engine's metrics match: expected vLLM (vllm:request_success_total), "
        "SGLang (sglang:num_requests_total), or TGI (tgi_request_success) series; "
        f"found {len(names)} metric name(s): {sample}"
    )


def engine_by_kind(kind: str) -> EngineMetrics:
    if kind not in ENGINES:
        raise InputError(f"unknown engine {kind!r}; known engines: {known_engines()}")
    return ENGINES[kind]


def resolve(engine: EngineMetrics, names: set[str]) -> dict[str, str]:
    """Role -> the first candidate name present; InputError naming every missing required role."""
    histograms = {"input_tokens", "output_tokens", "ttft", "tpot", "e2e"}
    found: dict[str, str] = {}
    roles = [*REQUIRED, "ttft", "tpot", "e2e", "running", "waiting"]
    roles += ["prefix_queries", "prefix_hits", "prefix_hit_rate", "kv_usage"]
    for role in roles:
        for cand in engine.role(role):
            if series_names(cand, role in histograms) <= names:
                found[role] = cand
                break
    missing = [r for r in REQUIRED if r not in found]
    if missing:
        expected = "; ".join(f"{r}: {' or '.join(engine.role(r))}" for r in missing)
        raise InputError(
            f"the {engine.kind} metrics needed are missing for this match ({expected}); "
            "check --match and --metric-names (known engines: " + known_engines() + ")"
        )
    if "prefix_hits" not in found or "prefix_queries" not in found:
        found.pop("prefix_hits", None)
        found.pop("prefix_queries", None)
    return found
