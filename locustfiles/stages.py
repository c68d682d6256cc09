"""Stage plans: built-in shapes by name (steady, steady-burst-recovery, steps) and plan files.

A plan is a list of stages {name, kind, role, duration_s, rate_rps or users, arrival}. The
built-ins take their loads from the caller or, when none is given, from the profile: the
steady load is the profile's mean rate, the burst twice its 10 s peak.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contracts.errors import ConfigError, InputError
from contracts.run import Stage, StagePlan
from locustfiles.arrivals import validate_arrival
from profiles.model import Profile


def _loads(profile: Profile, rate_rps: float | None) -> tuple[float, float]:
    """(steady rate, burst rate): given or from the profile's mean and 10 s peak."""
    mean = profile.arrivals.mean_rate_rps
    peak_to_mean = max(1.0, profile.arrivals.peak_to_mean.get("10s", 1.0) or 1.0)
    base = rate_rps if rate_rps is not None else mean
    if base <= 0:
        raise ConfigError("the profile has no arrival rate: give --rate or --users")
    return base, 2.0 * base * peak_to_mean


def _steady(
    profile: Profile,
    rate_rps: float | None,
    users: int | None,
    duration_s: float | None,
    arrival: str,
) -> list[Stage]:
    dur = duration_s or 60.0
    if users is not None:
        return [Stage(name="steady", kind="closed", role="steady", duration_s=dur, users=users)]
    base, _ = _loads(profile, rate_rps)
    return [Stage(name="steady", role="steady", duration_s=dur, rate_rps=base, arrival=arrival)]


def _steady_burst_recovery(
    profile: Profile,
    rate_rps: float | None,
    users: int | None,
    duration_s: float | None,
    arrival: str,
) -> list[Stage]:
    steady_s = duration_s or 120.0
    burst_s = max(1.0, steady_s / 4)
    recovery_s = max(1.0, steady_s)  # a cap: a load test with a threshold ends it on recovery
    if users is not None:
        return [
            Stage(name="steady", kind="closed", role="steady", duration_s=steady_s, users=users),
            Stage(name="burst", kind="closed", role="burst", duration_s=burst_s, users=2 * users),
            Stage(
                name="recovery",
                kind="closed",
                role="recovery",
                duration_s=recovery_s,
                users=max(1, users // 2),
            ),
        ]
    base, burst = _loads(profile, rate_rps)
    return [
        Stage(name="steady", role="steady", duration_s=steady_s, rate_rps=base, arrival=arrival),
        Stage(name="burst", role="burst", duration_s=burst_s, rate_rps=burst, arrival=arrival),
        Stage(
            name="recovery",
            role="recovery",
            duration_s=recovery_s,
            rate_rps=base / 2,
            arrival=arrival,
        ),
    ]


def _steps(
    profile: Profile,
    rate_rps: float | None,
    users: int | None,
    duration_s: float | None,
    arrival: str,
) -> list[Stage]:
    levels = 5
    dur = duration_s or 60.0
    if users is not None:
        counts = sorted({max(1, round(users * k / levels)) for k in range(1, levels + 1)})
        return [
            Stage(name=f"step{i + 1}", kind="closed", role="step", duration_s=dur, users=n)
            for i, n in enumerate(counts)
        ]
    # Without a rate: rise from the mean to twice the 10 s peak.
    base, burst = _loads(profile, rate_rps)
    top = base if rate_rps is not None else burst
    return [
        Stage(
            name=f"step{k}", role="step", duration_s=dur, rate_rps=top * k / levels, arrival=arrival
        )
        for k in range(1, levels + 1)
    ]


BuiltinFn = Callable[[Profile, float | None, int | None, float | None, str], list[Stage]]

BUILTIN_PLANS: dict[str, BuiltinFn] = {
    "steady": _steady,
    "steady-burst-recovery": _steady_burst_recovery,
    "steps": _steps,
}


def builtin_plan(
    name: str,
    profile: Profile,
    *,
    rate_rps: float | None = None,
    users: int | None = None,
    duration_s: float | None = None,
    arrival: str = "poisson",
) -> StagePlan:
    """A built-in plan by name.

    steady: one stage of `duration_s` (default 60 s). steady-burst-recovery: steady for
    `duration_s` (default 120 s) at `rate_rps` (default: the profile's mean rate), a burst of
    a quarter of that at twice the peak (the steady rate times the profile's 10 s
    peak-to-mean), then a recovery at half the steady rate for at most as long as the
    steady stage (the load test ends it once the rolling p95 TTFT is back under its
    threshold). steps: five rising levels of
    `duration_s` each (default 60 s) up to `rate_rps` (default: twice the 10 s peak).
    With `users`, the same shapes run closed-loop user counts instead of rates.
    Raises ConfigError for an unknown name (listing the known ones) or a bad arrival.
    """
    if name not in BUILTIN_PLANS:
        raise ConfigError(
            f"unknown plan {name!r}; built-in plans: {', '.join(BUILTIN_PLANS)} (or a plan file)"
        )
    if rate_rps is not None and users is not None:
        raise ConfigError("give either a rate (open loop) or a user count (closed loop), not both")
    validate_arrival(arrival)
    return StagePlan(
        name=name, stages=BUILTIN_PLANS[name](profile, rate_rps, users, duration_s, arrival)
    )


# The most requests one open stage may schedule: the driver draws every send time of a
# stage up front, one float each, in every load-generating process (20 million: 160 MB).
MAX_STAGE_REQUESTS = 20_000_000
# The most users one closed stage may run: each is a greenlet holding a connection (and a
# file descriptor) in a load-generating process; beyond this, split the load over workers'
# own runs or lower it.
MAX_STAGE_USERS = 100_000


def validate_plan(plan: StagePlan, where: str = "plan") -> StagePlan:
    """Check arrivals, unique stage names, and stages of at most MAX_STAGE_REQUESTS requests
    or MAX_STAGE_USERS users; raises ConfigError naming the stage."""
    seen: set[str] = set()
    for i, stage in enumerate(plan.stages):
        if stage.name in seen:
            raise ConfigError(
                f"{where}: stages[{i}].name: {stage.name!r} is used twice (names must be unique)"
            )
        seen.add(stage.name)
        scheduled = stage.requests or round((stage.rate_rps or 0.0) * stage.duration_s)
        if stage.kind == "open" and stage.arrival != "replay" and scheduled > MAX_STAGE_REQUESTS:
            load = (
                f"requests: {stage.requests}"
                if stage.requests
                else f"{stage.rate_rps:g} req/s for {stage.duration_s:g} s"
            )
            raise ConfigError(
                f"{where}: stages[{i}] ({stage.name!r}) schedules {scheduled:,} requests "
                f"({load}); at most {MAX_STAGE_REQUESTS:,} a stage: shorten it or lower the rate"
            )
        if stage.kind == "closed" and (stage.users or 0) > MAX_STAGE_USERS:
            raise ConfigError(
                f"{where}: stages[{i}] ({stage.name!r}) runs {stage.users:,} users; at most "
                f"{MAX_STAGE_USERS:,} a stage"
            )
        try:
            validate_arrival(stage.arrival)
        except ConfigError as err:
            raise ConfigError(f"{where}: stages[{i}].arrival: {err}") from err
    return plan


def plan_from_data(data: Any, where: str) -> StagePlan:
    if isinstance(data, list):
        data = {"stages": data}
    try:
        plan = StagePlan.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in first["loc"]).replace(
            ".[", "["
        )
        raise ConfigError(f"{where}: field {loc or '(top)'}: {first['msg']}") from err
    return validate_plan(plan, where)


def load_plan(path: str | Path) -> StagePlan:
    """Read a stage plan from YAML or JSON (`{name, stages: [...]}` or a bare list of stages).

    Raises InputError for a missing or unreadable file, ConfigError naming the field and the
    valid choices for a bad plan.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise InputError(f"{p}: cannot read the stage plan ({err.strerror or err})") from err
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as err:
        raise InputError(
            f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'} ({err})"
        ) from err
    return plan_from_data(data, str(p))


def resolve_plan(
    spec: str | None,
    profile: Profile,
    *,
    rate_rps: float | None = None,
    users: int | None = None,
    duration_s: float | None = None,
    arrival: str = "poisson",
) -> StagePlan:
    """A plan from a built-in name, a file, or (no spec, a load and a duration) one steady stage."""
    if spec is None:
        name = (
            "steady"
            if (rate_rps is not None or users is not None) and duration_s
            else "steady-burst-recovery"
        )
        return builtin_plan(
            name, profile, rate_rps=rate_rps, users=users, duration_s=duration_s, arrival=arrival
        )
    if spec in BUILTIN_PLANS:
        return builtin_plan(
            spec, profile, rate_rps=rate_rps, users=users, duration_s=duration_s, arrival=arrival
        )
    if Path(spec).suffix.lower() in (".yaml", ".yml", ".json") or Path(spec).exists():
        return load_plan(spec)
    raise ConfigError(
        f"unknown plan {spec!r}; built-in plans: {', '.join(BUILTIN_PLANS)}, or a .yaml/.json file"
    )


# --- Locust's common options (-u, -r, -t and the web UI's start form) --------------------------

UNTIL_STOPPED_S = 24 * 3600.0  # a closed stage without -t runs until Stop / Ctrl-C (a day at most)
OPEN_DEFAULT_S = 60.0  # an open stage's schedule is computed up front, so it needs a length


@dataclass(frozen=True)
class CommonOptions:
    """Locust's -u, -r and -t as the user gave them (None: not given)."""

    users: int | None = None
    spawn_rate_users_per_s: float | None = None
    run_time_s: float | None = None


@dataclass(frozen=True)
class LocustPlan:
    """The plan a plain Locust run follows, and what the common options did to it.

    `planned_s` maps each stage that -t cut short to its planned length; `dropped` names the
    stages -t left out; `notes` are lines for the log (warnings start with "warning:").
    `until_stopped`: the run has no set end (a closed stage without -t or a duration).
    """

    plan: StagePlan
    run_time_cap_s: float | None = None
    planned_s: dict[str, float] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    until_stopped: bool = False


def cap_plan(plan: StagePlan, load_s: float) -> tuple[StagePlan, dict[str, float], tuple[str, ...]]:
    """`plan` cut to `load_s` seconds: (the plan, {cut stage: planned length}, dropped stages).

    Raises ConfigError when not even a part of the first stage fits.
    """
    if load_s <= 0:
        raise ConfigError(f"-t / --run-time leaves no time for the plan {plan.name!r}")
    kept: list[Stage] = []
    planned: dict[str, float] = {}
    t = 0.0
    for stage in plan.stages:
        if t >= load_s - 1e-9:
            break
        if t + stage.duration_s > load_s + 1e-9:
            planned[stage.name] = stage.duration_s
            stage = stage.model_copy(update={"duration_s": load_s - t})
        kept.append(stage)
        t += stage.duration_s
    dropped = tuple(s.name for s in plan.stages[len(kept) :])
    return StagePlan(name=plan.name, stages=kept), planned, dropped


def locust_plan(
    spec: str | None,
    profile: Profile,
    common: CommonOptions,
    *,
    rate_rps: float | None = None,
    users: int | None = None,
    duration_s: float | None = None,
    arrival: str = "poisson",
    start_delay_s: float = 0.0,
) -> LocustPlan:
    """The plan of a `locust -f locustfiles/llm.py` run from its --llm-* and common options.

    Without a plan (`spec` None): `--llm-rate` gives one open-loop stage; else -u (or
    --llm-users) gives one closed-loop stage of that many users started at -r per second;
    with neither, the default steady-burst-recovery plan from the profile. The stage lasts
    -t minus `start_delay_s` (the gap between Locust's start and the plan's), else
    --llm-duration, else until stopped (closed) or 60 s (open). With a plan, -t cuts it so
    it ends by then, and -u / -r get a warning that names the plan.
    Raises ConfigError for a bad plan or a run time too short for any load.
    """
    notes: list[str] = []
    load_s = None if common.run_time_s is None else common.run_time_s - start_delay_s
    until_stopped = False
    if spec is None and (rate_rps is not None or common.users is not None or users is not None):
        if rate_rps is not None:
            if common.users is not None:
                notes.append(
                    f"open-loop stage at {rate_rps:g} req/s (--llm-rate): "
                    f"the user count {common.users} does not set the load"
                )
            dur = load_s or duration_s or OPEN_DEFAULT_S
            stage = Stage(name="steady", duration_s=dur, rate_rps=rate_rps, arrival=arrival)
        else:
            n = common.users if common.users is not None else users
            assert n is not None
            if n <= 0:
                raise ConfigError(f"-u / --users: {n} users; give at least 1")
            until_stopped = load_s is None and duration_s is None
            stage = Stage(
                name="steady",
                kind="closed",
                duration_s=load_s or duration_s or UNTIL_STOPPED_S,
                users=n,
                spawn_rate_users_per_s=common.spawn_rate_users_per_s,
            )
        validate_arrival(arrival)
        return LocustPlan(
            plan=StagePlan(name="steady", stages=[stage]),
            run_time_cap_s=common.run_time_s,
            notes=tuple(notes),
            until_stopped=until_stopped,
        )
    plan = resolve_plan(
        spec, profile, rate_rps=rate_rps, users=users, duration_s=duration_s, arrival=arrival
    )
    if spec is not None and (common.users is not None or common.spawn_rate_users_per_s):
        notes.append(
            f"warning: -u / -r do not apply: the plan {spec!r} sets the load of every stage"
        )
    if load_s is None:
        return LocustPlan(plan=plan, notes=tuple(notes))
    capped, planned, dropped = cap_plan(plan, load_s)
    if planned or dropped:
        cut = ", ".join(
            f"{n} ({planned[n]:g} s -> {s.duration_s:g} s)"
            for n, s in ((s.name, s) for s in capped.stages)
            if n in planned
        )
        notes.append(
            f"-t {common.run_time_s:g}s caps the plan {plan.name!r} at {load_s:g} s of load"
            + (f"; cut: {cut}" if cut else "")
            + (f"; not run: {', '.join(dropped)}" if dropped else "")
        )
    return LocustPlan(
        plan=capped,
        run_time_cap_s=common.run_time_s,
        planned_s=planned,
        dropped=dropped,
        notes=tuple(notes),
    )
