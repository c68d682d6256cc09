"""One error shape for every JSON file capplan reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import InputError
from contracts.jsonio import read_json, validate, write_model
from contracts.limit import LimitResult
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
