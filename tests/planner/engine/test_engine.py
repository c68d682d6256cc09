"""Behaviour of the engine model, read from its own timelines and gauges."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from contracts.errors import InputError
from planner.engine import (
    Engine,
    EngineConfig,
    EngineRequest,
    build_engine_config,
    kv_capacity_tokens,
    simulate,
)
from planner.engine.decode_run import DecodeRuns
from profiles.tokenize import chained_block_hashes
from testkit.engine_configs import NO_FRONT_END


def _h100(**overrides: Any) -> EngineConfig:
    return build_engine_config("H100-80GB", "llama-3.1-8b", **{**NO_FRONT_END, **overrides})


def _a10(**overrides: Any) -> EngineConfig:
    # Llama-3.1-8B on a 24 GB A10 leaves ~27k tokens of KV cache: easy to exhaust.
    return build_engine_config("A10-24GB", "llama-3.1-8b", **{**NO_FRONT_END, **overrides})


def _req(i: int, prompt: int, out: int, at: float = 0.0, **kw: object) -> EngineRequest:
    return EngineRequest(f"r{i}", prompt, out, at, **kw)  # type: ignore[arg-type]


def _hashes(n_tokens: int, seed: int) -> tuple[int, ...]:
    ids = np.random.default_rng(seed).integers(0, 2**31, size=n_tokens)
    return tuple(chained_block_hashes(ids, 16))


def test_ttft_grows_with_prompt_length() -> None:
    ttfts = []
    for prompt in (128, 1024, 8192, 32768):
        (tl,) = simulate([_req(0, prompt, 4)], _h100())
        assert tl.ttft_s is not None
        ttfts.append(tl.ttft_s)
    assert ttfts == sorted(ttfts)
    assert ttfts[-1] > 20 * ttfts[0]


def test_itl_grows_with_batch_size() -> None:
    itls = []
    for batch in (1, 16, 64, 256):
        tls = simulate([_req(i, 512, 64) for i in range(batch)], _h100())
        itls.append(float(np.median([g for tl in tls for g in tl.itl_s])))
    assert itls == sorted(itls)
    assert itls[-1] > 1.5 * itls[0]


def test_ttft_jumps_once_max_num_seqs_is_full() -> None:
    tls = simulate([_req(i, 256, 200) for i in range(8)], _h100(max_num_seqs=4))
    first, second = tls[:4], tls[4:]
    assert max(t.ttft_s or 0 for t in first) < 0.1
    # The second four wait for the first four to finish all their 200 tokens.
    assert min(t.ttft_s or 0 for t in second) >= max(t.e2e_s or 0 for t in first)


def test_ttft_jumps_once_kv_blocks_are_full() -> None:
    # An H100 at 25 % memory utilisation keeps ~24k tokens of KV for Llama-3.1-8B.
    config = _h100(gpu_memory_utilization=0.25)
    prompt, out = 2000, 200
    fit = kv_capacity_tokens(config) // prompt  # prompts admitted while blocks last
    tls = simulate([_req(i, prompt, out) for i in range(fit + 4)], config)
    ttfts = sorted(t.ttft_s or 0 for t in tls)
    admitted_first, late = ttfts[:fit], ttfts[fit:]
    # Those that did not fit wait for blocks that only finishing requests free.
    assert min(late) > 2 * max(admitted_first)
    assert min(late) >= min(t.finished_s or 0 for t in tls)
    assert all(t.output_tokens == out for t in tls)


def test_prefix_cache_lowers_ttft_of_a_repeated_long_prompt() -> None:
    hashes = _hashes(16000, seed=1)
    reqs = [
        _req(0, 16000, 8, 0.0, block_hashes=hashes),
        _req(1, 16000, 8, 10.0, block_hashes=hashes),
    ]
    on = simulate(reqs, _h100(prefix_caching=True))
    off = simulate(reqs, _h100(prefix_caching=False))
    assert on[1].cached_tokens >= 16000 - 16
    assert off[1].cached_tokens == 0
    assert (on[1].ttft_s or 0) < 0.2 * (on[0].ttft_s or 0)
    assert off[1].ttft_s == pytest.approx(off[0].ttft_s)


def test_prefix_cache_gauges_and_lru_eviction() -> None:
    engine = Engine(_a10())
    shared = _hashes(4096, seed=2)
    engine.add_request(_req(0, 4096, 2, block_hashes=shared), 0.0)
    now = 0.0
    while engine.has_work():
        now = engine.step(now).end_s
    engine.add_request(_req(1, 4096, 2, now, block_hashes=shared), now)
    while engine.has_work():
        now = engine.step(now).end_s
    g = engine.gauges()
    assert g.prefix_cache_queries_tokens == 2 * 4096
    assert g.prefix_cache_hits_tokens == 4096 - 16  # the last block is always recomputed
    # Fill the cache with other prompts until the first one is evicted.
    for i in range(2, 12):
        engine.add_request(_req(i, 4096, 2, now, block_hashes=_hashes(4096, seed=100 + i)), now)
        while engine.has_work():
            now = engine.step(now).end_s
    engine.add_request(_req(99, 4096, 2, now, block_hashes=shared), now)
    while engine.has_work():
        now = engine.step(now).end_s
    assert engine.timeline("r99").cached_tokens == 0
    assert engine.gauges().kv_used_blocks == 0


def test_preemption_under_kv_oversubscription_and_everything_finishes() -> None:
    config = _a10()
    reqs = [_req(i, 500, 2000, 0.01 * i) for i in range(24)]
    engine = Engine(config)
    for r in reqs:
        engine.add_request(r, 0.0)
    now = 0.0
    peak = 0.0
    kinds = set()
    while engine.has_work():
        result = engine.step(now)
        kinds |= {e.kind for e in result.events}
        peak = max(peak, engine.gauges().kv_usage_perc)
        now = result.end_s
    g = engine.gauges()
    assert g.num_preemptions > 0
    assert "preempted" in kinds
    assert peak > 0.95
    assert g.finished == len(reqs)
    for r in reqs:
        tl = engine.timeline(r.request_id)
        assert tl.output_tokens == 2000
        assert len(tl.token_times_s) == 2000
        assert tl.finished_s is not None
    assert sum(engine.timeline(r.request_id).preemptions for r in reqs) == g.num_preemptions
    assert g.kv_used_blocks == 0 and g.running == 0 and g.waiting == 0


def test_chunked_prefill_spreads_a_long_prompt_over_steps() -> None:
    engine = Engine(_h100(max_num_batched_tokens=2048))
    engine.add_request(_req(0, 10000, 2), 0.0)
    result = engine.step(0.0)
    assert result.prefill_tokens == 2048
    assert not result.events
    steps = 1
    now = result.end_s
    while engine.timeline("r0").first_token_s is None:
        now = engine.step(now).end_s
        steps += 1
    assert steps == 5  # ceil(10000 / 2048)


def test_running_decodes_keep_going_during_a_long_prefill() -> None:
    engine = Engine(_h100(max_num_batched_tokens=1024))
    engine.add_request(_req(0, 100, 50), 0.0)
    now = engine.step(0.0).end_s
    engine.add_request(_req(1, 20000, 5, now), now)
    result = engine.step(now)
    assert result.decode_tokens == 1
    assert result.prefill_tokens == 1023
    assert [e.request_id for e in result.events] == ["r0"]


def test_shortest_prompt_first_serves_short_requests_sooner_and_ages() -> None:
    # One long request occupies the only sequence slot; the rest queue behind it.
    reqs = [_req(0, 100, 100)]
    reqs += [_req(1 + i, 8000 if i % 2 else 100, 50, 0.001 * (1 + i)) for i in range(10)]
    fcfs = simulate(reqs, _h100(max_num_seqs=1))
    spf = simulate(reqs, _h100(max_num_seqs=1, queue_policy="spf", spf_aging_s=1000.0))
    short = [i for i in range(1, 11) if reqs[i].prompt_tokens == 100]
    long = [i for i in range(1, 11) if reqs[i].prompt_tokens == 8000]

    def mean_ttft(tls: list, idx: list[int]) -> float:
        return float(np.mean([tls[i].ttft_s for i in idx]))

    assert mean_ttft(spf, short) < 0.7 * mean_ttft(fcfs, short)
    assert mean_ttft(spf, long) > mean_ttft(fcfs, long)
    # With aging shorter than the queueing delay, SPF falls back towards arrival order.
    aged = simulate(reqs, _h100(max_num_seqs=1, queue_policy="spf", spf_aging_s=0.05))
    assert mean_ttft(aged, long) < mean_ttft(spf, long)


def test_abort_frees_blocks_and_marks_the_timeline() -> None:
    engine = Engine(_h100())
    engine.add_request(_req(0, 3000, 100), 0.0)
    engine.add_request(_req(1, 3000, 100), 0.0)
    now = engine.step(0.0).end_s
    assert engine.gauges().kv_used_blocks > 0
    engine.abort("r0", now)
    engine.abort("r1", now)
    engine.abort("unknown", now)
    g = engine.gauges()
    assert (g.running, g.waiting, g.kv_used_blocks) == (0, 0, 0)
    assert engine.timeline("r0").aborted
    assert not engine.has_work()


def test_token_times_off_keeps_ttft_e2e_tpot() -> None:
    reqs = [_req(i, 300 + 50 * i, 40 + i, 0.02 * i) for i in range(30)]
    full = simulate(reqs, _h100())
    lean = simulate(reqs, _h100(record_token_times=False))
    for a, b in zip(full, lean, strict=True):
        assert (a.ttft_s, a.e2e_s, a.output_tokens) == (b.ttft_s, b.e2e_s, b.output_tokens)
        assert a.tpot_s == pytest.approx(b.tpot_s)
        assert a.tpot_s == pytest.approx(float(np.mean(a.itl_s)))
        assert b.token_times_s == []


def test_bad_requests_are_rejected() -> None:
    engine = Engine(_a10())
    with pytest.raises(InputError, match="maximum model length"):
        engine.add_request(_req(0, 30000, 1000), 0.0)
    with pytest.raises(InputError, match="min_tokens"):
        engine.add_request(_req(1, 10, 5, min_tokens=6), 0.0)
    with pytest.raises(InputError, match=">= 1"):
        engine.add_request(_req(2, 0, 5), 0.0)
    engine.add_request(_req(3, 10, 5), 0.0)
    with pytest.raises(InputError, match="already used"):
        engine.add_request(_req(3, 10, 5), 0.0)


def test_decode_runs_change_no_timeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine without token events takes decode runs step by step (`simulate`, and a
    caller stepping it) and settles them when a request arrives or its gauges are read: every
    request gets the timeline, and the engine the gauges, that ordinary steps give, also
    with a cache small enough to preempt, and for requests read in the middle of a run."""
    rng = np.random.default_rng(11)
    requests = [
        EngineRequest(str(k), int(rng.integers(20, 2000)), int(rng.integers(1, 600)), k * 0.04)
        for k in range(600)
    ]
    run_steps = 0
    run_step = DecodeRuns.step

    def counted(self: DecodeRuns, now_s: float) -> Any:
        nonlocal run_steps
        run_steps += 1
        return run_step(self, now_s)

    def run(config: EngineConfig) -> tuple[list[tuple[Any, ...]], list[Any]]:
        engine = Engine(config, token_events=False)
        gauges = []
        for r in requests[:50]:
            engine.add_request(r, 0.0)
        now = 0.0
        for step in range(3000):
            now = engine.step(now).end_s
            if step % 7 == 0:  # read in the middle of runs, now and then
                gauges.append(engine.gauges())
                gauges.extend(
                    (t.output_tokens, t.last_token_s) for t in engine.timelines().values()
                )
        rows = [
            (t.first_token_s, t.last_token_s, t.output_tokens, t.preemptions, t.finished_s)
            for t in simulate(requests, config)
        ]
        return rows, gauges

    monkeypatch.setattr(DecodeRuns, "step", counted)
    quiet = {"record_token_times": False, **NO_FRONT_END}
    configs = [_h100(**quiet), _h100(kv_free_fraction=0.01, **quiet)]
    with_runs = [run(c) for c in configs]
    assert run_steps > 500
    monkeypatch.setattr(DecodeRuns, "start", lambda self: None)
    assert [run(c) for c in configs] == with_runs
    assert sum(row[3] for row in with_runs[1][0]) > 0  # preemptions happened
