"""The interleaved bisection of bench/loadgen_capacity.py, against clients with known limits."""

from __future__ import annotations

from collections.abc import Callable

from testkit.bisection import Bisection, search


def _client(limit_rps: float, noisy_fail_at: float | None = None) -> Callable[[float], float]:
    """A client whose lag p99 passes (1 ms) up to `limit_rps` and fails (9 ms) above it."""

    def measure(rate: float) -> float:
        if rate == noisy_fail_at:
            return 0.009
        return 0.001 if rate <= limit_rps else 0.009

    return measure


def test_each_client_is_bracketed_to_the_tolerance() -> None:
    clients = {"a": _client(537.0), "b": _client(329.0)}
    found = search(clients, lambda: Bisection(200.0, 4000.0, 0.05), 0.005)
    for name, limit in (("a", 537.0), ("b", 329.0)):
        lo, hi = found[name].passed_rps, found[name].failed_rps
        assert lo is not None and hi is not None
        assert lo <= limit < hi and hi - lo <= 0.05 * lo, (name, lo, hi)


def test_a_noisy_failure_below_a_pass_does_not_pull_the_bracket_down() -> None:
    b = Bisection(200.0, 4000.0, 0.05)
    for rate, ok in ((200.0, True), (400.0, False), (300.0, True)):
        b.record(rate, 0.001 if ok else 0.009, ok)
    b.record(250.0, 0.009, False)  # a stall of the machine, below a passing rate
    assert (b.passed_rps, b.failed_rps) == (300.0, 400.0)
    assert b.next_rate() == 350


def test_nothing_passes_halves_then_stops() -> None:
    found = search({"x": _client(0.0)}, lambda: Bisection(200.0, 4000.0, 0.05), 0.005)
    assert found["x"].passed_rps is None and min(found["x"].measured) <= 2
