"""Each `capplan verify` option declared once (issue 58 item 2): VerifyOptions holds its bound
and default; the CLI parameter only spells it. These tests fail when the two drift apart: a
field no option reaches, a default written twice and changed once, a bound the CLI does not
enforce through the model (or enforces with a check of its own that disagrees)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import annotated_types
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from capplan.cli import app
from capplan.commands.verify import FLAGS
from planner.verify.options import VerifyOptions

# Fields no option sets: the verify run's fixed steady-state rules and the request timeout.
NOT_OPTIONS = {"rules", "request_timeout_s"}


def verify_params() -> dict[str, Any]:
    """The command's parameters by the field each sets."""
    commands = get_command(app).commands  # type: ignore[attr-defined]  # a group
    field_of = {flag: field for field, flag in FLAGS.items()}
    params = {}
    for param in commands["verify"].params:
        flag = max(param.opts, key=len)
        params[field_of.get(flag, param.name or "")] = param
    return params


def test_every_field_has_its_option_and_every_option_its_field() -> None:
    params = verify_params()
    fields = set(VerifyOptions.model_fields)
    assert sorted(fields - NOT_OPTIONS - set(params)) == []
    assert sorted(set(params) - fields) == []


def test_each_default_is_the_models() -> None:
    for field, param in verify_params().items():
        info = VerifyOptions.model_fields[field]
        if info.is_required() or param.required:
            continue
        default = info.get_default(call_default_factory=True)
        cli = param.default
        if FLAGS.get(field, "").startswith("--no-"):
            cli = not cli  # --no-preflight False: preflight True
        if isinstance(default, list) and cli is None:
            cli = []  # a comma-separated option left out: no URLs
        if isinstance(default, Path | type(None)) or field == "slo":
            continue  # None on both sides, or parsed apart (the plan's SLO by default)
        assert cli == default, f"{max(param.opts, key=len)}: CLI {cli!r}, model {default!r}"


def _bounds() -> list[tuple[str, str, Any]]:
    """(field, --flag, a value just outside the field's bound) for every bounded field."""
    cases = []
    for field, param in verify_params().items():
        for bound in VerifyOptions.model_fields[field].metadata:
            flag = max(param.opts, key=len)
            if isinstance(bound, annotated_types.Gt):
                cases.append((field, flag, bound.gt))
            elif isinstance(bound, annotated_types.Ge):
                below = bound.ge - 1
                cases.append((field, flag, below))
    return cases


def test_the_bounded_fields_are_the_ones_expected() -> None:
    """The bound scan sees the model's bounds (a scan that saw none would pass the next test)."""
    assert {field for field, _, _ in _bounds()} >= {
        "steady_s", "burst_s", "recovery_s", "burst_factor", "time_scale", "replay_speed",
        "instances_down", "workers", "expect_workers", "wait_s",
    }  # fmt: skip


@pytest.mark.parametrize(("field", "flag", "value"), _bounds(), ids=lambda x: str(x))
def test_a_value_outside_the_models_bound_is_refused_naming_the_option(
    tmp_path: Path, field: str, flag: str, value: Any
) -> None:
    result = CliRunner().invoke(
        app,
        ["verify", "--plan", str(tmp_path / "plan.json"), "--profile", str(tmp_path / "p.json"),
         "-o", str(tmp_path / "run"), "--host", "http://127.0.0.1:9", flag, str(value)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert f"{flag} {value:g}: expected" in message, message
    assert "Traceback" not in result.output


def test_a_non_finite_number_is_refused_as_before(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["verify", "--plan", str(tmp_path / "plan.json"), "--profile", str(tmp_path / "p.json"),
         "-o", str(tmp_path / "run"), "--host", "http://127.0.0.1:9", "--steady-s", "inf"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--steady-s inf: expected a finite number" in " ".join(result.output.split())
