"""An interrupted limit search's limit.json says its answer is unconfirmed, and why;
`capplan plan` refuses such a limit (exit 2, naming why) unless --accept-unconfirmed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.limit import LimitResult, load_limit, write_limit
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.edge import search_limit
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import parse_slo
from testkit.profiles import make_profile
from testkit.report_inputs import build_limit
from tests.planner.limit.test_search import CurveProbe

SLO = "ttft:p95<=1s"


@dataclass
class StoppedProbe(CurveProbe):
    """A CurveProbe stopped (Ctrl-C, SIGTERM) at its `stop_at`-th level."""

    stop_at: int = 2
    calls: int = 0

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return super().measure(load, abandon=abandon)


def _stopped_search(out: Path, config: SearchConfig, stop_at: int = 2) -> LimitResult:
    probe = StoppedProbe(np.random.default_rng(3), stop_at=stop_at)
    with pytest.raises(KeyboardInterrupt):
        search_limit(probe, config, out, echo=lambda _: None)
    return load_limit(out)


def _plan(tmp_path: Path, limit: Path, *extra: str) -> tuple[int, str]:
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(128, 64), (512, 128)]).to_json())
    args = ["plan", "--profile", str(profile), "--limit", str(limit), "--no-fleet-check"]
    result = CliRunner().invoke(
        app, [*args, "-o", str(tmp_path / "plan.json"), *extra], env={"COLUMNS": "400"}
    )
    return result.exit_code, " ".join(result.output.split())


def test_a_search_stopped_around_a_fast_answer_is_unconfirmed_and_plan_refuses_it(
    tmp_path: Path,
) -> None:
    """Would fail if the interrupted file kept no reason, or plan took it silently."""
    # the measured levels around a fast answer of 20 req/s: 18 must hold, 22 must fail
    config = SearchConfig(
        slo=parse_slo(SLO), start=18.0, growth=22.0 / 18.0, answered=20.0, resamples=100
    )
    limit = _stopped_search(tmp_path / "run", config, stop_at=2)
    assert limit.feasible_max == 18.0 and not limit.answer_held  # 18 held, 22 never ran
    assert limit.unconfirmed == (
        "interrupted before the measured levels around the answer 20 req/s held it"
    )
    code, output = _plan(tmp_path, tmp_path / "run" / "limit.json")
    assert code == 2, output
    assert "the limit 18 req/s is unconfirmed (interrupted before the measured levels" in output
    assert "--accept-unconfirmed" in output and "Traceback" not in output

    code, output = _plan(tmp_path, tmp_path / "run" / "limit.json", "--accept-unconfirmed")
    assert code == 0, output
    assert "planning with an unconfirmed limit: interrupted before" in output


def test_an_interrupted_measured_search_is_unconfirmed(tmp_path: Path) -> None:
    config = SearchConfig(slo=parse_slo(SLO), start=4.0, resamples=100)
    limit = _stopped_search(tmp_path / "run", config, stop_at=3)
    assert limit.stopped == "interrupted" and limit.feasible_max == 8.0
    assert limit.unconfirmed is not None and "bracket was final" in limit.unconfirmed
    code, _ = _plan(tmp_path, tmp_path / "run" / "limit.json")
    assert code == 2


def test_a_search_stopped_before_any_level_held_has_no_limit_to_plan(tmp_path: Path) -> None:
    """Stopped after a failing first level: limit.json has no feasible load; plan crashed formatting
    it (a TypeError traceback, exit 1). It exits 2 saying there is no limit yet, with or
    without --accept-unconfirmed."""
    config = SearchConfig(slo=parse_slo(SLO), start=60.0, resamples=100)  # its first fails
    limit = _stopped_search(tmp_path / "run", config, stop_at=2)
    assert limit.feasible_max is None and limit.unconfirmed is not None
    for extra in ((), ("--accept-unconfirmed",)):
        code, output = _plan(tmp_path, tmp_path / "run" / "limit.json", *extra)
        assert code == 2 and "Traceback" not in output, output
        assert "stopped before any load met the SLO" in output and "no limit to plan" in output


def test_a_finished_search_is_confirmed(tmp_path: Path) -> None:
    probe = CurveProbe(np.random.default_rng(3))
    config = SearchConfig(slo=parse_slo(SLO), start=4.0, resamples=100)
    limit = search_limit(probe, config, tmp_path / "run", echo=lambda _: None)
    assert limit.unconfirmed is None and limit.stopped != "interrupted"
    code, output = _plan(tmp_path, tmp_path / "run" / "limit.json")
    assert code == 0, output
    assert "unconfirmed" not in output


@pytest.mark.parametrize("held", [False, True])
def test_a_fast_answer_is_confirmed_only_where_its_levels_held_it(
    tmp_path: Path, held: bool
) -> None:
    """A fast limit.json from before `unconfirmed` existed: answer_held decides."""
    limit = build_limit().model_copy(update={"method": "fast", "answer_held": held})
    path = tmp_path / "limit.json"
    write_limit(limit, path)
    code, output = _plan(tmp_path, path)
    assert code == (0 if held else 2), output
    if not held:
        assert "a fast answer the measured levels around it did not hold" in output


def test_compare_and_whatif_say_a_stopped_search_has_no_limit_yet(tmp_path: Path) -> None:
    """The same stopped search: compare said "no run met the SLO at any load" (no level was
    ever judged) and whatif --measured-limit exited 1; they say it stopped, and whatif exits 2."""
    config = SearchConfig(slo=parse_slo(SLO), start=60.0, resamples=100)
    _stopped_search(tmp_path / "run", config, stop_at=2)
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(128, 64), (512, 128)]).to_json())
    compared = CliRunner().invoke(
        app, ["compare", str(tmp_path / "run"), "--profile", str(profile),
              "-o", str(tmp_path / "c.json")], env={"COLUMNS": "400"},
    )  # fmt: skip
    assert compared.exit_code == 0, compared.output
    said = " ".join(compared.output.split())
    assert "no run has a limit yet: the search of run stopped before any load met" in said
    whatif = CliRunner().invoke(
        app, ["whatif", "--profile", str(profile), "--slo", SLO, "--measured-limit",
              str(tmp_path / "run" / "limit.json"), "--level-duration", "20",
              "-o", str(tmp_path / "w.json")],
    )  # fmt: skip
    assert whatif.exit_code == 2 and "stopped before it judged one" in whatif.output
