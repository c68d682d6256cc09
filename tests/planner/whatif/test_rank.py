"""whatif's ranking: cheapest fleet first; at the same monthly cost the candidate with the
higher limit (more headroom for the same money) ranks first, and the report does not then
say that the other "needs the cheaper fleet"."""

from __future__ import annotations

from pathlib import Path

from contracts.whatif import Whatif, WhatifCandidate
from planner.whatif.run import rank
from reports.which_data import CannotRun, _whatif_row, cheapest_per_token


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


def test_every_reason_a_candidate_cannot_run_is_a_field_the_report_reads(
    tmp_path: Path,
) -> None:
    """Why a candidate has no engine is a field of whatif.json (`cannot_run`, with the
    shortfall per GPU for "fit"), set where the configuration fails; the report read it from
    the problem's words (and an engine refusing the board read as "meets the SLO at no
    load")."""
    from typer.testing import CliRunner

    from capplan.cli import app
    from reports.which_data import cannot_run

    def cli(*args: str) -> None:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, result.output

    profile = tmp_path / "chat.json"
    cli("profile", "--preset", "chat", "-o", str(profile), "--quiet")
    out = tmp_path / "w.json"
    cli(
        "whatif", "--profile", str(profile), "--slo", "ttft:p95<=2s", "--model",
        "llama-3.1-70b", "--gpu", "H100-80GB,MI300X", "--engine", "trtllm", "--tp", "1,3,4",
        "--level-duration", "20", "-o", str(out),
    )  # fmt: skip
    by = {c.label: c for c in Whatif.model_validate_json(out.read_text()).candidates}
    fit = by["H100-80GB tp1"]
    assert fit.cannot_run == "fit" and fit.short_gb_per_gpu is not None
    assert f"{fit.short_gb_per_gpu:.1f} GB short" in (fit.problem or "")
    assert by["H100-80GB tp3"].cannot_run == "heads"
    assert by["MI300X-192GB tp4"].cannot_run == "other"  # TensorRT-LLM runs on NVIDIA GPUs only
    assert by["H100-80GB tp4"].cannot_run is None and by["H100-80GB tp4"].limit_rps
    kinds = {label: cannot_run(c) for label, c in by.items()}
    assert kinds["H100-80GB tp1"] == CannotRun("fit", fit.short_gb_per_gpu)
    assert kinds["H100-80GB tp3"] == CannotRun("heads")
    assert kinds["H100-80GB tp4"] is None


def test_a_knob_lesson_leaves_out_pairs_that_cannot_run(tmp_path: Path) -> None:
    """TensorRT-LLM cannot run on an MI300X: that pair counted in the engine lesson as a lost
    limit (-100 %), moving its median (a bug hunt: "median of 8: -100% to +15%"). Only the
    H100 pair is a comparison of the engines."""
    from typer.testing import CliRunner

    from capplan.cli import app

    profile = tmp_path / "chat.json"
    out = tmp_path / "w.json"
    runner = CliRunner()
    assert runner.invoke(app, ["profile", "--preset", "chat", "-o", str(profile)]).exit_code == 0
    result = runner.invoke(
        app,
        ["whatif", "--profile", str(profile), "--slo", "ttft:p95<=2s", "--gpu",
         "H100-80GB,MI300X", "--engine", "vllm,trtllm", "--level-duration", "20", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    whatif = Whatif.model_validate_json(out.read_text())
    (engine,) = [lesson for lesson in whatif.lessons if lesson.knob == "engine"]
    assert engine.pairs == 1 and engine.limit_change is not None and engine.limit_change > -1.0
