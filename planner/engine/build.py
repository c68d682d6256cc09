"""An engine configuration by name: GPU x model x engine, with fitted and calibrated factors.

`build_engine_config` layers, lowest first: EngineConfig's defaults; the engine profile's
scheduler and CPU costs (`planner.engine.runtimes`); the GPU's efficiency factors fitted on
published figures (`efficiency.yaml` next to this module, written by
`bench/engine_published.py --fit`, which names the rows each factor was fitted on); a
calibration file for the GPU x model pair (`calibration/<gpu>_<model>.json`); the caller's
overrides.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contracts.errors import CannotServeError, ConfigError, InputError
from planner.engine.catalog import find_gpu, find_model, fp4_gpus, normal_name
from planner.engine.precision import QUANTIZATIONS, peak_flops
from planner.engine.runtimes import EngineProfile, engine_profile
from planner.engine.specs import EngineConfig, GpuSpec, Unservable, kv_capacity_tokens

CALIBRATION_DIR = Path(__file__).with_name("calibration")
EFFICIENCY_PATH = Path(__file__).with_name("efficiency.yaml")
DEFAULT_ENGINE = "vllm"
_FITTED_FIELDS = (
    "mfu",
    "mbu",
    "fp8_efficiency",
    "step_overhead_s",
    "seq_overhead_s",
    "frontend_s",
    "frontend_s_per_request",
    "tp_link_efficiency",
    "tp_hop_latency_s",
    "tp_shard_efficiency",
)


@cache
def _fitted_table() -> dict[str, Any]:
    if not EFFICIENCY_PATH.is_file():
        return {}
    return yaml.safe_load(EFFICIENCY_PATH.read_text(encoding="utf-8")) or {}


def fitted_factors(gpu: str, engine: str) -> dict[str, float]:
    """The factors `efficiency.yaml` holds for this GPU (mfu, mbu) and engine profile (CPU
    and front-end costs), fitted on published figures; empty where it has none."""
    table = _fitted_table()
    out: dict[str, float] = {}
    for section, name in (("gpus", gpu), ("engines", engine)):
        entry = (table.get(section) or {}).get(name) or {}
        out.update({k: float(v) for k, v in entry.items() if k in _FITTED_FIELDS})
    return out


def calibration_path(gpu: str, model: str) -> Path:
    """Where a measured calibration of `gpu` x `model` lives (it may not exist)."""
    return CALIBRATION_DIR / f"{normal_name(gpu)}_{normal_name(model)}.json"


def load_calibration(gpu: str, model: str) -> dict[str, Any] | None:
    """The calibration file's factors for this pair, as EngineConfig fields, or None.

    Format: {"gpu": ..., "model": ..., "mfu": ..., "mbu": ..., "step_overhead_s": ...,
    "source": "..."} with an optional "seq_overhead_s". Raises InputError when the file
    exists but is malformed.
    """
    path = calibration_path(gpu, model)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a readable calibration JSON ({err})") from err
    missing = [k for k in ("mfu", "mbu", "step_overhead_s") if k not in data]
    if missing:
        raise InputError(f"{path}: missing field(s) {', '.join(missing)}")
    try:
        factors: dict[str, Any] = {
            k: float(data[k])
            for k in ("mfu", "mbu", "step_overhead_s", "seq_overhead_s")
            if k in data
        }
    except (TypeError, ValueError) as err:
        raise InputError(f"{path}: factors must be numbers ({err})") from err
    factors["calibration_source"] = f"{path.name}: {data.get('source', 'no source given')}"
    return factors


def build_engine_config(
    gpu: str,
    model: str,
    tp: int = 1,
    catalog: Path | str | None = None,
    engine: str | None = None,
    **overrides: Any,
) -> EngineConfig:
    """An EngineConfig for `gpu` x `model` served by `engine` (default: vLLM), by catalog
    name, with keyword overrides (None values are ignored).

    `model` may be the path of a Hugging Face config.json. Raises ConfigError for an unknown
    name (listing the known ones), a quantization the GPU cannot run (naming the GPUs that
    can), a model that does not fit (by how many GB) or an invalid field.
    """
    gpu_spec = find_gpu(gpu, catalog)
    model_spec = find_model(model, catalog)
    _check_runs(gpu_spec, str(overrides.get("quantization") or "none"), catalog)
    profile = engine_profile(engine or DEFAULT_ENGINE)
    _check_engine_serves(profile, gpu_spec, overrides)
    fields: dict[str, Any] = profile.overrides()
    parallel = tp * int(overrides.get("pp") or 1)
    given = overrides.get("gpu_memory_utilization") is not None
    fields.update(profile.board_defaults(gpu_spec.name, gpu_spec.memory_bytes, parallel, given))
    sources = [f"engine {profile.name}"]
    fitted = fitted_factors(gpu_spec.name, profile.name)
    if fitted:
        fields.update(fitted)
        sources.append(f"{', '.join(fitted)} fitted on published figures (efficiency.yaml)")
    calibration = load_calibration(gpu_spec.name, model_spec.name)
    if calibration is not None:
        sources.append(calibration.pop("calibration_source"))
        fields.update(calibration)
    fields["calibration_source"] = "; ".join(sources)
    fields.update({k: v for k, v in overrides.items() if v is not None})
    context = fields.get("max_model_len") or model_spec.max_context_tokens
    if fields.get("max_num_batched_tokens") is None:
        fields["max_num_batched_tokens"] = profile.batched_tokens(context)
    # V0 with chunked prefill turned on (prefill_first False) cuts prompts like any other.
    fields["whole_prompts"] = bool(fields.get("prefill_first")) and profile.whole_prompts(context)
    if overrides.get("max_num_seqs") is None and fields.get("max_num_seqs") is not None:
        # A default running cap stays within the step's budget (vLLM's arg_utils.py does
        # the same: max_num_seqs = min(max_num_seqs, max_num_batched_tokens)).
        fields["max_num_seqs"] = min(fields["max_num_seqs"], fields["max_num_batched_tokens"])
    by_rule = fields.get("max_num_seqs") is None
    if by_rule:
        fields["max_num_seqs"] = 1  # resolved below, once the KV cache's size is known
    try:
        config = EngineConfig(gpu=gpu_spec, model=model_spec, tp=tp, **fields)
    except ValidationError as err:
        problems = "; ".join(_problem(e["loc"], e["msg"]) for e in err.errors())
        where = f"{gpu_spec.name} x {model_spec.name} x tp={tp}"
        message = f"engine config for {where}: {problems}"
        causes = [e.get("ctx", {}).get("error") for e in err.errors()]
        why = next((c for c in causes if isinstance(c, Unservable)), None)
        if why is not None:
            reason, short = why.error.reason, why.error.short_bytes
            raise CannotServeError(message, reason=reason, short_bytes=short) from err
        raise ConfigError(message) from err
    if by_rule:
        context = config.max_model_len or model_spec.max_context_tokens
        cap = profile.running_cap(
            kv_capacity_tokens(config), context, config.max_num_batched_tokens
        )
        config = config.model_copy(update={"max_num_seqs": cap})
    return config


def _check_runs(gpu: GpuSpec, quantization: str, catalog: Path | str | None) -> None:
    """ConfigError when `gpu` cannot run `quantization` at all (nvfp4 without FP4 cores)."""
    fmt = QUANTIZATIONS.get(quantization)
    if fmt is None:
        return  # EngineConfig names the known ones
    rate = peak_flops(
        bf16_flops=gpu.bf16_flops, fp8_flops=gpu.fp8_flops, fp4_flops=gpu.fp4_flops, fmt=fmt
    )
    if rate is None:
        able = ", ".join(fp4_gpus(catalog)) or "none in the catalog"
        raise CannotServeError(
            f"--quantization {quantization} on {gpu.name}: needs FP4 tensor cores: {able}",
            reason="fp4",
        )


VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD"}


def _check_engine_serves(profile: EngineProfile, gpu: GpuSpec, overrides: dict[str, Any]) -> None:
    """ConfigError when the engine does not run on `gpu`'s vendor (TensorRT-LLM on an AMD
    board) or does not serve the weight or KV-cache format asked for (nvfp4 under vLLM 0.6,
    fp8 under llama.cpp)."""
    if gpu.vendor not in profile.vendors:
        runs_on = " and ".join(VENDOR_NAMES.get(v, v) for v in profile.vendors)
        raise ConfigError(
            f"--engine {profile.name} on {gpu.name}: {profile.label} runs on {runs_on} GPUs "
            f"only, and {gpu.name} is {VENDOR_NAMES.get(gpu.vendor, gpu.vendor)}'s"
        )
    quant = str(overrides.get("quantization") or "none")
    if profile.quantizations is not None and quant not in profile.quantizations:
        raise ConfigError(
            f"--quantization {quant} under --engine {profile.name}: {profile.label} serves "
            f"{', '.join(profile.quantizations)}"
        )
    kv = "fp8" if overrides.get("kv_dtype_bytes") == 1 else "auto"
    if profile.fp8_needs_cores and "fp8" in (quant, kv) and gpu.fp8_flops is None:
        what = "weights" if quant == "fp8" else "KV cache"
        raise ConfigError(
            f"--engine {profile.name} on {gpu.name}: {profile.label} runs FP8 ({what}) on FP8 "
            f"tensor cores only (Ada, Hopper, Blackwell), which {gpu.name} has not"
        )
    if profile.kv_cache_dtypes is not None and kv not in profile.kv_cache_dtypes:
        raise ConfigError(
            f"--kv-cache-dtype {kv} under --engine {profile.name}: {profile.label} keeps its "
            f"KV cache as {', '.join(profile.kv_cache_dtypes)}"
        )


def _problem(loc: tuple[Any, ...], msg: str) -> str:
    """One validation error as a user reads it: "pp: Input should be ..." for a field; the
    config check's own sentence, without pydantic's "Value error, ", for the whole config."""
    msg = msg.removeprefix("Value error, ")
    field = ".".join(str(p) for p in loc)
    return f"{field}: {msg}" if field else msg
