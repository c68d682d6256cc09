"""One error shape for every JSON file capplan reads."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from contracts.errors import InputError
from contracts.jsonio import read_json, validate, write_model
from contracts.limit import (
    ConstraintVerdict,
    LimitLevel,
    LimitResult,
    load_limit,
    write_limit,
)
from profiles.model import load_profile


def test_missing_broken_and_mistagged_files_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.json: plan not found"):
        read_json(tmp_path / "nope.json", "plan")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(InputError, match=r"broken\.json: not a profile JSON file"):
        load_profile(broken)
    with pytest.raises(InputError, match=r'expected "schema": "capplan.limit/1"'):
        validate(LimitResult, {"schema": "other"}, broken, "capplan.limit/1")


def test_first_bad_field_is_named(tmp_path: Path) -> None:
    data = {"schema": "capplan.limit/1", "dimension": "sideways"}
    with pytest.raises(InputError, match=r"x\.json: field dimension"):
        validate(LimitResult, data, tmp_path / "x.json", "capplan.limit/1")


def test_write_model_round_trips_and_names_an_unwritable_path(tmp_path: Path) -> None:
    limit = LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=4.0,
        infeasible_min=5.0,
        binding="ttft_p95_s",
        slo="ttft:p95<=1s",
        tolerance=0.05,
        levels=[],
    )
    out = tmp_path / "new" / "limit.json"
    write_model(out, limit)
    assert validate(LimitResult, read_json(out, "limit"), out) == limit
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match=r"file/x\.json: cannot write the limit \("):
        write_model(blocker / "x.json", limit, "the limit")


def test_limit_json_keeps_an_interval_open_on_one_side(tmp_path: Path) -> None:
    """A level whose bootstrap interval has no upper bound (too few requests finished) writes
    it as Infinity and reads it back: pydantic's own JSON writes null and then refuses it (a
    CI run of the llama.cpp compare test failed so)."""
    level = LimitLevel(
        load=4.0,
        stage="level-02",
        requests=40,
        completed=12,
        metrics={"ttft_p95_s": 2.5},
        constraints=[
            ConstraintVerdict(
                name="ttft:p95",
                value=2.5,
                threshold=1.0,
                margin=-1.5,
                passed=False,
                interval=(0.9, math.inf),
            )
        ],
        verdict="fail",
        certain=False,
        interval={"ttft:p95": (0.9, math.inf)},
    )
    limit = LimitResult(
        dimension="rate", unit="rps", feasible_max=2.0, infeasible_min=4.0, binding="ttft:p95",
        slo="ttft:p95<=1s", tolerance=0.05, levels=[level],
    )  # fmt: skip
    out = tmp_path / "limit.json"
    write_limit(limit, out)
    assert load_limit(out) == limit
    assert "Infinity" in out.read_text()
