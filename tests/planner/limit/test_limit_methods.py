"""`capplan limit`'s methods by name (planner.limit.methods): every name the options allow
has a runner, an unknown one is refused naming the known ones, and `run_limit` hands the
checked run to the runner its options name."""

from __future__ import annotations

from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from contracts.errors import ConfigError
from contracts.limit import LimitResult
from planner.limit import methods
from planner.limit.methods import METHODS, MethodRun, runner
from planner.limit.options import LimitOptions
from planner.limit.run import run_limit
from planner.slo.spec import parse_slo
from profiles.model import save_profile
from profiles.presets import preset_profile


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
