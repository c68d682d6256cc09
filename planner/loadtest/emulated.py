"""Whether an endpoint is capplan's emulator, from its own /metrics.

`capplan emulate` serves the engine model in real time. A limit measured on it is the engine
model's prediction for the GPU it names, not a measurement on one, so the limit carries the
prediction's interval and the report says "predicted, not measured". The emulator says what
it is in one Prometheus info metric, `capplan_emulator_info{runtime, gpu, model, tp, pp,
quantization, kv_cache_dtype} 1` (as vLLM states its cache configuration in
`vllm:cache_config_info`; kv_cache_dtype is absent from older emulators); `emulated_engine`
reads it back. A real server has no such metric (or no /metrics): None.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

INFO_METRIC = "capplan_emulator"  # exposed as capplan_emulator_info (prometheus_client's Info)
INFO_LABELS = ("runtime", "gpu", "model", "tp", "pp", "quantization")
METRICS_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class EmulatedEngine:
    """The engine model behind an emulator: its engine profile (vllm, trtllm, sglang), the
    catalog GPU and model, its parallelism and weight format."""

    runtime: str
    gpu: str
    model: str
    tp: int
    pp: int
    quantization: str
    kv_cache_dtype: str | None = None  # absent from older emulators' info

    def words(self) -> str:
        parallel = f" x {self.tp * self.pp}" if self.tp * self.pp > 1 else ""
        return f"the {self.runtime} engine model of {self.model} on {self.gpu}{parallel}"


def parse_emulated(exposition: str) -> EmulatedEngine | None:
    """The emulator's identity in a Prometheus text exposition; None without one (or with a
    label missing or malformed: an endpoint that is not capplan's)."""
    try:
        families = list(text_string_to_metric_families(exposition))
    except ValueError:
        return None
    for family in families:
        if family.name not in (INFO_METRIC, f"{INFO_METRIC}_info"):  # parsers differ
            continue
        for sample in family.samples:
            labels = sample.labels
            if not all(labels.get(k) for k in INFO_LABELS):
                continue
            try:
                tp, pp = int(labels["tp"]), int(labels["pp"])
            except ValueError:
                continue
            return EmulatedEngine(
                runtime=labels["runtime"], gpu=labels["gpu"], model=labels["model"],
                tp=tp, pp=pp, quantization=labels["quantization"],
                kv_cache_dtype=labels.get("kv_cache_dtype") or None,
            )  # fmt: skip
    return None


def emulated_engine(host: str, api_key: str | None = None) -> EmulatedEngine | None:
    """Read `host`/metrics and say whether it is capplan's emulator. Any failure (no
    /metrics, an error status, no answer) is a real server's answer: None."""
    request = urllib.request.Request(host.rstrip("/") + "/metrics")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=METRICS_TIMEOUT_S) as response:
            body = response.read(8 * 1024 * 1024).decode("utf-8", errors="replace")
    except (OSError, ValueError):  # URLError and HTTPError are OSErrors
        return None
    return parse_emulated(body)
