"""What `capplan emulate` was asked: each option's bound and default declared once here.

The CLI builds `EmulateOptions` with `capplan.cli.build_options` (a refused value is one
`error:` line naming the option, exit 2); `config()` hands the engine model its typed slice,
an `EngineConfig` (from the catalog, or a full one from --engine-config), and `faults` the
server its fault injection.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.errors import ConfigError, InputError
from planner.emulator.server import Faults
from planner.engine import EngineConfig, build_engine_config
from planner.engine.precision import precision_overrides
from planner.engine.specs import QueuePolicy


class EmulateOptions(BaseModel):
    """One emulated engine: what it models, where it listens, its clock and its faults."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    gpu: str = Field(default="H100-80GB", description="the GPU emulated, a catalog name")
    model: str = Field(default="llama-3.1-8b", description="a catalog model or a config.json")
    tp: int = Field(default=1, ge=1, description="tensor-parallel GPUs per stage")
    pp: int = Field(default=1, ge=1, description="pipeline stages")
    quantization: str = Field(default="none", description="vLLM's --quantization")
    kv_cache_dtype: str = Field(default="auto", description="vLLM's --kv-cache-dtype")
    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8000, ge=0, le=65535, description="0: a free one")
    engine: str = Field(default="vllm", description="engine profile")
    max_num_seqs: int | None = Field(default=None, ge=1, description="None: the engine's")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, description="None: the engine's")
    prefix_caching: bool | None = Field(default=None, description="None: the engine's")
    queue_policy: QueuePolicy = "fcfs"
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="None: the engine's"
    )
    time_scale: float = Field(default=1.0, gt=0, description="engine time per wall second")
    stream_interval: int = Field(default=1, ge=1, description="tokens per chunk after the first")
    seed: int = 0
    faults: Faults = Field(default_factory=Faults)
    mfu: float | None = Field(default=None, gt=0, le=1, description="None: the engine's")
    mbu: float | None = Field(default=None, gt=0, le=1, description="None: the engine's")
    step_overhead_s: float | None = Field(default=None, ge=0, description="None: the engine's")
    catalog: Path | None = Field(
        default=None, description="a GPU/model catalog file extending the built-in one"
    )
    served_model_name: str | None = Field(default=None, description="None: the model's name")
    engine_config: Path | None = Field(
        default=None, description="a full EngineConfig JSON (the options above unused)"
    )

    def config(self) -> EngineConfig:
        """The engine model served: --engine-config's, or the catalog's with the overrides.

        Raises InputError for an unreadable --engine-config, ConfigError for one that is not
        an engine config or for unknown catalog names."""
        if self.engine_config is not None:
            path = self.engine_config
            try:
                return EngineConfig.model_validate_json(path.read_text())
            except OSError as err:
                raise InputError(f"{path}: cannot read ({err.strerror})") from err
            except ValidationError as err:
                raise ConfigError(f"{path}: not a valid engine config: {err}") from err
        return build_engine_config(
            self.gpu,
            self.model,
            tp=self.tp,
            catalog=self.catalog,
            engine=self.engine,
            pp=self.pp,
            **precision_overrides(self.quantization, self.kv_cache_dtype),
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            prefix_caching=self.prefix_caching,
            queue_policy=self.queue_policy,
            gpu_memory_utilization=self.gpu_memory_utilization,
            mfu=self.mfu,
            mbu=self.mbu,
            step_overhead_s=self.step_overhead_s,
            record_token_times=False,
        )
