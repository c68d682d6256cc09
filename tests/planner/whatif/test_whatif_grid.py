"""whatif's candidate grid on local worker processes: the same candidates, in the same order,
as in this process alone (the Dask cluster: tests/integration/test_fleet_dask.py)."""

from __future__ import annotations

import pytest

from tests.helpers.whatif_grid import GPUS, grid_candidates


def test_two_worker_processes_give_the_candidates_of_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "1")
    alone = grid_candidates()
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "2")
    assert grid_candidates() == alone
    assert [(c["gpu"], c["settings"]) for c in alone] == [
        (gpu, {"max_num_seqs": seqs}) for gpu in GPUS for seqs in ("256", "64")
    ]
    assert all(c["limit_rps"] for c in alone)
