"""limit.json of a fast answer and the measured levels around it: the fast search's answer
where they held it (rate: L between about 0.9 L, or a lower hold level, and 1.1 L; users: N
between about 0.9 N and 1.1 N), with the bracket and its gap; otherwise the measured
search's, with the fast search's account."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.limit import LimitResult
from planner.limit.fast.result import fast_record
from planner.limit.fast.steps import FastResult
from planner.limit.measured.config import SearchConfig


@dataclass(frozen=True)
class FastAnswer:
    result: FastResult
    limit: LimitResult | None  # the fast answer's limit.json (None: the model was inadequate)
    started_s: float  # `clock` when the fast search began
    clock: Callable[[], float]  # the search's clock (a resumed run's counts its time before)

    def wall_s(self) -> float:
        return self.clock() - self.started_s


def with_fast(limit: LimitResult, fast: FastAnswer, config: SearchConfig) -> LimitResult:
    """limit.json after a fast search and the measured levels that followed it. Where they
    held the fast answer between a certain pass and a fail one step apart, the answer is the
    fast search's, resting on them; otherwise the measured search's, with the fast search's
    account of why it could not answer."""
    record = fast_record(fast.result, config)
    if config.dimension == "concurrency" and limit.answer_held:
        return _users_held(limit, fast, config)
    if fast.limit is None or not limit.answer_held:
        return limit.model_copy(update={"fast": record, "wall_s": fast.wall_s()})
    failed = limit.infeasible_min
    above = f", {failed:g} failed" if failed is not None else ", nothing above it failed"
    answer = fast.limit.feasible_max
    held = limit.feasible_max
    assert answer is not None and held is not None  # the levels held the answer
    gap = (answer - held) / answer
    stepped = ""
    if held < config.start * (1 - 1e-6):
        stepped = (
            f" ({100 * gap:.0f} % below the answer: {config.start:g} was not certain within "
            f"{config.hold_budget_s:g} s)"
        )
    return fast.limit.model_copy(
        update={
            "levels": [*fast.limit.levels, *limit.levels],
            "infeasible_min": failed,
            "held_load": limit.feasible_max,
            "answer_held": True,
            "held_gap": round(gap, 4),
            "unconfirmed": None,
            "failed_load": failed,
            "binding": limit.binding or fast.limit.binding,
            "stopped": limit.stopped,
            "wall_s": fast.wall_s(),
            "sentence": f"{fast.limit.sentence}; measured: {held:g} req/s held "
            f"with certainty{stepped}{above}",
        }
    )


def _users_held(limit: LimitResult, fast: FastAnswer, config: SearchConfig) -> LimitResult:
    """limit.json of a users answer the measured levels held: the model's N users, between
    the level that held it (about 0.9 N) and the one that failed (about 1.1 N)."""
    assert config.answered is not None and limit.feasible_max is not None
    users, held = config.answered, limit.feasible_max
    failed = limit.infeasible_min
    assert failed is not None  # an answer held has its fail level
    return limit.model_copy(
        update={
            "method": "fast",
            "fast": fast_record(fast.result, config),
            "feasible_max": users,
            "held_load": held,
            "failed_load": failed,
            "held_gap": round((users - held) / users, 4),
            "wall_s": fast.wall_s(),
            "sentence": f"one instance holds {users:g} users at {config.slo.describe()} "
            f"(measured bracket {held:g}-{failed:g} users); fast search: the characterised "
            f"model's closed loop said {users:g} users, measured: {held:g} held with "
            f"certainty, {failed:g} failed",
        }
    )
