"""The configuration knobs `capplan whatif --vary` sweeps: each one's values (the first the
baseline) as engine overrides, and the parser of `--vary`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contracts.errors import ConfigError
from planner.engine import engine_profile
from planner.engine.precision import (
    KV_CACHE_DTYPES,
    QUANTIZATION_NAMES,
    kv_cache_overrides,
    quantization,
)
from planner.whatif.disagg import parse_disagg

# Speculative decoding when varied "on": a Llama-3.2-1B-sized draft proposing 4 tokens,
# each accepted with probability 0.7 (inputs: change them with the options).
SPEC_DRAFT_TOKENS = 4
SPEC_ACCEPTANCE = 0.7
SPEC_DRAFT_PARAMS = 1_235_814_400


@dataclass(frozen=True)
class Knob:
    """A configuration choice: its values (the first is the baseline) as engine overrides."""

    name: str
    values: tuple[str, ...]
    overrides: Callable[[str], dict[str, Any]]
    numeric: bool = False
    check: Callable[[str], object] | None = None  # validates a value (raises ConfigError)


def _spec(value: str) -> dict[str, Any]:
    if value == "off":
        return {"spec_draft_tokens": 0}
    return {
        "spec_draft_tokens": SPEC_DRAFT_TOKENS,
        "spec_acceptance_rate": SPEC_ACCEPTANCE,
        "spec_draft_params": SPEC_DRAFT_PARAMS,
    }


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        # The serving engine: its scheduler, KV rules and CPU costs (planner.engine.runtimes).
        Knob(
            "engine",
            ("vllm", "trtllm", "sglang", "tgi"),
            lambda v: {"engine": v},
            check=engine_profile,
        ),  # fmt: skip
        Knob("prefix_caching", ("off", "on"), lambda v: {"prefix_caching": v == "on"}),
        Knob("kv_dtype", ("fp16", "fp8"), lambda v: {"kv_dtype_bytes": 1 if v == "fp8" else 2}),
        # Precision as deployed, in vLLM's spelling (planner.engine.precision).
        Knob("kv_cache_dtype", KV_CACHE_DTYPES, kv_cache_overrides),
        Knob(
            "quantization",
            QUANTIZATION_NAMES,
            lambda v: {"quantization": quantization(v).name},
        ),
        Knob("kv_reservation", ("paged", "static"), lambda v: {"kv_reservation": v}),
        Knob("queue_policy", ("fcfs", "spf"), lambda v: {"queue_policy": v}),
        Knob("speculative", ("off", "on"), _spec),
        Knob("max_num_seqs", ("256", "64"), lambda v: {"max_num_seqs": int(v)}, True),
        Knob(
            "max_num_batched_tokens",
            ("8192", "2048"),
            lambda v: {"max_num_batched_tokens": int(v)},
            True,
        ),
        Knob(
            "gpu_memory_utilization",
            ("0.9", "0.8"),
            lambda v: {"gpu_memory_utilization": float(v)},
            True,
        ),
        # A fleet-level choice, not an engine knob: planner.whatif.disagg (values `off` or
        # `<p>p<d>d`, prefill and decode instances per unit).
        Knob("disaggregation", ("off", "1p1d", "1p3d", "3p1d"), lambda v: {}, check=parse_disagg),
    )
}


def parse_vary(text: str) -> dict[str, tuple[str, ...]]:
    """`prefix_caching,max_num_seqs=64:256` -> {knob: values}; the first value is the baseline.

    Raises ConfigError naming an unknown knob (with the known ones) or a bad value.
    """
    out: dict[str, tuple[str, ...]] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, values = part.partition("=")
        knob = KNOBS.get(name.strip())
        if knob is None:
            raise ConfigError(f"--vary: unknown knob {name!r}; known: {', '.join(KNOBS)}")
        chosen = tuple(v.strip() for v in values.split(":")) if values else knob.values
        for v in chosen:
            if knob.check is not None:
                knob.check(v)
            elif knob.numeric:
                try:
                    if not float(v) > 0:
                        raise ValueError
                except ValueError as err:
                    raise ConfigError(f"--vary {name}: {v!r} is not a positive number") from err
                try:
                    knob.overrides(v)  # int() for a count: 1.5 requests at once is none
                except ValueError as err:
                    raise ConfigError(f"--vary {name}: {v!r} is not a whole number") from err
            elif v not in knob.values:
                raise ConfigError(
                    f"--vary {name}: unknown value {v!r}; known: {', '.join(knob.values)}"
                )
        if len(chosen) < 2:
            example = f"{name}={':'.join(knob.values[:2])}"
            raise ConfigError(f"--vary {name}: give at least two values (e.g. {example})")
        out[knob.name] = chosen
    return out
