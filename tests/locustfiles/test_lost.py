"""The master's account of a lost worker: its share of the schedule, as `lost` rows."""

from __future__ import annotations

import numpy as np

from contracts.run import Stage, StagePlan
from locustfiles.arrivals import arrival_times
from locustfiles.driver import Slot
from locustfiles.lost import LOST, LostWorker, lost_rows, slot_schedule, with_open
from locustfiles.recorder import RECORD_NAMES

PLAN = StagePlan(
    stages=[
        Stage(name="a", duration_s=5.0, rate_rps=20.0),
        Stage(name="c", kind="closed", duration_s=2.0, users=4),
        Stage(name="b", duration_s=4.0, rate_rps=10.0, arrival="gamma:2"),
    ]
)


def test_the_slots_together_are_the_whole_schedule_once() -> None:
    a = arrival_times("poisson", 20.0, 5.0, np.random.default_rng([7, 1, 0]))
    b = arrival_times("gamma:2", 10.0, 4.0, np.random.default_rng([7, 1, 2]))
    union = [r for k in range(3) for r in slot_schedule(PLAN, 7, Slot(k, 3), 100.0)]
    assert sorted(r[1] for r in union) == sorted(
        [f"a/{j}" for j in range(len(a))] + [f"b/{j}" for j in range(len(b))]
    )
    times = dict((r[1], r[2]) for r in union)
    assert times["a/0"] == 100.0 + a[0] and times["b/1"] == 107.0 + b[1]  # after the closed 2 s


def test_an_early_stage_end_and_a_stop_cut_the_schedule() -> None:
    ends = {"a": 102.0}
    rows = slot_schedule(PLAN, 7, Slot(0, 1), 100.0, stage_ends_s=ends, stop_s=105.0)
    assert all(t < 102.0 for s, _, t in rows if s == "a")
    assert all(104.0 <= t < 105.0 for s, _, t in rows if s == "b")  # b starts at 102 + 2


def test_lost_rows_are_the_unrecorded_requests_in_record_order() -> None:
    schedule = slot_schedule(PLAN, 7, Slot(1, 2), 0.0)
    recorded = {schedule[0][1], schedule[2][1]}
    lost = LostWorker("w1", Slot(1, 2), lost_at_s=1.5)
    rows = lost_rows(lost, schedule, recorded)
    assert len(rows) == len(schedule) - 2
    row = dict(zip(RECORD_NAMES, rows[0], strict=True))
    assert row["request_id"] == schedule[1][1] and row["error_class"] == "lost"
    assert row["ok"] is False and row["sent_s"] is None
    assert row["end_s"] == max(schedule[1][2], 1.5)
    assert "slot 2 of 2" in row["error_message"]


def test_open_requests_join_the_schedule_once_and_recorded_ones_are_not_lost() -> None:
    schedule = [("o", "o/1", 1.0), ("o", "o/4", 2.0)]
    open_requests = [("c", "c/7", 5.0), ("o", "o/4", 2.0), ("c", "c/1", 4.0), ("c", "c/7", 5.0)]
    merged = with_open(schedule, open_requests)
    assert merged == [("o", "o/1", 1.0), ("o", "o/4", 2.0), ("c", "c/1", 4.0), ("c", "c/7", 5.0)]
    lost = LostWorker("w1", Slot(1, 3), lost_at_s=4.5)
    rows = [dict(zip(RECORD_NAMES, r, strict=True)) for r in lost_rows(lost, merged, {"c/1"})]
    assert [r["request_id"] for r in rows] == ["o/1", "o/4", "c/7"]
    assert all(r["error_class"] == LOST and r["ok"] is False for r in rows)
    assert [r["end_s"] for r in rows] == [4.5, 4.5, 5.0]  # due, or noticed, whichever later
