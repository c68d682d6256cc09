"""The limit search's result as limit.json's contract: one record per level, the answer in
one sentence, and how sure it is."""

from __future__ import annotations

from contracts.limit import (
    LIMIT_SCHEMA,
    ConstraintVerdict,
    Dimension,
    LimitLevel,
    LimitResult,
    LittlesLaw,
)
from planner.limit.measured.search import LevelOutcome, SearchResult


def _unit_text(dimension: Dimension, load: float) -> str:
    if dimension == "rate":
        return f"{load:.3g} req/s"
    users = int(round(load))
    return f"{users} concurrent user{'s' if users != 1 else ''}"


def _constraint_words(name: str) -> str:
    return name.replace(":", " ")


def _sentence(result: SearchResult, binding: str | None, littles: LittlesLaw | None) -> str:
    slo_words = result.config.slo.describe()
    if result.interrupted:
        return "interrupted before the limit was found: " + _sentence_body(
            result, binding, littles, slo_words
        )
    return _sentence_body(result, binding, littles, slo_words)


def _sentence_body(
    result: SearchResult, binding: str | None, littles: LittlesLaw | None, slo_words: str
) -> str:
    dimension = result.config.dimension
    lo, hi = result.feasible_max, result.infeasible_min
    if lo is None and hi is None:
        return "no level was measured"
    if lo is None:
        assert hi is not None
        lowest = result.outcome(hi)
        if lowest is not None and lowest.invalid is not None:
            return (
                f"no level was valid: the load generator could not offer even "
                f"{_unit_text(dimension, hi)} (add --workers N, or give it cores of its own)"
            )
        reason = f" ({_constraint_words(binding)} fails)" if binding else ""
        return f"one instance does not meet {slo_words} even at {_unit_text(dimension, hi)}{reason}"
    holds = _unit_text(dimension, lo)
    if dimension == "concurrency" and littles is not None:
        holds += f" ({littles.rate_rps:.3g} req/s)"
    if hi is None:
        return (
            f"one instance holds at least {holds} at {slo_words}; nothing up to the maximum "
            f"{_unit_text(dimension, lo)} failed"
        )
    failing = result.outcome(hi)
    if failing is not None and failing.invalid is not None:
        return (
            f"one instance holds at least {holds} at {slo_words}; the load generator could not "
            f"offer {_unit_text(dimension, hi)} (add --workers N to measure higher)"
        )
    fails = "fail" if dimension == "concurrency" and round(hi) != 1 else "fails"
    binds = f"; {_constraint_words(binding)} binds first" if binding else ""
    return f"one instance holds {holds} at {slo_words}{binds}; {_unit_text(dimension, hi)} {fails}"


def _confidence(result: SearchResult) -> str:
    parts: list[str] = []
    lo, hi = result.feasible_max, result.infeasible_min
    if lo is not None and hi is not None:
        parts.append(f"limit between {lo:g} and {hi:g} (gap {100 * (hi - lo) / lo:.1f} %)")
    ends = [o for o in (result.outcome(lo), result.outcome(hi)) if o is not None]
    uncertain = [o for o in ends if not o.certain]
    level_pct = f"{result.config.confidence * 100:g} %"
    if ends and not uncertain:
        parts.append(f"both verdicts hold across {level_pct} bootstrap intervals")
    for o in uncertain:
        parts.append(
            f"the verdict at {o.load:g} is within the noise after {len(o.stages)} measurement(s)"
        )
    repeated = sum(1 for o in result.levels if o.repeats)
    parts.append(f"{len(result.levels)} levels, {repeated} repeated; {result.stopped}")
    return "; ".join(parts)


def _unconfirmed(result: SearchResult) -> str | None:
    """Why an interrupted search's answer is not confirmed (None: the search ended)."""
    if not result.interrupted:
        return None
    config = result.config
    if config.answered is not None:
        return (
            f"interrupted before the measured levels around the answer "
            f"{_unit_text(config.dimension, config.answered)} held it"
        )
    return "interrupted before the search's bracket was final (the answer is not yet narrowed)"


def level_record(outcome: LevelOutcome) -> LimitLevel:
    """The limit.json entry of one judged level."""
    evaluation = outcome.evaluation
    constraints = [
        ConstraintVerdict(
            name=c.name,
            value=c.value,
            threshold=c.threshold,
            margin=c.margin,
            passed=c.passed,
            interval=c.interval,
        )
        for c in evaluation.constraints
    ]
    return LimitLevel(
        load=outcome.load,
        stage=outcome.stages[-1],
        stages=list(outcome.stages),
        requests=evaluation.scheduled,
        completed=evaluation.completed,
        metrics=dict(evaluation.metrics),
        constraints=constraints,
        verdict=outcome.verdict,
        certain=outcome.certain,
        interval={c.name: c.interval for c in evaluation.constraints if c.interval is not None},
        repeats=outcome.repeats,
        abandoned_early=outcome.abandoned is not None,
        abandoned_reason=outcome.abandoned,
        achieved_rps=evaluation.achieved_rps,
        mean_e2e_s=evaluation.mean_e2e_s,
        goodput_rps=evaluation.goodput_rps,
        attainment=evaluation.attainment,
        failure_share=evaluation.error_rate,
        errors_by_class=dict(evaluation.errors_by_class),
        censored=evaluation.censored,
        schedule_lag_p99_s=evaluation.metrics.get("schedule_lag_p99_s"),
        unstable=outcome.unstable,
        invalid=outcome.invalid,
        steady=outcome.steady,
    )


def build_limit_result(
    result: SearchResult,
    *,
    target: str = "",
    model: str = "",
    profile_digest: str = "",
    wall_s: float | None = None,
    recovery_s: float | None = None,
    time_scale: float = 1.0,
) -> LimitResult:
    """limit.json from a finished search: levels, bracket, binding constraint, Little's law.

    Little's law at the limit: concurrency = achieved rate x mean E2E of the highest
    passing level. Saturation throughput is the highest completion rate of any level.
    """
    config = result.config
    binding = result.binding
    passing = result.outcome(result.feasible_max)
    littles: LittlesLaw | None = None
    if passing is not None and passing.evaluation.mean_e2e_s is not None:
        rate_rps = passing.evaluation.achieved_rps
        littles = LittlesLaw(
            rate_rps=rate_rps,
            concurrency=rate_rps * passing.evaluation.mean_e2e_s,
            mean_e2e_s=passing.evaluation.mean_e2e_s,
        )
    achieved = [o.evaluation.achieved_rps for o in result.levels if o.abandoned is None]
    return LimitResult(
        schema=LIMIT_SCHEMA,
        dimension=config.dimension,
        unit="rps" if config.dimension == "rate" else "users",
        feasible_max=result.feasible_max,
        infeasible_min=result.infeasible_min,
        held_load=result.feasible_max,
        failed_load=result.infeasible_min,
        answer_held=result.held_answer,
        binding=binding,
        slo=config.slo.text,
        tolerance=config.tolerance,
        levels=[level_record(o) for o in result.levels],
        saturation_throughput_rps=max(achieved) if achieved else None,
        littles_law=littles,
        confidence=_confidence(result),
        target=target,
        model=model,
        profile_digest=profile_digest,
        wall_s=wall_s,
        recovery_s=recovery_s,
        sentence=_sentence(result, binding, littles),
        stopped=result.stopped,
        unconfirmed=_unconfirmed(result),
        time_scale=time_scale,
    )
