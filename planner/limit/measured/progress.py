"""How far the limit search is, for people: elapsed wall time and an estimate of the time
left, from what is left of the bracket (the measured search) or of the chunks (the fast one).

The measured search's estimate: once a level passed and a higher one failed, narrowing to
the tolerance takes at most about log2(gap / (tolerance x the highest pass)) more levels —
bisection's count; the isotonic interpolation usually needs fewer — plus one more run of
each of the two deciding levels whose verdict is not yet settled, never more new levels than
`max_levels` allows. While the bracket is open (no fail yet, or no pass yet) at least one
more level is needed and then a narrowing from one growth step: the estimate is a lower
bound and says so. After a fast answer (`SearchConfig.answered`) two levels decide: one that
holds just below the answer and one above it. Levels are costed at the mean wall time of the
runs so far. The fast search's estimate is an upper bound: the chunks its level and moves
have left at most.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from planner.limit.fast.steps import FastConfig
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.search import LevelOutcome


@dataclass(frozen=True)
class Left:
    """Runs left: `runs`, and whether that is a lower bound (`at_least`) or an upper one
    (`at_most`); neither: an estimate."""

    runs: int
    at_least: bool = False
    at_most: bool = False


def _narrowing(gap: float, lo: float, config: SearchConfig) -> int:
    """Bisection's levels to bring a pass/fail gap above `lo` within the tolerance."""
    if config.dimension == "concurrency":
        step = max(1.0, math.floor(config.tolerance * lo))
    else:
        step = config.tolerance * lo
    return math.ceil(math.log2(gap / step)) if gap > step else 0


def measured_left(outcomes: Mapping[float, LevelOutcome], config: SearchConfig) -> Left:
    """Runs the measured search has left after the levels judged so far (load -> outcome)."""
    fails = [x for x, o in outcomes.items() if not o.passed]
    hi = min(fails) if fails else None
    passes = [x for x, o in outcomes.items() if o.passed and (hi is None or x < hi)]
    lo = max(passes) if passes else None
    at_least = False
    answered = config.answered
    if answered is not None and lo is not None:
        top = lo * config.growth * 1.001  # levels are snapped to 4 significant digits
        if lo <= answered < top and (hi is None or answered < hi <= top):
            # a fast answer held just above `lo`: the level above it decides (search.py)
            new = 0 if hi is not None else 1
            return Left(new + int(not outcomes[lo].settled))
    if answered is not None and not outcomes:
        return Left(2)  # one level below the answer, one above
    if lo is not None and hi is not None:
        new = _narrowing(hi - lo, lo, config)
    elif lo is not None:
        done = lo >= config.max_load
        new = 0 if done else 1 + _narrowing(lo * (config.growth - 1), lo, config)
        at_least = not done
    elif hi is not None:
        done = hi <= config.lowest
        below = hi / config.growth
        new = 0 if done else 1 + _narrowing(hi - below, below, config)
        at_least = not done
    else:
        return Left(0, at_least=True)
    room = max(config.max_levels - len(outcomes), 0)
    if new >= room:  # --max-levels ends the search first: at most that many
        new, at_least = room, False
    unsettled = sum(1 for x in (lo, hi) if x is not None and not outcomes[x].settled)
    return Left(new + unsettled, at_least=at_least)


def fast_chunks_left(config: FastConfig, chunks: int, moves: int) -> int:
    """The most confirmation chunks left after `chunks` at the current level and `moves`
    moves of the level so far."""
    return max(config.max_chunks - chunks, 0) + max(config.max_moves - moves, 0) * config.max_chunks


def closed_steps_left(config: FastConfig, users: int) -> int:
    """The most closed-loop steps left after one of `users` (users double up to max_users)."""
    if users >= config.max_users:
        return 0
    return math.ceil(math.log2(config.max_users / max(users, 1)))


def format_clock(seconds: float) -> str:
    """42s, 4m05s, 1h02m."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def progress_note(elapsed_s: float, left: Left, per_run_s: float, unit: str = "levels") -> str:
    """`elapsed 4m05s  left ~6m10s (3 levels)`: the runs left at `per_run_s` each."""
    return time_note(elapsed_s, left, left.runs * per_run_s, unit)


def time_note(elapsed_s: float, left: Left, left_s: float, unit: str) -> str:
    """`elapsed 4m05s  left <=2m30s (2 stages)`: `left.runs` runs taking `left_s` in all."""
    sign = ">=" if left.at_least else "<=" if left.at_most else "~"
    plus = "+" if left.at_least else ""
    note = f"elapsed {format_clock(elapsed_s)}"
    if left.runs == 0 and not left.at_least:
        return f"{note}  left ~0s"
    unit = unit.removesuffix("s") if left.runs == 1 and not left.at_least else unit
    return f"{note}  left {sign}{format_clock(left_s)} ({left.runs}{plus} {unit})"
