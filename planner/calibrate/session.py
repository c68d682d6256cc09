"""One calibration from start to file: read the server's KV figures, run the probe rounds,
check drift, fit prefill and decode apart, check the held-out probes, build cal.json's model.

`fit_measured` is the pure half (measured repeats in, `CalibrationFile` out), so the fitting
is tested on synthetic probes; `run_calibration` adds the server. `calibrated_config` is how
a prediction uses a cal.json: its overrides on build_engine_config, its measured hardware
figures on the GPU spec.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from contracts.calibration import (
    CALIBRATION_SCHEMA,
    CalibrationFile,
    Factor,
    HeldOut,
    KvCapacity,
    PrefixEffect,
    ProbeResult,
)
from contracts.errors import ConfigError, RunError
from planner.calibrate.fit import (
    MBU_GRID,
    MFU_GRID,
    DecodeFit,
    DecodePoint,
    PrefillFit,
    PrefillPoint,
    decode_step_s,
    fit_decode,
    fit_prefill,
    frontend_s,
    predicted_ttft_s,
    with_attention,
)
from planner.calibrate.measure import (
    DEFAULT_MAX_DRIFT,
    Measured,
    check_drift,
    drift_of,
    probe_plan,
    run_rounds,
    spread,
)
from planner.calibrate.probes import Target, prefix_cache_hits, server_kv
from planner.engine import (
    EngineConfig,
    build_engine_config,
    engine_profile,
    find_model,
    kv_bytes_per_token,
    weight_bytes,
)
from planner.engine.precision import precision_overrides
from planner.loadtest.emulated import emulated_engine

# Above these held-out errors (|predicted / measured - 1|) a calibration carries a warning.
WARN_HELD_OUT_MEDIAN = 0.10
WARN_HELD_OUT_WORST = 0.25
# Factors fitted on a bounded grid or by non-negative least squares: at a bound the fit
# ran out of room (the model cannot draw the probes), it did not find the server's value.
FACTOR_BOUNDS = {"mfu": (MFU_GRID[0], MFU_GRID[-1]), "mbu": (MBU_GRID[0], MBU_GRID[-1])}


class CalibrateOptions(BaseModel):
    """What `capplan calibrate` was asked: the server, the catalog entries, the limits (each
    option's bound and default declared once here; the CLI builds it with build_options)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    host: str = Field(description="base URL of the OpenAI-compatible server")
    served_model: str = Field(description="model name sent in each request")
    api_key: str | None = Field(
        default=None, repr=False, description="bearer token (read from --api-key-env)"
    )
    gpu: str = Field(default="H100-80GB", description="the server's GPU, a catalog name")
    catalog_model: str | None = Field(
        default=None, description="the model's catalog name; None: the served name"
    )
    tp: int = Field(default=1, ge=1, description="the server's tensor-parallel GPUs")
    pp: int = Field(default=1, ge=1, description="the server's pipeline stages")
    quantization: str = Field(default="none", description="the server's vLLM --quantization")
    kv_cache_dtype: str = Field(default="auto", description="and its --kv-cache-dtype")
    catalog: str | None = Field(
        default=None, description="a GPU/model catalog file extending the built-in one"
    )
    engine: str = Field(default="vllm", description="engine profile")
    budget_s: float = Field(default=300.0, gt=0, description="time for the probe rounds")
    max_drift: float = Field(
        default=DEFAULT_MAX_DRIFT, gt=0, le=1, description="largest drift share accepted"
    )
    seed: int | None = Field(
        default=None, ge=0, description="seed of the random prompts; None: a fresh one per run"
    )

    @property
    def target(self) -> Target:
        """The server the probes are sent to."""
        return Target(host=self.host, model=self.served_model, api_key=self.api_key)

    @property
    def model(self) -> str:
        """The model's catalog name (the served name unless --catalog-model)."""
        return self.catalog_model or self.served_model


def base_config(options: CalibrateOptions) -> EngineConfig:
    """The uncalibrated engine config of the options' GPU x model x engine (ConfigError for
    unknown names, before any request is sent)."""
    return build_engine_config(
        options.gpu, options.model, options.tp, options.catalog, engine=options.engine,
        pp=options.pp, **precision_overrides(options.quantization, options.kv_cache_dtype),
    )  # fmt: skip


def kv_factors(config: EngineConfig, kv: KvCapacity) -> dict[str, Factor]:
    """EngineConfig fields that make the model's KV cache the server's: sequences at once and
    tokens per sequence from slots, the memory share that holds the reported tokens."""
    out: dict[str, Factor] = {}
    if kv.slots and kv.tokens:
        out["max_num_seqs"] = Factor(value=kv.slots, source=kv.source)
        out["max_model_len"] = Factor(value=kv.tokens // kv.slots, source=kv.source)
    if kv.tokens:
        need = kv.tokens * kv_bytes_per_token(config)
        room = config.gpu.memory_bytes - weight_bytes(config) - config.activation_reserve_bytes
        if config.kv_free_fraction is not None and 0 < need <= room:
            out["kv_free_fraction"] = Factor(value=need / room, source=kv.source)
        elif config.kv_free_fraction is None and need <= room:
            used = (weight_bytes(config) + config.activation_reserve_bytes + need) * 1.0001
            share = min(1.0, used / config.gpu.memory_bytes)
            out["gpu_memory_utilization"] = Factor(value=share, source=kv.source)
    return out


def fit_measured(
    options: CalibrateOptions,
    base: EngineConfig,
    measured: list[Measured],
    kv: KvCapacity,
    kv_fields: dict[str, Factor],
    duration_s: float,
    seed: int | None = None,
) -> CalibrationFile:
    """The calibration of `base` to the measured probes (pure: no server, no clock), with
    its warnings (`fit_warnings`); `seed` is the prompts' seed it records.

    Raises RunError when the repeats drift beyond `options.max_drift` or a fit lacks probes.
    """
    drift = drift_of(measured, options.max_drift)
    check_drift(drift)
    med = {m.spec.name: float(np.median(m.values_s)) for m in measured}
    fit_on = [m for m in measured if not m.spec.held_out]
    pre = [
        PrefillPoint(prompt_tokens=m.spec.prompt_tokens, ttft_s=med[m.spec.name])
        for m in fit_on
        if m.spec.kind in ("prefill", "frontend")
    ]
    dec = [
        DecodePoint(batch=m.spec.batch, context_tokens=m.context_tokens, step_s=med[m.spec.name])
        for m in fit_on
        if m.spec.kind == "decode"
    ]
    one = next(m for m in measured if m.spec.kind == "frontend")
    try:
        p, d = _fit_apart(base, pre, dec, med[one.spec.name])
    except ValueError as err:
        raise RunError(f"calibration: {err}") from err
    names = lambda kind: ", ".join(m.spec.name for m in fit_on if m.spec.kind == kind)  # noqa: E731
    factors = dict(kv_fields)
    factors["mfu"] = Factor(value=p.mfu, source=f"prefill fit on {names('prefill')}")
    mbu_src = f"decode fit on {names('decode')}"
    if not d.mbu_identified:
        mbu_src = "not identified by the decode probes (compute- or overhead-bound): kept"
    factors["mbu"] = Factor(value=d.mbu, source=mbu_src)
    for key, value in (
        ("step_overhead_s", d.step_overhead_s),
        ("seq_overhead_s", d.seq_overhead_s),
        ("decode_attention_s_per_pair", d.decode_attention_s_per_pair),
    ):
        factors[key] = Factor(value=value, source=f"decode fit on {names('decode')}")
    fitted = with_attention(
        base.model_copy(update={k: f.value for k, f in factors.items()}), p.attention_flops
    )
    front = frontend_s(fitted.model_copy(update={"frontend_s": 0.0}), med[one.spec.name])
    factors["frontend_s"] = Factor(
        value=front, source=f"{one.spec.name} TTFT minus the fitted model's step for it"
    )
    factors["frontend_s_per_prompt_token"] = Factor(
        value=base.frontend_s_per_prompt_token,
        source=f"engine profile {base.engine} (not measured: the probes send token ids)",
    )
    fitted = fitted.model_copy(update={"frontend_s": front})
    probes = [_result(m, fitted) for m in measured]
    held_out = _held_out(probes)
    return CalibrationFile(
        schema=CALIBRATION_SCHEMA,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        host=options.target.host,
        served_model=options.target.model,
        engine=base.engine,
        gpu=base.gpu.name,
        model=base.model.name,
        tp=options.tp,
        pp=options.pp,
        quantization=options.quantization,
        kv_cache_dtype=options.kv_cache_dtype,
        catalog=options.catalog,
        hardware={} if p.attention_flops is None else {"attention_flops": p.attention_flops},
        factors=factors,
        kv=kv,
        prefix_cache=_prefix(measured),
        drift=drift,
        held_out=held_out,
        probes=probes,
        duration_s=duration_s,
        seed=seed,
        warnings=fit_warnings(factors, d, held_out),
    )


def fit_warnings(factors: dict[str, Factor], decode: DecodeFit, held_out: HeldOut) -> list[str]:
    """Why a fit may not describe the server: a factor at its bound (mfu, mbu at the ends of
    their grids; the decode's step overhead at 0 with mbu at its top, the two trading one
    for the other), a held-out error above WARN_HELD_OUT_MEDIAN or WARN_HELD_OUT_WORST."""
    out = []
    at_bound = []
    for name, (lo, hi) in FACTOR_BOUNDS.items():
        value = float(factors[name].value)
        if name == "mbu" and not decode.mbu_identified:
            continue
        if value <= lo * 1.0001 or value >= hi * 0.9999:
            at_bound.append(f"{name} {value:.4g} (bounds {lo:g}-{hi:g})")
    if at_bound and decode.step_overhead_s == 0:
        at_bound.append("step_overhead_s 0 (its lower bound)")
    if at_bound:
        out.append(
            "factors at their bounds: " + ", ".join(at_bound) + ": the engine model could "
            "not draw the probes, so these are not the server's values"
        )
    if (
        held_out.median_abs_error > WARN_HELD_OUT_MEDIAN
        or held_out.worst_abs_error > WARN_HELD_OUT_WORST
    ):
        out.append(
            f"held-out error median {held_out.median_abs_error:.1%}, worst "
            f"{held_out.worst_abs_error:.1%} ({', '.join(held_out.probes)}), above the "
            f"{WARN_HELD_OUT_MEDIAN:.0%} / {WARN_HELD_OUT_WORST:.0%} this calibration trusts: "
            f"predictions made with it are this far off at least"
        )
    return out


def _fit_apart(
    base: EngineConfig, pre: list[PrefillPoint], dec: list[DecodePoint], one_token_ttft_s: float
) -> tuple[PrefillFit, DecodeFit]:
    """Prefill first (mfu, attention), then decode at that mfu (mbu, overheads), anchored by
    the one-token prompt's bare step (its TTFT minus the prefill intercept)."""
    p = fit_prefill(base, pre)
    config = with_attention(base.model_copy(update={"mfu": p.mfu, "mbu": p.mbu}), p.attention_flops)
    d = fit_decode(config, dec, one_token_ttft_s - p.intercept_s)
    return p, d


def _predicted(config: EngineConfig, m: Measured) -> float | None:
    if m.spec.kind in ("prefill", "frontend"):
        return predicted_ttft_s(config, m.spec.prompt_tokens)
    if m.spec.kind == "decode":
        return decode_step_s(config, m.spec.batch, m.context_tokens)
    return None


def _result(m: Measured, config: EngineConfig) -> ProbeResult:
    median = float(np.median(m.values_s))
    pred = _predicted(config, m)
    return ProbeResult(
        name=m.spec.name,
        kind=m.spec.kind,  # type: ignore[arg-type]
        prompt_tokens=m.spec.prompt_tokens,
        batch=m.spec.batch,
        context_tokens=m.context_tokens,
        measured_s=m.values_s,
        median_s=median,
        spread=spread(m.values_s),
        held_out=m.spec.held_out,
        predicted_s=pred,
        error=None if pred is None else pred / median - 1,
    )


def _held_out(probes: list[ProbeResult]) -> HeldOut:
    held = [p for p in probes if p.held_out and p.error is not None]
    if not held:
        raise RunError("calibration: no probe was held out of the fit")
    errors = [abs(p.error) for p in held if p.error is not None]
    return HeldOut(
        probes=[p.name for p in held],
        median_abs_error=float(np.median(errors)),
        worst_abs_error=max(errors),
    )


def _prefix(measured: list[Measured]) -> PrefixEffect | None:
    m = next((m for m in measured if m.spec.kind == "prefix" and m.firsts_s), None)
    if m is None:
        return None
    first, again = float(np.median(m.firsts_s)), float(np.median(m.values_s))
    return PrefixEffect(
        prompt_tokens=m.spec.prompt_tokens,
        first_ttft_s=first,
        repeat_ttft_s=again,
        ratio=again / first if first > 0 else 1.0,
    )


def run_calibration(
    options: CalibrateOptions, echo: Callable[[str], None] = lambda _: None
) -> CalibrationFile:
    """Characterise the live server and fit the engine model to it (see the module docstring).

    Raises ConfigError for unknown catalog names, TargetError when the server fails a
    request, RunError when the calibration is refused (drift) or cannot be fitted.
    """
    t0 = time.perf_counter()
    config = base_config(options)
    check_emulated(options)
    seed = options.seed if options.seed is not None else fresh_seed()
    kv = server_kv(options.target)
    kv_fields = kv_factors(config, kv)
    base = config.model_copy(update={k: f.value for k, f in kv_fields.items()})
    echo(f"KV cache: {kv.tokens or 'unknown'} tokens, {kv.slots or 'unknown'} slots ({kv.source})")
    specs = probe_plan(base.effective_max_model_len, kv.slots or min(base.max_num_seqs, 8))
    measured = run_rounds(
        options.target,
        specs,
        budget_s=options.budget_s,
        vocab=base.model.vocab_size,
        rng=np.random.default_rng(seed),
        echo=echo,
        cache_hits=lambda: prefix_cache_hits(options.target),
    )
    return fit_measured(options, base, measured, kv, kv_fields, time.perf_counter() - t0, seed=seed)


def fresh_seed() -> int:
    """A seed of its own for one run: a calibration run twice against one server must not
    send the same prompts again (the prefix cache would answer them)."""
    return int(np.random.SeedSequence().entropy) % 2**63  # type: ignore[arg-type]


def check_emulated(options: CalibrateOptions) -> None:
    """ConfigError when the endpoint is capplan's emulator and states another weight format
    or KV-cache format than --quantization / --kv-cache-dtype (a real server states none)."""
    emulated = emulated_engine(options.host, options.api_key)
    if emulated is None:
        return
    wanted = precision_overrides(options.quantization, options.kv_cache_dtype)["quantization"]
    stated = (
        ("--quantization", emulated.quantization, wanted, options.quantization),
        ("--kv-cache-dtype", emulated.kv_cache_dtype, options.kv_cache_dtype, None),
    )
    for flag, theirs, ours, typed in stated:
        if theirs is not None and theirs != ours:
            raise ConfigError(
                f"{flag} {typed or ours}, but {options.host} is capplan's emulator of "
                f"{emulated.words()} and states {flag.removeprefix('--')} {theirs}: give "
                f"{flag} {theirs} (a calibration of another format fits the wrong model)"
            )


def calibrated_config(
    cal: CalibrationFile, catalog: str | None = None, **overrides: Any
) -> EngineConfig:
    """The engine config a cal.json describes: its GPU x model x engine, its factors, its
    measured hardware figures, then `overrides`. `catalog` defaults to the one it was made with."""
    fields = {**cal.engine_overrides(), **overrides}
    config = build_engine_config(
        cal.gpu, cal.model, cal.tp, catalog or cal.catalog, pp=cal.pp,
        **precision_overrides(cal.quantization, cal.kv_cache_dtype),
        **fields,
    )  # fmt: skip
    return with_attention(config, cal.hardware.get("attention_flops"))


def calibration_overrides(
    cal: CalibrationFile | None,
    model: str,
    catalog: str | None = None,
    engines: Sequence[str] = (),
) -> dict[str, Any]:
    """build_engine_config overrides of a cal.json for `model` on any GPU ({} without one);
    they set the calibration's engine.

    Raises ConfigError when the file calibrates another model (its factors say nothing of
    this one), or when one of `engines` (the engines asked for) is not the file's: its
    factors were measured through that engine's scheduler and do not transfer to another's.
    A calibration of another GPU is applied as it is (the same utilisation
    factors assumed, as `whatif` does across GPUs); measured hardware figures are not (they
    belong to the GPU the file was made on: see `calibrated_config`).
    """
    if cal is None:
        return {}
    wanted = find_model(model, catalog).name
    if wanted != cal.model:
        raise ConfigError(
            f"the calibration is of {cal.model} ({cal.served_model} at {cal.host}), "
            f"not {wanted}: calibrate this model, or drop --calibration"
        )
    theirs = engine_profile(cal.engine).name  # "vllm" asks for the newest, "vllm@0.10"
    others = [e for e in engines if engine_profile(e).name != theirs]
    if others:
        raise ConfigError(
            f"the calibration is of the {cal.engine} engine ({cal.served_model} at "
            f"{cal.host}), not {', '.join(others)}: its factors do not carry to another "
            f"engine's scheduler; give --engine {cal.engine}, calibrate a server of that "
            f"engine, or drop --calibration"
        )
    source = f"capplan calibrate of {cal.host} on {cal.gpu}, {cal.created}"
    return {**cal.engine_overrides(), "calibration_source": source}
