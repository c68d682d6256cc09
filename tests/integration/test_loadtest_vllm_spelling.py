"""`capplan loadtest` in vLLM's spelling (--dataset-name random, --num-prompts, the percentiles
asked) and guidellm's (--data), against the test stream server on 127.0.0.1."""

from __future__ import annotations

import csv
import re
import shlex
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import Result
from typer.testing import CliRunner

from capplan.cli import app
from contracts.rundir import read_records, read_run_info
from testkit.stream_server import start_server

pytestmark = pytest.mark.integration

_LINE = re.compile(r"^(P[\d.]+|Mean|Median) (TTFT|TPOT|ITL|E2EL) \(ms\):\s+([\d.]+)\s*$")
VLLM_ARGS = """--dataset-name random --random-input-len 512 --random-output-len 128
    --num-prompts 200 --max-concurrency 50
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99"""
GUIDELLM_ARGS = "--data prompt_tokens=64,output_tokens=8 --num-prompts 30 --request-rate 40"
_COLUMNS = {"TTFT": "ttft_s", "TPOT": "tpot_s", "ITL": "itl_gaps_s", "E2EL": "e2e_s"}


def _loadtest(args: str, *, ttft_s: float, itl_s: float) -> tuple[Result, list[dict[str, float]]]:
    """`capplan loadtest ARGS` against a fresh stream server: the CLI's result (exit 0 checked)
    and the server's own log of the requests it answered."""
    server = start_server(ttft_s=ttft_s, itl_s=itl_s)
    try:
        base = ["loadtest", "--host", server.url, "--model", "m", "--no-preflight"]
        result = CliRunner().invoke(app, [*base, *shlex.split(args)])
        own = server.timings()
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    return result, own


def _printed(output: str) -> dict[tuple[str, str], float]:
    """(statistic, metric) -> value of every latency line of the summary."""
    found = {}
    for line in output.splitlines():
        m = _LINE.match(line)
        if m:
            found[(m.group(1), m.group(2))] = float(m.group(3))
    return found


def _figure(output: str, label: str) -> float:
    (line,) = [x for x in output.splitlines() if x.startswith(label)]
    return float(line[len(label) :].split()[0])


def _ms(records: pl.DataFrame, column: str) -> pl.Series:
    s = records.filter(pl.col("ok"))[column]
    return (s.explode() if column == "itl_gaps_s" else s).drop_nulls() * 1000.0


def test_random_dataset_sends_num_prompts_of_the_asked_lengths_and_prints_the_asked_percentiles(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    csv_args = f"-o {run} --csv {tmp_path / 'csv' / 'bench'} {VLLM_ARGS}"
    result, own = _loadtest(csv_args, ttft_s=0.02, itl_s=0.002)
    # The server's own log: exactly 200 requests, each 512 prompt tokens asking 128 out.
    assert len(own) == 200
    assert {t["prompt_tokens"] for t in own} == {512}
    assert {t["max_tokens"] for t in own} == {128}
    records = read_records(run)
    assert records.height == 200 and records["ok"].all()
    assert read_run_info(run).profile_source == "random: 512 in / 128 out tokens"
    printed = _printed(result.output)
    asked = {(f"P{p}", m) for p in (50, 90, 99) for m in _COLUMNS}
    means = {(s, m) for s in ("Mean", "Median") for m in _COLUMNS}
    assert set(printed) == asked | means  # no percentile that was not asked
    for (stat, metric), value in printed.items():
        values = _ms(records, _COLUMNS[metric])
        q = {"Mean": None, "Median": 0.5}.get(stat, float(stat[1:]) / 100 if stat[0] == "P" else 0)
        truth = values.mean() if q is None else values.quantile(q, interpolation="linear")
        assert truth is not None and abs(value - float(truth)) <= 0.006, (stat, metric, value)
    # Against the server's own clock (units and metric): the median TTFT it measured, plus
    # connecting and reading (50 streams of 500 chunks/s on a shared CI machine: loose).
    own_ttft_ms = float(np.median([t["ttft_s"] for t in own])) * 1000
    assert 0 <= printed[("Median", "TTFT")] - own_ttft_ms <= 250.0
    assert _figure(result.output, "Successful requests:") == 200
    rps = _figure(result.output, "Request throughput (req/s):")
    assert rps > 0
    assert _figure(result.output, "Input token throughput (tok/s):") == pytest.approx(
        512 * rps, rel=0.002
    )
    assert _figure(result.output, "Output token throughput (tok/s):") == pytest.approx(
        128 * rps, rel=0.002
    )
    span_s = float(records["end_s"].max()) - float(records["sent_s"].min())  # type: ignore[arg-type]
    assert _figure(result.output, "Benchmark duration (s):") == pytest.approx(span_s, abs=0.006)
    with (tmp_path / "csv" / "bench_records.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 200 and {r["input_tokens"] for r in rows} == {"512"}
    with (tmp_path / "csv" / "bench_stages.csv").open() as f:
        (stage,) = list(csv.DictReader(f))
    assert stage["scheduled"] == "200" and float(stage["ttft_s.p95"]) > 0
    # The stage lasts until its last answer (not its 1 ms all-at-once schedule).
    assert float(stage["duration_s"]) == pytest.approx(span_s, abs=0.5)


def test_guidellm_data_and_a_request_rate_send_exactly_the_count(tmp_path: Path) -> None:
    result, own = _loadtest(f"-o {tmp_path / 'run'} {GUIDELLM_ARGS}", ttft_s=0.01, itl_s=0.001)
    assert len(own) == 30 and {(t["prompt_tokens"], t["max_tokens"]) for t in own} == {(64, 8)}
    # vLLM's defaults: the ttft, tpot and itl percentiles at 99 only.
    assert set(_printed(result.output)) == {
        (s, m) for s in ("Mean", "Median", "P99") for m in ("TTFT", "TPOT", "ITL")
    }
    records = read_records(tmp_path / "run")
    sends = records.sort("intended_send_s")["intended_send_s"].to_numpy()
    assert sends[-1] - sends[0] == pytest.approx(29 / 40, rel=0.5)  # spread at 40 req/s
