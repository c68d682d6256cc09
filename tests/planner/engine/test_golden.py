"""Golden outputs of the engine model: fixed seeded runs through its public entry points.

A refactoring of the scheduler (planner.engine) must not change a single simulated bit, so
each run below is dumped in full (every step, event, gauge and timeline field; floats as
their exact repr) and compared with a sha256 taken from the code before the refactoring
(golden.json next to this file). A few readable figures come with each digest so a failure
says what moved. When a change of behaviour is intended, rerun with GOLDEN_PRINT=1 and -s to
print the new digests and figures, update golden.json, and say in the commit why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.engine import (
    Engine,
    EngineConfig,
    EngineRequest,
    RequestTimeline,
    StepResult,
    build_engine_config,
    simulate,
)
from planner.fleet.sim import simulate_fleet
from planner.limit.measured.search import run_search
from planner.limit.measured.steady import SteadyRules
from planner.limit.predict import EngineProbe
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import parse_slo
from planner.whatif.disagg import Disagg, simulate_disaggregated
from planner.whatif.virtual import search_config
from profiles.presets import preset_profile
from profiles.tokenize import chained_block_hashes


def _h100(**overrides: Any) -> EngineConfig:
    return build_engine_config("H100-80GB", "llama-3.1-8b", **overrides)


def _requests(
    n: int, seed: int, *, gap_s: float = 0.02, prompt: int = 600, out: int = 120, shared: int = 0
) -> list[EngineRequest]:
    """`n` seeded requests; the first `shared` prompt tokens are one prefix common to all."""
    rng = np.random.default_rng(seed)
    common = rng.integers(0, 2**31, size=shared)
    reqs = []
    at = 0.0
    for i in range(n):
        p = int(rng.integers(prompt // 4, prompt * 2))
        o = int(rng.integers(1, out * 2))
        ids = np.concatenate([common, rng.integers(0, 2**31, size=p)])
        reqs.append(
            EngineRequest(
                f"r{i:03d}",
                len(ids),
                o,
                at,
                tuple(chained_block_hashes(ids, 16)),
                min_tokens=min(o, 3),
            )
        )
        at += float(rng.exponential(gap_s))
    return reqs


def _timeline(tl: RequestTimeline) -> list[Any]:
    return [
        tl.request_id,
        tl.arrival_s,
        tl.prompt_tokens,
        tl.scheduled_s,
        tl.first_token_s,
        tl.last_token_s,
        tl.token_times_s,
        tl.finished_s,
        tl.preemptions,
        tl.cached_tokens,
        tl.output_tokens,
        tl.aborted,
    ]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _floats(values: Iterable[Any]) -> list[Any]:
    return [None if isinstance(v, float) and v != v else v for v in values]


def _step_dump(engine: Engine, result: StepResult) -> list[Any]:
    g = engine.gauges()
    return [
        result.start_s,
        result.duration_s,
        result.end_s,
        [list(e) for e in result.events],
        result.prefill_tokens,
        result.decode_tokens,
        result.batch_size,
        [g.running, g.waiting, g.kv_used_blocks, g.kv_total_blocks],
        [g.prefix_cache_queries_tokens, g.prefix_cache_hits_tokens, g.num_preemptions],
        [g.finished, g.prompt_tokens_total, g.generation_tokens_total],
    ]


def _stepped(
    config: EngineConfig, requests: list[EngineRequest], abort: tuple[str, ...]
) -> dict[str, Any]:
    """Drive `Engine` step by step as the emulator does (token events on), adding each
    request at the first step start after its arrival and aborting the `abort` ids after
    the 40th step (running or waiting); one idle step at the end."""
    engine = Engine(config)
    pending = sorted(requests, key=lambda r: r.arrival_s)
    steps: list[Any] = []
    now = 0.0
    k = 0
    aborted = False
    while k < len(pending) or engine.has_work():
        if not engine.has_work():
            now = max(now, pending[k].arrival_s)
        while k < len(pending) and pending[k].arrival_s <= now:
            engine.add_request(pending[k], now)
            k += 1
        result = engine.step(now)
        steps.append(_step_dump(engine, result))
        if not aborted and len(steps) == 40:
            for rid in abort:
                engine.abort(rid, result.end_s)
            aborted = True
        now = result.end_s
    steps.append(_step_dump(engine, engine.step(now)))
    tls = [_timeline(engine.timeline(r.request_id)) for r in requests]
    g = engine.gauges()
    return {
        "steps": steps,
        "timelines": tls,
        "figures": {
            "steps": len(steps),
            "end_s": round(now, 6),
            "preemptions": g.num_preemptions,
            "hits": g.prefix_cache_hits_tokens,
            "generated": g.generation_tokens_total,
        },
    }


def _simulated(config: EngineConfig, requests: list[EngineRequest]) -> dict[str, Any]:
    tls = simulate(requests, config)
    return {
        "timelines": [_timeline(t) for t in tls],
        "figures": {
            "last_s": round(max(t.finished_s or 0.0 for t in tls), 6),
            "preemptions": sum(t.preemptions for t in tls),
            "cached": sum(t.cached_tokens for t in tls),
            "tokens": sum(t.output_tokens for t in tls),
        },
    }


def _fleet_dump(run: Any) -> dict[str, Any]:
    return {
        "arrays": [
            _floats(run.arrival_s.tolist()),
            _floats(run.ttft_s.tolist()),
            _floats(run.tpot_s.tolist()),
            _floats(run.e2e_s.tolist()),
            run.output_tokens.tolist(),
            run.instance.tolist(),
            run.simulated_s,
            run.steps,
        ],
        "figures": {
            "steps": run.steps,
            "simulated_s": round(run.simulated_s, 6),
            "ttft_p50_s": round(float(np.nanmedian(run.ttft_s)), 6),
        },
    }


def _small_kv() -> EngineConfig:
    # ~24k tokens of KV cache: 40 long-decoding requests outgrow it and are preempted.
    return _h100(gpu_memory_utilization=0.25)


def _case(name: str) -> dict[str, Any]:
    if name == "stepped_prefix_cache_abort":
        return _stepped(_h100(), _requests(30, 1, shared=700), abort=("r005",))
    if name == "stepped_preemption":
        return _stepped(_small_kv(), _requests(40, 2, gap_s=0.005, out=500), abort=("r007", "r039"))
    if name == "simulate_preemption_spf":
        config = _small_kv().model_copy(update={"queue_policy": "spf", "spf_aging_s": 0.5})
        return _simulated(config, _requests(40, 3, gap_s=0.005, out=500))
    if name == "simulate_chunked_prefill":
        config = _h100(max_num_batched_tokens=512, max_num_seqs=8)
        return _simulated(config, _requests(20, 4, prompt=1500, shared=300))
    if name == "simulate_static_reservation":
        config = _h100(kv_reservation="static", max_model_len=4096, gpu_memory_utilization=0.3)
        return _simulated(config, _requests(30, 5))
    if name == "simulate_speculative_tp":
        config = _small_kv().model_copy(
            update={
                "spec_draft_tokens": 4,
                "spec_acceptance_rate": 0.6,
                "spec_draft_params": 1_000_000_000,
                "tp": 2,
                "tp_link_bandwidth_bytes_per_s": 450e9,
                "tp_allreduce_latency_s": 10e-6,
            }
        )
        return _simulated(config, _requests(40, 6, gap_s=0.005, out=500))
    if name == "simulate_kv_ready":
        reqs = [
            dataclasses.replace(r, block_hashes=(), kv_ready_tokens=r.prompt_tokens // 2)
            for r in _requests(40, 7, gap_s=0.005, out=500)
        ]
        return _simulated(_small_kv(), reqs)
    if name == "fleet_round_robin":
        return _fleet_dump(simulate_fleet(_requests(60, 8, gap_s=0.01), _h100(), 3, "round_robin"))
    if name == "fleet_least_outstanding":
        run = simulate_fleet(_requests(60, 9, gap_s=0.01, shared=200), _small_kv(), 2)
        return _fleet_dump(run)
    if name == "disaggregated":
        run = simulate_disaggregated(_requests(30, 10), _h100(), Disagg(prefill=1, decode=2))
        return _fleet_dump(run)
    if name == "predict_level":
        probe = EngineProbe(
            profile=preset_profile("chat"),
            config=_h100(),
            rules=None,
            slo=parse_slo("ttft:p95<=2s"),
            level_s=20.0,
        )
        records = probe.measure(4.0).records.sort("intended_send_s")
        cols = ["intended_send_s", "first_token_s", "end_s", "ttft_s", "tpot_s", "e2e_s"]
        cols += ["ok", "input_tokens", "output_tokens"]
        return {
            "records": [_floats(records[c].to_list()) for c in cols],
            "figures": {
                "requests": records.height,
                "ttft_p50_s": round(float(records["ttft_s"].median()), 6),  # type: ignore[arg-type]
            },
        }
    if name == "predict_steady_search":  # levels capped (after a longer span) or abandoned
        return _steady_search(SteadyRules(max_level_s=120.0))
    if name == "predict_steady_search_loose":  # levels end steady, then drain (or abandoned)
        rules = SteadyRules(max_level_s=120.0, effective_requests=20, tail_requests=0.2)
        return _steady_search(rules, save_every_s=20.0)  # stops after a saved copy
    raise KeyError(name)


def _steady_search(rules: SteadyRules, save_every_s: float = 100.0) -> dict[str, Any]:
    """The limit search in virtual time under steady-state `rules`: every level's records,
    length, warm-up and evidence, and the limit. (`save_every_s`: how often the probe saves
    a copy of a paused level's run; the same records whatever it is.)"""
    probe = EngineProbe(
        profile=preset_profile("chat"),
        config=_small_kv(),
        rules=rules,
        slo=parse_slo("ttft:p99<=2s,tpot:p99<=50ms"),
        arrival_kind="gamma",
        drain_s=3.0,
        check_every_s=5.0,
    )
    if save_every_s != 100.0:  # an older probe had no copies: the same figures without
        probe.save_every_s = save_every_s
    measured: list[LevelMeasurement] = []
    plain = probe.measure

    def measure(load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        measured.append(plain(load, abandon=abandon))
        return measured[-1]

    probe.measure = measure  # type: ignore[method-assign]
    result = run_search(probe, search_config(probe.slo, 4.0))
    cols = ["intended_send_s", "first_token_s", "end_s", "ttft_s", "tpot_s", "e2e_s", "ok"]
    cols += ["error_class", "input_tokens", "output_tokens"]
    levels = [
        {
            "load": m.load,
            "duration_s": m.duration_s,
            "warmup_s": m.warmup_s,
            "abandoned": m.abandoned,
            "unstable": m.unstable,
            "steady": m.steady,
            "records": [_floats(m.records[c].to_list()) for c in cols],
        }
        for m in measured
    ]
    return {
        "levels": levels,
        "figures": {
            "limit_rps": result.feasible_max,
            "fail_rps": result.infeasible_min,
            "levels": [[m.load, m.duration_s, m.records.height] for m in measured],
            "simulated_requests": probe.simulated_requests,
        },
    }


CASES = (
    "stepped_prefix_cache_abort",
    "stepped_preemption",
    "simulate_preemption_spf",
    "simulate_chunked_prefill",
    "simulate_static_reservation",
    "simulate_speculative_tp",
    "simulate_kv_ready",
    "fleet_round_robin",
    "fleet_least_outstanding",
    "disaggregated",
    "predict_level",
    "predict_steady_search",
    "predict_steady_search_loose",
)

# name -> {"sha256": digest of the complete dump, "figures": readable figures}
GOLDEN = json.loads(Path(__file__).with_name("golden.json").read_text())


@pytest.mark.parametrize("name", CASES)
def test_engine_outputs_match_the_golden_snapshot(name: str) -> None:
    dump = _case(name)
    digest = _digest({k: v for k, v in dump.items() if k != "figures"})
    if os.environ.get("GOLDEN_PRINT"):
        print(json.dumps({name: {"sha256": digest, "figures": dump["figures"]}}))
    assert name in GOLDEN, "no snapshot yet: rerun with GOLDEN_PRINT=1 and -s"
    assert dump["figures"] == GOLDEN[name]["figures"]
    assert digest == GOLDEN[name]["sha256"]
