"""The one duration reader (`contracts.duration.duration_s`): each caller's units, bare seconds
and combined parts, checked against values written out by hand."""

from __future__ import annotations

import pytest

from contracts.duration import duration_s

CLI = ("ms", "s", "m", "h", "d")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        (" 2H ", 7200.0),
        ("1d2h", 93600.0),
        (".5s", 0.5),
        ("1.5m", 90.0),
        ("90", 90.0),
        ("0.5", 0.5),
    ],
)
def test_the_cli_reads_units_bare_seconds_and_parts_largest_first(
    text: str, seconds: float
) -> None:
    assert duration_s(text, CLI, bare=True, combined=True) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["", "s", "5", "5x", "5 m", "30m1h", "1m1m", "5min", "1w", "-5s"])
def test_what_the_cli_refuses_reads_as_none(text: str) -> None:
    assert duration_s(text, CLI, combined=True) is None


def test_each_caller_takes_its_own_units() -> None:
    slo = ("ms", "s")
    assert duration_s("100ms", slo) == pytest.approx(0.1)
    assert duration_s("2s", slo) == 2.0
    assert duration_s("1m", slo) is None  # an SLO bound in seconds or milliseconds only
    assert duration_s("2", slo) is None  # a bare number is not an SLO bound
    prom = ("s", "m", "h", "d", "w")
    assert duration_s("13w", prom) == 13 * 7 * 86400.0
    assert duration_s("1700000000", prom) is None  # epoch seconds, not a range
    assert duration_s("1h30m", prom) is None  # one part unless combined
    assert duration_s("500ms", prom) is None
