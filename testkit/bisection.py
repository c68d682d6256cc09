"""A load generator's capacity search: double the rate until a level fails, then bisect
(bench/loadgen_capacity.py runs it against real clients; its test against fakes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Bisection:
    """One client's search: double until a level fails, then halve the bracket to `tolerance`.

    The bracket is the highest passing rate and the lowest failing rate above it: a failure
    below a pass (another program stalled the client) does not pull the bracket down.
    """

    start_rps: float
    max_rps: float
    tolerance: float
    measured: dict[float, float] = field(default_factory=dict)  # rate -> lag p99 (s)
    passed: dict[float, bool] = field(default_factory=dict)

    @property
    def passed_rps(self) -> float | None:
        return max((r for r, ok in self.passed.items() if ok), default=None)

    @property
    def failed_rps(self) -> float | None:
        lo = self.passed_rps or 0.0
        return min((r for r, ok in self.passed.items() if not ok and r > lo), default=None)

    def next_rate(self) -> float | None:
        """The next rate to measure, or None when the search is over."""
        lo, hi = self.passed_rps, self.failed_rps
        if lo is not None and hi is not None:
            return None if hi - lo <= self.tolerance * lo else round((lo + hi) / 2)
        if lo is None and hi is None:
            return self.start_rps
        if hi is None:
            assert lo is not None
            return None if lo >= self.max_rps else min(2 * lo, self.max_rps)
        assert hi is not None
        return None if hi <= 2 else round(hi / 2)  # nothing passed yet: halve

    def record(self, rate: float, lag_p99_s: float, passed: bool) -> None:
        self.measured[rate] = lag_p99_s
        self.passed[rate] = passed


def search(
    clients: dict[str, Callable[[float], float]],
    make: Callable[[], Bisection],
    lag_p99_max_s: float,
) -> dict[str, Bisection]:
    """Every client's bisection, interleaved: each round, each unfinished client measures its
    next level (so a busy moment of the machine falls on all of them)."""
    searches = {name: make() for name in clients}
    while True:
        todo = [(n, r) for n, b in searches.items() if (r := b.next_rate()) is not None]
        if not todo:
            return searches
        for name, rate in todo:
            p99 = clients[name](rate)
            passed = p99 <= lag_p99_max_s
            searches[name].record(rate, p99, passed)
            print(
                f"  {name:<20} {rate:8.0f} req/s  lag p99 {p99 * 1000:8.2f} ms  "
                f"{'pass' if passed else 'FAIL'}",
                flush=True,
            )
