"""The step time of the engine model: a roofline over one step's work, per GPU.

`Roofline` turns an `EngineConfig` into seconds per token, per attention pair and per KV
token once, so the scheduler (`planner.engine.engine`) prices each step with a few
multiplications.
"""

from __future__ import annotations

from planner.engine.specs import EngineConfig, kv_bytes_per_token, weight_bytes


class Roofline:
    """The cost model of one engine step (see `step_time_s`)."""

    def __init__(self, config: EngineConfig) -> None:
        m = config.model
        per_gpu_flops = config.gpu.bf16_flops * config.mfu * config.tp
        attn = config.gpu.attention_flops
        attn_flops = per_gpu_flops if attn is None else attn * config.mfu * config.tp
        self._s_per_linear_token = 2.0 * m.params / per_gpu_flops
        self._s_per_attn_pair = 4.0 * m.layers * m.attention_heads * m.head_dim / attn_flops
        bandwidth = config.gpu.hbm_bandwidth_bytes_per_s * config.mbu
        self._weight_s = weight_bytes(config) / bandwidth
        self._s_per_kv_token = kv_bytes_per_token(config) / bandwidth
        self._overhead_s = config.step_overhead_s
        self._seq_overhead_s = config.seq_overhead_s
        # Speculative decoding: k draft forwards per step under the draft model's roofline.
        self._spec_k = config.spec_draft_tokens
        draft = config.spec_draft_params
        self._draft_weight_s = draft * config.dtype_bytes / config.tp / bandwidth
        self._draft_s_per_token = 2.0 * draft / per_gpu_flops
        # Tensor parallelism: two all-reduces per layer of each token's hidden state; a ring
        # all-reduce moves 2 (tp - 1) / tp of the message through each GPU's link.
        link = config.tp_link_bandwidth_bytes_per_s
        if config.tp > 1 and link is not None:
            ring = 2.0 * (config.tp - 1) / config.tp
            calls = 2 * m.layers
            self._comm_s_per_token = calls * ring * m.hidden_size * config.dtype_bytes / link
            self._comm_fixed_s = calls * config.tp_allreduce_latency_s
        else:
            self._comm_s_per_token = 0.0
            self._comm_fixed_s = 0.0

    def step_time_s(
        self, tokens: int, attn_pairs: float, kv_tokens_read: int, seqs: int = 1, drafts: int = 0
    ) -> float:
        """Roofline time of one step: max(compute, memory) + overhead + communication + drafts.

        compute = (2 x params x tokens / bf16 FLOP/s + 4 x layers x heads x head_dim x
                   attention pairs / attention FLOP/s) / (tp x mfu), attention FLOP/s being
                  the GPU's bf16 FLOP/s unless its spec states another
        memory  = (weight bytes + KV bytes of every context token read) / (bandwidth x mbu),
        overhead = step_overhead_s + seq_overhead_s x sampled positions (one per scheduled
                   request; k + 1 for a speculatively verified decode),
        per GPU under tensor parallelism. `attn_pairs` counts (query, key) token pairs.
        communication (tp > 1 with a stated link) = 2 x layers x (ring share x tokens x
        hidden x dtype / link bandwidth + all-reduce latency), not overlapped with compute.
        drafts (speculative decoding) = k sequential draft forwards over `drafts` sequences,
        each max(draft weights / bandwidth, 2 x draft params x drafts / FLOP/s).
        """
        compute = tokens * self._s_per_linear_token + attn_pairs * self._s_per_attn_pair
        memory = self._weight_s + kv_tokens_read * self._s_per_kv_token
        roofline = compute if compute > memory else memory
        total = roofline + self._overhead_s + seqs * self._seq_overhead_s
        if self._comm_fixed_s or self._comm_s_per_token:
            total += self._comm_fixed_s + tokens * self._comm_s_per_token
        if drafts and self._draft_weight_s:
            draft = max(self._draft_weight_s, drafts * self._draft_s_per_token)
            total += self._spec_k * draft
        return total
