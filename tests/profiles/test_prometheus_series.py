"""The pure arithmetic of the Prometheus source: counter increases (restarts, gaps, chunks),
histogram quantiles as PromQL reads them, engine names and the time grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contracts.errors import InputError
from profiles.prometheus.build import PromSource, grid_of, selector_of
from profiles.prometheus.engines import ENGINES, detect_engine, resolve, series_names
from profiles.prometheus.series import bucket_quantiles, cdf_at, draw_binned, increases


def test_increases_read_a_restart_as_a_counter_from_zero() -> None:
    values = np.array([10.0, 12.0, 15.0, 2.0, 5.0])
    inc, last = increases(values, np.nan)
    assert inc.tolist() == [0.0, 2.0, 3.0, 2.0, 3.0]  # nothing known before the first value
    assert last == 5.0


def test_a_series_created_inside_the_range_counts_from_zero() -> None:
    values = np.array([np.nan, np.nan, 3.0, 5.0])
    assert increases(values, np.nan, from_zero=True)[0].tolist() == [0.0, 0.0, 3.0, 2.0]
    assert increases(values, np.nan)[0].tolist() == [0.0, 0.0, 0.0, 2.0]


def test_increases_bridge_a_missing_value() -> None:
    inc, _ = increases(np.array([1.0, np.nan, 4.0]), 0.0)
    assert inc.tolist() == [1.0, 0.0, 3.0]


def test_increases_in_chunks_equal_increases_at_once() -> None:
    rng = np.random.default_rng(3)
    values = np.cumsum(rng.poisson(4.0, 1000)).astype(float)
    values[400:] -= values[399]  # a restart
    values[rng.choice(1000, 50, replace=False)] = np.nan
    whole, _ = increases(values, np.nan)
    parts, prev = [], np.nan
    for chunk in np.array_split(values, 7):
        inc, prev = increases(chunk, prev)
        parts.append(inc)
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_bucket_quantiles_interpolate_like_histogram_quantile() -> None:
    edges = np.array([1.0, 2.0, 4.0, math.inf])
    cumulative = np.array([10.0, 30.0, 40.0, 40.0])
    # rank 20 of 40 is half-way through the (1, 2] bucket; the first bucket starts at 0
    assert bucket_quantiles(edges, cumulative, (0.5, 0.125)) == [1.5, 0.5]
    # a quantile inside +Inf reads as the highest finite edge
    assert bucket_quantiles(edges, np.array([1.0, 1.0, 1.0, 10.0]), (0.9,)) == [4.0]
    assert bucket_quantiles(edges, np.zeros(4), (0.5,)) == [None]
    assert cdf_at(edges, cumulative, 1.5) == pytest.approx(0.5)


def test_draw_binned_stays_in_the_buckets() -> None:
    edges = np.array([10.0, 100.0, math.inf])
    draws = draw_binned(edges, np.array([0.0, 50.0, 50.0]), 500, np.random.default_rng(0))
    assert draws.min() > 10 and draws.max() <= 100


def test_engine_names_and_the_missing_ones() -> None:
    vllm = ENGINES["vllm"]
    names = set().union(
        {"vllm:request_success_total", "vllm:prefix_cache_queries_total"},
        series_names("vllm:request_prompt_tokens", True),
        series_names("vllm:request_generation_tokens", True),
    )
    assert detect_engine(names).kind == "vllm"
    assert resolve(vllm, names)["input_tokens"] == "vllm:request_prompt_tokens"
    with pytest.raises(InputError, match="sglang:prompt_tokens_histogram"):
        resolve(ENGINES["sglang"], names)
    with pytest.raises(InputError, match="no serving engine"):
        detect_engine({"up", "node_cpu_seconds_total"})


def test_the_grid_starts_on_a_minute_and_checks_its_inputs() -> None:
    grid = grid_of(PromSource(url="http://x", since="1h", until="1000030"), now_s=0)
    assert grid.start_s % 60 == 0 and grid.step_s == 15
    assert grid.start_s + (grid.points - 1) * 15 <= 1000030
    with pytest.raises(InputError, match="divide a minute"):
        grid_of(PromSource(url="http://x", step="7s"), now_s=1e9)
    with pytest.raises(InputError, match="label selector"):
        selector_of('job="vllm"')
