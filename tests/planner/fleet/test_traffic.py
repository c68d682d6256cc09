"""Traffic synthesis: gamma arrivals and bursts, request shapes, shared prefix block hashes."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import build_engine_config, simulate
from planner.fleet.traffic import BurstWindow, arrival_times_s, profile_requests, shape_block_hashes
from profiles.presets import preset_profile
from profiles.workload import MessageShape
from testkit.profiles import make_profile

CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b")


def test_gamma_arrivals_have_the_asked_rate_and_cv() -> None:
    rng = np.random.default_rng(11)
    times = arrival_times_s(20.0, 2.0, 2000.0, rng)
    gaps = np.diff(times)
    assert len(times) / 2000.0 == pytest.approx(20.0, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.1)
    assert times.max() < 2000.0


def test_profile_requests_draw_lengths_from_the_sample() -> None:
    profile = make_profile(pairs=[(100, 10), (5000, 400)])
    reqs = profile_requests(profile, 10.0, 30.0, np.random.default_rng(0), 2048)
    assert {(r.prompt_tokens, r.max_tokens) for r in reqs} <= {(100, 10), (2047, 1)}
    assert len({r.request_id for r in reqs}) == len(reqs)


def test_burst_window_raises_the_rate_inside_it_only() -> None:
    burst = BurstWindow(start_s=400.0, duration_s=100.0, factor=3.0)
    times = arrival_times_s(10.0, 1.0, 1000.0, np.random.default_rng(4), burst)
    inside = ((times >= 400.0) & (times < 500.0)).sum() / 100.0
    outside = ((times < 400.0) | (times >= 500.0)).sum() / 900.0
    assert inside == pytest.approx(30.0, rel=0.1)
    assert outside == pytest.approx(10.0, rel=0.05)
    assert times.max() < 1000.0 and np.all(np.diff(times) >= 0)


def test_shared_prompts_share_block_hashes() -> None:
    system = MessageShape("system", 40, (1, 0))
    a = shape_block_hashes([system, MessageShape("user", 30, (2, 7))], 16, 70)
    b = shape_block_hashes([system, MessageShape("user", 50, (2, 8))], 16, 90)
    assert len(a) == 70 // 16 and len(b) == 90 // 16
    assert a[:2] == b[:2]  # the first 32 tokens are the system prompt in both
    assert a[2] != b[2]  # block 3 mixes the system prompt's tail with each user's text
    alone = shape_block_hashes([MessageShape("user", 70, (2, 7))], 16, 70)
    assert not set(alone) & set(a)


def test_preset_with_shared_prefixes_hits_the_prefix_cache() -> None:
    profile = preset_profile("agent")
    assert profile.prefix.available and profile.prefix.top_prefixes
    reqs = profile_requests(profile, 4.0, 60.0, np.random.default_rng(0), 32768)
    shared = [r for r in reqs if r.block_hashes]
    assert len(shared) > len(reqs) / 4
    timelines = simulate(reqs, CONFIG)
    cached = sum(t.cached_tokens for t in timelines)
    assert cached > 0.2 * sum(r.prompt_tokens for r in reqs)
