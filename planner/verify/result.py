"""verify.json from a finished (or interrupted) verify run: phases, verdicts and the sentence.

`judge_run` reads the run directory the load test wrote, judges the steady stage with the limit
search's steady-state rules (planner.limit.measured.steady: its warm-up, its window, settled or
not) and its SLO verdict, the burst and the recovery as whole stages, and sets each beside the
engine model's simulation of the same stages (planner.verify.simulate) judged by the same function.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from contracts.finding import Finding, FindingValue
from contracts.plan import FleetPoint, Plan
from contracts.recovery import recovery_curve
from contracts.run import StagePlan, StageSummary
from contracts.rundir import read_records, read_stages
from contracts.verify import Figures, Phase
from planner.limit.measured.steady import LevelState, SteadyRules, assess
from planner.slo.spec import Slo
from planner.verify.judge import errors_by_class, figures, gateway_classes


@dataclass(frozen=True, kw_only=True)
class Judged:
    """What the run showed: its phases, the steady stage's state and the verdicts."""

    phases: list[Phase]
    state: LevelState | None
    invalid_reason: str | None
    recovery_s: float | None
    recovery_simulated_s: float | None
    held_peak: bool
    held_burst: bool
    recovered: bool


def _summary(stages: list[StageSummary], name: str) -> StageSummary | None:
    return next((s for s in stages if s.name == name), None)


def _steady_state(
    records: pl.DataFrame, summary: StageSummary, rules: SteadyRules, slo: Slo
) -> LevelState:
    return assess(
        records,
        start_s=summary.start_s,
        now_s=summary.start_s + summary.duration_s,
        rate_rps=summary.target_rate_rps,
        rules=rules,
        slo=slo,
    )


def _invalid(
    state: LevelState | None, summary: StageSummary | None, steady: Phase | None
) -> str | None:
    """Why the steady stage cannot be judged (None: it can). A stage that did not settle is
    judged (it failed), and so is one that missed the SLO in a window shorter than the rules
    ask: it started from an empty fleet, the most favourable state, so a longer window could
    only have queued more. A pass in a short window, or a load that was not the asked one, is
    not a test of the plan."""
    if summary is None or state is None or steady is None:
        return "the run has no steady stage (interrupted before it)"
    if summary.validity is not None and summary.validity.warnings:
        return "; ".join(summary.validity.warnings)
    if not state.ready and state.unstable is None and steady.measured.meets_slo:
        return f"the steady window was too short for the steady-state rules ({state.evidence()})"
    return None


def judge_run(
    run_dir: Path,
    plan: StagePlan,
    slo: Slo,
    rules: SteadyRules,
    simulated: pl.DataFrame | None,
) -> Judged:
    """Judge the run directory `run_dir` of `plan` (steady, burst, recovery)."""
    records = gateway_classes(read_records(run_dir))
    stages = read_stages(run_dir)
    phases: list[Phase] = []
    state: LevelState | None = None
    sim_start = 0.0
    for stage in plan.stages:
        summary = _summary(stages, stage.name)
        rows = records.filter(pl.col("stage") == stage.name)
        warmup = 0.0
        if summary is not None and stage.role == "steady":
            state = _steady_state(rows, summary, rules, slo)
            warmup = state.warmup_s
        sim = None
        if simulated is not None:
            sim = _within(simulated, slo, sim_start, stage.duration_s, warmup)
        sim_start += stage.duration_s
        if summary is None:
            continue
        assert stage.rate_rps is not None
        phases.append(
            Phase(
                name=stage.name,
                role=stage.role,  # type: ignore[arg-type]
                rate_rps=stage.rate_rps,
                duration_s=summary.duration_s,
                warmup_s=warmup,
                measured=figures(
                    rows,
                    slo,
                    start_s=summary.start_s,
                    duration_s=summary.duration_s,
                    warmup_s=warmup,
                ),  # fmt: skip
                simulated=sim,
                errors_by_class=errors_by_class(rows),
            )
        )
    return _verdicts(phases, state, stages, plan, slo, simulated)


def _within(
    simulated: pl.DataFrame, slo: Slo, start_s: float, duration_s: float, warmup_s: float
) -> Figures:
    rows = simulated.filter(
        (pl.col("intended_send_s") >= start_s) & (pl.col("intended_send_s") < start_s + duration_s)
    )
    return figures(rows, slo, start_s=start_s, duration_s=duration_s, warmup_s=warmup_s)


def _verdicts(
    phases: list[Phase],
    state: LevelState | None,
    stages: list[StageSummary],
    plan: StagePlan,
    slo: Slo,
    simulated: pl.DataFrame | None,
) -> Judged:
    by_role = {p.role: p for p in phases}
    steady = by_role.get("steady")
    invalid = _invalid(state, _summary(stages, "steady"), steady)
    held_peak = bool(
        steady is not None and steady.measured.meets_slo and state is not None
        and state.unstable is None
    )  # fmt: skip
    burst = by_role.get("burst")
    recovery_summary = _summary(stages, "recovery")
    threshold = slo.ttft_bound_s
    if threshold is not None:
        recovered = bool(recovery_summary is not None and recovery_summary.recovered)
        recovery_s = recovery_summary.recovery_s if recovery_summary is not None else None
    else:
        rec = by_role.get("recovery")
        recovered = bool(rec is not None and rec.measured.meets_slo)
        recovery_s = None
    sim_recovery = None
    if simulated is not None and threshold is not None:
        b0 = plan.stages[0].duration_s
        b1 = b0 + plan.stages[1].duration_s
        end = b1 + plan.stages[2].duration_s
        sim_recovery = recovery_curve(simulated, b0, b1, end, threshold).recovery_s
    return Judged(
        phases=phases,
        state=state,
        invalid_reason=invalid,
        recovery_s=recovery_s,
        recovery_simulated_s=sim_recovery,
        held_peak=held_peak,
        held_burst=bool(burst is not None and burst.measured.meets_slo),
        recovered=recovered,
    )


def verdict_finding(
    judged: Judged, *, serving: int, planned: int, slo: Slo, rate_rps: float, burst_s: float
) -> Finding:
    """The verify's one sentence as a finding (contracts.finding words it)."""
    steady = next((p for p in judged.phases if p.role == "steady"), None)
    base: dict[str, FindingValue] = {
        "serving": serving,
        "planned": planned,
        "slo": slo.text,
        "rate": rate_rps,
        "burst_s": burst_s,
    }
    if judged.invalid_reason is not None:
        return Finding(key="verify.invalid", values={**base, "reason": judged.invalid_reason})
    if steady is not None and steady.measured.attainment is None:
        # the warm-up (mean E2Es, which grow while the queue grows) filled the whole stage:
        # no request was judged, so there is no attainment to state, not 0 %
        return Finding(
            key="verify.no_window",
            values={**base, "warmup_s": steady.warmup_s, "duration_s": steady.duration_s},
        )
    measured = steady.measured.attainment if steady is not None else None
    simulated = steady.simulated.attainment if steady and steady.simulated else None
    base |= {"attainment": measured or 0.0, "sim_attainment": simulated or 0.0}
    if not judged.held_peak:
        return Finding(key="verify.fails_peak", values=base)
    if not judged.recovered:
        return Finding(key="verify.fails_recovery", values=base)
    return Finding(key="verify.holds", values={**base, "recovery": judged.recovery_s or 0.0})


def plan_points(plan: Plan, serving: int) -> list[FleetPoint]:
    """The plan's own fleet-check points at this instance count."""
    fleet = plan.checks.fleet
    return [p for p in fleet.points if p.instances == serving] if fleet is not None else []
