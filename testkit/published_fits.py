"""Which engine-model factor is fitted on which published row (bench/engine_published.py
fits them; tests/planner/engine/test_published.py checks no checked row is a fitted one)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testkit.published import Row


@dataclass(frozen=True)
class Fit:
    """One factor (`section`/`name`/`field` of efficiency.yaml) fitted on the one row
    `matches` accepts, searched on a log scale between `low` and `high`."""

    section: str
    name: str
    field: str
    low: float
    high: float
    matches: Callable[[Row], bool]

    @property
    def label(self) -> str:
        return f"{self.name} {self.field}"


def _row(**want: Any) -> Callable[[Row], bool]:
    return lambda r: all(
        (re.search(v, getattr(r, k)) if isinstance(v, str) else getattr(r, k) == v)
        for k, v in want.items()
    )


_TRT_8B = {"source": "^trtllm_v014$", "model": "llama-3.1-8b", "precision": "FP16"}
_TRT_8B_FP8 = {"source": "^trtllm_v014_8b_fp8$", "model": "llama-3.1-8b"}
# The L40S's published rows are all FP8 (TensorRT-LLM 0.14-0.17): its mfu and mbu are fitted
# on FP8 rows and take in its FP8 efficiency (left at 1.0: no FP16 row tells them apart).
_L40S = {"source": "^trtllm_v014_l40s$", "gpu": "L40S-48GB"}
FITS = (
    Fit("gpus", "H100-80GB", "mfu", 0.2, 1.0,
        _row(**_TRT_8B, gpu="H100-80GB", workload="fixed 2048/128$")),
    Fit("gpus", "H100-80GB", "mbu", 0.3, 1.0,
        _row(**_TRT_8B, gpu="H100-80GB", workload="fixed 128/2048$")),
    Fit("gpus", "H100-80GB", "fp8_efficiency", 0.3, 1.0,
        _row(**_TRT_8B_FP8, gpu="H100-80GB", workload="fixed 2048/128$")),
    Fit("gpus", "H200-141GB", "mbu", 0.3, 1.0,
        _row(**_TRT_8B_FP8, gpu="H200-141GB", workload="fixed 128/2048$")),
    Fit("gpus", "A100-80GB", "mfu", 0.2, 1.0,
        _row(**_TRT_8B, gpu="A100-80GB", workload="fixed 2048/128$")),
    Fit("gpus", "A100-80GB", "mbu", 0.3, 1.0,
        _row(**_TRT_8B, gpu="A100-80GB", workload="fixed 128/2048$")),
    Fit("gpus", "L40S-48GB", "mfu", 0.2, 1.0,
        _row(**_L40S, model="llama-3.1-8b", workload="fixed 2048/128$")),
    Fit("gpus", "L40S-48GB", "mbu", 0.3, 1.0,
        _row(**_L40S, model="llama-3.1-8b", workload="fixed 128/2048$")),
    Fit("gpus", "H100-80GB", "tp_shard_efficiency", 0.5, 1.0,
        _row(source="trtllm_v014_70b", gpu="H100-80GB", precision="FP16", tp=4,
             workload="fixed 1000/1000$")),
    # No NVLink on the L40S: the share of the PCIe bus bandwidth its all-reduces reach (through
    # PCIe switches and the CPUs' root complexes), on one tensor-parallel row.
    Fit("gpus", "L40S-48GB", "tp_link_efficiency", 0.05, 1.0,
        _row(**_L40S, model="llama-3.1-70b", tp=4, workload="fixed 1000/1000$")),
    Fit("engines", "vllm@0.6", "seq_overhead_s", 1e-6, 1e-3,
        _row(source="lambda_v0", engine="steps=1$", metric="output tok/s")),
    Fit("engines", "vllm@0.6", "frontend_s_per_request", 1e-5, 0.02,
        _row(source="lambda_h100_8b_10", metric="TTFT p50")),
    Fit("engines", "vllm@0.5", "seq_overhead_s", 1e-6, 1e-3,
        _row(source="lambda_v0", engine="v0.5.4", metric="output tok/s")),
    Fit("engines", "vllm@0.10", "seq_overhead_s", 1e-6, 1e-3,
        _row(source="vllm_ci_h100", metric="req/s")),
    Fit("engines", "trtllm@0.14", "frontend_s", 1e-4, 0.1,
        _row(source="online", gpu="H100-80GB", model="8b", workload="^online 2 QPS.*467/256",
             metric="TTFT mean")),
)  # fmt: skip
