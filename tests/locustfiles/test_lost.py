"""locustfiles.lost: a lost worker's closed-loop requests in flight join its schedule once."""

from __future__ import annotations

from locustfiles.driver import Slot
from locustfiles.lost import LOST, LostWorker, lost_rows, with_open
from locustfiles.recorder import RECORD_NAMES


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
