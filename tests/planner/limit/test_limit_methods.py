"""`capplan limit`'s methods by name (planner.limit.methods): every name the options allow
has a runner, an unknown one is refused naming the known ones, and `run_limit` hands the
checked run to the runner its options name."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import get_args, get_type_hints

import numpy as np
import pytest

from contracts.errors import ConfigError
from contracts.limit import LimitResult, load_limit
from planner.limit import methods
from planner.limit.held import FastAnswer
from planner.limit.ledger import SearchLedger
from planner.limit.measured.config import SearchConfig
from planner.limit.methods import METHODS, MethodRun, runner
from planner.limit.options import LimitOptions
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.limit.run import run_limit
from planner.slo.spec import parse_slo
from profiles.model import save_profile
from profiles.presets import preset_profile
from tests.planner.limit.test_limit_default import _fast
from tests.planner.limit.test_limit_resume import IDENTITY, OPTIONS, SLO, SeededProbe


def test_every_method_the_options_allow_has_a_runner_and_no_other() -> None:
    allowed = get_args(get_type_hints(LimitOptions)["method"])
    assert set(METHODS) == set(allowed) == {"measured", "fast"}
    assert runner("measured") is methods.run_measured and runner("fast") is methods.run_fast


def test_an_unknown_method_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"--method 'quick': expected one of measured, fast"):
        runner("quick")


@pytest.mark.parametrize("name", ["measured", "fast"])
def test_run_limit_runs_the_method_its_options_name(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each runner is replaced by one that records the run it was handed; the host answers
    nothing and is never asked (no runner of the registry runs)."""
    handed: dict[str, MethodRun] = {}

    def recording(key: str) -> methods.Runner:
        def run(checked: MethodRun) -> LimitResult:
            handed[key] = checked
            raise KeyboardInterrupt  # stops run_limit before the ledger is finished

        return run

    monkeypatch.setattr(methods, "METHODS", {k: recording(k) for k in METHODS})
    profile = tmp_path / "chat.json"
    save_profile(preset_profile("chat"), profile)
    options = LimitOptions(host="http://127.0.0.1:9", model="m", slo=parse_slo("ttft:p95<=1s"),
                           out_dir=tmp_path / "run", profile=str(profile), method=name)  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        run_limit(options, echo=lambda _: None)
    assert list(handed) == [name]
    assert handed[name].options.method == name
    assert handed[name].search_config.slo == options.slo


@pytest.mark.parametrize("stop_at", [None, 3])
def test_after_a_fast_search_hands_over_elapsed_and_wall_s_count_from_its_start(
    stop_at: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast search takes 165 s on the clock and finds its model inadequate; the measured
    levels (a known curve, 60 s each) go on: their lines' elapsed time and limit.json's
    wall_s count from the fast search's start, not from the handover, also when the levels
    are stopped (Ctrl-C in the third: limit.json holds what was measured)."""
    now = [100.0]
    probe = SeededProbe(np.random.default_rng(0), stop_at=stop_at)
    measure = probe.measure

    def timed(load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        now[0] += 60.0
        return measure(load, abandon=abandon)

    probe.measure = timed  # type: ignore[method-assign]
    ledger = SearchLedger.fresh(tmp_path, IDENTITY, OPTIONS, clock=lambda: now[0])

    def fast_search(run: MethodRun) -> FastAnswer:
        started = run.ledger.clock()
        now[0] += 165.0
        return FastAnswer(_fast(20.0, False), None, started, run.ledger.clock)

    monkeypatch.setattr(methods, "_fast_search", fast_search)
    monkeypatch.setattr(methods, "LocustProbe", lambda *a, **k: probe)
    options = LimitOptions(host="http://127.0.0.1:9", model="m", slo=parse_slo(SLO),
                           out_dir=tmp_path, profile="preset:chat", method="fast")  # fmt: skip
    lines: list[str] = []
    run = MethodRun(
        options=options, config=options.load_test_config(), profile=preset_profile("chat"),
        search_config=SearchConfig(slo=parse_slo(SLO), start=4.0, resamples=100),
        rules=options.rules(), ledger=ledger, verify=None, echo=lines.append, resume=False,
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt) if stop_at else contextlib.nullcontext():
        methods.run_fast(run)
    levels = [line for line in lines if line.startswith("run ")]
    assert "elapsed 3m45s" in levels[0]  # 165 s of the fast search + its first 60 s level
    assert load_limit(tmp_path).wall_s == pytest.approx(165.0 + 60.0 * (stop_at or len(levels)))
