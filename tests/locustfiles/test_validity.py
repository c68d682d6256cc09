"""A stage says whether the offered workload was the asked one: rate, lag, prefix reuse."""

from __future__ import annotations

import json

import polars as pl
import pytest

from contracts.run import Stage
from locustfiles.summary import expected_hit_ratio, stage_validity
from profiles.model import LruPoint, Prefix

PREFIX = Prefix(
    available=True,
    block_tokens=16,
    ideal_hit_ratio=0.65,
    lru_hit_ratio=[
        LruPoint(cache_tokens=65_536, hit_ratio=0.20),
        LruPoint(cache_tokens=1_048_576, hit_ratio=0.60),
    ],
)


def _rows(n: int, span_s: float, lag_s: float = 0.001) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "intended_send_s": [span_s * i / n for i in range(n)],
            "schedule_lag_s": [lag_s] * n,
        }
    )


def _server(hits: float, queries: float, blocks: int) -> pl.DataFrame:
    labels = json.dumps({"block_size": "16", "num_gpu_blocks": str(blocks)}, sort_keys=True)
    return pl.DataFrame(
        {
            "t_s": [0.0, 0.0, 10.0, 10.0, 5.0],
            "name": [
                "vllm:prefix_cache_hits_total",
                "vllm:prefix_cache_queries_total",
                "vllm:prefix_cache_hits_total",
                "vllm:prefix_cache_queries_total",
                "vllm:cache_config_info",
            ],
            "labels": ["", "", "", "", labels],
            "type": ["counter", "counter", "counter", "counter", "gauge"],
            "value": [0.0, 0.0, hits, queries, 1.0],
        }
    )


def test_expected_hit_ratio_interpolates_in_log_cache_size() -> None:
    # 262,144 tokens is halfway between 64 Ki and 1 Mi on a log scale.
    assert expected_hit_ratio(PREFIX, 262_144) == pytest.approx(0.40)
    assert expected_hit_ratio(PREFIX, None) == 0.65  # unknown size: the ideal ratio


def test_a_matching_stage_has_no_warning() -> None:
    stage = Stage(name="s", duration_s=10.0, rate_rps=10.0)
    # 16,384 blocks x 16 tokens = 262,144 tokens: the profile expects 40 %; measured 38 %.
    v = stage_validity(_rows(100, 10.0), stage, 0.0, 10.0, _server(380, 1000, 16_384), PREFIX)
    assert v.offered_share == pytest.approx(1.0)
    assert v.cache_tokens == 262_144
    assert v.prefix_hit_measured == pytest.approx(0.38)
    assert v.prefix_hit_expected == pytest.approx(0.40)
    assert v.schedule_lag_p99_s == pytest.approx(0.001)
    assert v.warnings == []


def test_prompts_without_the_profiles_reuse_are_another_workload() -> None:
    stage = Stage(name="s", duration_s=10.0, rate_rps=10.0)
    v = stage_validity(_rows(100, 10.0), stage, 0.0, 10.0, _server(20, 1000, 16_384), PREFIX)
    assert len(v.warnings) == 1 and "another workload" in v.warnings[0]
    assert "2% on the server against 40%" in v.warnings[0]


def test_a_client_that_offered_less_is_named() -> None:
    stage = Stage(name="s", duration_s=10.0, rate_rps=100.0)
    v = stage_validity(_rows(700, 10.0), stage, 0.0, 10.0, None, PREFIX)
    assert v.offered_share == pytest.approx(0.7)
    assert v.warnings == ["offered 70 req/s against 100 asked"]
    # 30 % short of 10 requests is within Poisson noise (3 sd): no warning.
    small = Stage(name="s", duration_s=1.0, rate_rps=10.0)
    assert stage_validity(_rows(7, 1.0), small, 0.0, 1.0, None, PREFIX).warnings == []


def test_an_emulator_that_fell_behind_is_named() -> None:
    stage = Stage(name="s", duration_s=10.0, rate_rps=10.0)
    server = pl.DataFrame(
        {
            "t_s": [0.0, 10.0],
            "name": ["capplan_emulator_behind_seconds_total"] * 2,
            "labels": ["", ""],
            "type": ["counter", "counter"],
            "value": [1.0, 3.5],
        }
    )
    v = stage_validity(_rows(100, 10.0), stage, 0.0, 10.0, server, None)
    assert v.warnings == [
        "the emulator fell 2.5 s behind its clock: this machine's CPU, not the engine model, "
        "set the pace (lower its --time-scale)"
    ]
