"""Prometheus metrics of the emulator under vLLM's metric names, in engine seconds.

Gauges and counters are read from the engine when scraped; latency histograms are observed
as requests reach their first token and finish. Two capplan_emulator_* counters say whether
the emulator process itself kept up with its clock (if not, its latencies are inflated).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from planner.engine import EngineGauges, RequestTimeline
from planner.loadtest.emulated import INFO_METRIC

# vLLM's bucket boundaries for these histograms (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TPOT_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
LATENCY_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

# vLLM's 1-2-5 buckets of request lengths in tokens (build_1_2_5_buckets up to max_model_len;
# here up to a million tokens, past any model's context).
LENGTH_BUCKETS_TOKENS = tuple(float(m * 10**e) for e in range(7) for m in (1, 2, 5))[:-2]


class _EngineCollector(Collector):
    def __init__(
        self,
        gauges: Callable[[], EngineGauges],
        labels: dict[str, str],
        lag: Callable[[], tuple[float, int]],
        block_tokens: int,
    ) -> None:
        self._gauges = gauges
        self._labels = labels
        self._lag = lag
        self._block_tokens = block_tokens

    def collect(self) -> Iterator[Metric]:
        g = self._gauges()
        names = list(self._labels)
        values = list(self._labels.values())

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            m = GaugeMetricFamily(name, doc, labels=names)
            m.add_metric(values, value)
            return m

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            m = CounterMetricFamily(name, doc, labels=names)
            m.add_metric(values, value)
            return m

        yield gauge("vllm:num_requests_running", "Requests in model execution batches.", g.running)
        yield gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", g.waiting)
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                    g.kv_usage_perc)  # fmt: skip
        # vLLM's cache_config_info: the cache's size in its labels (block size is in tokens).
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig.",
            labels=[*names, "num_gpu_blocks", "block_size"],
        )
        info.add_metric([*values, str(g.kv_total_blocks), str(self._block_tokens)], 1.0)
        yield info
        yield counter("vllm:prefix_cache_queries", "Prefix-cache queries, in tokens.",
                      g.prefix_cache_queries_tokens)  # fmt: skip
        yield counter("vllm:prefix_cache_hits", "Prefix-cache hits, in tokens.",
                      g.prefix_cache_hits_tokens)  # fmt: skip
        yield counter("vllm:num_preemptions", "Cumulative number of preemptions.",
                      g.num_preemptions)  # fmt: skip
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                      g.prompt_tokens_total)  # fmt: skip
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.",
                      g.generation_tokens_total)  # fmt: skip
        behind_s, resyncs = self._lag()
        yield counter("capplan_emulator_behind_seconds",
                      "Engine seconds lost because the emulator process fell behind its clock.",
                      behind_s)  # fmt: skip
        yield counter("capplan_emulator_resyncs",
                      "Times the emulator resynced its engine clock after falling behind.",
                      resyncs)  # fmt: skip


class EmulatorMetrics:
    """One registry per emulator: engine gauges plus request latency histograms."""

    def __init__(
        self,
        gauges: Callable[[], EngineGauges],
        model_name: str,
        lag: Callable[[], tuple[float, int]] = lambda: (0.0, 0),
        block_tokens: int = 16,
        identity: Mapping[str, str] | None = None,
    ) -> None:
        labels = {"model_name": model_name, "engine": "0"}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_EngineCollector(gauges, labels, lag, block_tokens))
        if identity:  # capplan_emulator_info: what a limit measured here predicts for
            Info(
                INFO_METRIC,
                "The engine model this emulator serves: a limit measured here is predicted.",
                registry=self.registry,
            ).info(dict(identity))
        names = list(labels)
        self._values = list(labels.values())

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, names, registry=self.registry, buckets=buckets)

        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Time to first token in seconds.", TTFT_BUCKETS_S
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Per-request mean time per output token in seconds.",
            TPOT_BUCKETS_S,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "End to end request latency in seconds.",
            LATENCY_BUCKETS_S,
        )  # fmt: skip
        self.queue = histogram(
            "vllm:request_queue_time_seconds", "Time spent waiting in the queue in seconds.",
            LATENCY_BUCKETS_S,
        )  # fmt: skip
        self.prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.",
            LENGTH_BUCKETS_TOKENS,
        )  # fmt: skip
        self.generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.",
            LENGTH_BUCKETS_TOKENS,
        )  # fmt: skip
        self.success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*names, "finished_reason"],
            registry=self.registry,
        )

    def first_token(self, timeline: RequestTimeline) -> None:
        if timeline.ttft_s is not None:
            self.ttft.labels(*self._values).observe(timeline.ttft_s)
        if timeline.queued_s is not None:
            self.queue.labels(*self._values).observe(timeline.queued_s)

    def finished(self, timeline: RequestTimeline, finish_reason: str) -> None:
        if timeline.e2e_s is not None:
            self.e2e.labels(*self._values).observe(timeline.e2e_s)
        if timeline.tpot_s is not None:
            self.tpot.labels(*self._values).observe(timeline.tpot_s)
        self.prompt_tokens.labels(*self._values).observe(timeline.prompt_tokens)
        self.generation_tokens.labels(*self._values).observe(timeline.output_tokens)
        self.success.labels(*self._values, finish_reason).inc()

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
