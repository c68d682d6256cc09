"""build_plan and the memory arithmetic: instances, resources, cost and checks in one Plan."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from contracts.plan import Plan
from planner.capacity.arithmetic import parse_limit
from planner.capacity.plan import PlanOptions, build_plan, gpu_memory, mean_context_tokens
from planner.engine import build_engine_config
from testkit.profiles import make_profile


def test_kv_and_weight_arithmetic_for_llama_8b_on_h100() -> None:
    config = build_engine_config("H100-80GB", "llama-3.1-8b")
    mem = gpu_memory(config, concurrency=50.0, context_tokens=2000.0)
    # 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 128 KiB per token.
    assert mem.kv_bytes_per_token_per_gpu == 131072
    assert mem.weights_bytes_per_gpu == 8030261248 * 2
    free = 85520809984 * 0.9 - 8030261248 * 2 - 2 * 1024**3
    assert mem.kv_capacity_tokens == int(free // (131072 * 16)) * 16
    assert mem.kv_needed_tokens_at_limit == 100000.0
    assert mem.kv_headroom_frac == pytest.approx(1 - 100000.0 / mem.kv_capacity_tokens)
    tp2 = gpu_memory(build_engine_config("H100-80GB", "llama-3.1-8b", tp=2), 50.0, 2000.0)
    assert tp2.kv_bytes_per_token_per_gpu == 65536
    assert tp2.weights_bytes_per_gpu == 8030261248
    assert tp2.kv_capacity_tokens > 2 * mem.kv_capacity_tokens


def test_mean_context_is_weighted_by_time_in_flight() -> None:
    # (100 in, 2 out): 100*2 + 3 token-steps; (10, 1): 10 + 1; over 3 decode steps.
    assert mean_context_tokens([(100, 2), (10, 1)]) == pytest.approx(214 / 3)
    with pytest.raises(ConfigError):
        mean_context_tokens([])


def _options(**kw: object) -> PlanOptions:
    base: dict[str, object] = dict(profile_path="fixture", fleet=False, gpu_hour_price_usd=4.0)
    base.update(kw)
    return PlanOptions(**base)  # type: ignore[arg-type]


def test_plan_for_the_seed_example_in_users() -> None:
    profile = make_profile()
    plan = build_plan(
        profile,
        parse_limit("50users"),
        _options(peak_users=200.0, growth=(1.0, 1.3), headroom=0.2, redundancy=1, slo=None),
    )
    # Users are converted to a rate only when an e2e is known; 50users without one needs it.
    assert plan.instances == 6  # ceil(200 x 1.2 / 50) + 1
    assert [s.instances for s in plan.scenarios] == [6, 8]  # ceil(312 / 50) + 1 = 8
    assert plan.resources.gpus == 6
    assert plan.cost.monthly_usd == pytest.approx(6 * 4.0 * 730)
    assert plan.cost.per_scenario_monthly_usd["1.3x"] == pytest.approx(8 * 4.0 * 730)
    assert plan.resources.gpu_memory.concurrency_at_limit == 50.0
    cells = {(c.growth, c.headroom): c.instances for c in plan.sensitivity}
    assert cells[(1.0, 0.0)] == 5 and cells[(2.0, 0.5)] == 13
    Plan.model_validate_json(plan.model_dump_json(by_alias=True))


def test_rate_limit_without_e2e_gets_a_simulated_one_and_a_note() -> None:
    profile = make_profile(
        window_rates_60s=[float(i) / 10 for i in range(101)], interarrival_cv=1.5
    )
    plan = build_plan(profile, parse_limit("4rps"), _options(headroom=0.0, redundancy=0))
    assert plan.demand.peak_rps == pytest.approx(9.9)
    assert plan.instances == 3
    assert plan.demand.mean_e2e_s is not None and plan.demand.mean_e2e_s > 0
    assert any("simulated" in n for n in plan.notes)
    q = plan.checks.queueing
    assert q is not None
    assert q.arrival_cv2 == pytest.approx(1.5**2)
    assert q.instances_bursty >= q.instances_poisson >= 1
    assert plan.checks.fleet is None


def test_fleet_check_needs_an_slo() -> None:
    plan = build_plan(make_profile(), parse_limit("4rps"), _options(fleet=True, fleet_span_s=20.0))
    assert plan.checks.fleet is None
    assert any("no SLO" in n for n in plan.notes)


def test_unknown_gpu_without_price_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        build_plan(make_profile(), parse_limit("4rps"), _options(gpu="TPU-v9"))
