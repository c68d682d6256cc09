"""Published engine figures as engine-model scenarios: a row of a published table in, the
engine configuration, the requests and the metric that reproduce its measurement out.

A table has the columns of `../shared/data/engine_published/published.csv` (source, engine,
gpu, precision, model, tp, workload, metric, published, reference). A row is representable
when its engine, workload and metric are among those below; otherwise `scenario` says why
not. Per-request lengths named by a `lambda_raw:<file>` source are read from that file
beside the table (`input_lens`, `output_lens`).

How each benchmark ran, as its source states it:
- trtllm-bench (TensorRT-LLM perf overview, `offline fixed I/O`): all requests queued at
  once, in process (no HTTP front end), fixed lengths, the request count per length pair
  from the same page; its runtime printed max batch 4096, max tokens 8192 and a KV memory
  share of 99 % of the memory free after the engine loads.
- TensorRT-LLM online (`online Q QPS 500 req fixed I/O`): Triton in front, 500 requests
  at Q requests/s (INF: all at once); lengths taken as fixed at the stated values.
- Lambda's vLLM runs (benchmark_serving.py over HTTP): ShareGPT requests all at once,
  max_model_len 2048, gpu_memory_utilization 0.95; exact lengths where the result file
  has them, else bootstrapped from those files' lengths (seeded).
- vLLM CI: `batch-8 32->128 latency` is one offline batch of 8 (no front end);
  `200 ShareGPT req/s` is offline throughput of 200 ShareGPT requests (lengths
  bootstrapped as above).
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from planner.engine import EngineConfig, EngineRequest, RequestTimeline, build_engine_config

# trtllm-bench's request counts per (input, output) length pair (perf-overview.md, v0.14).
TRTLLM_BENCH_REQUESTS = {
    (128, 128): 30000,
    (128, 2048): 3000,
    (128, 4096): 1500,
    (2048, 128): 3000,
    (2048, 2048): 1500,
    (5000, 500): 1500,
    (1000, 1000): 3000,
    (500, 2000): 3000,
    (20000, 2000): 1000,
}
METRICS = (
    "output tok/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TTFT mean ms",
    "TPOT p50 ms",
    "TPOT mean ms",
    "ITL mean ms",
    "ITL p50 ms",
    "batch-8 32->128 latency ms",
    "200 ShareGPT req/s",
)


@dataclass(frozen=True)
class Row:
    """One published figure."""

    index: int
    source: str
    engine: str
    gpu: str
    precision: str
    model: str
    tp: int
    workload: str
    metric: str
    published: float
    reference: str

    @property
    def key(self) -> str:
        """A short name that tells rows apart in a printout."""
        return (
            f"{self.engine.split(' (')[0]} {self.gpu} {self.precision} {self.model} tp{self.tp} "
            f"{self.workload.split(',')[0]} {self.metric}"
        )

    def fields(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "index"}


@dataclass(frozen=True)
class Scenario:
    """What the engine model runs for a row: a config and requests (None when the row
    cannot be represented, with the reason)."""

    row: Row
    config: EngineConfig | None
    requests: tuple[EngineRequest, ...] = ()
    why_not: str | None = None


def read_table(path: Path) -> list[Row]:
    """The rows of a published table (the header of published.csv)."""
    with path.open(newline="", encoding="utf-8") as fh:
        return [
            Row(
                index=i,
                source=r["source"],
                engine=r["engine"],
                gpu=r["gpu"],
                precision=r["precision"],
                model=r["model"],
                tp=int(r["tp"]),
                workload=r["workload"],
                metric=r["metric"],
                published=float(r["published"]),
                reference=r["reference"],
            )
            for i, r in enumerate(csv.DictReader(fh))
        ]


def _engine_settings(row: Row) -> tuple[str, dict[str, Any]] | str:
    """(engine profile, overrides) for the row's engine as its benchmark ran it, or why not."""
    e = row.engine
    if e.startswith("TensorRT-LLM"):
        if "Triton" in e:
            return "trtllm@0.14", {}
        # trtllm-bench printed these runtime settings (perf-overview.md).
        return "trtllm@0.14", {
            "max_num_seqs": 4096,
            "max_num_batched_tokens": 8192,
            "kv_free_fraction": 0.99,
        }
    lambda_run = {"gpu_memory_utilization": 0.95, "max_model_len": 2048, "max_num_seqs": 256}
    steps = re.search(r"steps=(\d+)", e)
    if e.startswith("vLLM 0.6.0") or e.startswith("vLLM v0.6.0"):
        return "vllm@0.6", {**lambda_run, "scheduler_steps": int(steps.group(1)) if steps else 1}
    if e.startswith("vLLM v0.5.4"):
        # chunked prefill on: prefills and decodes mixed, 512-token budget (0.5's default).
        return "vllm@0.5", {**lambda_run, "prefill_first": False, "max_num_batched_tokens": 512}
    if e.startswith("vLLM (CI"):
        # The CI's offline benchmarks (an LLM object, not `vllm serve`) of an unstated
        # version: 256 requests and 8192 tokens a step, whatever the board.
        return "vllm", {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
    return f"engine {e!r} has no profile"


def _precision(row: Row) -> dict[str, Any] | str:
    p = row.precision.upper()
    if p in ("FP16", "BF16"):
        return {"dtype_bytes": 2}
    if p == "FP8":
        return {"dtype_bytes": 1, "kv_dtype_bytes": 1}
    return f"precision {row.precision!r} is not modelled"


def sharegpt_lengths(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every ShareGPT (input, output) length pair of the Lambda result files in `folder`."""
    ins: list[int] = []
    outs: list[int] = []
    for f in sorted(folder.glob("lambda_*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        ins += data["input_lens"]
        outs += data["output_lens"]
    return np.array(ins), np.array(outs)


def _requests(lengths: list[tuple[int, int]], arrivals: np.ndarray) -> tuple[EngineRequest, ...]:
    """Requests of these (input, output) lengths at these arrivals; an output of 0 tokens
    (a failed request in a result file) is taken as 1."""
    return tuple(
        EngineRequest(f"q{i}", int(p), max(1, int(o)), float(a))
        for i, ((p, o), a) in enumerate(zip(lengths, arrivals, strict=True))
    )


def _workload(
    row: Row, folder: Path, max_requests: int | None, rng: np.random.Generator
) -> tuple[tuple[EngineRequest, ...], bool] | str:
    """(requests, whether an HTTP front end served them) for the row's workload, or why not."""
    w = row.workload
    fixed = re.search(r"fixed (\d+)/(\d+)", w)
    cap = max_requests or math.inf
    if w.startswith("offline fixed") and fixed:
        pair = (int(fixed.group(1)), int(fixed.group(2)))
        n = int(min(TRTLLM_BENCH_REQUESTS.get(pair, 1000), cap))
        return _requests([pair] * n, np.zeros(n)), False
    online = re.match(r"online (\S+) QPS (\d+) req", w)
    if online and fixed:
        pair = (int(fixed.group(1)), int(fixed.group(2)))
        n = int(min(int(online.group(2)), cap))
        qps = online.group(1)
        arrivals = np.zeros(n) if qps == "INF" else np.cumsum(rng.exponential(1.0 / float(qps), n))
        return _requests([pair] * n, arrivals - arrivals[0]), True
    if row.source.startswith("lambda_raw:"):
        data = json.loads((folder / row.source.split(":", 1)[1]).read_text(encoding="utf-8"))
        pairs = list(zip(data["input_lens"], data["output_lens"], strict=True))
        return _requests(pairs, np.zeros(len(pairs))), True
    if row.metric.startswith("batch-8 32->128"):
        return _requests([(32, 128)] * 8, np.zeros(8)), False
    offline_200 = row.metric == "200 ShareGPT req/s"
    at_once = re.search(r"ShareGPT (\d+) req at once", w)
    count = 200 if offline_200 else int(at_once.group(1)) if at_once else None
    if count is not None:
        ins, outs = sharegpt_lengths(folder)
        if len(ins) == 0:
            return "no lambda_*.json beside the table to bootstrap ShareGPT lengths from"
        n = int(min(count, cap))
        pick = rng.integers(0, len(ins), n)
        pairs = list(zip(ins[pick], outs[pick], strict=True))
        return _requests(pairs, np.zeros(n)), not offline_200
    return f"workload {w!r} is not representable"


def scenario(
    row: Row,
    folder: Path,
    factors: dict[str, Any] | None = None,
    max_requests: int | None = None,
    seed: int = 0,
) -> Scenario:
    """The engine-model scenario of `row` (`factors`: extra EngineConfig overrides, such as
    a fit's trial values; `max_requests` caps the request count for quick runs)."""
    if row.metric not in METRICS:
        return Scenario(row, None, why_not=f"metric {row.metric!r} is not computed")
    settings = _engine_settings(row)
    precision = _precision(row)
    workload = _workload(row, folder, max_requests, np.random.default_rng(seed))
    for problem in (settings, precision, workload):
        if isinstance(problem, str):
            return Scenario(row, None, why_not=problem)
    assert not isinstance(settings, str) and not isinstance(precision, str)
    assert not isinstance(workload, str)
    engine, overrides = settings
    requests, http = workload
    if not http:
        overrides = {**overrides, "frontend_s": 0.0, "frontend_s_per_prompt_token": 0.0}
    longest = max(r.prompt_tokens + r.max_tokens for r in requests)
    overrides.setdefault("max_model_len", max(longest, 2048))
    overrides = {**overrides, **precision, **(factors or {}), "record_token_times": False}
    config = build_engine_config(row.gpu, row.model, row.tp, engine=engine, **overrides)
    return Scenario(row, config, requests)


def metric_value(metric: str, timelines: list[RequestTimeline]) -> float:
    """The row's metric computed from simulated timelines, as the benchmark computes it."""
    arrival = np.array([t.arrival_s for t in timelines])
    first = np.array([t.first_token_s for t in timelines], dtype=float)
    end = np.array([t.last_token_s for t in timelines], dtype=float)
    out = np.array([t.output_tokens for t in timelines])
    ttft = (first - arrival) * 1e3
    duration = float(np.max(end) - np.min(arrival))
    multi = out > 1
    tpot = (end - first)[multi] / (out[multi] - 1) * 1e3
    if metric == "output tok/s":
        return float(out.sum() / duration)
    if metric == "200 ShareGPT req/s":
        return len(timelines) / duration
    if metric.startswith("batch-8"):
        return float(np.max(end - arrival) * 1e3)
    if metric.startswith("TTFT"):
        return _stat(metric, ttft)
    if metric.startswith("TPOT"):
        return _stat(metric, tpot)
    if metric == "ITL mean ms":
        return float((end - first)[multi].sum() / (out[multi] - 1).sum() * 1e3)
    if metric == "ITL p50 ms":  # every gap between tokens, pooled (needs record_token_times)
        gaps = [np.diff(t.token_times_s) for t in timelines if len(t.token_times_s) > 1]
        return float(np.median(np.concatenate(gaps)) * 1e3)
    raise ValueError(f"unknown metric {metric!r}")


def _stat(metric: str, values: np.ndarray) -> float:
    if "mean" in metric:
        return float(values.mean())
    q = float(re.search(r"p(\d+)", metric).group(1)) / 100  # type: ignore[union-attr]
    return float(np.quantile(values, q))
