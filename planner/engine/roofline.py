"""The step time of the engine model: a roofline over one step's work, per GPU.

`Roofline` turns an `EngineConfig` into seconds per token, per attention pair and per KV
token once, so the scheduler (`planner.engine.engine`) prices each step with a few
multiplications.
"""

from __future__ import annotations

from planner.engine.parallel import DEFAULT_LINK, allreduce_latency_s, ring_share
from planner.engine.specs import EngineConfig, kv_bytes_per_token, weight_bytes


class Roofline:
    """The cost model of one engine step (see `step_time_s`)."""

    def __init__(self, config: EngineConfig) -> None:
        m = config.model
        gpu = config.gpu
        bf16 = gpu.bf16_flops * config.mfu * config.tp
        # FP8 weights run their matrix multiplies at the FP8 rate where the board has one.
        one_byte = config.dtype_bytes == 1
        fp8 = one_byte and gpu.fp8_flops is not None
        linear_flops = gpu.fp8_flops * config.mfu * config.tp if fp8 else bf16  # type: ignore[operator]
        if one_byte:
            linear_flops *= config.fp8_efficiency
        attn = gpu.attention_flops
        attn_flops = bf16 if attn is None else attn * config.mfu * config.tp
        self._s_per_linear_token = 2.0 * m.params / linear_flops
        self._s_per_attn_pair = 4.0 * m.layers * m.attention_heads * m.head_dim / attn_flops
        bandwidth = gpu.hbm_bandwidth_bytes_per_s * config.mbu
        self._weight_s = weight_bytes(config) / bandwidth
        if one_byte:
            self._weight_s /= config.fp8_efficiency
        self._s_per_kv_token = kv_bytes_per_token(config) / bandwidth
        self._overhead_s = config.step_overhead_s
        self._seq_overhead_s = config.seq_overhead_s
        # Speculative decoding: k draft forwards per step under the draft model's roofline.
        self._spec_k = config.spec_draft_tokens
        draft = config.spec_draft_params
        self._draft_weight_s = draft * config.dtype_bytes / config.tp / bandwidth
        self._draft_s_per_token = 2.0 * draft / bf16
        # Tensor parallelism: two all-reduces per layer of each token's hidden state (bf16
        # activations), over the config's link if it names one, else the board's own.
        self._comm_s_per_token = 0.0
        self._comm_fixed_s = 0.0
        if config.tp > 1:
            link_bw = config.tp_link_bandwidth_bytes_per_s
            if link_bw is not None:
                latency = config.tp_allreduce_latency_s
            else:
                link_bw = gpu.link_bandwidth_bytes_per_s or DEFAULT_LINK.bandwidth_bytes_per_s
                link_bw *= config.tp_link_efficiency
                hop = config.tp_hop_latency_s
                if hop is None:
                    hop = gpu.link_latency_s or DEFAULT_LINK.hop_latency_s
                latency = allreduce_latency_s(hop, config.tp)
            calls = 2 * m.layers
            self._comm_s_per_token = calls * ring_share(config.tp) * m.hidden_size * 2 / link_bw
            self._comm_fixed_s = calls * latency

    def step_time_s(
        self, tokens: int, attn_pairs: float, kv_tokens_read: int, seqs: float = 1, drafts: int = 0
    ) -> float:
        """Roofline time of one step, kernel group by kernel group: the matrix multiplies
        (each bound by compute or by reading the weights) and attention (bound by compute or by
        reading the KV cache) run one after the other, so their times add:

        linear    = max(2 x params x tokens / (linear FLOP/s x mfu x tp),
                        weight bytes / (bandwidth x mbu)), the linear rate being the board's
                    FP8 peak for 1-byte weights where it has one, else bf16, both scaled by
                    `fp8_efficiency` for 1-byte weights;
        attention = max(4 x layers x heads x head_dim x attention pairs / (attention FLOP/s x
                        mfu x tp), KV bytes of every context token read / (bandwidth x mbu)),
                    attention's rate being bf16 unless the GPU's spec states another;
        overhead = step_overhead_s + seq_overhead_s x sampled positions (one per scheduled
                   request; k + 1 for a speculatively verified decode),
        per GPU under tensor parallelism. `attn_pairs` counts (query, key) token pairs.
        communication (tp > 1) = 2 x layers x (ring share x tokens x hidden x 2 bytes / link
        bandwidth + all-reduce latency), not overlapped with compute; the latency grows
        with tp (planner.engine.parallel).
        drafts (speculative decoding) = k sequential draft forwards over `drafts` sequences,
        each max(draft weights / bandwidth, 2 x draft params x drafts / FLOP/s).
        """
        linear = tokens * self._s_per_linear_token
        if linear < self._weight_s:
            linear = self._weight_s
        attention = attn_pairs * self._s_per_attn_pair
        kv = kv_tokens_read * self._s_per_kv_token
        if attention < kv:
            attention = kv
        total = linear + attention + self._overhead_s + seqs * self._seq_overhead_s
        if self._comm_fixed_s or self._comm_s_per_token:
            total += self._comm_fixed_s + tokens * self._comm_s_per_token
        if drafts and self._draft_weight_s:
            draft = max(self._draft_weight_s, drafts * self._draft_s_per_token)
            total += self._spec_k * draft
        return total
