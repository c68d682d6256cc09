"""Where the queue and KV-cache lines come from: the gauges the limit run's server reported
during the level the limit rests on (not the failing level above it), through the run
directory's own summary code; estimated, and said so, without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.limit import LimitLevel, LimitResult
from contracts.run import Stage, StagePlan
from contracts.rundir import (
    consolidate_run,
    metrics_writer,
    read_records,
    read_server_metrics,
    write_stages,
)
from locustfiles.summary import summarize_plan
from planner.ops.thresholds import queue_and_kv_seen
from tests.planner.ops.conftest import plan_chat

SLO = "ttft:p95<=2s"


def _limit_run(folder: Path) -> Path:
    """A limit run: 8 req/s held (waiting peaked at 7, KV at 0.61), 12 req/s failed (20)."""
    metrics_writer(folder).write([
        (1.0, "vllm:num_requests_waiting", 'instance="a"', "gauge", 3.0),
        (2.0, "vllm:num_requests_waiting", 'instance="a"', "gauge", 7.0),
        (2.0, "vllm:kv_cache_usage_perc", 'instance="a"', "gauge", 0.61),
        (12.0, "vllm:num_requests_waiting", 'instance="a"', "gauge", 20.0),
        (12.0, "vllm:kv_cache_usage_perc", 'instance="a"', "gauge", 0.97),
    ])  # fmt: skip
    consolidate_run(folder)
    plan = StagePlan(stages=[Stage(name="r8", duration_s=10.0, rate_rps=8.0),
                             Stage(name="r12", duration_s=10.0, rate_rps=12.0)])  # fmt: skip
    server = read_server_metrics(folder)
    write_stages(folder, summarize_plan(read_records(folder), plan, 0.0, server=server))

    def level(load: float, verdict: Any) -> LimitLevel:
        return LimitLevel(load=load, stage=f"r{load:g}", requests=400, completed=400,
                          metrics={"ttft_p95_s": 1.0}, constraints=[], verdict=verdict,
                          mean_e2e_s=2.0)  # fmt: skip

    result = LimitResult(
        dimension="rate", unit="rps", feasible_max=8.0, infeasible_min=12.0, binding="ttft:p95",
        slo=SLO, tolerance=0.1, levels=[level(8.0, "pass"), level(12.0, "fail")],
    )  # fmt: skip
    path = folder / "limit.json"
    path.write_text(result.model_dump_json(by_alias=True))
    return path


def test_the_lines_are_what_the_server_showed_at_the_limit(tmp_path: Path) -> None:
    limit = _limit_run(tmp_path)
    seen = queue_and_kv_seen(str(limit))
    assert (seen.queue, seen.queue_name, seen.kv) == (7.0, "vllm:num_requests_waiting", 0.61)
    in_dir = queue_and_kv_seen(str(tmp_path))  # the run directory names it too
    assert (in_dir.queue, in_dir.kv) == (seen.queue, seen.kv)
    assert queue_and_kv_seen("8rps").queue is None


def test_a_plan_on_a_measured_limit_alerts_at_those_lines(tmp_path: Path) -> None:
    limit = _limit_run(tmp_path)
    out = tmp_path / "plans" / "q1.json"
    plan, output = plan_chat(tmp_path, out, "--limit", str(limit), "--peak-rps", "20")
    ops = plan.ops
    assert ops is not None and Path(ops.rule_groups).parent == tmp_path / "plans" / "q1-ops"
    t = ops.thresholds
    assert (t.queue_per_instance.value, t.kv_usage.value) == (7.0, 0.61)
    assert "the highest vllm:num_requests_waiting at the limit, 7" in t.queue_per_instance.source
    # ceil(20 x 1.2 / 8) + 1 = 4 instances, 3 serving: 24 req/s, 20 sized for
    assert (t.capacity.value, t.planned_load.value) == (24.0, 20.0)
    assert "Alerts and dashboard: 7 alerts" not in output  # no TPOT bound: 6
    assert "Alerts and dashboard: 6 alerts" in " ".join(output.split())


def test_without_headroom_the_queue_line_is_still_finite(tmp_path: Path) -> None:
    """No headroom: M/M/c at utilisation 1 has no mean queue; the line is taken at 95 %."""
    plan, _ = plan_chat(tmp_path, tmp_path / "p.json", "--limit", "4rps", "--peak-rps", "9",
                        "--slo", SLO, "--headroom", "0", "--redundancy", "0")  # fmt: skip
    ops = plan.ops
    assert ops is not None
    line = ops.thresholds.queue_per_instance
    assert 1.0 <= line.value < 100 and "at 95% utilisation" in line.source
