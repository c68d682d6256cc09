"""The engine model of an LLM serving engine (specs, KV cache, scheduler, roofline step time).

Runs in whatever clock its caller passes: real time behind the emulator, virtual time in
`simulate` and the fleet simulator.
"""

from planner.engine.build import build_engine_config, calibration_path, load_calibration
from planner.engine.catalog import find_gpu, find_model, gpu_catalog, model_catalog
from planner.engine.engine import Engine, simulate
from planner.engine.requests import (
    EngineGauges,
    EngineRequest,
    RequestTimeline,
    StepResult,
    TokenEvent,
)
from planner.engine.runtimes import ENGINE_PROFILES, EngineProfile, engine_profile
from planner.engine.specs import (
    EngineConfig,
    GpuSpec,
    ModelSpec,
    kv_bytes_per_token,
    kv_capacity_blocks,
    kv_capacity_tokens,
    weight_bytes,
)

__all__ = [
    "ENGINE_PROFILES",
    "EngineProfile",
    "engine_profile",
    "Engine",
    "EngineConfig",
    "EngineGauges",
    "EngineRequest",
    "GpuSpec",
    "ModelSpec",
    "RequestTimeline",
    "StepResult",
    "TokenEvent",
    "build_engine_config",
    "calibration_path",
    "find_gpu",
    "find_model",
    "gpu_catalog",
    "kv_bytes_per_token",
    "kv_capacity_blocks",
    "kv_capacity_tokens",
    "load_calibration",
    "model_catalog",
    "simulate",
    "weight_bytes",
]
