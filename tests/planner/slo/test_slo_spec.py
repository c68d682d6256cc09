"""The SLO grammar: both forms parsed, every bad token quoted with the grammar."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from planner.slo.spec import parse_slo


def test_parse_percentile_form_with_units() -> None:
    slo = parse_slo("ttft:p95<=2s, tpot:p95<=100ms,e2e:p99<=30s,errors<=1%")
    assert slo.kind == "percentile"
    assert [(c.name, c.threshold_s) for c in slo.percentiles] == [
        ("ttft:p95", 2.0),
        ("tpot:p95", 0.1),
        ("e2e:p99", 30.0),
    ]
    assert slo.percentiles[0].quantile == pytest.approx(0.95)
    assert slo.max_error_rate == pytest.approx(0.01)
    assert slo.min_attainment is None
    assert {t.metric: t.threshold_s for t in slo.request_thresholds} == {
        "ttft": 2.0,
        "tpot": 0.1,
        "e2e": 30.0,
    }
    assert slo.constraint_names == ("ttft:p95", "tpot:p95", "e2e:p99", "errors")
    assert slo.describe() == "ttft p95 <= 2 s, tpot p95 <= 100 ms, e2e p99 <= 30 s, errors <= 1 %"


def test_parse_attainment_form() -> None:
    slo = parse_slo("attainment>=95%:ttft<=2s,tpot<=100ms")
    assert slo.kind == "attainment"
    assert slo.min_attainment == pytest.approx(0.95)
    assert slo.percentiles == ()
    assert {t.metric: t.threshold_s for t in slo.request_thresholds} == {"ttft": 2.0, "tpot": 0.1}
    assert slo.describe() == "95 % of requests within ttft <= 2 s, tpot <= 100 ms"


def test_parse_other_statistics_and_fractions() -> None:
    slo = parse_slo("ttft:p99.9<=1.5s,e2e:mean<=.5s,itl_max:max<=250ms")
    assert [c.quantile for c in slo.percentiles] == [pytest.approx(0.999), None, 1.0]
    assert slo.percentiles[1].threshold_s == 0.5
    assert slo.percentiles[2].threshold_s == 0.25


@pytest.mark.parametrize(
    ("spec", "token", "why"),
    [
        ("ttft:p95<=2sec", "ttft:p95<=2sec", "duration"),
        ("ttft:p95<=2", "ttft:p95<=2", "duration"),
        ("ttfb:p95<=2s", "ttfb:p95<=2s", "unknown metric"),
        ("ttft:p95<2s", "ttft:p95<2s", "inclusive"),
        ("ttft<=2s", "ttft<=2s", "METRIC:STAT"),
        ("ttft:q95<=2s", "ttft:q95<=2s", "statistic"),
        ("ttft:p95<=2s,errors<=1", "errors<=1", "share"),
        ("ttft:p95<=2s,,tpot:p95<=1s", "", "empty"),
        ("attainment>=95:ttft<=2s", "attainment>=95", "share"),
        ("attainment>=95%:ttft:p95<=2s", "ttft:p95<=2s", "no STAT"),
        ("attainment>=95%", "attainment>=95%", "needs ':'"),
        ("ttft:p95<=2s,attainment>=95%", "attainment>=95%", "must come first"),
        ("ttft:p95<=2s,ttft:p95<=3s", "ttft:p95<=3s", "twice"),
        ("itl:p95<=2s", "itl:p95<=2s", "tpot or itl_max"),
    ],
)
def test_bad_tokens_are_quoted_with_the_grammar(spec: str, token: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_slo(spec)
    message = str(err.value)
    assert f"bad token {token!r}" in message
    assert why in message
    assert "SLO grammar" in message and "attainment>=95%:ttft<=2s" in message


def test_empty_slo_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="empty"):
        parse_slo("  ")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("ttft:p95<=2s", "ttft:p95<=2000ms"),
        ("ttft:p95<=2s,tpot:p95<=100ms", "TPOT:p95 <= 0.1s, ttft:p95.0<=2000ms"),
        (
            "attainment>=95%:ttft<=2s,tpot<=100ms,errors<=1%",
            "attainment>=95.0%:tpot<=.1s,ttft<=2s,errors<=1.0%",
        ),
        ("e2e:p99<=0.1ms", "e2e:p99<=0.0001s"),
    ],
)
def test_two_spellings_of_one_slo_have_one_canonical_form(a: str, b: str) -> None:
    assert parse_slo(a).canonical == parse_slo(b).canonical
    assert parse_slo(a).text != parse_slo(b).text  # the spec as given is kept


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("ttft:p95<=2s", "ttft:p99<=2s"),
        ("ttft:p95<=2s", "ttft:p95<=2.001s"),
        ("ttft:p95<=2s", "ttft:p95<=2s,errors<=1%"),
        ("ttft:p95<=2s", "attainment>=95%:ttft<=2s"),
        ("ttft:max<=2s", "ttft:mean<=2s"),
    ],
)
def test_different_slos_keep_different_canonical_forms(a: str, b: str) -> None:
    assert parse_slo(a).canonical != parse_slo(b).canonical


def test_success_only_is_part_of_the_canonical_form() -> None:
    spec = "ttft:p95<=2s"
    assert parse_slo(spec).canonical != parse_slo(spec, success_only=True).canonical


@pytest.mark.parametrize(
    ("spec", "goal"),
    [
        ("tpot:p95<=100ms,ttft:p99<=2s,ttft:p90<=1s", (2.0, 0.99)),  # the first TTFT term
        ("attainment>=90%:tpot<=50ms,ttft<=1.5s", (1.5, 0.9)),
        ("ttft:mean<=800ms", (0.8, 0.99)),
        ("ttft:max<=3s", (3.0, 1.0)),
        ("tpot:p95<=100ms,errors<=1%", None),
        ("attainment>=95%:e2e<=20s", None),
    ],
)
def test_the_ttft_goal_is_the_bound_and_the_share_that_must_meet_it(
    spec: str, goal: tuple[float, float] | None
) -> None:
    assert parse_slo(spec).ttft_goal == goal
