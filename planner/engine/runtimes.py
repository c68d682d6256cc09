"""Engine profiles: how each serving engine schedules, holds its KV cache and spends CPU time.

The engine model's scheduler is one; what differs between vLLM, SGLang, TensorRT-LLM, TGI
and llama.cpp is a handful of published behaviours, each a field of `EngineProfile`:
- how the KV cache is sized (vLLM: `gpu_memory_utilization` of the whole board minus
  weights and activations; TensorRT-LLM: a share of the memory left after them);
- how it is reserved (paged as tokens arrive, with recompute preemption when blocks run
  out; or a request's prompt + max_tokens up front, never preempted; or a fixed slot);
- how prefills and decodes share a step (mixed, with chunked prefill; or prefill-first:
  a step with admissible waiting requests runs their prefills alone, vLLM 0.5/0.6's default
  without chunked prefill), and the token budget of a step: fixed, or vLLM V0's rule
  without chunked prefill, max(max_model_len, 2048) (`max_num_batched_tokens=None`);
- CPU time per step and per scheduled request (scheduling, sampling, detokenising), and
  multi-step scheduling, which pays it once per `scheduler_steps` decode steps;
- the front end in TTFT: HTTP, tokenisation and hand-over to the engine.

`profile_overrides(name)` gives an `EngineConfig`'s fields for an engine; names take an
optional version (`vllm@0.6`). Each profile names its sources. The CPU costs that no
source states are fitted on published figures by `bench/engine_published.py --fit`, on the
rows that bench names as fitting rows, and checked on the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.errors import ConfigError

# vLLM V0's budget rule (max_num_batched_tokens None) holds up to this context length; past
# it the profile keeps a fixed budget (see EngineProfile.batched_tokens).
# The weight formats vLLM 0.5/0.6 serve of those capplan models: FP8, AWQ and GPTQ; nvfp4
# (ModelOpt FP4) and mxfp4 came in 2025 (mxfp4 with gpt-oss, vllm-project/vllm#22259, 0.10.1).
V0_QUANTIZATIONS = ("none", "fp8", "awq", "gptq")
V0_RULE_MAX_CONTEXT = 32768
FALLBACK_BATCHED_TOKENS = 8192


@dataclass(frozen=True)
class ServeLimits:
    """vLLM V1's `vllm serve` defaults by board (vllm/engine/arg_utils.py,
    get_batch_defaults): a board with at least `gib` of memory whose name does not hold
    `except_name` runs `seqs` requests at once and `tokens` tokens a step; the others keep the
    profile's own two."""

    gib: float
    except_name: str
    seqs: int
    tokens: int

    def defaults(
        self, label: str, gpu_name: str, memory_bytes: int, parallel: int, share_given: bool
    ) -> dict[str, Any]:
        if memory_bytes < self.gib * 2**30 or self.except_name in gpu_name.lower():
            return {}
        return {"max_num_seqs": self.seqs, "max_num_batched_tokens": self.tokens}


@dataclass(frozen=True)
class MemoryTiers:
    """SGLang's static memory share and prefill chunk by the board's memory in MiB
    (nvidia-smi's total) and tp x pp (python/sglang/srt/server_args.py, ServerArgs.
    __post_init__, as of 2025 releases; earlier ones fixed 0.88 at tp 1): per tier (below this
    many GiB, reserved GiB = a + b x tp x pp, chunked_prefill_size), mem_fraction_static =
    (memory - reserved) / memory. The reserve (activations, CUDA graphs) is what the share
    leaves outside, so none is taken off the share again."""

    tiers: tuple[tuple[float, float, float, int], ...]

    def defaults(
        self, label: str, gpu_name: str, memory_bytes: int, parallel: int, share_given: bool
    ) -> dict[str, Any]:
        mib = memory_bytes / 2**20
        _, base, per, chunk = next(t for t in self.tiers if mib < t[0] * 1024)
        reserved = (base + per * parallel) * 1024
        if reserved >= mib and not share_given:
            raise ConfigError(
                f"{label} on {gpu_name}: its default memory share leaves nothing after its "
                f"reserve of {reserved / 1024:.1f} GiB on {mib / 1024:.1f} GiB; give a share "
                "(emulate --gpu-memory-utilization, whatif --vary gpu_memory_utilization=...)"
            )
        return {
            "gpu_memory_utilization": round((mib - reserved) / mib, 3),
            "activation_reserve_bytes": 0,
            "max_num_batched_tokens": chunk,
        }


VLLM_SERVE_LIMITS = ServeLimits(gib=70, except_name="a100", seqs=1024, tokens=8192)
SGLANG_MEMORY_TIERS = MemoryTiers(
    (
        (35, 2.8, 0.1, 2048),  # T4, A10, L4, 4090
        (90, 9.5, 0.5, 8192),  # H100, A100, L40S
        (160, 12.0, 0.5, 8192),  # H20, H100 NVL, H200
        (float("inf"), 32.0, 0.0, 16384),  # B200, MI300X
    )
)


@dataclass(frozen=True, kw_only=True)
class EngineProfile:
    """One serving engine's published behaviour, as EngineConfig defaults."""

    name: str
    label: str
    kv_reservation: str = "paged"
    kv_free_fraction: float | None = None
    gpu_memory_utilization: float = 0.9
    prefill_first: bool = False
    admission_reserve: bool = False
    # None: SGLang's rule, from the KV cache's size and the context length (`running_cap`).
    max_num_seqs: int | None = 256
    # None: vLLM V0's default without chunked prefill, max(max_model_len, 2048) tokens a
    # step (`batched_tokens`); a number: that budget whatever the context length.
    max_num_batched_tokens: int | None = 8192
    prefix_caching: bool = True
    scheduler_steps: int = 1
    step_overhead_s: float = 1e-3
    seq_overhead_s: float = 40e-6
    frontend_s: float = 5e-3
    frontend_s_per_prompt_token: float = 2e-6
    frontend_s_per_request: float = 0.0
    frontend_handover: str = "each"
    # Defaults that depend on the board (ServeLimits, MemoryTiers); None: none do.
    board_rule: ServeLimits | MemoryTiers | None = None
    sources: tuple[str, ...] = ()
    # Whose boards the engine runs on, and the weight formats (--quantization) and KV-cache
    # formats (--kv-cache-dtype) it serves; None: every one capplan models.
    vendors: tuple[str, ...] = ("nvidia", "amd")
    quantizations: tuple[str, ...] | None = None
    kv_cache_dtypes: tuple[str, ...] | None = None
    # FP8 weights or an FP8 KV cache only on boards with FP8 tensor cores (no weight-only FP8
    # on Ampere, as vLLM's Marlin kernels run it)
    fp8_needs_cores: bool = False

    def board_defaults(
        self, gpu_name: str, memory_bytes: int, parallel: int, share_given: bool = False
    ) -> dict[str, Any]:
        """The settings this profile defaults to on the board `gpu_name` with `memory_bytes`
        of memory, `parallel` (tp x pp) boards to an instance, where they depend on the
        board; empty where they do not. `share_given`: the caller sets the memory share."""
        if self.board_rule is None:
            return {}
        return self.board_rule.defaults(self.label, gpu_name, memory_bytes, parallel, share_given)

    def batched_tokens(self, max_model_len: int) -> int:
        """The step's token budget for an engine whose context length is `max_model_len`.

        vLLM V0 without chunked prefill must fit a whole prompt in one step, so its default
        budget is max(max_model_len, 2048) (vllm/config.py `SchedulerConfig`, v0.4 to v0.6):
        2048 tokens for a 2048-token context. For contexts beyond V0_RULE_MAX_CONTEXT vLLM
        turns chunked prefill on by itself, which this profile does not model: it keeps
        the fixed FALLBACK_BATCHED_TOKENS there.
        """
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        if max_model_len > V0_RULE_MAX_CONTEXT:
            return FALLBACK_BATCHED_TOKENS
        return max(max_model_len, 2048)

    def whole_prompts(self, max_model_len: int) -> bool:
        """Whether prompts are scheduled whole: vLLM V0 without chunked prefill, the profile's
        budget rule in force (`batched_tokens`) for a context of `max_model_len` (the caller
        also checks that prefills still go first: chunked prefill not turned on). Its
        scheduler (vllm/core/scheduler.py `_schedule_prefills`, v0.4 to v0.6) stops taking
        waiting prompts at the first whose tokens do not fit what is left of the step's
        budget (`budget.can_schedule`); it never cuts one."""
        return self.max_num_batched_tokens is None and max_model_len <= V0_RULE_MAX_CONTEXT

    def running_cap(self, kv_tokens: int, context_len: int, batched_tokens: int) -> int:
        """The most requests running at once when `max_num_seqs` is None: SGLang's default
        (python/sglang/srt/model_executor/model_runner.py, 0.3 to 0.5: the request pool holds
        int(KV tokens / context length x 512) clamped to [2048, 4096], and the scheduler runs
        at most min(that, KV tokens // 2)), kept within the step's token budget (every
        running decode must fit one step in this model)."""
        pool = min(max(int(kv_tokens / max(context_len, 1) * 512), 2048), 4096)
        return max(1, min(pool, kv_tokens // 2, batched_tokens))

    def overrides(self) -> dict[str, Any]:
        """The EngineConfig fields this profile sets (`max_num_batched_tokens` None: resolve
        it with `batched_tokens` once the context length is known)."""
        return {
            "engine": self.name,
            "kv_reservation": self.kv_reservation,
            "kv_free_fraction": self.kv_free_fraction,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "prefill_first": self.prefill_first,
            "admission_reserve": self.admission_reserve,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "prefix_caching": self.prefix_caching,
            "scheduler_steps": self.scheduler_steps,
            "step_overhead_s": self.step_overhead_s,
            "seq_overhead_s": self.seq_overhead_s,
            "frontend_s": self.frontend_s,
            "frontend_s_per_prompt_token": self.frontend_s_per_prompt_token,
            "frontend_s_per_request": self.frontend_s_per_request,
            "frontend_handover": self.frontend_handover,
        }


_VLLM_V1 = EngineProfile(
    name="vllm@0.10",
    label="vLLM V1 (0.8 and later)",
    max_num_seqs=256,
    max_num_batched_tokens=2048,
    board_rule=VLLM_SERVE_LIMITS,
    step_overhead_s=1e-3,
    seq_overhead_s=15e-6,
    sources=(
        "vLLM V1 engine (blog 'vLLM V1: A Major Upgrade', 2025-01): chunked prefill always "
        "on, prefill and decode mixed in one step, scheduling overlapped with the GPU",
        "gpu_memory_utilization 0.9; `vllm serve`'s scheduler defaults by board "
        "(vllm/engine/arg_utils.py get_batch_defaults, UsageContext.OPENAI_API_SERVER; "
        "its test test_defaults_with_usage_context): max_num_seqs 1024 and "
        "max_num_batched_tokens 8192 on a board with at least 70 GiB of memory that is "
        "not an A100 (H100, H200, B200, MI300X), else 256 and 2048 (A100, L40S, L4)",
    ),
)

_VLLM_06 = EngineProfile(
    name="vllm@0.6",
    label="vLLM 0.6 (V0 scheduler)",
    prefill_first=True,
    quantizations=V0_QUANTIZATIONS,
    max_num_batched_tokens=None,
    step_overhead_s=1e-3,
    seq_overhead_s=190e-6,
    frontend_s_per_request=3e-3,
    frontend_handover="round",
    sources=(
        "vLLM 0.6 V0 scheduler without chunked prefill: waiting prompts are prefilled in a "
        "step of their own before running decodes continue (vllm/core/scheduler.py "
        "_schedule_default); recompute preemption",
        "max_num_batched_tokens: vllm/config.py SchedulerConfig (v0.6.0) defaults it, without "
        "chunked prefill, to max(max_model_len, 2048), so a whole prompt fits one step; "
        "_schedule_prefills stops at the first waiting prompt whose tokens do not fit what "
        "is left of the step's budget (budget.can_schedule) and never cuts one "
        "(whole_prompts); "
        "2048 tokens a step at max_model_len 2048, as in Lambda's runs",
        "multi-step (--num-scheduler-steps N): vllm/engine/llm_engine.py step() skips the "
        "scheduler while the current batch has steps left, so waiting prompts join only "
        "between runs of N decode steps; a prefill runs one step (vllm/core/scheduler.py "
        "_schedule_prefills: init_multi_step(_get_num_lookahead_slots(is_prefill=True) + 1), "
        "no lookahead slots for a prefill)",
        "vLLM blog 'vLLM v0.6.0: 2.7x Throughput Improvement' (2024-09-05): the CPU side "
        "(API server about 33 %, scheduling about 29 %) of a step; --num-scheduler-steps "
        "amortises it over several decode steps",
        "seq_overhead_s fitted by bench/engine_published.py --fit on LambdaLabsML's "
        "'vLLM v0.6.0 steps=1' throughput row (benchmark_v0.md)",
        "formats: fp8, awq and gptq (vLLM 0.6's quantization methods); nvfp4 and mxfp4 came "
        "in 2025 (mxfp4 with gpt-oss, vllm-project/vllm#22259)",
        "front end: the OpenAI API server is one asyncio event loop; requests that arrive "
        "together are worked one after another and handed to the engine together "
        "(frontend_handover round). LambdaLabsML/vllm-benchmark's per-request TTFTs of 160 "
        "requests at once (results/prompt_160, 1xH100 and 1xA100, Llama-3-8B): none before "
        "0.57 s (H100) and 0.91 s (A100), then clusters one 2048-token prefill step apart "
        "(about 50 and 125 ms); frontend_s_per_request fitted by bench/engine_published.py "
        "--fit on the 10-requests-at-once H100 TTFT p50 row",
    ),
)

_VLLM_05 = EngineProfile(
    name="vllm@0.5",
    label="vLLM 0.5 (V0 scheduler, no multi-step)",
    prefill_first=True,
    quantizations=V0_QUANTIZATIONS,
    max_num_batched_tokens=None,
    step_overhead_s=1e-3,
    seq_overhead_s=250e-6,
    frontend_s_per_request=3e-3,
    frontend_handover="round",
    sources=(
        "as vllm@0.6 (prefill-first, the V0 token budget max(max_model_len, 2048) without "
        "chunked prefill), before its CPU optimisations; seq_overhead_s fitted by "
        "bench/engine_published.py --fit on LambdaLabsML's 'vLLM v0.5.4' throughput row",
    ),
)

_TRTLLM = EngineProfile(
    name="trtllm@0.14",
    label="TensorRT-LLM 0.14 (C++ runtime, in-flight batching)",
    vendors=("nvidia",),
    kv_reservation="request",
    kv_free_fraction=0.9,
    max_num_seqs=2048,
    max_num_batched_tokens=8192,
    step_overhead_s=0.5e-3,
    seq_overhead_s=3e-6,
    sources=(
        "TensorRT-LLM docs, 'Scheduler policy': GUARANTEED_NO_EVICT reserves each request's "
        "input + output KV at admission and never evicts",
        "kv_cache_free_gpu_mem_fraction (default 0.9): the KV cache takes this share of the "
        "memory free after the engine's weights and activations are loaded",
        "max_num_tokens 8192: trtllm-build's default; max batch size 2048 (trtllm-build)",
        "C++ batch manager: per-request CPU cost of microseconds (no Python in the loop)",
        "NVIDIA GPUs only (TensorRT builds CUDA engines): not on AMD boards",
        "FP8 on FP8 tensor cores only: its support matrix (docs, reference/support-matrix, "
        "0.13-0.18) lists Hopper and Ada with FP8, Ampere with FP32, FP16, BF16, INT8, INT4",
    ),
    fp8_needs_cores=True,
)

_SGLANG = EngineProfile(
    name="sglang@0.4",
    label="SGLang 0.4 and later (RadixAttention, overlap scheduler)",
    prefill_first=True,
    admission_reserve=True,
    gpu_memory_utilization=0.88,
    max_num_seqs=None,
    max_num_batched_tokens=8192,
    board_rule=SGLANG_MEMORY_TIERS,
    step_overhead_s=0.8e-3,
    seq_overhead_s=10e-6,
    sources=(
        "SGLang server arguments (server_args.py of 2025 releases): mem_fraction_static "
        "(weights + KV cache as a share of the board) = (memory - reserved) / memory and "
        "chunked_prefill_size by the board's memory and tp x pp (SGLANG_MEMORY_TIERS): "
        "0.874 and 8192 on one H100, 0.778 and 8192 on one L40S, 0.911 on one H200; radix "
        "prefix cache on",
        "prefill first: scheduler.py get_next_batch_to_run runs a new prefill batch whenever "
        "get_new_batch_prefill forms one ('Run prefill first if possible') and the running "
        "decodes wait; enable_mixed_chunk (which mixes them) is off by default; a prompt "
        "longer than the chunk goes on chunk by chunk the same way (the chunked request "
        "leads the next prefill batch: schedule_policy.py PrefillAdder.add_chunked_req)",
        "admission reserve: a waiting request joins while its uncached prompt plus "
        "max_new_tokens fit the free and evictable KV less new_token_ratio x each running "
        "request's tokens to come (clipped at 4096); the ratio starts at 0.7, falls to "
        "0.098 over 600 decode steps, is re-estimated after a retraction and reset when "
        "idle (schedule_policy.py PrefillAdder, scheduler.py, environ.py defaults)",
        "max_running_requests unset: min(KV tokens // 2, the request pool, int(KV tokens / "
        "context_len x 512) clamped to [2048, 4096]) (model_runner.py and scheduler.py, "
        "0.3 to 0.5): 2048 to 4096 requests at once on large GPUs",
        "SGLang v0.4 blog (2024-12): the zero-overhead batch scheduler overlaps CPU "
        "scheduling with the GPU's step",
    ),
)

_TGI = EngineProfile(
    name="tgi@3",
    label="Text Generation Inference 3 (Rust router)",
    quantizations=("none", "fp8", "awq", "gptq"),
    kv_reservation="request",
    max_num_seqs=1024,
    max_num_batched_tokens=4096,
    step_overhead_s=1e-3,
    seq_overhead_s=20e-6,
    sources=(
        "TGI launcher: max_batch_prefill_tokens 4096; the router admits a request while its "
        "input plus max_new_tokens fit the token budget (max_batch_total_tokens, inferred "
        "from free memory), so running requests are not preempted",
        "formats: TGI's --quantize serves fp8, awq and gptq (and others capplan does not "
        "model), not nvfp4 or mxfp4",
    ),
)

_LLAMACPP = EngineProfile(
    name="llamacpp",
    label="llama.cpp server (slots)",
    quantizations=("none", "mxfp4"),
    kv_cache_dtypes=("auto",),
    kv_reservation="static",
    gpu_memory_utilization=1.0,
    max_num_seqs=4,
    max_num_batched_tokens=2048,
    prefix_caching=False,
    step_overhead_s=1e-3,
    seq_overhead_s=50e-6,
    frontend_s=1e-3,
    frontend_s_per_prompt_token=1e-6,
    sources=(
        "llama.cpp tools/server: n_parallel slots, each holding n_ctx / n_parallel KV cells "
        "(a fixed slot per sequence), prompt and decode tokens of all slots in one batch of "
        "up to n_batch (2048) tokens; the prompt cache is per slot, not shared",
        "formats: GGUF files; of those capplan models, 16-bit weights and MXFP4 (ggml-org/"
        "llama.cpp#15091, 2025-08, with gpt-oss); the KV cache in the model's type (its "
        "cache-type options are q8_0/q4_0, not fp8)",
    ),
)

ENGINE_PROFILES: dict[str, EngineProfile] = {
    p.name: p for p in (_VLLM_V1, _VLLM_06, _VLLM_05, _TRTLLM, _SGLANG, _TGI, _LLAMACPP)
}
# A bare name means the newest profile of that engine.
_LATEST = {"vllm": "vllm@0.10", "trtllm": "trtllm@0.14", "sglang": "sglang@0.4", "tgi": "tgi@3"}
_ALIASES = {"tensorrt-llm": "trtllm", "llama.cpp": "llamacpp", "llama-cpp": "llamacpp"}


def engine_profile(name: str) -> EngineProfile:
    """The profile called `name` (`vllm`, `vllm@0.6`, `trtllm`, ...); ConfigError lists the
    known ones for an unknown name."""
    key = name.strip().lower()
    base, _, version = key.partition("@")
    base = _ALIASES.get(base, base)
    key = f"{base}@{version}" if version else _LATEST.get(base, base)
    if key not in ENGINE_PROFILES:
        known = ", ".join([*_LATEST, *ENGINE_PROFILES])
        raise ConfigError(f"unknown engine {name!r}; known engines: {known}")
    return ENGINE_PROFILES[key]


def profile_overrides(name: str) -> dict[str, Any]:
    """EngineConfig fields of the engine called `name` (see `engine_profile`)."""
    return engine_profile(name).overrides()


def board_defaults_text() -> str:
    """How each engine starts on a board, in words, from the profiles' own values."""
    v1, trt, big = _VLLM_V1, _TRTLLM, VLLM_SERVE_LIMITS
    assert trt.kv_free_fraction is not None
    return (
        f"engines as they start with their own defaults on each board: vLLM V1 {big.seqs:,} "
        f"requests at once and {big.tokens:,} tokens a step on a board of {big.gib:g} "
        f"GiB or more that is not an {big.except_name.upper()}, {v1.max_num_seqs:,} and "
        f"{v1.max_num_batched_tokens:,} on the rest (vllm serve); SGLang prefills first, admits "
        "a request only while its prompt and output fit the free KV less a share of the "
        "running requests' tokens to come (schedule_policy.py), its memory share and "
        "prefill chunk by board memory and tp x pp (server_args.py); "
        f"TensorRT-LLM {trt.kv_free_fraction:g} of the memory left for KV, "
        f"{trt.max_num_batched_tokens:,} tokens a step (planner/engine/runtimes.py)"
    )
