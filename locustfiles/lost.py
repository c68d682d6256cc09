"""A worker lost mid-run: which of its scheduled requests have no record, as `lost` rows.

The master knows the plan, the seed and each worker's slot, so it can recompute every
open-loop or replay arrival a worker was given (the driver's schedule: the same seeded
`arrival_times` per stage, arrivals with number % count == index). Each one the worker
never reported becomes a row with `error_class="lost"`, so every scheduled request still
has exactly one row. Closed-loop stages have no fixed schedule: each worker's report to
the master (about every second) lists the requests it has in flight, and those of a lost
worker's last report without a record become `lost` rows too. A closed-loop request the
worker started after its last report cannot be named (at most one per user of it, within
the last report interval).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from contracts.run import StagePlan
from locustfiles.arrivals import replay_times, stage_times
from locustfiles.driver import ReplayLog, Row, Slot
from locustfiles.recorder import RECORD_NAMES

LOST = "lost"


@dataclass(frozen=True)
class LostWorker:
    """A worker the master stopped hearing from (Locust's heartbeat) before its plan ended."""

    worker: str
    slot: Slot
    lost_at_s: float  # run clock when the master noticed


def slot_schedule(
    plan: StagePlan,
    seed: int,
    slot: Slot,
    plan_start_s: float,
    *,
    replay: ReplayLog | None = None,
    stage_ends_s: dict[str, float] | None = None,
    stop_s: float | None = None,
) -> list[tuple[str, str, float]]:
    """(stage, request_id, intended_send_s) of every arrival the plan gave `slot`, in order.

    Mirrors locustfiles.driver.PlanDriver: a stage ended early ends at its `stage_ends_s`
    time and the next starts there; nothing is scheduled at or after `stop_s`.
    """
    ends = stage_ends_s or {}
    out: list[tuple[str, str, float]] = []
    stage_start = plan_start_s
    for i, stage in enumerate(plan.stages):
        end = min(ends.get(stage.name, np.inf), stage_start + stage.duration_s)
        if stop_s is not None:
            end = min(end, stop_s)
        times: np.ndarray | None = None
        if stage.kind == "open" and stage.arrival == "replay" and replay is not None:
            skip = int(np.searchsorted(replay.arrival_s, replay.origin_s, side="left"))
            times = replay_times(
                replay.arrival_s[skip:], replay.speed, stage.duration_s, replay.origin_s
            )
        elif stage.kind == "open" and stage.arrival != "replay":
            rng = np.random.default_rng([seed, 1, i])
            times = stage_times(stage, rng)
        if times is not None:
            for j in range(slot.index, len(times), slot.count):
                intended = stage_start + float(times[j])
                if intended >= end:
                    break
                out.append((stage.name, f"{stage.name}/{j}", intended))
        stage_start = ends.get(stage.name, stage_start + stage.duration_s)
        if stop_s is not None and stage_start >= stop_s:
            break
    return out


def with_open(
    schedule: list[tuple[str, str, float]], open_requests: list[tuple[str, str, float]]
) -> list[tuple[str, str, float]]:
    """The schedule plus the requests a worker last reported in flight that it does not hold
    (closed-loop requests), each request once."""
    known = {request_id for _, request_id, _ in schedule}
    extra = [r for r in open_requests if r[1] not in known]
    return schedule + sorted({r[1]: r for r in extra}.values(), key=lambda r: r[2])


def lost_rows(
    lost: LostWorker,
    schedule: list[tuple[str, str, float]],
    recorded_ids: Collection[str],
) -> list[Row]:
    """One `lost` row (RECORD_COLUMNS order) per scheduled request of the lost worker that
    has no record; it ends when it was due or when the loss was noticed, whichever is later."""
    message = (
        f"worker {lost.worker} (slot {lost.slot.index + 1} of {lost.slot.count}) stopped "
        f"answering at t={lost.lost_at_s:.1f} s; this request was scheduled on it and never "
        "reported"
    )
    rows: list[Row] = []
    for stage, request_id, intended_s in schedule:
        if request_id in recorded_ids:
            continue
        values = dict.fromkeys(RECORD_NAMES)
        values.update(
            stage=stage,
            request_id=request_id,
            intended_send_s=intended_s,
            end_s=max(intended_s, lost.lost_at_s),
            tokens_estimated=True,
            ok=False,
            status_code=0,
            error_class=LOST,
            error_message=message,
            itl_gaps_s=[],
        )
        rows.append(tuple(values[name] for name in RECORD_NAMES))
    return rows
