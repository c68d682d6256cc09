"""The emulator names its engine model on /metrics (capplan_emulator_info), and a limit
measured on it is marked predicted (planner.limit.run). The HTTP round trip is in
tests/integration/test_limit_emulator.py; here the exposition itself."""

from __future__ import annotations

from planner.emulator.metrics import EmulatorMetrics
from planner.engine import EngineGauges
from planner.loadtest.emulated import EmulatedEngine, parse_emulated

IDENTITY = {
    "runtime": "trtllm", "gpu": "H100-80GB", "model": "llama-3.1-70b", "tp": "4", "pp": "1",
    "quantization": "fp8",
}  # fmt: skip


def _gauges() -> EngineGauges:
    return EngineGauges(**{name: 0 for name in EngineGauges.__dataclass_fields__})


def test_the_emulator_names_its_engine_model_on_metrics() -> None:
    text = EmulatorMetrics(_gauges, "m", identity=IDENTITY).exposition().decode()
    assert "capplan_emulator_info{" in text
    assert parse_emulated(text) == EmulatedEngine(
        runtime="trtllm", gpu="H100-80GB", model="llama-3.1-70b", tp=4, pp=1,
        quantization="fp8",
    )  # fmt: skip
    assert parse_emulated(text).words() == (  # type: ignore[union-attr]
        "the trtllm engine model of llama-3.1-70b on H100-80GB x 4"
    )


def test_a_server_without_the_info_metric_is_not_the_emulator() -> None:
    # vLLM's own metrics (the emulator's, less its identity) and other answers: None.
    text = EmulatorMetrics(_gauges, "m").exposition().decode()
    assert "vllm:num_requests_running" in text
    assert parse_emulated(text) is None
    assert parse_emulated("<html>404</html>") is None
    assert parse_emulated("") is None
    partial = 'capplan_emulator_info{runtime="vllm",gpu="A10-24GB"} 1.0\n'
    assert parse_emulated(partial) is None  # a label missing: not capplan's
