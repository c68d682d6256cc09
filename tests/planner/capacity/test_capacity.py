"""Instance arithmetic (rate and concurrency, growth, headroom, N+k), --limit parsing, cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import ConfigError, InputError
from contracts.limit import LimitLevel, LimitResult, LittlesLaw
from planner.capacity.arithmetic import (
    HostRule,
    build_demand,
    demand_in_unit,
    instances_for_load,
    parse_float_list,
    parse_limit,
    plan_scenario,
    sensitivity,
    window_rate_quantile,
)
from planner.capacity.cost import gpu_hour_price, monthly_cost_usd, price_or_note
from planner.slo.spec import parse_slo
from testkit.profiles import make_profile


def _limit_json(tmp_path: Path, **overrides: object) -> Path:
    levels = [
        LimitLevel(
            load=load,
            stage=f"c{load:g}",
            requests=400,
            completed=400,
            metrics={"ttft_p95_s": ttft},
            constraints=[],
            verdict=verdict,
            mean_e2e_s=e2e,
        )
        for load, ttft, verdict, e2e in [
            (20, 0.4, "pass", 6.0),
            (50, 1.8, "pass", 8.0),
            (80, 4.5, "fail", 12.0),
        ]
    ]
    fields: dict[str, object] = dict(
        dimension="concurrency",
        unit="users",
        feasible_max=50.0,
        infeasible_min=80.0,
        binding="ttft:p95",
        slo="ttft:p95<=2s",
        tolerance=0.1,
        levels=levels,
    )
    fields.update(overrides)
    result = LimitResult(**fields)  # type: ignore[arg-type]
    path = tmp_path / "limit.json"
    path.write_text(result.model_dump_json(by_alias=True))
    return path


def test_seed_example_200_concurrent_over_50_per_instance(tmp_path: Path) -> None:
    # An instance meets P95 at 50 concurrent and degrades by 80: a peak of 200 concurrent needs
    # at least 4 instances, plus buffer.
    limit = parse_limit(str(_limit_json(tmp_path)), slo=parse_slo("ttft:p95 <= 2s"))
    assert (limit.value, limit.unit, limit.binding) == (50.0, "users", "ttft:p95")
    bare = plan_scenario(200.0, "users", limit.value, 1.0, 0.0, 0, tp=1, gpu_hour_price_usd=3.0)
    assert bare.instances == 4
    buffered = plan_scenario(200.0, "users", limit.value, 1.0, 0.2, 1, tp=1, gpu_hour_price_usd=3.0)
    assert buffered.instances_for_load == 5  # ceil(240 / 50)
    assert buffered.instances == 6
    assert "= 6" in buffered.arithmetic


def test_rate_form_growth_headroom_and_redundancy() -> None:
    s = plan_scenario(100.0, "rps", 17.4, 1.3, 0.2, 2, tp=2, gpu_hour_price_usd=4.25)
    assert s.demand == pytest.approx(130.0)
    assert s.demand_with_headroom == pytest.approx(156.0)
    assert s.instances_for_load == 9  # 156 / 17.4 = 8.97
    assert s.instances == 11
    assert s.gpus == 22
    assert s.monthly_cost_usd == pytest.approx(22 * 4.25 * 730)


def test_exact_multiples_do_not_round_up() -> None:
    assert instances_for_load(3 * 0.3, 0.3, 0.0) == 3
    assert instances_for_load(200.0, 50.0, 0.0) == 4
    assert instances_for_load(200.01, 50.0, 0.0) == 5
    assert instances_for_load(0.0, 50.0, 0.2) == 1


def test_sensitivity_grows_with_growth_and_headroom() -> None:
    cells = sensitivity(100.0, 10.0, [1.0, 2.0], [0.0, 0.5], redundancy=1)
    table = {(c.growth, c.headroom): c.instances for c in cells}
    assert table == {(1.0, 0.0): 11, (1.0, 0.5): 16, (2.0, 0.0): 21, (2.0, 0.5): 31}


@pytest.mark.parametrize("text", ["0rps", "-3users", "17.4", "12parsecs", "0users"])
def test_bad_limits_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_limit(text)


def test_number_limits_parse() -> None:
    assert (parse_limit("17.4rps").value, parse_limit("17.4rps").unit) == (17.4, "rps")
    assert parse_limit("50 users").unit == "users"
    with pytest.raises(InputError):
        parse_limit("runs/nowhere/limit.json")


def test_limit_json_slo_must_match(tmp_path: Path) -> None:
    path = _limit_json(tmp_path)
    with pytest.raises(ConfigError, match="measured under the SLO"):
        parse_limit(str(path), slo=parse_slo("ttft:p99<=2s"))
    assert parse_limit(str(path)).slo == parse_slo("ttft:p95<=2s")


def test_limit_json_without_feasible_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no load met the SLO"):
        parse_limit(str(_limit_json(tmp_path, feasible_max=None)))


def test_limit_json_e2e_from_littles_law(tmp_path: Path) -> None:
    path = _limit_json(
        tmp_path,
        dimension="rate",
        unit="rps",
        feasible_max=6.0,
        infeasible_min=9.0,
        littles_law=LittlesLaw(rate_rps=6.0, concurrency=48.0, mean_e2e_s=8.0),
    )
    limit = parse_limit(str(path))
    assert (limit.value, limit.unit, limit.mean_e2e_s) == (6.0, "rps", 8.0)


def test_not_a_limit_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(InputError, match="capplan.limit/1"):
        parse_limit(str(bad))


def test_demand_from_profile_percentiles() -> None:
    profile = make_profile(window_rates_60s=[float(i) for i in range(101)], peak_to_mean_10s=24.0)
    assert window_rate_quantile(profile, "60s", 0.99) == pytest.approx(99.0)
    assert window_rate_quantile(profile, "60s", 0.995) == pytest.approx(99.5)
    demand = build_demand(profile, mean_e2e_s=4.0)
    assert demand.peak_rps == pytest.approx(99.0)
    assert demand.burst_factor == pytest.approx(120.0 / 99.0)
    assert demand.peak_concurrency == pytest.approx(396.0)
    assert demand_in_unit(demand, "users") == pytest.approx(396.0)
    with pytest.raises(ConfigError, match="10s"):
        build_demand(profile, peak_window="10s")
    with pytest.raises(ConfigError):
        build_demand(profile, peak_quantile=1.5)


def test_demand_overrides() -> None:
    profile = make_profile()
    assert build_demand(profile, peak_rps=30.0).peak_rps == 30.0
    users = build_demand(profile, peak_users=200.0, mean_e2e_s=8.0)
    assert users.peak_rps == pytest.approx(25.0) and users.peak_concurrency == 200.0
    with pytest.raises(ConfigError):
        build_demand(profile, peak_users=200.0)
    with pytest.raises(ConfigError):
        build_demand(profile, peak_rps=1.0, peak_users=2.0)
    with pytest.raises(ConfigError, match="concurrency"):
        demand_in_unit(build_demand(profile), "users")


def test_host_rule_and_cost() -> None:
    rule = HostRule()
    assert rule.cpu_cores(2) == 20
    assert rule.host_ram_gib(1, 80 * 2**30) == pytest.approx(176.0)
    assert "DGX" in rule.describe()
    price, source = gpu_hour_price("H100-80GB", None)
    assert price > 0 and "on-demand" in source
    assert gpu_hour_price("h100", 4.25) == (4.25, "given (--gpu-hour-price)")
    # named as the engine catalog finds it (nvidia-smi's name), but not another board
    assert gpu_hour_price("NVIDIA H100 80GB HBM3", None) == (price, source)
    with pytest.raises(ConfigError):
        gpu_hour_price("H100 PCIe", None)
    with pytest.raises(ConfigError):
        gpu_hour_price("TPU-v5", None)
    with pytest.raises(ConfigError):
        gpu_hour_price("H100-80GB", 0.0)
    assert monthly_cost_usd(8, 2.0) == pytest.approx(8 * 2.0 * 730)


def test_a_board_with_no_price_on_file_gets_a_note_not_an_error() -> None:
    """whatif's price: the table's, the given one, or 0 with the reason (a limit still
    stands); a bad given price is still an error."""
    assert price_or_note("H100-80GB", None) == (gpu_hour_price("H100-80GB", None)[0], None)
    assert price_or_note("H100-NVL-94GB", 3.0) == (3.0, None)
    price, note = price_or_note("H100-NVL-94GB", None)
    assert price == 0.0 and note is not None
    assert "no public price on file for H100-NVL-94GB" in note and "--gpu-hour-price" in note
    with pytest.raises(ConfigError, match="--gpu-hour-price must be > 0"):
        price_or_note("H100-NVL-94GB", 0.0)


def test_parse_float_list() -> None:
    assert parse_float_list("1.0, 1.3,2", "--growth") == [1.0, 1.3, 2.0]
    with pytest.raises(ConfigError, match="--growth"):
        parse_float_list("1.0,x", "--growth")
