"""Stage plans: built-ins from loads or the profile, plan files with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import ConfigError, InputError
from locustfiles.stages import (
    OPEN_DEFAULT_S,
    CommonOptions,
    builtin_plan,
    load_plan,
    locust_plan,
    resolve_plan,
)
from testkit.profiles import make_profile

PROFILE = make_profile([(100, 10)], rate_rps=4.0, peak_to_mean_10s=2.5)


def test_steady_burst_recovery_from_the_profile() -> None:
    plan = builtin_plan("steady-burst-recovery", PROFILE, duration_s=40)
    roles = [s.role for s in plan.stages]
    assert roles == ["steady", "burst", "recovery"]
    steady, burst, rec = plan.stages
    assert steady.rate_rps == 4.0 and steady.duration_s == 40
    assert burst.rate_rps == pytest.approx(2 * 4.0 * 2.5)  # twice the 10 s peak
    assert burst.duration_s == 10 and rec.rate_rps == 2.0


def test_closed_loop_and_steps() -> None:
    plan = builtin_plan("steady-burst-recovery", PROFILE, users=8, duration_s=4)
    assert [s.users for s in plan.stages] == [8, 16, 4]
    assert all(s.kind == "closed" for s in plan.stages)
    steps = builtin_plan("steps", PROFILE, rate_rps=10, duration_s=2)
    assert [s.rate_rps for s in steps.stages] == [2, 4, 6, 8, 10]


def test_rate_and_duration_without_plan_is_one_steady_stage() -> None:
    plan = resolve_plan(None, PROFILE, rate_rps=3, duration_s=5, arrival="gamma:2")
    assert len(plan.stages) == 1 and plan.stages[0].arrival == "gamma:2"


def test_plan_file_yaml(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(
        "name: x\nstages:\n  - {name: a, duration_s: 2, rate_rps: 5}\n"
        "  - {name: b, kind: closed, duration_s: 1, users: 3}\n"
    )
    plan = load_plan(f)
    assert [s.name for s in plan.stages] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("stages:\n  - {name: a, duration_s: 2, rate_rps: 5, kind: opn}\n", "stages[0].kind"),
        ("stages:\n  - {name: a, duration_s: 2, rate_rps: 5, arrival: poison}\n", "poisson"),
        ("stages:\n  - {name: a, duration_s: 2}\n", "needs rate_rps"),
        (
            "stages:\n  - {name: a, duration_s: 2, rate_rps: 1}\n"
            "  - {name: a, duration_s: 2, rate_rps: 1}\n",
            "twice",
        ),
        ("stages:\n  - {name: a, duration: 2, rate_rps: 1}\n", "duration"),
    ],
)
def test_bad_plan_names_field_and_choices(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_plan(f)
    assert needle in str(err.value) and str(f) in str(err.value)


def test_unknown_builtin_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="steady-burst-recovery"):
        resolve_plan("burst-only", PROFILE)
    with pytest.raises(InputError):
        load_plan(tmp_path / "nope.yaml")


# --- Locust's common options -----------------------------------------------------------------


def test_users_spawn_rate_and_run_time_give_one_closed_stage() -> None:
    common = CommonOptions(users=4, spawn_rate_users_per_s=2.0, run_time_s=10.0)
    got = locust_plan(None, make_profile([(10, 5)]), common, start_delay_s=0.5)
    (stage,) = got.plan.stages
    assert (stage.kind, stage.users, stage.spawn_rate_users_per_s) == ("closed", 4, 2.0)
    assert stage.duration_s == 9.5 and got.run_time_cap_s == 10.0 and not got.until_stopped


def test_without_run_time_a_closed_stage_runs_until_stopped_and_rate_gives_open_loop() -> None:
    profile = make_profile([(10, 5)])
    closed = locust_plan(None, profile, CommonOptions(users=2))
    assert closed.until_stopped and closed.plan.stages[0].duration_s >= 3600
    opened = locust_plan(None, profile, CommonOptions(users=2), rate_rps=3.0)
    (stage,) = opened.plan.stages
    assert (stage.kind, stage.rate_rps, stage.duration_s) == ("open", 3.0, OPEN_DEFAULT_S)
    assert "does not set the load" in opened.notes[0]


def test_run_time_caps_a_plan_and_users_are_warned_about() -> None:
    common = CommonOptions(users=8, run_time_s=25.0)
    got = locust_plan("steps", make_profile([(10, 5)]), common, rate_rps=5.0, duration_s=10.0)
    assert [(s.name, s.duration_s) for s in got.plan.stages] == [
        ("step1", 10.0),
        ("step2", 10.0),
        ("step3", 5.0),
    ]
    assert got.planned_s == {"step3": 10.0} and got.dropped == ("step4", "step5")
    assert any(n.startswith("warning:") and "'steps'" in n for n in got.notes)
    assert any("caps the plan 'steps' at 25 s" in n and "not run: step4" in n for n in got.notes)


def test_run_time_shorter_than_the_start_delay_is_an_error() -> None:
    with pytest.raises(ConfigError, match="no time"):
        locust_plan("steady", make_profile([(10, 5)]), CommonOptions(run_time_s=0.5),
                    rate_rps=1.0, start_delay_s=0.5)  # fmt: skip
