"""Open-loop arrival schedules: absolute send times for a stage, chosen by kind.

A schedule is fixed before the stage starts and never waits for the server (no coordinated
omission). Every schedule holds exactly round(rate x duration) arrivals - the process
conditioned on its count - so a stage offers exactly its rate (a limit search compares
levels without count noise) while the gaps keep the kind's distribution.

Kinds: `constant` (evenly spaced), `poisson` (exponential gaps), `gamma:K` (gamma gaps
with shape K, so the inter-arrival CV is 1/sqrt(K): K < 1 is burstier than Poisson, K > 1
smoother), and `replay` (a log's own timestamps, sped up).

`gamma_times` is the one gamma/Poisson generator over a span of time: the load test draws its
stages with `exact_count=True`, the planner's fleet simulation (`planner.fleet.traffic`) draws the
free renewal process with `exact_count=False`. A table of lengths profiled at --rate-rps draws a
fixed number of gaps, one per row, chunk by chunk (`profiles.readers.drawn`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from contracts.errors import ConfigError
from contracts.run import Stage

ArrivalFn = Callable[[float, float, np.random.Generator], np.ndarray]


def _constant(rate_rps: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    n = int(round(rate_rps * duration_s))
    return np.arange(n, dtype=float) / rate_rps


def gamma_times(
    rate_rps: float,
    shape: float,
    duration_s: float,
    rng: np.random.Generator,
    *,
    exact_count: bool,
) -> np.ndarray:
    """Ascending arrival times in [0, duration_s) with gamma gaps of `shape` at `rate_rps`.

    Shape 1 is Poisson; the inter-arrival CV is 1/sqrt(shape). With `exact_count` the process
    is conditioned on round(rate x duration) arrivals (n + 1 gaps scaled to span the stage, so
    a stage offers exactly its rate); without it this is the free renewal process, whose count
    varies as the process does. The caller checks that rate, shape and duration are positive.
    """
    if exact_count:
        n = int(round(rate_rps * duration_s))
        if n == 0:
            return np.zeros(0)
        # For shape 1 these are sorted uniform times (Poisson given its count).
        t = np.cumsum(rng.gamma(shape, 1.0, size=n + 1))
        return np.asarray(t[:n] / t[-1] * duration_s, dtype=float)
    expected = rate_rps * duration_s
    n = int(expected + 6 * math.sqrt(expected / min(shape, 1.0)) + 16)
    scale = 1.0 / (rate_rps * shape)
    times = np.cumsum(rng.gamma(shape, scale, size=n))
    while times[-1] < duration_s:  # rare: draw more until the span is covered
        more = np.cumsum(rng.gamma(shape, scale, size=n)) + times[-1]
        times = np.concatenate([times, more])
    return times[times < duration_s]


def _gamma_gaps(shape: float) -> ArrivalFn:
    def times(rate_rps: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
        return gamma_times(rate_rps, shape, duration_s, rng, exact_count=True)

    return times


_KINDS: dict[str, str] = {
    "constant": "evenly spaced sends",
    "poisson": "exponential gaps (CV 1)",
    "gamma:K": "gamma gaps with shape K (CV 1/sqrt(K))",
    "replay": "a log's own timestamps at --replay-speed X",
}


def parse_arrival(spec: str) -> ArrivalFn:
    """The schedule function for `spec`; raises ConfigError listing the valid kinds."""
    kind, _, arg = spec.partition(":")
    if kind == "constant" and not arg:
        return _constant
    if kind == "poisson" and not arg:
        return _gamma_gaps(1.0)
    if kind == "gamma":
        try:
            shape = float(arg)
        except ValueError:
            shape = -1.0
        if shape > 0:
            return _gamma_gaps(shape)
        raise ConfigError(f"arrival {spec!r}: gamma needs a positive shape, e.g. gamma:0.5")
    raise ConfigError(f"unknown arrival {spec!r}; valid: " + ", ".join(_KINDS))


def validate_arrival(spec: str) -> None:
    """Raise ConfigError unless `spec` names a known arrival kind (replay included)."""
    if spec != "replay":
        parse_arrival(spec)


def arrival_times(
    spec: str, rate_rps: float, duration_s: float, rng: np.random.Generator
) -> np.ndarray:
    """Send times (seconds from the stage start, ascending, all < duration_s) for one stage."""
    return parse_arrival(spec)(rate_rps, duration_s, rng)


def stage_times(stage: Stage, rng: np.random.Generator) -> np.ndarray:
    """Send times of an open, non-replay stage (seconds from its start, ascending).

    A stage with `requests` N (vLLM's --num-prompts) gets exactly N: all at 0 when it has no
    rate (vLLM's default --request-rate inf), else the schedule of its kind over N / rate
    seconds (which holds exactly N arrivals); the others get `arrival_times` over duration_s.
    """
    if stage.requests is None:
        assert stage.rate_rps is not None
        return arrival_times(stage.arrival, stage.rate_rps, stage.duration_s, rng)
    if stage.rate_rps is None:
        return np.zeros(stage.requests)
    times = arrival_times(stage.arrival, stage.rate_rps, stage.requests / stage.rate_rps, rng)
    if len(times) != stage.requests:  # a rounding slip must not change the count asked
        raise ConfigError(
            f"stage {stage.name!r}: schedule holds {len(times)} requests, {stage.requests} asked"
        )
    return times


def replay_times(
    arrival_s: np.ndarray, speed: float, duration_s: float, origin_s: float | None = None
) -> np.ndarray:
    """A log's timestamps (seconds) counted from `origin_s` (default: the first one), divided by
    `speed`, cut at the stage length."""
    if speed <= 0:
        raise ConfigError(f"replay speed must be positive, got {speed}")
    arr = np.asarray(arrival_s, dtype=float)
    if len(arr) == 0:
        return arr
    origin = arr[0] if origin_s is None else origin_s
    t = (arr - origin) / speed
    return t[(t >= 0) & (t < duration_s)]
