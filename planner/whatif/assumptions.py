"""What a whatif assumes, in words for whatif.json's `assumptions` (also in the README), and
the context length it runs at: the profile's longest request, or --max-model-len, and the
share of the profile's requests longer than that."""

from __future__ import annotations

import math

from planner.engine.parallel import TP_LINKS
from planner.engine.runtimes import board_defaults_text
from planner.whatif.knobs import SPEC_ACCEPTANCE, SPEC_DRAFT_PARAMS, SPEC_DRAFT_TOKENS
from planner.whatif.options import WhatifOptions
from profiles.model import Profile


def default_max_model_len(profile: Profile, model_context: int) -> int:
    """The profile's longest sampled request (prompt + output), up to a multiple of 1024."""
    longest = max(i + o for i, o in profile.lengths.sampler.pairs)
    return min(model_context, 1024 * math.ceil(longest / 1024))


def too_long_share(profile: Profile, max_len: int) -> float:
    """The share of the profile's sampled requests whose prompt + output exceed `max_len`."""
    pairs = profile.lengths.sampler.pairs
    return sum(1 for i, o in pairs if i + o > max_len) / len(pairs) if pairs else 0.0


def assumptions(options: WhatifOptions, max_len: int, too_long: float = 0.0) -> list[str]:
    """What the engine model assumes for the knobs of this run (also in the README); with
    `too_long` (the share of requests longer than max_len) a "too long:" line first."""
    links = "; ".join(f"{t.name}: {t.source}" for t in TP_LINKS.values())
    if options.max_model_len is not None:
        why = "--max-model-len"
    elif too_long > 0:
        why = f"{options.model}'s context"
    else:
        why = "the profile's longest request"
    warn = []
    if too_long > 0:
        warn.append(
            f"too long: {too_long:.1%} of the profile's requests have a prompt + output longer "
            f"than max_model_len {max_len:,} ({why}); a server rejects them (HTTP 400), here "
            "they are cut to fit, so the limit is optimistic for such traffic"
        )
    return warn + [
        f"max_model_len {max_len:,} tokens ({why}); static reservation "
        f"holds that many tokens per running sequence from admission",
        f"precision: weights {options.quantization} (--quantization), KV cache "
        f"{options.kv_cache_dtype} (--kv-cache-dtype); fp8 KV holds twice the tokens in the "
        "same memory; fp8/fp4 weights run at the board's dense FP8/FP4 tensor-core peak where "
        "it has one, else weight-only at the bf16 rate; awq/gptq int4 at the bf16 rate; the "
        "quality cost of quantization is not modelled",
        f"speculative decoding 'on': {SPEC_DRAFT_TOKENS} draft tokens, acceptance "
        f"{SPEC_ACCEPTANCE} each, a {SPEC_DRAFT_PARAMS / 1e9:.2f}B-parameter draft costed on "
        f"the roofline; verification computes k + 1 positions per decode",
        board_defaults_text(),
        f"tensor parallelism: two ring all-reduces per layer per step, not overlapped; {links}",
        "prefix reuse replayed: shared system prompts and session history from the profile "
        "(profiles.workload.WorkloadStream); reuse of other content across requests is not",
        f"disaggregation '<p>p<d>d': units of p prefill and d decode instances planned "
        f"together; each prompt's KV crosses a {options.kv_link_bandwidth_bytes_per_s / 1e9:g} "
        f"GB/s per-GPU link (+20 us) before its decode, which streams every token; a request "
        f"is never split across units; limit, instances and cost are per unit",
        f"search: planner.limit.measured.search in virtual time, {options.search_text()}, "
        f"tolerance {options.tolerance:.0%}",
    ]
