"""capplan verify's pure parts: the router's choice, the per-instance spread and flags, the
gateway error classes, and the checks of its inputs."""

from __future__ import annotations

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
    with pytest.raises(ConfigError, match="round_robin, least_outstanding"):
        Router(["http://a"], "random")  # type: ignore[arg-type]


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
