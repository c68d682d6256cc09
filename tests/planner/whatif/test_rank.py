"""whatif's ranking: cheapest fleet first; at the same monthly cost the candidate with the
higher limit (more headroom for the same money) ranks first, and the report does not then
say that the other "needs the cheaper fleet"."""

from __future__ import annotations

from contracts.whatif import WhatifCandidate
from planner.whatif.run import rank
from reports.which_data import _whatif_row, cheapest_per_token


def _candidate(label: str, limit: float, cost: float, e2e: float) -> WhatifCandidate:
    return WhatifCandidate(
        label=label, gpu="H100-80GB", tp=1, settings={}, limit_rps=limit, instances=1,
        monthly_cost_usd=cost, e2e_p95_s=e2e, usd_per_million_output_tokens=cost / limit,
    )  # fmt: skip


def test_at_the_same_cost_the_higher_limit_ranks_first() -> None:
    # The bug hunt's agent-preset case: static KV 4.33 req/s and paged 7.27 req/s, both
    # $4,365 a month; static's e2e at its own (lower) limit is the shorter.
    static = _candidate("static", 4.33, 4365.0, 3.0)
    paged = _candidate("paged", 7.27, 4365.0, 5.0)
    dear = _candidate("dear", 9.0, 8730.0, 2.0)
    rank([static, dear, paged])
    assert (paged.rank, static.rank, dear.rank) == (1, 2, 3)
    rows = [_whatif_row(c) for c in (static, dear, paged)]
    assert cheapest_per_token(rows) is None  # paged is both first and cheapest per token


def test_the_per_token_sentence_needs_a_dearer_fleet() -> None:
    """The cheaper-per-token candidate is named only when its fleet costs more a month."""
    best = _candidate("best", 4.0, 4365.0, 3.0)
    per_token = _candidate("per-token", 12.0, 8730.0, 3.0)  # $727 against $1,091 per unit
    rank([best, per_token])
    low = cheapest_per_token([_whatif_row(c) for c in (best, per_token)])
    assert low is not None and low.label == "per-token"
    # Same monthly cost but ranked second (a planted tie-break by e2e): nothing to explain.
    tie = _candidate("tie", 12.0, 4365.0, 9.0)
    best.rank, tie.rank = 1, 2
    assert cheapest_per_token([_whatif_row(c) for c in (best, tie)]) is None


def test_an_engine_that_cannot_run_is_not_ranked() -> None:
    """TensorRT-LLM cannot run on an MI300X: vLLM there has nothing to lead, so no "engine
    ranking" sentence comes of it (one came, and the report rendered it as "no prediction")."""
    from planner.whatif.lessons import engine_rankings
    from profiles.presets import preset_profile

    def cand(gpu: str, engine: str, limit: float | None) -> WhatifCandidate:
        return WhatifCandidate(
            label=f"{gpu} tp1 engine={engine}", gpu=gpu, tp=1, settings={"engine": engine},
            limit_rps=limit,
        )  # fmt: skip

    candidates = [
        cand("H100-80GB", "trtllm", 6.0), cand("H100-80GB", "vllm", 5.0),
        cand("MI300X-192GB", "trtllm", None), cand("MI300X-192GB", "vllm", 7.0),
    ]  # fmt: skip
    assert engine_rankings(preset_profile("chat"), candidates, {}) == []


def test_every_reason_a_candidate_cannot_run_is_read_as_such() -> None:
    """The report names why a candidate has no engine from whatif's problem text; an engine
    refusing the board (TensorRT-LLM on an MI300X) read as "meets the SLO at no load"."""
    from reports.which_data import cannot_run

    refused = "--engine trtllm@0.14 on MI300X-192GB: ... runs on NVIDIA GPUs only"
    cases = {
        refused: "other",
        "--kv-cache-dtype fp8 under --engine llamacpp: ...": "other",
        "--quantization nvfp4 on H100-80GB: needs FP4 tensor cores: B200-180GB": "fp4",
        "engine config for H100-80GB x llama-3.1-70b x tp=1: ... 66.3 GB short (...)": "fit",
    }
    for problem, kind in cases.items():
        got = cannot_run(problem)
        assert got is not None and got.kind == kind, problem
    assert cannot_run("no rate met the SLO (ttft:p95 3.2 s at 0.5 req/s)") is None
