"""Open-loop arrival schedules: absolute send times for a stage, chosen by kind.

A schedule is fixed before the stage starts and never waits for the server (no coordinated
omission). Kinds: `constant` (evenly spaced), `poisson` (exponential gaps), `gamma:K`
(gamma gaps with shape K, so the inter-arrival CV is 1/sqrt(K): K < 1 is burstier than
Poisson, K > 1 smoother), and `replay` (a log's own timestamps, sped up).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from planner.errors import ConfigError

ArrivalFn = Callable[[float, float, np.random.Generator], np.ndarray]


def _constant(rate_rps: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    n = int(np.floor(rate_rps * duration_s + 1e-9))
    return np.arange(n, dtype=float) / rate_rps


def _gamma_gaps(shape: float) -> ArrivalFn:
    def times(rate_rps: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
        # Draw more gaps than expected and cut at the stage end; draw again if too few.
        out: list[np.ndarray] = []
        t0 = 0.0
        expected = rate_rps * duration_s
        # The first arrival comes after one gap, like every other (a stationary start).
        while t0 < duration_s:
            n = int(expected + 10 * np.sqrt(expected / shape + 1) + 16)
            gaps = rng.gamma(shape, 1.0 / (shape * rate_rps), size=n)
            t = t0 + np.cumsum(gaps)
            out.append(t[t < duration_s])
            t0 = float(t[-1])
        return np.concatenate(out) if out else np.zeros(0)

    return times


_KINDS: dict[str, str] = {
    "constant": "evenly spaced sends",
    "poisson": "exponential gaps (CV 1)",
    "gamma:K": "gamma gaps with shape K (CV 1/sqrt(K))",
    "replay": "a log's own timestamps at --speed X",
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


def replay_times(arrival_s: np.ndarray, speed: float, duration_s: float) -> np.ndarray:
    """A log's timestamps (seconds, any origin) shifted to start at 0 and divided by `speed`."""
    if speed <= 0:
        raise ConfigError(f"replay speed must be positive, got {speed}")
    arr = np.asarray(arrival_s, dtype=float)
    if len(arr) == 0:
        return arr
    t = (arr - arr[0]) / speed
    return t[t < duration_s]
