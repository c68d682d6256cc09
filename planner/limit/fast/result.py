"""limit.json from a fast search: the corrected model's limit, each confirmation level
judged as the measured search judges a level, and the fast search's account."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import polars as pl

from contracts.limit import LIMIT_SCHEMA, FastSearchRecord, LimitResult
from planner.limit.fast.closed import whole_users_bracket
from planner.limit.fast.misses import targets
from planner.limit.fast.model import ServerModel
from planner.limit.fast.steps import FastResult
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.result import level_record
from planner.limit.measured.search import judge_level
from planner.limit.probe import LevelMeasurement
from planner.slo.spec import Slo


def fast_record(result: FastResult, config: SearchConfig) -> FastSearchRecord:
    """limit.json's account of a fast search."""
    names = tuple(t.name for t in targets(config.slo))
    last = result.confirmations[-1] if result.confirmations else None
    model = result.model
    interval = None
    if result.low is not None and result.high is not None and math.isfinite(result.high):
        interval = (result.low, result.high)
    return FastSearchRecord(
        stopped=result.stopped,
        adequate=result.adequate,
        characterise_s=result.characterise_s,
        confirm_s=result.confirm_s,
        predicted_rps=result.predicted,
        limit_rps=result.limit,
        interval=interval,
        bias=dict(zip(names, last.bias, strict=True)) if last else {},
        bias_se={n: e for n, e in zip(names, last.bias_se, strict=True) if math.isfinite(e)}
        if last
        else {},
        delay_bias_s=last.delay_bias_s if last else None,
        delay_se_s=last.delay_se_s if last and math.isfinite(last.delay_se_s) else None,
        delay_shift=last.delay_shift if last else None,
        levels=[(c.rate, c.chunks, c.requests) for c in result.confirmations],
        slots=model.slots if model else None,
        refuses=model.refuses if model else None,
        max_slowdown=model.max_slowdown if model else None,
        model=model.describe() if model else None,
        sizes=result.sizes,
        pace=result.pace if result.pace != 1.0 else None,
    )


def fast_limit_result(
    result: FastResult,
    config: SearchConfig,
    levels: list[tuple[float, list[str], pl.DataFrame, float, float]],
    *,
    target: str = "",
    model: str = "",
    profile_digest: str = "",
    wall_s: float | None = None,
    time_scale: float = 1.0,
) -> LimitResult:
    """limit.json of an adequate fast search. `levels`: each confirmation rate with its
    stage names, records, first start and total seconds held."""
    assert result.limit is not None
    rng = np.random.default_rng(config.seed)
    outcomes = []
    for rate, stages, records, start_s, held_s in levels:
        measurement = LevelMeasurement(
            load=rate,
            stage=stages[0],
            records=records,
            duration_s=held_s,
            warmup_s=0.0,
            start_s=start_s,
        )
        outcome = judge_level(config, rate, [measurement], rng)
        outcomes.append(level_record(outcome).model_copy(update={"stages": stages}))
    record = fast_record(result, config)
    interval = ""
    if record.interval is not None:
        interval = f"90 % interval {record.interval[0]:.3g}-{record.interval[1]:.3g} req/s"
    within = f" ({interval})" if interval else ""
    kind = "characterised" if isinstance(result.model, ServerModel) else "engine"
    sentence = (
        f"one instance holds {result.limit:.3g} req/s{within} at {config.slo.describe()}; "
        f"fast search: the {kind} model said {result.predicted:.3g}, corrected by "
        f"its bias measured on {len(result.confirmations)} confirmation chunk(s)"
    )
    return LimitResult(
        schema=LIMIT_SCHEMA,
        dimension="rate",
        unit="rps",
        feasible_max=round(result.limit, 4),
        infeasible_min=None,
        binding=config.slo.constraint_names[0] if len(config.slo.constraint_names) == 1 else None,
        slo=config.slo.text,
        tolerance=config.tolerance,
        levels=outcomes,
        confidence=interval,
        target=target,
        model=model,
        profile_digest=profile_digest,
        wall_s=wall_s,
        recovery_s=None,
        time_scale=time_scale,
        method="fast",
        fast=record,
        sentence=sentence,
        stopped=result.stopped,
        # written before the measured levels around it run: a crash leaves it unconfirmed
        unconfirmed="the measured levels around the fast answer have not held it yet",
    )


def fallback_start(result: FastResult, slo: Slo) -> float | None:
    """Where the measured search starts when the fast search's model was inadequate: the
    corrected limit (else the model's), moved into what the confirmation levels showed.

    A level on whose requests the server missed no more than the SLO allows (the model's own
    misses there plus the bias) held; one that missed more did not. A bias too large for the
    model's curve puts the corrected root far below every level that held (on the demo's
    emulator, 3.9 req/s after a level at 17.2 held and one at 18.2 missed 12 %): the start
    is kept between the highest level that held and the lowest that did not. Where none
    held, the misfit model's root is no measurement: the start is kept at most two seeded
    steps (SEEDED_GROWTH) below the lowest level that missed. On a fresh llama.cpp server
    (bench/limit_real_engine.py, 2026-12-04) a model that missed at 22.6 req/s put its
    corrected root at 4.59 req/s, and the measured search climbed six levels from there to
    a limit of 15.2."""
    start = result.limit or result.predicted
    allowed = [t.allowed for t in targets(slo)]
    held: list[float] = []
    missed: list[float] = []
    for c in result.confirmations:
        if c.requests == 0 or len(c.sampled) != len(allowed):
            continue
        shares = [s + b for s, b in zip(c.sampled, c.bias, strict=True)]
        ok = all(share <= limit for share, limit in zip(shares, allowed, strict=True))
        (held if ok else missed).append(c.rate)
    if start is None:  # only an SLO the fast search cannot take: nothing was confirmed
        return None
    top_held = max(held, default=0.0)
    start = max(start, top_held)
    above = [r for r in missed if r > top_held]
    if not above:
        return start
    floor = max(top_held, min(above) / SEEDED_GROWTH**2)
    return min(max(start, floor), min(above))


# The measured search after a fast search the model could not settle steps by this factor
# from where the fast search's levels point (2x from there overshoots into levels that fail).
SEEDED_GROWTH = 1.25


def seeded(
    config: SearchConfig, result: FastResult, echo: Callable[[str], None] = print
) -> SearchConfig:
    """The measured levels after a fast search. Where its model answered L, one level at
    L x (1 - 2 x tolerance) that must hold with certainty and one a `growth` step above, at
    L x (1 + 2 x tolerance), that must fail (0.9 L and 1.1 L at the default 5 %): the answer
    then rests on measured levels on both sides (SearchConfig.answered). Closer levels cost
    more than they tell: at 0.95 L of the ~0.7 s slot server (bench/search_truth.py) the
    pass stayed uncertain through repeats, and the two levels took 27.5 virtual minutes.
    Where either level does not hold the answer, or the model was inadequate, the measured
    search goes on from there, seeded where the measurements point (`fallback_start`),
    never from the bottom: a misfit costs time, never the answer."""
    tolerance = config.tolerance
    if result.adequate and result.limit is not None and config.dimension == "concurrency":
        held, failed = whole_users_bracket(result.limit, tolerance)
        users = max(1, round(result.limit))
        echo(f"fast search: {result.stopped}, {users} users; measured levels around it: "
             f"{held} must hold, {failed} must fail")  # fmt: skip
        return replace(config, start=held, growth=failed / held, answered=float(users))
    if result.adequate and result.limit is not None:
        answer = float(f"{result.limit:.4g}")
        start = float(f"{answer * (1 - 2 * tolerance):.4g}")
        growth = (1 + 2 * tolerance) / (1 - 2 * tolerance)
        echo(f"fast search: {result.stopped}, {answer:g} req/s; measured levels around it: "
             f"{start:g} must hold, {start * growth:.4g} must fail")  # fmt: skip
        return replace(config, start=start, growth=growth, answered=answer)
    if config.dimension == "concurrency":  # no confirmation levels to point anywhere
        echo(f"fast search: {result.stopped}; the measured search takes over")
        return config
    pointed = fallback_start(result, config.slo)
    if pointed is None:
        echo(f"fast search: {result.stopped}; the measured search takes over")
        return config
    start = float(f"{pointed:.4g}")
    echo(f"fast search: {result.stopped}; the measured search takes over at {start:g} req/s "
         f"(where the fast search's levels point), {SEEDED_GROWTH:g}x a step")  # fmt: skip
    return replace(config, start=start, growth=SEEDED_GROWTH)
