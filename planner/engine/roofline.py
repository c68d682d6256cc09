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
    PointToPoint,
    allreduce_latency_s,
    fixed_allreduce,
    nccl_allreduce,
)
from planner.engine.specs import (
    EngineConfig,
    bytes_per_weight,
    kv_bytes_per_token,
    linear_peak_flops,
    weight_format,
)


class Roofline:
    """The cost model of one engine step (see `step_time_s`)."""

    def __init__(self, config: EngineConfig) -> None:
        m = config.model
        gpu = config.gpu
        # Narrower shards under tensor parallelism reach less of each GPU's peak.
        shard = config.tp_shard_efficiency ** math.log2(config.tp)
        mfu = config.mfu * shard
        bf16 = gpu.bf16_flops * mfu * config.tp
        # Quantized weights run their matrix multiplies at their format's tensor-core rate
        # where the board has it, else weight-only at bf16 (planner.engine.precision).
        fp8 = weight_format(config).name == "fp8"
        linear_peak = linear_peak_flops(config)
        assert linear_peak is not None  # EngineConfig refuses a format the board cannot run
        linear_flops = linear_peak * mfu * config.tp
        if fp8:
            linear_flops *= config.fp8_efficiency
        attn = gpu.attention_flops
        attn_flops = bf16 if attn is None else attn * mfu * config.tp
        self._s_per_linear_token = 2.0 * m.params_per_token / linear_flops
        self._s_per_attn_pair = 4.0 * m.layers * m.attention_heads * m.head_dim / attn_flops
        self._s_per_decode_pair = config.decode_attention_s_per_pair
        bandwidth = gpu.hbm_bandwidth_bytes_per_s * config.mbu * shard
        # The whole model's weights on one tensor-parallel group (every pipeline stage's):
        # a token's step crosses all stages. A mixture of experts reads its routed experts
        # only as far as the step's tokens touch them (see `weight_read_s`).
        per_weight = bytes_per_weight(config)
        self._weight_s = (
            math.ceil((m.params - m.expert_params) * per_weight / config.tp) / bandwidth
        )
        self._expert_s = math.ceil(m.expert_params * per_weight / config.tp) / bandwidth
        if fp8:
            self._weight_s /= config.fp8_efficiency
            self._expert_s /= config.fp8_efficiency
        self._expert_miss = 1.0 - m.active_experts / m.experts if m.experts else 1.0
        self._s_per_kv_token = kv_bytes_per_token(config) * config.pp / bandwidth
        self._overhead_s = config.step_overhead_s
        self._seq_overhead_s = config.seq_overhead_s
        # Speculative decoding: k draft forwards per step under the draft model's roofline.
        self._spec_k = config.spec_draft_tokens
        draft = config.spec_draft_params
        self._draft_weight_s = draft * config.dtype_bytes / config.tp / bandwidth
        self._draft_s_per_token = 2.0 * draft / bf16
        self._allreduce = tp_allreduce(config)
        self._allreduce_calls = 2 * m.layers
        self._activation_bytes_per_token = m.hidden_size * 2  # bf16 hidden states
        self._pp = config.pp
        self._stage_send = stage_send(config)

    def microbatches(self, seqs: float) -> int:
        """Microbatches in flight under pipeline parallelism: one per stage, fewer when fewer
        requests run (the idle stages are the bubble); 1 without it."""
        return max(1, min(self._pp, math.ceil(seqs)))

    def batch_time_s(self, batch: StepBatch, seqs: float) -> float:
        """`step_time_s` of a scheduled batch whose CPU cost covers `seqs` requests."""
        b = batch
        return self.step_time_s(
            b.tokens, b.attn_pairs, b.kv_read_tokens, seqs, b.drafts, decode_pairs=b.decode_pairs
        )

    def weight_read_s(self, tokens: float) -> float:
        """Time to read the weights a step of `tokens` tokens uses: all of a dense model's; a
        mixture of experts' shared part plus the routed experts some token picks, with k of
        E experts per token picked uniformly: a share 1 - (1 - k/E)^tokens of them."""
        if not self._expert_s:
            return self._weight_s
        return self._weight_s + self._expert_s * (1.0 - self._expert_miss**tokens)

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

        linear    = max(2 x active params x tokens / (linear FLOP/s x mfu x tp),
                        weight bytes read / (bandwidth x mbu)), the linear rate being the
                    dense peak of the weights' format where the board has it (FP8, FP4),
                    else bf16 (weight-only), both scaled by `fp8_efficiency` for FP8
                    weights; a mixture of experts reads its routed experts only as far as
                    the step's tokens pick them (`weight_read_s`);
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
        Under pipeline parallelism (pp > 1) the GPU terms are those of one microbatch
        (`_pipelined_s`).
        """
        if self._pp > 1:
            return self._pipelined_s(tokens, attn_pairs, kv_tokens_read, seqs, drafts, decode_pairs)
        return self._gpu_time_s(tokens, attn_pairs, kv_tokens_read, drafts, decode_pairs, seqs)

    def _pipelined_s(
        self,
        tokens: float,
        attn_pairs: float,
        kv_tokens_read: float,
        seqs: float,
        drafts: float,
        decode_pairs: float,
    ) -> float:
        """A step under pipeline parallelism: the batch splits into m microbatches in flight,
        one per stage (fewer when fewer requests run); each crosses every stage, so a token
        waits pp x (its microbatch's work on one stage) = the whole model's work on 1/m of the
        batch, plus pp - 1 activation sends between stages."""
        m = self.microbatches(seqs)
        share = 1.0 / m
        gpu = self._gpu_time_s(
            tokens * share, attn_pairs * share, kv_tokens_read * share, drafts * share,
            decode_pairs * share,
        )  # fmt: skip
        send = (self._pp - 1) * self._stage_send.time_s(
            tokens * share * self._activation_bytes_per_token
        )
        return gpu + send + self._overhead_s + seqs * self._seq_overhead_s

    def _gpu_time_s(
        self,
        tokens: float,
        attn_pairs: float,
        kv_tokens_read: float,
        drafts: float,
        decode_pairs: float,
        seqs: float | None = None,
    ) -> float:
        """The GPUs' time of one step of the whole model on one tensor-parallel group, plus the
        CPU's for `seqs` requests when given (added in the order that keeps every sum
        bit-identical to the golden snapshots)."""
        linear = tokens * self._s_per_linear_token
        weights = self.weight_read_s(tokens)
        if linear < weights:
            linear = weights
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
        total = linear + attention
        if seqs is not None:
            total = total + self._overhead_s + seqs * self._seq_overhead_s
        if self._allreduce is not None:
            message = tokens * self._activation_bytes_per_token
            total += self._allreduce_calls * self._allreduce.time_s(message)
        if drafts and self._draft_weight_s:
            draft = max(self._draft_weight_s, drafts * self._draft_s_per_token)
            total += self._spec_k * draft
        return total


def tp_allreduce(config: EngineConfig) -> AllReduceCost | None:
    """One tensor-parallel all-reduce's cost (None at tp 1): over the config's forced link
    (fixed latency), across PCIe where the group is larger than the board's link joins
    (`link_gpus`: an NVLink bridge's pair), with a calibrated hop latency on the board's
    link, or by NCCL's own cost model of the board's link (planner.engine.parallel)."""
    if config.tp == 1:
        return None
    gpu = config.gpu
    link_bw = gpu.link_bandwidth_bytes_per_s or DEFAULT_LINK.bandwidth_bytes_per_s
    link_bw *= config.tp_link_efficiency
    if config.tp_link_bandwidth_bytes_per_s is not None:
        return fixed_allreduce(
            config.tp_allreduce_latency_s, config.tp_link_bandwidth_bytes_per_s, config.tp
        )
    if gpu.link_gpus is not None and config.tp > gpu.link_gpus:
        # the ring leaves the bridged group: its slowest hops cross PCIe
        pcie_bw = gpu.pcie_bandwidth_bytes_per_s or DEFAULT_LINK.bandwidth_bytes_per_s
        return nccl_allreduce("pcie", pcie_bw * config.tp_link_efficiency, config.tp)
    if config.tp_hop_latency_s is not None:
        latency = allreduce_latency_s(config.tp_hop_latency_s, config.tp)
        return fixed_allreduce(latency, link_bw, config.tp)
    return nccl_allreduce(gpu.link_kind, link_bw, config.tp)


def stage_send(config: EngineConfig) -> PointToPoint:
    """The send of a microbatch's hidden states from one pipeline stage to the next: one
    point-to-point transfer over the board's link (catalog.yaml; PCIe defaults without one)."""
    gpu = config.gpu
    return PointToPoint(
        latency_s=gpu.link_latency_s or DEFAULT_LINK.hop_latency_s,
        bandwidth_bytes_per_s=gpu.link_bandwidth_bytes_per_s or DEFAULT_LINK.bandwidth_bytes_per_s,
    )
