"""whatif's candidate grid on local worker processes: the same candidates, in the same order,
as in this process alone (the Dask cluster: tests/integration/test_fleet_dask.py)."""

from __future__ import annotations

import pytest

from contracts.whatif import WhatifCandidate
from planner.fleet.executor import LOCAL, ExecutorSpec
from planner.slo.spec import parse_slo
from planner.whatif.options import WhatifOptions
from planner.whatif.run import parse_vary, run_whatif
from profiles.presets import preset_profile

# Two shapes x two knob values (CAPPLAN_FLEET_WORKERS sets the workers whatever the size).
GRID = {"gpus": ("H100-80GB", "A100-80GB"), "vary": "max_num_seqs=256:64"}


def grid_candidates(executor: ExecutorSpec = LOCAL) -> list[dict[str, object]]:
    """The grid's candidates as dicts, less their wall time (the machine's, not a result)."""
    options = WhatifOptions(
        "chat", parse_slo("ttft:p95<=2s"), gpus=GRID["gpus"], vary=parse_vary(GRID["vary"]),
        level_s=10.0, executor=executor,
    )  # fmt: skip
    whatif = run_whatif(preset_profile("chat", rate_rps=20.0), options)
    return [_result(c) for c in whatif.candidates]


def _result(c: WhatifCandidate) -> dict[str, object]:
    return c.model_dump(exclude={"wall_s"})


def test_two_worker_processes_give_the_candidates_of_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "1")
    alone = grid_candidates()
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "2")
    assert grid_candidates() == alone
    assert [(c["gpu"], c["settings"]) for c in alone] == [
        (gpu, {"max_num_seqs": seqs}) for gpu in GRID["gpus"] for seqs in ("256", "64")
    ]
    assert all(c["limit_rps"] for c in alone)
