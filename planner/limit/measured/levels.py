"""Which loads the limit search holds: a load snapped to what the search runs (whole users,
4 significant digits), and the levels that must hold a fast answer (the first, 0.9 L, and
the steps down a hold budget allows)."""

from __future__ import annotations

import math

from planner.limit.measured.config import SearchConfig
from planner.limit.probe import LevelMeasurement


def snap_load(config: SearchConfig, load: float, upward: bool) -> float:
    """A load the search holds: within its bounds, whole users or 4 significant digits."""
    load = min(max(load, config.lowest), config.max_load)
    if config.dimension == "concurrency":
        # a user count times a growth may land a hair off a whole number: not a user more
        return float(max(1, math.ceil(load - 1e-9) if upward else math.floor(load + 1e-9)))
    return float(f"{load:.4g}")


def _hold_level(config: SearchConfig) -> float | None:
    """With `answered`: the level that must hold it (the search's first)."""
    return None if config.answered is None else snap_load(config, config.start, upward=True)


def hold_levels(config: SearchConfig) -> list[float]:
    """With `answered` L: the levels that may hold it, highest first: the search's first
    (0.9 L at the default tolerance), then L x (1 - (3 + k) x tolerance) for each of
    `hold_steps` (0.85 L, 0.8 L), where a budget lets the search step down to them. Users
    step down one user or more each."""
    first = _hold_level(config)
    if first is None or config.answered is None:
        return []
    levels = [first]
    for k in range(config.hold_steps if config.hold_budget_s is not None else 0):
        load = snap_load(config, config.answered * (1 - (3 + k) * config.tolerance), upward=False)
        if config.dimension == "concurrency":
            load = min(load, levels[-1] - 1)
        if load < levels[-1] and load >= config.lowest:
            levels.append(load)
    return levels


def abandonable_again(config: SearchConfig, load: float, runs: list[LevelMeasurement]) -> bool:
    """The level that must hold a fast answer was stopped early as hopeless on every run so
    far: its next run may be stopped early too (it may be hopeless after all: a misfit
    model's answer). The rule counts requests past a threshold against the level's shortest
    length, and near the limit a burst trips it: see `limit_search`."""
    return load in hold_levels(config) and all(m.abandoned is not None for m in runs)
