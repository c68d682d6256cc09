"""The wait for a settled server: probes until one comes back no slower than the one before,
within a cap (planner.limit.measured.settle)."""

from __future__ import annotations

from collections.abc import Callable

from contracts.errors import PreflightError
from planner.limit.measured.settle import settle


class Clock:
    """A clock that only the probes and pauses move."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += seconds


def probes(clock: Clock, ttfts: list[float | None]) -> Callable[[float], float]:
    """Each call takes its TTFT of clock time (None: fails at once)."""
    script = iter(ttfts)

    def probe(timeout_s: float) -> float:
        ttft = next(script)
        if ttft is None:
            raise PreflightError("test request answered HTTP 503")
        clock.now += min(ttft, timeout_s)
        return ttft

    return probe


def test_an_idle_server_settles_after_two_probes() -> None:
    clock = Clock()
    done = settle(probes(clock, [0.02, 0.021]), clock=clock, pause=clock.pause)
    assert done.settled and done.probes == (0.02, 0.021)
    assert done.waited_s == 0.041


def test_a_backlog_is_waited_out_by_the_first_probe_and_confirmed_by_the_next() -> None:
    clock = Clock()
    done = settle(probes(clock, [12.0, 0.02]), clock=clock, pause=clock.pause)
    assert done.settled and len(done.probes) == 2 and done.waited_s == 12.02
    assert "waited 12.0 s" in done.line("level-02")


def test_a_slower_probe_or_a_failed_one_does_not_settle_it() -> None:
    clock = Clock()
    done = settle(probes(clock, [0.02, 0.5, None, 0.3, 0.3]), clock=clock, pause=clock.pause)
    assert done.settled and done.probes == (0.02, 0.5, None, 0.3, 0.3)


def test_a_server_that_keeps_slowing_is_left_at_the_cap() -> None:
    clock = Clock()
    slowing = [0.1 * 2**k for k in range(20)]
    done = settle(probes(clock, slowing), cap_s=30.0, clock=clock, pause=clock.pause)
    assert not done.settled and done.waited_s >= 30.0
    assert "still busy 30 s" in done.line("level-04")
