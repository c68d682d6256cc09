"""capplan verify's pure parts: the router's choice, the per-instance spread and flags, the
gateway error classes, and the checks of its inputs."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from contracts.errors import ConfigError
from planner.verify.instances import Series, instance_loads
from planner.verify.judge import errors_by_class, gateway_classes
from planner.verify.router import Router


def test_round_robin_cycles_and_least_outstanding_takes_the_idlest() -> None:
    rr = Router(["http://a", "http://b", "http://c"], "round_robin")
    assert [rr.choose() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert rr.counts() == {"http://a": 3, "http://b": 2, "http://c": 2}
    lo = Router(["http://a", "http://b"], "least_outstanding")
    first, second, third = lo.choose(), lo.choose(), lo.choose()
    assert (first, second, third) == (0, 1, 0)  # ties to the lowest index
    lo.done(1)
    lo.done(0)
    assert lo.choose() == 1  # a: 1 in flight, b: 0
    with pytest.raises(ConfigError, match="round_robin, least_outstanding, power_of_two"):
        Router(["http://a"], "random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs --host"):
        Router(["http://a"], "prefix_aware")  # it reads prompts the proxy never tokenises


def test_the_proxy_routes_with_the_fleet_simulators_own_routers() -> None:
    """One implementation: for each load-only router, the proxy's choices are the fleet
    router's on the same in-flight counts (a proxy with a copy of its own once drifted)."""
    from planner.engine.requests import EngineRequest
    from planner.fleet.routing import load_only_routings, make_router

    assert set(load_only_routings()) == {"round_robin", "least_outstanding", "power_of_two"}
    request = EngineRequest(request_id="r", prompt_tokens=8, max_tokens=4, arrival_s=0.0)
    for kind in load_only_routings():
        proxy = Router([f"http://h{i}" for i in range(4)], kind)
        fleet = make_router(kind, 4)
        outstanding = [0, 0, 0, 0]
        for step in range(40):
            expected = fleet.route(request, outstanding)
            assert proxy.choose() == expected, (kind, step)
            outstanding[expected] += 1
            if step % 3 == 2:  # some finish, unevenly
                done = max(range(4), key=outstanding.__getitem__)
                outstanding[done] -= 1
                proxy.done(done)


def test_verify_help_names_every_router_the_proxy_runs() -> None:
    from typer.testing import CliRunner

    from capplan.cli import app
    from planner.fleet.routing import load_only_routings

    text = " ".join(
        CliRunner().invoke(app, ["verify", "--help"], env={"COLUMNS": "300"}).output.split()
    )
    for kind in load_only_routings():
        assert kind in text


def _series(counts: list[float], running: float = 1.0) -> Series:
    s = Series()
    for t, c in enumerate(counts):
        s.add(float(t), {"vllm:request_success_total": c, "vllm:num_requests_running": running})
    return s


def test_spread_flags_the_instance_over_its_share_and_one_ejected() -> None:
    # a: 0 -> 100 requests, b: 0 -> 60 then reset to 40 (= 100), c: 0 -> 150, d: none
    series = {
        "http://a": _series([0, 50, 100]),
        "http://b": _series([0, 60, 40]),
        "http://c": _series([0, 100, 150]),
        "http://d": _series([7, 7, 7], running=0.0),
    }
    rows, spread = instance_loads(series, down=[])
    by = {r.url: r for r in rows}
    assert by["http://b"].requests == 100.0  # a counter reset adds its new value
    assert by["http://c"].share == pytest.approx(150 / 350)
    # fair share 1/4; c took 43 % > 1.25 x 25 %; d took nothing: ejected
    assert by["http://c"].flag == "over_share" and by["http://d"].flag == "idle"
    assert by["http://a"].flag == by["http://b"].flag == "ok"
    assert spread.max_over_fair == pytest.approx(4 * 150 / 350)
    assert len(spread.flagged) == 2


def test_an_instance_taken_out_that_still_takes_traffic_is_flagged() -> None:
    series = {"http://a": _series([0, 100]), "http://b": _series([0, 20])}
    rows, _ = instance_loads(series, down=["http://b"])
    assert {r.url: r.flag for r in rows} == {"http://a": "ok", "http://b": "not_down"}
    routed, _ = instance_loads({"http://a": Series(), "http://b": Series()}, [], routed={
        "http://a": 10, "http://b": 10})  # fmt: skip
    assert all(r.source == "router" and r.share == 0.5 for r in routed)


def test_in_flight_stands_in_when_no_request_counter_is_exposed() -> None:
    def gauges(running: float, waiting: float) -> Series:
        s = Series()
        s.add(0.0, {"vllm:num_requests_running": running, "vllm:num_requests_waiting": waiting})
        return s

    rows, spread = instance_loads({"http://a": gauges(4, 2), "http://b": gauges(2, 0)}, [])
    assert spread.measure == "mean requests in flight"
    assert [r.share for r in rows] == pytest.approx([0.75, 0.25])


def test_a_balancers_502_and_504_are_their_own_error_classes() -> None:
    records = pl.DataFrame(
        {
            "ok": [True, False, False, False, False],
            "status_code": [200, 502, 504, 500, None],
            "error_class": [None, "server_error", "server_error", "server_error", "cancelled"],
        }
    )
    got = errors_by_class(gateway_classes(records))
    assert got == {"gateway_502": 1, "gateway_504": 1, "server_error": 1}  # censored: not failed


def test_a_readable_instance_without_the_request_counter_finished_none() -> None:
    # vLLM creates its labelled request counter at the first request: an instance taken
    # out shows gauges only
    idle = Series()
    idle.add(0.0, {"vllm:num_requests_running": 0.0})
    rows, _ = instance_loads({"http://a": _series([0, 90]), "http://b": idle}, down=["http://b"])
    assert [(r.requests, r.share, r.flag) for r in rows] == [(90.0, 1.0, "ok"), (0.0, 0.0, "ok")]


def test_a_replayed_steady_stage_is_simulated_with_the_logs_own_requests(tmp_path: Path) -> None:
    """--replay: the plan's simulation beside the measurement sends the log's arrivals (sped
    up and cut as the load test does: counted here by hand) and its lengths; the burst and
    recovery stay drawn from the profile. The log's prompts (4,000 tokens) are ten times the
    profile's, so the steady stage's first tokens come later than the profile's would."""
    from contracts.run import Stage, StagePlan
    from planner.engine import build_engine_config
    from planner.verify.options import VerifyOptions, verify_stages
    from planner.verify.simulate import simulate_stages
    from testkit.profiles import make_profile

    log = tmp_path / "log.parquet"
    arrivals = [0.5 * k for k in range(60)]  # 2 req/s for 30 log seconds
    pl.DataFrame(
        {"arrival_s": arrivals, "input_tokens": [4000] * 60, "output_tokens": [50] * 60}
    ).write_parquet(log)
    profile = make_profile([(400, 50)] * 50, rate_rps=4.0, peak_to_mean_10s=1.5)
    config = build_engine_config("A10-24GB", "llama-3.1-8b")
    stages = StagePlan(
        name="verify",
        stages=[
            Stage(name="steady", role="steady", duration_s=10.0, rate_rps=4.0, arrival="replay"),
            Stage(name="burst", role="burst", duration_s=5.0, rate_rps=8.0),
            Stage(name="recovery", role="recovery", duration_s=5.0, rate_rps=4.0),
        ],
    )
    replayed = simulate_stages(profile, config, stages, 2, "round_robin", replay=(str(log), 2.0))
    steady = replayed.filter(pl.col("intended_send_s") < 10.0)
    # log seconds 0-19.5 at 2x: 40 requests at 0, 0.25, ..., 9.75 s
    expected = [0.25 * k for k in range(40)]
    assert steady["intended_send_s"].to_list() == pytest.approx(expected)
    assert replayed.filter(pl.col("intended_send_s") >= 10.0).height > 0  # the burst's own
    poisson = StagePlan(
        name="verify",
        stages=[stages.stages[0].model_copy(update={"arrival": "poisson"}), *stages.stages[1:]],
    )
    drawn = simulate_stages(profile, config, poisson, 2, "round_robin")
    drawn_steady = drawn.filter(pl.col("intended_send_s") < 10.0)
    assert steady["ttft_s"].median() > 3 * drawn_steady["ttft_s"].median()
    # the options' stages: a replay makes the steady stage's arrivals the log
    options = VerifyOptions.model_construct(
        replay_path=str(log), steady_s=10.0, burst_s=5.0, burst_factor=2.0, recovery_s=5.0
    )
    assert verify_stages(options, 4.0).stages[0].arrival == "replay"
