"""Loading the finished results a report renders: every number it shows was computed before.

The profile, the run directory (through contracts.rundir), the limit and the plan are read and
validated here; the run's timeline series come from contracts.timeline. Nothing is computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contracts.digest import sha256_of
from contracts.errors import InputError
from contracts.jsonio import read_json, validate
from contracts.limit import LIMIT_FILE, LimitResult, load_limit
from contracts.plan import PLAN_SCHEMA, Plan
from contracts.run import RunInfo, StageSummary
from contracts.rundir import (
    METRICS_FILE,
    RECORDS_FILE,
    RUN_FILE,
    STAGES_FILE,
    read_run_info,
    read_stages,
)
from contracts.timeline import KV_METRIC, QUEUE_METRIC, Series, Timeline, run_timeline
from contracts.verify import VERIFY_SCHEMA, Verify
from profiles.model import Profile, load_profile

__all__ = ["KV_METRIC", "QUEUE_METRIC", "ReportInputs", "Series", "Timeline", "load_inputs"]


@dataclass(frozen=True, kw_only=True)
class InputDigest:
    """One input file the report rests on, with its sha256."""

    role: str
    path: str
    sha256: str


@dataclass(frozen=True)
class ReportInputs:
    """Everything one report renders, loaded and validated. `run`, `run_dir`, `limit` and
    `limit_path` are None (and `stages` empty) when the plan's limit was given as a number
    and no load test was given: the report leaves its load-test and limit pages out."""

    profile: Profile
    profile_path: Path
    run: RunInfo | None
    run_dir: Path | None
    stages: list[StageSummary]
    limit: LimitResult | None
    limit_path: Path | None
    plan: Plan
    plan_path: Path
    previous: Plan | None
    previous_path: Path | None
    timeline: Timeline | None
    digests: list[InputDigest]
    verifies: tuple[Verify, ...] = ()  # capplan verify's tests of this plan's fleet


def load_plan(path: Path) -> Plan:
    """Read plan.json; raises InputError naming the file and the first bad field."""
    return validate(Plan, read_json(path, "plan"), path, PLAN_SCHEMA)


def load_verify(path: Path, plan_path: Path) -> Verify:
    """Read verify.json; raises InputError when it is bad or verified another plan."""
    verify = validate(Verify, read_json(path, "verify"), path, VERIFY_SCHEMA)
    if verify.plan_digest != sha256_of(plan_path):
        raise InputError(
            f"{path}: verifies another plan ({verify.plan}, sha256 {verify.plan_digest[:12]}), "
            f"not {plan_path}"
        )
    return verify


# A plan made from a limit typed as a rounded number ("14.6rps" for 14.57) rests on that run.
SAME_LIMIT = 0.01


def _slo_text(spec: str) -> str:
    """An SLO spec as written, without spaces and case (`ttft:p95 <= 2s` is `ttft:p95<=2s`);
    reports parse no SLO (planner.slo does), so another spelling of one SLO reads as another."""
    return "".join(spec.split()).lower()


def check_plan_rests_on(plan: Plan, plan_path: Path, limit: LimitResult, limit_file: Path) -> None:
    """InputError when the plan's per-instance limit is not this limit.json's: another run's,
    another number, or another SLO. The report would set the run's limit, binding constraint
    and SLO beside a plan made from something else (a bug hunt's first page said "4.2 req/s
    (tpot:p95 binds first)" for a plan whose SLO has no tpot, from a run that found 14.6)."""
    given, found = plan.inputs.limit, limit.feasible_max
    words = {"rps": "req/s", "users": "users"}
    ours = (
        found is not None
        and given.unit == limit.unit
        and abs(given.value - found) <= SAME_LIMIT * found
        and (given.slo is None or _slo_text(given.slo) == _slo_text(limit.slo))
    )
    if not ours:
        held = f"{found:.4g} {words[limit.unit]}" if found is not None else "no limit"
        raise InputError(
            f"{plan_path} plans with a limit of {given.value:.4g} {words[given.unit]} "
            f"({given.source}"
            + (f", SLO {given.slo}" if given.slo else "")
            + f"), but {limit_file} found {held} under the SLO {limit.slo}: give the run the "
            f"plan was made from, or re-plan from this one (capplan plan --limit {limit_file})"
        )


def load_inputs(
    profile_path: Path,
    run_dir: Path | None,
    plan_path: Path,
    *,
    previous_plan: Path | None = None,
    limit_path: Path | None = None,
    verify_paths: Sequence[Path] = (),
) -> ReportInputs:
    """Load and validate every input of a report; raises InputError on a missing or bad file,
    and when `run_dir` is None but the plan's limit was read from a limit.json."""
    if run_dir is not None and not run_dir.is_dir():
        raise InputError(f"{run_dir}: run directory not found")
    profile = load_profile(profile_path)
    plan = load_plan(plan_path)
    if run_dir is None and not plan.inputs.limit.given:
        raise InputError(
            f"missing --run: {plan_path}'s limit was measured ({plan.inputs.limit.source}); "
            "give the run directory of that load test"
        )
    previous = load_plan(previous_plan) if previous_plan is not None else None
    files = [("profile", profile_path)]
    run, stages, limit, limit_file, timeline = None, [], None, None, None
    if run_dir is not None:
        limit_file = limit_path if limit_path is not None else run_dir / LIMIT_FILE
        run = read_run_info(run_dir)
        stages = read_stages(run_dir, required=True)
        limit = load_limit(limit_file)
        check_plan_rests_on(plan, plan_path, limit, limit_file)
        timeline = run_timeline(run_dir, stages)
        files += [
            ("run", run_dir / RUN_FILE),
            ("stages", run_dir / STAGES_FILE),
            ("records", run_dir / RECORDS_FILE),
            ("server_metrics", run_dir / METRICS_FILE),
            ("limit", limit_file),
        ]
    files.append(("plan", plan_path))
    if previous_plan is not None:
        files.append(("previous", previous_plan))
    verifies = tuple(load_verify(p, plan_path) for p in verify_paths)
    files += [("verify", p) for p in verify_paths]
    digests = [
        InputDigest(role=role, path=str(p), sha256=sha256_of(p)) for role, p in files if p.exists()
    ]
    return ReportInputs(
        profile=profile,
        profile_path=profile_path,
        run=run,
        run_dir=run_dir,
        stages=stages,
        limit=limit,
        limit_path=limit_file,
        plan=plan,
        plan_path=plan_path,
        previous=previous,
        previous_path=previous_plan,
        timeline=timeline,
        digests=digests,
        verifies=verifies,
    )
