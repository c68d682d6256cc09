"""A real engine as target: llama.cpp's server (xllamacpp) on a random tiny Llama."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from contracts.rundir import read_records, read_server_metrics
from locustfiles.stages import builtin_plan
from planner.loadtest.run import LoadTestConfig, run_loadtest
from testkit.profiles import make_profile
from testkit.real_engine import build_random_llama, start_llama_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_steady_burst_recovery_against_llama_cpp(tmp_path: Path) -> None:
    model = build_random_llama(tmp_path / "tiny.gguf")
    server = start_llama_server(model, n_parallel=4, log_path=tmp_path / "llama.log")
    profile = make_profile([(120, 32), (300, 48), (60, 24)], rate_rps=4.0, peak_to_mean_10s=2.0)
    profile_path = tmp_path / "profile.json"
    profile_path.write_text(profile.to_json())
    # steady 4 s at 4 req/s, burst 1 s at 16 req/s, recovery 2 s at 2 req/s
    plan = builtin_plan("steady-burst-recovery", profile, rate_rps=4.0, duration_s=4.0)
    config = LoadTestConfig(
        host=server.url, model=server.model, profile_path=str(profile_path), drain_s=20.0
    )
    try:
        stages = run_loadtest(config, plan, tmp_path / "run")
    finally:
        server.stop()
    assert [s.role for s in stages] == ["steady", "burst", "recovery"]
    assert all(s.errors == 0 and s.completed == s.scheduled > 0 for s in stages)
    records = read_records(tmp_path / "run")
    # Token counts come from the server's usage, and ignore_eos made it produce them all.
    assert not records["tokens_estimated"].any()
    assert set(records["output_tokens"].unique().to_list()) <= {24, 32, 48}
    assert (records["input_tokens"] > 0).all()
    assert records.filter(pl.col("ttft_s") <= 0).height == 0
    metrics = read_server_metrics(tmp_path / "run")
    assert "llamacpp:tokens_predicted_total" in set(metrics["name"].to_list())
    predicted = stages[0].server.get("llamacpp:tokens_predicted_total:rate_per_s")
    assert predicted is not None and predicted > 0
    recovery = stages[2]
    assert recovery.recovered is not None  # measured against the steady stage's p95
