"""Stage plans: built-ins from loads or the profile, plan files with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from locustfiles.stages import builtin_plan, load_plan, resolve_plan
from planner.errors import ConfigError, InputError
from tests.helpers.profiles import make_profile

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
    f.write_text("name: x\nstages:\n  - {name: a, duration_s: 2, rate_rps: 5}\n  - {name: b, kind: closed, duration_s: 1, users: 3}\n")
    plan = load_plan(f)
    assert [s.name for s in plan.stages] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("stages:\n  - {name: a, duration_s: 2, rate_rps: 5, kind: opn}\n", "stages[0].kind"),
        ("stages:\n  - {name: a, duration_s: 2, rate_rps: 5, arrival: poison}\n", "poisson"),
        ("stages:\n  - {name: a, duration_s: 2}\n", "needs rate_rps"),
        ("stages:\n  - {name: a, duration_s: 2, rate_rps: 1}\n  - {name: a, duration_s: 2, rate_rps: 1}\n", "twice"),
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
