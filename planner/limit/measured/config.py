"""The limit search's knobs (`SearchConfig`), validated once where they are made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from contracts.errors import ConfigError
from contracts.limit import Dimension
from planner.limit.probe import AbandonRule
from planner.slo.spec import Slo

# how the search narrows a bracket: on the isotonic fit of each constraint against load
# (bisection as the fallback and safeguard), or by bisection alone
Narrowing = Literal["isotonic", "bisect"]
HELD_ANSWER = "held the answer"  # how `stopped` begins when levels held SearchConfig.answered


@dataclass(frozen=True)
class SearchConfig:
    """Knobs of the search; loads are req/s (rate) or users (concurrency, whole numbers).

    Brackets from `start` by `growth` (down to `min_load`, default start / 64 or 1 user; up
    to `max_load`), narrows until the pass/fail gap is within `tolerance` (relative), runs at
    most `max_levels` distinct levels. A deciding level is run again while its verdict is
    uncertain, at most `max_repeats` extra times and until its runs total `max_pooled_s`
    (None: no time cap): a level whose misses are rare events (refusals) needs many runs to
    be certain, one whose queue settles slowly has long runs already.
    With `answered` (a load the fast search's model answered), the search starts below it
    and stops once a pass and a fail one `growth` step apart hold it between them: the
    answer then rests on measured levels on both sides (the pass settled certain, the fail
    as it came: an overloaded level is stopped as hopeless before its fail is certain). The
    pass level is run again while it is uncertain, before the search looks below it, and
    only `max_pooled_s` caps its repeats (where `max_repeats` allows any). With
    `hold_budget_s`, that level's runs end at the budget, and where it is not certain within
    it the search steps down to the next hold level (`hold_levels`: the answer x (1 - k x
    tolerance) for k = 3, 4 below the first, 0.85 L and 0.8 L at the default 5 %) rather
    than pooling more runs: the answer then rests on the lower level that held, a wider
    gap below it. The lowest hold level is pooled as before.
    Intervals are `confidence` bootstrap intervals of `resamples` draws seeded by `seed`: a
    verdict is certain when its interval lies on its side of the threshold, so the default
    0.90 makes each verdict a one-sided 95 % bound.
    A level whose schedule lag p99 exceeds `max_lag_share` of the SLO's tightest TTFT or
    E2E threshold (`Slo.lag_bound_s`; the tightest of all where it has neither) is invalid:
    the client could not offer the load. TPOT and ITL are left out: latencies are measured
    from the actual send, and a late send moves arrivals, not the per-token times. Raises
    ConfigError for values out of range.
    """

    slo: Slo
    dimension: Dimension = "rate"
    start: float = 1.0
    max_load: float = 4096.0
    min_load: float | None = None
    growth: float = 2.0
    tolerance: float = 0.05
    min_completed: int = 50
    max_repeats: int = 5
    max_pooled_s: float | None = 900.0
    max_levels: int = 24
    narrowing: Narrowing = "isotonic"
    confidence: float = 0.90
    resamples: int = 400
    abandon_error_rate: float = 0.5
    max_lag_share: float = 0.1
    certain_pass: bool = True
    correlated_blocks: bool = True
    seed: int = 0
    # a load another method answered (the fast search's model): the search stops as soon as
    # a certain pass and a fail at most one `growth` step apart hold it between them
    answered: float | None = None
    # the longest the level that must hold `answered` is run before the search steps down
    hold_budget_s: float | None = 180.0
    hold_steps: int = 2  # hold levels below the first (0.85 L, 0.8 L)

    def __post_init__(self) -> None:
        if self.start <= 0:
            raise ConfigError(f"start load must be > 0, got {self.start}")
        if self.max_load < self.start:
            raise ConfigError(f"max load {self.max_load} is below the start load {self.start}")
        if not 0 < self.tolerance < 1:
            raise ConfigError(f"tolerance must be in (0, 1), got {self.tolerance}")
        if self.growth <= 1:
            raise ConfigError(f"growth factor must be > 1, got {self.growth}")
        if self.dimension == "concurrency" and self.start < 1:
            raise ConfigError("concurrency starts at 1 user or more")
        if self.max_levels < 2:
            raise ConfigError(f"max levels must be at least 2, got {self.max_levels}")
        if self.max_repeats < 0 or self.min_completed < 0:
            raise ConfigError("max repeats and min completed requests must be >= 0")
        if self.max_pooled_s is not None and self.max_pooled_s <= 0:
            raise ConfigError(f"max pooled time must be > 0 s, got {self.max_pooled_s}")
        if not 0 < self.confidence < 1 or self.resamples < 10:
            raise ConfigError("confidence must be in (0, 1) and resamples at least 10")
        if self.hold_budget_s is not None and self.hold_budget_s <= 0:
            raise ConfigError(f"hold budget must be > 0 s, got {self.hold_budget_s}")
        if self.hold_steps < 0:
            raise ConfigError(f"hold steps must be >= 0, got {self.hold_steps}")
        if not 0 < self.abandon_error_rate <= 1:
            rate = self.abandon_error_rate
            raise ConfigError(f"abandon error rate must be in (0, 1], got {rate}")

    @property
    def lowest(self) -> float:
        if self.min_load is not None:
            return self.min_load
        return 1.0 if self.dimension == "concurrency" else self.start / 64.0

    def abandon_rule(self) -> AbandonRule:
        return AbandonRule(self.slo, error_rate=self.abandon_error_rate)
