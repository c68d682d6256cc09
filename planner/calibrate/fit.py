"""Fitting the engine model's free parameters to measured probes: prefill and decode apart.

Pure functions over typed points; no server, no clock. The model is the engine's own
roofline (`planner.engine.roofline.Roofline`), so a fitted factor means what it means in a
simulation:
- prefill (single requests, one output token, a one-token prompt among them): TTFT(n) =
  c0 + step(n), with step(n) the roofline of one step prefilling n tokens. Fitted: `mfu`,
  the mbu that prices the memory-bound short prompts (and, where the GPU spec names a
  separate attention rate, that rate: a CPU's attention reaches a fraction of its GEMM
  rate) over coarse-to-fine log grids, the intercept c0 in closed form at each point.
- decode (b concurrent streams at context c): step(b, c) = roofline(b decodes, their
  attention left out) + step_overhead_s + b x seq_overhead_s + b (c + 1) x
  decode_attention_s_per_pair. Fitted: `mbu` over a log grid, the two overheads and the
  decode attention's cost per (query, key) pair by non-negative least squares at each grid
  point, the prefill's mfu held fixed; among the mbu values the decode probes fit equally
  well, a one-token prompt's TTFT minus the prefill intercept (the bare one-token step)
  chooses. Decode attention has its own cost because one query
  at a time runs far below the batched prefill's attention rate on a CPU (llama.cpp here:
  1.7-5.4 us a pair against 0.4-0.7 us), so a model with one attention rate misdraws
  decode at long contexts.
- front end: the TTFT of a one-token prompt minus the fitted model's step for it.
Errors are relative (a 10 ms and a 1 s probe weigh alike).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from planner.engine import EngineConfig
from planner.engine.frontend import FrontEnd
from planner.engine.roofline import Roofline

MFU_GRID = np.geomspace(1e-3, 1.0, 241)
MBU_GRID = np.geomspace(1e-3, 1.0, 241)
ATTENTION_SCALE_GRID = np.geomspace(0.05, 20.0, 61)  # the prefill's refined grids span these
# A grid whose relative errors span less than this leaves the factor unidentified.
FLAT = 1e-3


@dataclass(frozen=True, kw_only=True)
class PrefillPoint:
    """TTFT of a single request of `prompt_tokens` (one output token), in seconds."""

    prompt_tokens: int
    ttft_s: float


@dataclass(frozen=True, kw_only=True)
class DecodePoint:
    """Seconds per decode step with `batch` streams at a mean context of `context_tokens`."""

    batch: int
    context_tokens: float
    step_s: float


@dataclass(frozen=True, kw_only=True)
class PrefillFit:
    mfu: float
    mbu: float
    attention_flops: float | None
    intercept_s: float
    rms_rel_error: float


@dataclass(frozen=True, kw_only=True)
class DecodeFit:
    mbu: float
    mbu_identified: bool
    step_overhead_s: float
    seq_overhead_s: float
    decode_attention_s_per_pair: float
    rms_rel_error: float


def _bare(config: EngineConfig, **update: object) -> EngineConfig:
    """The config with `update` and no fixed costs: the roofline part of a step only."""
    return config.model_copy(update={"step_overhead_s": 0.0, "seq_overhead_s": 0.0, **update})


def with_attention(config: EngineConfig, attention_flops: float | None) -> EngineConfig:
    """The config on a GPU spec whose attention rate is `attention_flops` (None: unchanged)."""
    if attention_flops is None:
        return config
    gpu = dataclasses.replace(config.gpu, attention_flops=attention_flops)
    return config.model_copy(update={"gpu": gpu})


def prefill_step_s(config: EngineConfig, n: int) -> float:
    """One step prefilling an n-token prompt alone, overheads included."""
    return Roofline(config).step_time_s(n, _pairs(n), n, 1)


def decode_step_s(config: EngineConfig, batch: int, context: float) -> float:
    """One decode step of `batch` sequences at `context` tokens each, overheads included."""
    pairs = batch * (context + 1)
    return Roofline(config).step_time_s(batch, pairs, round(pairs), batch, decode_pairs=pairs)


def fit_prefill(config: EngineConfig, points: Sequence[PrefillPoint]) -> PrefillFit:
    """mfu, the memory-bound prompts' mbu (and the attention rate where the GPU spec has its
    own) from single-request TTFTs, the intercept c0 in closed form.

    Short prompts are memory-bound (weights / (bandwidth x mbu)), long ones compute-bound
    (FLOPs / (peak x mfu)): fitting both factors here keeps the intercept (front end and
    overheads) from absorbing a wrong memory time. Raises ValueError with fewer than two
    distinct prompt lengths.
    """
    if len({p.prompt_tokens for p in points}) < 2:
        raise ValueError("the prefill fit needs at least two prompt lengths")
    # The front end's per-token time is the engine profile's, not fitted: taken off first.
    per_token = config.frontend_s_per_prompt_token
    y = np.array([p.ttft_s - per_token * p.prompt_tokens for p in points])
    base_attn = config.gpu.attention_flops
    dims = 3 if base_attn is not None else 2

    def error(x: np.ndarray) -> tuple[float, float]:
        attn = None if base_attn is None else base_attn * float(x[2])
        cfg = with_attention(_bare(config, mfu=float(x[0]), mbu=float(x[1])), attn)
        roof = Roofline(cfg)
        core = np.array(
            [
                roof.step_time_s(p.prompt_tokens, _pairs(p.prompt_tokens), p.prompt_tokens, 1)
                for p in points
            ]
        )
        c0, err = _intercept(y, core)
        return err, c0

    lo = np.log10([MFU_GRID[0], MBU_GRID[0], ATTENTION_SCALE_GRID[0]][:dims])
    hi = np.log10([MFU_GRID[-1], MBU_GRID[-1], ATTENTION_SCALE_GRID[-1]][:dims])
    x, err, c0 = _refine(error, lo, hi)
    return PrefillFit(
        mfu=float(x[0]),
        mbu=float(x[1]),
        attention_flops=None if base_attn is None else base_attn * float(x[2]),
        intercept_s=c0,
        rms_rel_error=err,
    )


def _pairs(n: int) -> float:
    return n * (n + 1) / 2


def _refine(
    error: Callable[[np.ndarray], tuple[float, float]], lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, float, float]:
    """The grid point (log-spaced in each dimension between 10^lo and 10^hi) of least error:
    a coarse grid, then three finer grids around the best point (each a fifth as wide)."""
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    best: tuple[float, float, np.ndarray] | None = None
    for steps in (25, 11, 11, 11):
        axes = [
            np.clip(np.linspace(c - h, c + h, steps), a, b)
            for c, h, a, b in zip(centre, half, lo, hi, strict=True)
        ]
        for logs in itertools.product(*axes):
            x = 10 ** np.array(logs)
            err, c0 = error(x)
            if best is None or err < best[0]:
                best = (err, c0, x)
        assert best is not None
        centre, half = np.log10(best[2]), half / 5
    assert best is not None
    return best[2], best[0], best[1]


def _intercept(y: np.ndarray, core: np.ndarray) -> tuple[float, float]:
    """The c0 >= 0 minimising sum(((c0 + core - y) / y)^2), and the RMS relative error."""
    w = 1.0 / y**2
    c0 = max(0.0, float(np.sum((y - core) * w) / np.sum(w)))
    rel = (c0 + core - y) / y
    return c0, float(np.sqrt(np.mean(rel**2)))


def fit_decode(
    config: EngineConfig, points: Sequence[DecodePoint], one_token_core_s: float | None = None
) -> DecodeFit:
    """mbu, step_overhead_s, seq_overhead_s and decode_attention_s_per_pair from decode step
    times (mfu from `config`).

    A decode step's fixed part is weights / (bandwidth x mbu) + step_overhead_s: decode
    probes alone often cannot tell them apart. The decode probes decide: every mbu whose
    error on them is within FLAT of the least is as good. `one_token_core_s`, a one-token
    prompt's TTFT minus the prefill fit's intercept (front end and overheads), is the bare
    step of one token and chooses among those the one it is nearest to. It only breaks
    ties: on llama.cpp a one-token prompt does not run as a decode step does, and as one
    more point in the error it pulled the fit off the decode probes (4 streams at a short
    context 14 % slow, over-predicting a decode-bound limit). mbu is `identified` when the
    anchor chose it or the decode error varies over its grid by more than FLAT; otherwise
    `config.mbu` is kept. Raises ValueError with fewer than two batch sizes.
    """
    if len({p.batch for p in points}) < 2:
        raise ValueError("the decode fit needs at least two batch sizes")
    y = np.array([p.step_s for p in points])
    columns = np.array([[1.0, p.batch, p.batch * (p.context_tokens + 1)] for p in points])
    anchor = one_token_core_s if one_token_core_s and one_token_core_s > 0 else None
    fits = [_decode_at(_bare(config, mbu=float(mbu)), points, y, columns) for mbu in MBU_GRID]
    errors = np.array([f[0] for f in fits])
    as_good = [f for f in fits if f[0] <= errors.min() + FLAT]
    identified = anchor is not None or float(errors.max() - errors.min()) > FLAT
    if anchor is not None:
        err, mbu, costs = min(
            as_good, key=lambda f: abs(prefill_step_s(_bare(config, mbu=f[1]), 1) / anchor - 1)
        )
    elif identified:
        err, mbu, costs = min(fits, key=lambda f: f[0])
    else:
        err, mbu, costs = _decode_at(_bare(config), points, y, columns)
    return DecodeFit(
        mbu=mbu,
        mbu_identified=identified,
        step_overhead_s=float(costs[0]),
        seq_overhead_s=float(costs[1]),
        decode_attention_s_per_pair=float(costs[2]),
        rms_rel_error=err,
    )


def _decode_at(
    cfg: EngineConfig,
    points: Sequence[DecodePoint],
    y: np.ndarray,
    columns: np.ndarray,
) -> tuple[float, float, np.ndarray]:
    """(RMS relative error, mbu, [step overhead, per-sequence overhead, per decode pair]) at
    cfg's mbu: the three costs by non-negative least squares in relative error."""
    bare = cfg.model_copy(update={"decode_attention_s_per_pair": 0.0})
    core = np.array([decode_step_s(bare, p.batch, p.context_tokens) for p in points])
    w = 1.0 / y
    costs, _ = nnls(columns * w[:, None], (y - core) * w)
    rel = (core + columns @ costs - y) / y
    return float(np.sqrt(np.mean(np.square(rel)))), cfg.mbu, costs


def frontend_s(config: EngineConfig, one_token_ttft_s: float) -> float:
    """The front end's delay: a one-token prompt's TTFT minus the model's step for it and
    the profile's queued work for one request (>= 0)."""
    queued = FrontEnd.work_s(config, 1)
    return max(0.0, one_token_ttft_s - prefill_step_s(config, 1) - queued)


def predicted_ttft_s(config: EngineConfig, n: int) -> float:
    """The fitted model's TTFT of a single n-token request: front end plus its prefill step."""
    return config.frontend_s + FrontEnd.work_s(config, n) + prefill_step_s(config, n)
