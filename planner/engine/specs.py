"""GPU and model specs, the engine configuration, and the weight and KV-cache sizing formulas.

The catalogs of specs by name (built in, a user's file, a Hugging Face config.json) are
`planner.engine.catalog`; weight and KV formats are `planner.engine.precision`.

Default efficiency factors of the step-time roofline when nothing better is known:
`mfu = 0.5` (dense bf16 GEMMs at thousands of tokens per step reach 40-60 % of peak),
`mbu = 0.8` (decode kernels reach 75-85 % of peak bandwidth), `step_overhead_s = 1 ms`
(kernel launches under CUDA graphs), `seq_overhead_s = 40 us` (CPU per scheduled request).
`planner.engine.build` replaces them with an engine profile's CPU costs, the per-GPU
factors fitted on published figures (`efficiency.yaml`) and a user's calibration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.errors import CannotServeError, CannotServeReason
from planner.engine.parallel import LinkKind
from planner.engine.precision import QUANTIZATION_NAMES, QUANTIZATIONS, Quantization, peak_flops

DEFAULT_MFU = 0.5
DEFAULT_MBU = 0.8
DEFAULT_STEP_OVERHEAD_S = 0.001
DEFAULT_SEQ_OVERHEAD_S = 40e-6
DEFAULT_ACTIVATION_RESERVE_BYTES = 2 * 1024**3

QueuePolicy = Literal["fcfs", "spf"]  # first come first served; shortest prompt first


@dataclass(frozen=True)
class GpuSpec:
    """One GPU board: total memory, HBM bandwidth, dense bf16 (fp8, fp4) peaks, its TP link.

    `attention_flops`, when given, is the rate of the attention kernels (QK^T and PV)
    where it differs from the matrix multiplies' `bf16_flops` (a CPU running llama.cpp:
    its attention reaches a fraction of its GEMM rate); None: the same rate. `fp8_flops`:
    the dense FP8 peak of boards with FP8 tensor cores (None: FP8 weights are computed at the
    bf16 rate, as weight-only quantisation); `fp4_flops` likewise for FP4 tensor cores (None:
    nvfp4 cannot run, mxfp4 runs weight-only). `link_*`: the board's link for tensor-parallel
    all-reduces (per-GPU bus bandwidth one way, latency per ring hop); None: PCIe defaults.
    `link_kind` (nvlink or pcie) picks NCCL's latencies for that link
    (planner.engine.parallel). `link_gpus`: the most GPUs that link joins where it does not
    join a whole node (an NVLink bridge: 2 boards of H100 NVL); a tensor-parallel group
    larger than that all-reduces across PCIe, at `pcie_bandwidth_bytes_per_s` (None: the
    PCIe default). None: the link joins every GPU of the group.
    """

    name: str
    memory_bytes: int
    hbm_bandwidth_bytes_per_s: float
    bf16_flops: float
    attention_flops: float | None = None
    fp8_flops: float | None = None
    fp4_flops: float | None = None
    link_bandwidth_bytes_per_s: float | None = None
    link_latency_s: float | None = None
    link_kind: LinkKind = "pcie"
    link_gpus: int | None = None
    pcie_bandwidth_bytes_per_s: float | None = None
    vendor: str = "nvidia"  # whose board: nvidia or amd (an engine may run on one only)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape (as in its Hugging Face config.json).

    `params`: every parameter (the weight bytes held); `active_params`: those one token runs
    through (a mixture of experts' shared part plus `active_experts` of its `experts` routed
    ones; None: all, a dense model). `mla_kv_dim`: elements one token caches per layer under
    multi-head latent attention (DeepSeek: kv_lora_rank + qk_rope_head_dim), one latent for
    all heads, replicated on every tensor-parallel GPU; 0: grouped-query attention, 2 x
    kv_heads x head_dim per layer.
    """

    name: str
    params: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    max_context_tokens: int = 131072
    experts: int = 0
    active_experts: int = 0
    active_params: int | None = None
    mla_kv_dim: int = 0

    @property
    def params_per_token(self) -> int:
        """Parameters one token's forward pass multiplies by (all of a dense model's)."""
        return self.active_params or self.params

    @property
    def expert_params(self) -> int:
        """Parameters in the routed experts, all of them: with E experts of which k run per
        token, params - active_params = (E - k) / E of them."""
        if not self.experts or self.active_params is None:
            return 0
        idle = self.params - self.active_params
        return round(idle * self.experts / (self.experts - self.active_experts))


def model_shape_problem(m: ModelSpec) -> str | None:
    """What makes `m` no transformer an engine could serve (as "field: reason"), or None:
    KV heads that do not group the attention heads, a mixture of experts that runs all or
    more of its experts per token, more active parameters than parameters."""
    if m.attention_heads % m.kv_heads:
        return (
            f"kv_heads: {m.kv_heads} KV heads do not group {m.attention_heads} attention heads "
            "(each KV head serves a whole number of them)"
        )
    if m.active_experts and not m.experts:
        return "active_experts: given without experts"
    if m.experts and not 0 < m.active_experts < m.experts:
        return (
            f"active_experts: a mixture of {m.experts} experts runs from 1 to {m.experts - 1} "
            f"of them per token, got {m.active_experts}"
        )
    if m.active_params is not None and m.active_params > m.params:
        return f"active_params: {m.active_params:,} is more than params ({m.params:,})"
    return None


class Unservable(ValueError):
    """EngineConfig's check that no engine can serve the configuration at all, carrying the
    reason as a field (pydantic keeps this exception in the validation error's context, so
    planner.engine.build re-raises `error`, the CannotServeError, with its own words)."""

    def __init__(
        self, message: str, *, reason: CannotServeReason, short_bytes: float | None = None
    ) -> None:
        super().__init__(message)
        self.error = CannotServeError(message, reason=reason, short_bytes=short_bytes)


class EngineConfig(BaseModel):
    """Everything one engine instance needs: hardware, model, scheduler knobs, efficiency factors.

    Scheduler knobs mirror vLLM's flags of the same names. `mfu`, `mbu` and `step_overhead_s`
    are the roofline's efficiency factors (see the module docstring for their sources).
    `record_token_times` keeps every token's time in each timeline (needed for ITL); turn it
    off in long simulations: TTFT, E2E and TPOT stay exact.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    gpu: GpuSpec
    model: ModelSpec
    tp: int = Field(1, ge=1, le=64, description="tensor-parallel degree (GPUs per stage)")
    pp: int = Field(
        1, ge=1, le=64, description="pipeline-parallel stages (an instance holds tp x pp GPUs)"
    )
    dtype_bytes: int = Field(
        2, ge=1, le=4, description="bytes per checkpoint weight and KV element (1: legacy fp8)"
    )
    quantization: str = Field(
        "none",
        description=f"weight format as vLLM's --quantization: {', '.join(QUANTIZATION_NAMES)} "
        "(planner.engine.precision)",
    )
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    activation_reserve_bytes: int = Field(
        DEFAULT_ACTIVATION_RESERVE_BYTES,
        ge=0,
        description="per-GPU memory kept for activations, CUDA graphs and the sampler",
    )
    max_num_seqs: int = Field(256, ge=1)
    max_num_batched_tokens: int = Field(8192, ge=1)
    block_tokens: int = Field(16, ge=1)
    prefix_caching: bool = True
    queue_policy: QueuePolicy = "fcfs"
    spf_aging_s: float = Field(
        30.0, gt=0.0, description="under spf, a request waiting this long goes ahead of the rest"
    )
    mfu: float = Field(DEFAULT_MFU, gt=0.0, le=1.0)
    mbu: float = Field(DEFAULT_MBU, gt=0.0, le=1.0)
    fp8_efficiency: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="share of mfu and mbu that 1-byte (FP8) weights' matrix multiplies reach",
    )
    step_overhead_s: float = Field(DEFAULT_STEP_OVERHEAD_S, ge=0.0)
    seq_overhead_s: float = Field(
        DEFAULT_SEQ_OVERHEAD_S,
        ge=0.0,
        description="CPU time per scheduled request per step (scheduling, sampling, output)",
    )
    max_model_len: int | None = Field(
        None, ge=1, description="longest prompt + output; default: the model's context length"
    )
    kv_dtype_bytes: int | None = Field(
        None, ge=1, le=4, description="bytes per KV-cache element (1 = fp8); default dtype_bytes"
    )
    kv_reservation: Literal["paged", "request", "static"] = Field(
        "paged",
        description="paged: blocks as tokens arrive (vLLM); request: prompt + max_tokens "
        "reserved at admission, never preempted (TensorRT-LLM's guaranteed-no-evict); static: "
        "max_model_len tokens reserved per sequence (engines without paged attention)",
    )
    kv_free_fraction: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="KV cache = this share of the memory left after weights and activations "
        "(TensorRT-LLM's rule); None: vLLM's rule (memory x gpu_memory_utilization - weights "
        "- activations)",
    )
    engine: str = Field("vllm", description="the engine profile the defaults came from")
    frontend_s: float = Field(
        0.0, ge=0.0, description="API-server delay in TTFT every request pays (HTTP, hand-over)"
    )
    frontend_s_per_prompt_token: float = Field(
        0.0, ge=0.0, description="tokenisation time per prompt token, queued in one thread"
    )
    frontend_s_per_request: float = Field(
        0.0,
        ge=0.0,
        description="API-server CPU time per request (parsing, chat template, sampling "
        "parameters), queued in the same thread as tokenisation",
    )
    frontend_handover: Literal["each", "round"] = Field(
        "each",
        description="each: a request reaches the scheduler as soon as its own front-end work "
        "is done; round: an event loop takes every request waiting when it wakes, works them "
        "one after another and hands them over together at the end (vLLM 0.5/0.6's API server)",
    )
    scheduler_steps: int = Field(
        1, ge=1, le=64, description="decode steps per scheduler call (vLLM multi-step)"
    )
    prefill_first: bool = Field(
        False,
        description="a step with admissible waiting requests, or a prompt whose chunks "
        "are not all computed, runs those prefills alone (vLLM 0.5/0.6 without chunked "
        "prefill, SGLang); False: prefills and decodes mixed",
    )
    whole_prompts: bool = Field(
        False,
        description="vLLM 0.5/0.6 without chunked prefill: a prompt (or a preempted "
        "request's recompute) is scheduled whole or waits for a later step, and admission "
        "stops there; False: cut to the step's budget, the rest in later steps",
    )
    admission_reserve: bool = Field(
        False,
        description="SGLang's admission: a waiting request joins only while its uncached "
        "prompt and max_tokens fit the free KV less a share (new_token_ratio: 0.7 falling "
        "to 0.098 over 600 decode steps) of the running requests' tokens still to come",
    )
    spec_draft_tokens: int = Field(
        0, ge=0, le=16, description="speculative decoding: draft tokens per step (0 = off)"
    )
    spec_acceptance_rate: float = Field(
        0.7, ge=0.0, lt=1.0, description="probability that each draft token is accepted"
    )
    spec_draft_params: int = Field(
        0, ge=0, description="parameters of the draft model (0: a proposer that costs nothing)"
    )
    tp_link_bandwidth_bytes_per_s: float | None = Field(
        None,
        gt=0.0,
        description="per-GPU all-reduce link bandwidth under tp > 1; None: no communication cost",
    )
    tp_allreduce_latency_s: float = Field(
        0.0, ge=0.0, description="fixed latency of one all-reduce (two per layer per step)"
    )
    tp_link_efficiency: float = Field(
        1.0, gt=0.0, le=1.0, description="share of the board's link bandwidth all-reduces reach"
    )
    tp_hop_latency_s: float | None = Field(
        None, ge=0.0, description="latency per ring hop of an all-reduce; None: the board's"
    )
    decode_attention_s_per_pair: float | None = Field(
        None,
        ge=0.0,
        description="single-query (decode) attention's time per (query, key) pair, added to "
        "the KV cache read, in place of the attention rate prefills run at (a CPU decodes "
        "far below its batched prefill rate); None: decodes priced as prefills; fitted by "
        "capplan calibrate",
    )
    tp_shard_efficiency: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="per-GPU rate kept at each doubling of the tensor-parallel group (narrower "
        "shards reach less of the peak): mfu and mbu x this ** log2(tp)",
    )
    record_token_times: bool = True
    calibration_source: str = "defaults (see planner/engine/specs.py)"

    @model_validator(mode="after")
    def _fits(self) -> EngineConfig:
        if self.quantization not in QUANTIZATIONS:
            raise ValueError(
                f"unknown quantization {self.quantization!r}; known: "
                f"{', '.join(QUANTIZATION_NAMES)}"
            )
        if linear_peak_flops(self) is None:
            raise Unservable(
                f"{self.quantization} needs FP4 tensor cores, which {self.gpu.name} has not",
                reason="fp4",
            )
        if self.model.layers < self.pp:
            raise ValueError(f"pp={self.pp} stages for {self.model.layers} layers")
        heads, kv = self.model.attention_heads, self.model.kv_heads
        if heads % self.tp or (kv % self.tp if kv >= self.tp else self.tp % kv):
            raise Unservable(
                f"tp={self.tp} does not split {self.model.name}'s {heads} attention heads and "
                f"{kv} KV heads evenly: the engines need tp to divide the attention heads and "
                "to divide the KV heads or be a multiple of them",
                reason="heads",
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be at least "
                f"max_num_seqs ({self.max_num_seqs}) so every running decode fits in a step"
            )
        if kv_capacity_blocks(self) < 1:
            need = weight_bytes(self) + self.activation_reserve_bytes
            have = float(self.gpu.memory_bytes)
            if self.kv_free_fraction is None:  # the share, not a share of what is left
                have *= self.gpu_memory_utilization
            block = kv_bytes_per_token(self) * self.block_tokens
            short = need + block - have
            fmt = weight_format(self).name
            what = "weights + activation reserve" if self.activation_reserve_bytes else "weights"
            raise Unservable(
                f"{self.model.name} does not fit on {self.gpu.name} at quantization={fmt}, "
                f"tp={self.tp}, pp={self.pp}: {what} need "
                f"{need / 1e9:.1f} GB per GPU, {have / 1e9:.1f} GB usable, {short / 1e9:.1f} GB "
                f"short (before any KV cache); raise tp or pp, quantize, or pick a larger GPU",
                reason="fit",
                short_bytes=short,
            )
        return self

    @property
    def effective_max_model_len(self) -> int:
        """Longest prompt + output one request may have (never more than the KV cache holds)."""
        limit = self.max_model_len or self.model.max_context_tokens
        return min(limit, kv_capacity_tokens(self))

    @property
    def spec_tokens_per_step(self) -> float:
        """Expected tokens one decode step emits per sequence under speculative decoding.

        With k draft tokens each accepted with probability a (independently, stopping at the
        first rejection), the step emits the accepted run plus the target's own token:
        (1 - a^(k+1)) / (1 - a). 1 when speculative decoding is off.
        """
        k, a = self.spec_draft_tokens, self.spec_acceptance_rate
        return (1.0 - a ** (k + 1)) / (1.0 - a) if k else 1.0


def kv_heads_per_gpu(config: EngineConfig) -> int:
    """KV heads each GPU holds under tensor parallelism (replicated when tp > kv_heads)."""
    return max(1, math.ceil(config.model.kv_heads / config.tp))


def layers_per_stage(config: EngineConfig) -> int:
    """Layers on each pipeline stage (the largest stage's, when they do not divide evenly)."""
    return math.ceil(config.model.layers / config.pp)


def kv_bytes_per_token(config: EngineConfig) -> int:
    """KV bytes of one token on each GPU: 2 (K and V) x layers x kv_heads x head_dim x KV dtype
    (grouped-query attention, heads split over tp), or layers x mla_kv_dim x KV dtype (latent
    attention, replicated over tp); the layers of one pipeline stage."""
    m = config.model
    dtype = config.kv_dtype_bytes or config.dtype_bytes
    if m.mla_kv_dim:
        return layers_per_stage(config) * m.mla_kv_dim * dtype
    return 2 * layers_per_stage(config) * kv_heads_per_gpu(config) * m.head_dim * dtype


def weight_format(config: EngineConfig) -> Quantization:
    """The config's weight format; `dtype_bytes=1` without a quantization is fp8 (the older
    spelling)."""
    if config.quantization == "none" and config.dtype_bytes == 1:
        return QUANTIZATIONS["fp8"]
    return QUANTIZATIONS[config.quantization]


def bytes_per_weight(config: EngineConfig) -> float:
    """Bytes one weight takes in the config's format, scales included."""
    return weight_format(config).bytes_per_weight or float(config.dtype_bytes)


def linear_peak_flops(config: EngineConfig) -> float | None:
    """Dense peak FLOP/s of one GPU for the weights' matrix multiplies (None: cannot run)."""
    g = config.gpu
    return peak_flops(
        bf16_flops=g.bf16_flops, fp8_flops=g.fp8_flops, fp4_flops=g.fp4_flops,
        fmt=weight_format(config),
    )  # fmt: skip


def weight_bytes(config: EngineConfig) -> int:
    """Weight bytes on each GPU: params x bytes per weight / (tp x pp)."""
    return math.ceil(config.model.params * bytes_per_weight(config) / (config.tp * config.pp))


def kv_capacity_blocks(config: EngineConfig) -> int:
    """KV blocks: (memory x utilisation - weights - activation reserve) / block bytes, or
    under `kv_free_fraction` (memory - weights - activation reserve) x fraction / block bytes."""
    rest = config.gpu.memory_bytes - weight_bytes(config) - config.activation_reserve_bytes
    if config.kv_free_fraction is not None:
        free = rest * config.kv_free_fraction
    else:
        free = rest - config.gpu.memory_bytes * (1.0 - config.gpu_memory_utilization)
    block_bytes = kv_bytes_per_token(config) * config.block_tokens
    return max(0, int(free // block_bytes))


def kv_capacity_tokens(config: EngineConfig) -> int:
    """Tokens the KV cache holds: blocks x block_tokens."""
    return kv_capacity_blocks(config) * config.block_tokens
