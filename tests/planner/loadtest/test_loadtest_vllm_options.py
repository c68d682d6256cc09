"""vLLM's and guidellm's spellings in `capplan loadtest`: bad values exit 2 naming the option
(before any request), and the pure parts (the count plan, the summary, the synthetic lengths)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.run import RECORD_COLUMNS
from locustfiles.arrivals import stage_times
from locustfiles.summary import summarize_plan
from planner.loadtest.benchmark import count_plan, serving_summary
from profiles.synthetic import RandomDataset, random_dataset_profile
from profiles.workload import WorkloadStream

BASE = ["loadtest", "--host", "http://127.0.0.1:9", "--model", "m", "--no-preflight"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--dataset-name", "sharegpt"], "--dataset-name 'sharegpt': expected one of random"),
        (["--dataset-name", "random", "--num-prompts", "0"], "--num-prompts"),
        (["--dataset-name", "random", "--random-input-len", "0"], "--random-input-len"),
        (["--dataset-name", "random", "--random-output-len", "-3"], "--random-output-len"),
        (["--dataset-name", "random", "--random-range-ratio", "1"], "--random-range-ratio"),
        (["--dataset-name", "random", "--request-rate", "0"], "--request-rate"),
        (["--dataset-name", "random", "--request-rate", "nan"], "--request-rate"),
        (["--dataset-name", "random", "--burstiness", "0"], "--burstiness"),
        (["--dataset-name", "random", "--percentile-metrics", "ttft,lat"], "unknown: lat"),
        (["--dataset-name", "random", "--metric-percentiles", "50,100"], "--metric-percentiles"),
        (["--dataset-name", "random", "--metric-percentiles", "p99"], "--metric-percentiles"),
        (["--data", "prompt_tokens=512"], "missing output_tokens"),
        (["--data", "prompt_tokens=x,output_tokens=1"], "--data"),
        (["--data", "p=1,output_tokens=1"], "--data"),
        (["--num-prompts", "10"], "--num-prompts: need --dataset-name random"),
        (["--dataset-name", "random", "--rate", "3"], "--rate: not with --dataset-name"),
        (["--dataset-name", "random", "--workers", "2"], "runs in one process"),
        (["--dataset-name", "random", "--data", "prompt_tokens=1,output_tokens=1"], "one of"),
    ],
)
def test_a_bad_value_exits_2_naming_the_option(args: list[str], named: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [*BASE, *args, "-o", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "run").exists()


def test_a_count_stage_sends_exactly_its_requests_at_its_rate_or_at_once() -> None:
    for n, rate in ((200, None), (200, 7.0), (1, 3.0), (997, 0.3)):
        (stage,) = count_plan(n, rate, "poisson").stages
        times = stage_times(stage, np.random.default_rng([5, 1, 0]))
        assert len(times) == n
        if rate is None:
            assert not times.any()
        else:
            assert times.max() < n / rate and np.all(np.diff(times) >= 0)


def test_random_lengths_are_fixed_or_within_the_range_ratio() -> None:
    fixed = random_dataset_profile(RandomDataset(input_tokens=512, output_tokens=128), 50, 0)
    stream = WorkloadStream(fixed, 0)
    shapes = [next(stream) for _ in range(300)]
    assert {(s.input_tokens, s.output_tokens) for s in shapes} == {(512, 128)}
    assert all(len(s.messages) == 1 for s in shapes)  # no shared prefix, no session turns
    ranged = RandomDataset(input_tokens=100, output_tokens=10, range_ratio=0.5)
    pairs = np.array(random_dataset_profile(ranged, 2000, 1).lengths.sampler.pairs)
    assert pairs[:, 0].min() == 50 and pairs[:, 0].max() == 150  # both ends drawn
    assert pairs[:, 1].min() == 5 and pairs[:, 1].max() == 15


def _records(rows: list[dict[str, object]]) -> pl.DataFrame:
    full = [{c: row.get(c) for c in RECORD_COLUMNS} for row in rows]
    return pl.DataFrame(full, schema=RECORD_COLUMNS)


def test_the_summary_counts_successes_and_pools_the_gaps() -> None:
    ok = {"ok": True, "input_tokens": 10, "output_tokens": 3}
    records = _records(
        [
            {**ok, "sent_s": 1.0, "end_s": 2.0, "ttft_s": 0.1, "itl_gaps_s": [0.1, 0.3]},
            {**ok, "sent_s": 1.5, "end_s": 3.0, "ttft_s": 0.3, "itl_gaps_s": [0.2, 0.4]},
            {"ok": False, "sent_s": 1.2, "input_tokens": 10, "output_tokens": 0, "ttft_s": 9.0},
        ]
    )
    s = serving_summary(records, ("ttft", "itl"), (50.0, 75.0))
    assert (s.requests, s.successful, s.failed) == (3, 2, 1)
    assert s.duration_s == 2.0  # first send 1.0 to last end 3.0
    assert (s.request_throughput_rps, s.input_tokens_per_s, s.output_tokens_per_s) == (1, 10, 3)
    ttft, itl = s.metrics
    assert ttft.percentiles_ms[50.0] == pytest.approx(200.0)  # the failure's 9 s is apart
    assert itl.mean_ms == pytest.approx(250.0)  # four gaps pooled: 0.1 0.2 0.3 0.4
    assert itl.percentiles_ms[75.0] == pytest.approx(325.0)  # linear: 0.3 + 0.25 x 0.1
    assert not math.isnan(itl.median_ms or math.nan)


def test_a_count_stage_is_summarized_until_its_last_answer() -> None:
    plan = count_plan(4, None, "poisson")  # all at once: a nominal 1 ms schedule
    rows = [
        {"stage": "benchmark", "ok": True, "sent_s": 0.0, "end_s": end, "output_tokens": 10}
        for end in (2.0, 4.0, 6.0, 8.0)
    ]
    (s,) = summarize_plan(_records(rows), plan, 0.0)
    assert s.duration_s == 8.0 and s.offered_rps == 0.5 and s.output_tokens_per_s == 5.0
    assert s.validity is not None and s.validity.warnings == []
    (short,) = summarize_plan(_records(rows[:3]), plan, 0.0)
    assert short.validity is not None
    assert short.validity.warnings == ["scheduled 3 requests against 4 asked"]
