"""Typed contract of cal.json (`"schema": "capplan.calibration/1"`): a live server's calibration.

`capplan calibrate` writes it; `whatif`, `plan` and the fast limit prediction read it with
`load_calibration_file` (the one reader) and pass `engine_overrides()` to the engine model's
`build_engine_config`. Each factor says where it came from; each probe keeps its repeats
(in the order they ran, interleaved with the other probes), whether it was held out of the
fit, and the fitted model's prediction of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.jsonio import read_json, validate

CALIBRATION_SCHEMA = "capplan.calibration/1"

ProbeKind = Literal["prefill", "decode", "frontend", "prefix"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Factor(_Model):
    """One EngineConfig field's calibrated value and where it came from."""

    value: float | int | bool | str
    source: str = Field(description="the probes it was fitted on, a server endpoint, or a default")


class ProbeResult(_Model):
    """One probe (a request shape), its repeated measurements and the model's prediction."""

    name: str
    kind: ProbeKind
    prompt_tokens: int = Field(ge=1)
    batch: int = Field(1, ge=1, description="concurrent streams")
    context_tokens: float = Field(0.0, ge=0, description="mean context of a decode step")
    measured_s: list[float] = Field(description="one per repeat, in the order they ran")
    median_s: float
    spread: float = Field(description="median absolute deviation / median of the repeats")
    held_out: bool = False
    predicted_s: float | None = None
    error: float | None = Field(None, description="predicted / measured median - 1")


class Drift(_Model):
    """How much the repeats of each probe disagreed, and the bound the calibration held to."""

    bound: float = Field(description="largest median spread and |trend| accepted")
    rounds: int
    median_spread: float
    worst_spread: float
    worst_probe: str
    trend: float = Field(
        description="median over probes of the later half's median / the earlier half's - 1"
    )


class HeldOut(_Model):
    """The fitted model's error on the probes left out of the fit."""

    probes: list[str]
    median_abs_error: float
    worst_abs_error: float


class KvCapacity(_Model):
    """The server's KV cache as it reports it (None where it does not)."""

    tokens: int | None = None
    slots: int | None = None
    source: str


class PrefixEffect(_Model):
    """TTFT of the same prompt sent twice: the second time from the prefix cache, if any."""

    prompt_tokens: int
    first_ttft_s: float
    repeat_ttft_s: float
    ratio: float = Field(description="repeat / first")


class CalibrationFile(_Model):
    """cal.json: the engine model's factors for one live server, and the evidence for them."""

    schema_: str = Field(CALIBRATION_SCHEMA, alias="schema")
    created: str
    host: str
    served_model: str
    engine: str
    gpu: str
    model: str = Field(description="the engine catalog's model")
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1, description="pipeline stages of the server")
    quantization: str = Field("none", description="the server's weight format (vLLM's spelling)")
    kv_cache_dtype: str = Field("auto", description="the server's KV-cache format")
    catalog: str | None = Field(None, description="the catalog file the specs came from")
    hardware: dict[str, float] = Field(
        default_factory=dict, description="measured GPU figures (e.g. attention_flops)"
    )
    factors: dict[str, Factor]
    kv: KvCapacity
    prefix_cache: PrefixEffect | None = None
    drift: Drift
    held_out: HeldOut
    probes: list[ProbeResult]
    duration_s: float
    seed: int | None = Field(
        None, description="seed of the random prompts (a fresh one per run unless --seed)"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="why the fit may not describe the server (factors at their bounds, a "
        "large held-out error)",
    )

    def engine_overrides(self) -> dict[str, Any]:
        """build_engine_config's `engine=` and field overrides: every factor's value (the
        factors hold for this engine only: `calibration_overrides` refuses another)."""
        return {"engine": self.engine, **{k: f.value for k, f in self.factors.items()}}


def load_calibration_file(path: Path | str) -> CalibrationFile:
    """Read a cal.json; raises InputError naming the path and the first bad field."""
    path = Path(path)
    data = read_json(path, "calibration")
    return validate(CalibrationFile, data, path, CALIBRATION_SCHEMA)
