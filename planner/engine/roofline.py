"""The step time of the engine model: a roofline over one step's work, per GPU.

`Roofline` turns an `EngineConfig` into seconds per token, per attention pair and per KV
token once, so the scheduler (`planner.engine.engine`) prices each step with a few
multiplications.
"""

from __future__ import annotations

import math

from planner.engine.batch import StepBatch
from planner.engine.parallel import (
    DEFAULT_LINK,
    AllReduceCost,
    allreduce_latency_s,
    fixed_allreduce,
    nccl_allreduce,
)
from planner.engine.specs import EngineConfig, kv_bytes_per_token, weight_bytes


class Roofline:
    """The cost model of one engine step (see `step_time_s`)."""

    def __init__(self, config: EngineConfig) -> None:
        m = config.model
        gpu = config.gpu
        # Narrower shards under tensor parallelism reach less of each GPU's peak.
        shard = config.tp_shard_efficiency ** math.log2(config.tp)
        mfu = config.mfu * shard
        bf16 = gpu.bf16_flops * mfu * config.tp
        # FP8 weights run their matrix multiplies at the FP8 rate where the board has one.
        one_byte = config.dtype_bytes == 1
        fp8 = one_byte and gpu.fp8_flops is not None
        linear_flops = gpu.fp8_flops * mfu * config.tp if fp8 else bf16  # type: ignore[operator]
        if one_byte:
            linear_flops *= config.fp8_efficiency
        attn = gpu.attention_flops
        attn_flops = bf16 if attn is None else attn * mfu * config.tp
        self._s_per_linear_token = 2.0 * m.params / linear_flops
        self._s_per_attn_pair = 4.0 * m.layers * m.attention_heads * m.head_dim / attn_flops
        self._s_per_decode_pair = config.decode_attention_s_per_pair
        bandwidth = gpu.hbm_bandwidth_bytes_per_s * config.mbu * shard
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
        # activations): over the config's forced link (fixed latency), with a calibrated hop
        # latency on the board's link, or by NCCL's own cost model of the board's link.
        self._allreduce: AllReduceCost | None = None
        self._allreduce_calls = 2 * m.layers
        self._allreduce_bytes_per_token = m.hidden_size * 2
        if config.tp > 1:
            forced_bw = config.tp_link_bandwidth_bytes_per_s
            link_bw = gpu.link_bandwidth_bytes_per_s or DEFAULT_LINK.bandwidth_bytes_per_s
            link_bw *= config.tp_link_efficiency
            if forced_bw is not None:
                self._allreduce = fixed_allreduce(
                    config.tp_allreduce_latency_s, forced_bw, config.tp
                )
            elif config.tp_hop_latency_s is not None:
                latency = allreduce_latency_s(config.tp_hop_latency_s, config.tp)
                self._allreduce = fixed_allreduce(latency, link_bw, config.tp)
            else:
                self._allreduce = nccl_allreduce(gpu.link_kind, link_bw, config.tp)

    def batch_time_s(self, batch: StepBatch, seqs: float) -> float:
        """`step_time_s` of a scheduled batch whose CPU cost covers `seqs` requests."""
        b = batch
        return self.step_time_s(
            b.tokens, b.attn_pairs, b.kv_read_tokens, seqs, b.drafts, decode_pairs=b.decode_pairs
        )

    def step_time_s(
        self,
        tokens: int,
        attn_pairs: float,
        kv_tokens_read: int,
        seqs: float = 1,
        drafts: int = 0,
        *,
        decode_pairs: float = 0.0,
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
        per GPU under tensor parallelism, where mfu and mbu are each scaled by
        tp_shard_efficiency ** log2(tp) (narrower shards reach less of the peak).
        `attn_pairs` counts (query, key) token pairs, `decode_pairs` those of single-query
        decodes among them; with `decode_attention_s_per_pair` set (a calibration) decode
        pairs leave the compute side and cost that much each on top of the attention term.
        communication (tp > 1) = 2 x layers x one all-reduce of tokens x hidden x 2 bytes,
        priced by NCCL's cost model on the board's link (the quickest protocol of latency +
        2 (tp-1) hops + ring share of the bytes over the bus bandwidth), not overlapped with
        compute; the latency grows with tp (planner.engine.parallel).
        drafts (speculative decoding) = k sequential draft forwards over `drafts` sequences,
        each max(draft weights / bandwidth, 2 x draft params x drafts / FLOP/s).
        """
        linear = tokens * self._s_per_linear_token
        if linear < self._weight_s:
            linear = self._weight_s
        decode_pair_s = self._s_per_decode_pair
        if decode_pair_s is None:
            attention = attn_pairs * self._s_per_attn_pair
        else:
            attention = (attn_pairs - decode_pairs) * self._s_per_attn_pair
        kv = kv_tokens_read * self._s_per_kv_token
        if attention < kv:
            attention = kv
        if decode_pair_s is not None:
            attention += decode_pairs * decode_pair_s
        total = linear + attention + self._overhead_s + seqs * self._seq_overhead_s
        if self._allreduce is not None:
            message = tokens * self._allreduce_bytes_per_token
            total += self._allreduce_calls * self._allreduce.time_s(message)
        if drafts and self._draft_weight_s:
            draft = max(self._draft_weight_s, drafts * self._draft_s_per_token)
            total += self._spec_k * draft
        return total
