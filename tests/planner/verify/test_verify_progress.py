"""`capplan verify`'s stage lines: one per stage as the run enters it, elapsed and time left in
the limit search's format, told by the load test's live file (planner.loadtest.processes)."""

from __future__ import annotations

import json
from pathlib import Path

from contracts.rundir import LIVE_FILE, WORK_DIR
from planner.loadtest.processes import Progress
from planner.verify.options import VerifyOptions, verify_stages
from planner.verify.progress import StageLines


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _stages() -> object:
    options = VerifyOptions.model_construct(
        steady_s=120.0, burst_s=30.0, burst_factor=2.0, recovery_s=120.0, replay_path=None
    )
    return verify_stages(options, 6.0)


def test_each_stage_says_elapsed_and_what_is_left() -> None:
    """Truths by hand: 120 + 30 + 120 s of endpoint time and a 30 s drain after the last stage
    at --time-scale 3 is 100 s of wall time; the recovery stage and the drain may end early,
    so every estimate is an upper bound. Rates and lengths are the engine's time, said so."""
    clock, said = _Clock(), []
    lines = StageLines(_stages(), said.append, time_scale=3.0, drain_s=30.0, clock=clock)  # type: ignore[arg-type]
    clock.now += 5.0
    lines(0)
    clock.now += 40.0
    lines(1)
    clock.now += 10.0
    lines(2)
    clock.now += 21.0
    lines(3)  # past the plan (Locust's drain): nothing
    lines.done("judging them")
    assert said == [
        "stage 1/3 steady at 6 req/s for 2m00s of engine time (40s of wall time at "
        "--time-scale 3)  elapsed 5s  left <=1m40s (3 stages)",
        "stage 2/3 burst at 12 req/s for 30s of engine time (10s of wall time at --time-scale 3)"
        "  elapsed 45s  left <=1m00s (2 stages)",
        "stage 3/3 recovery at 6 req/s for up to 2m00s of engine time (40s of wall time at "
        "--time-scale 3)  elapsed 55s  left <=50s (1 stage)",
        "stages done  elapsed 1m16s; judging them",
    ]


def _live(tmp_path: Path, index: int) -> None:
    (tmp_path / WORK_DIR).mkdir(exist_ok=True)
    live = {"t_s": float(index), "stage": f"s{index}", "stage_index": index, "scheduled": 0}
    (tmp_path / WORK_DIR / LIVE_FILE).write_text(json.dumps(live))


def test_the_live_file_tells_each_stage_once_in_order(tmp_path: Path) -> None:
    told: list[int] = []
    progress = Progress(tmp_path, None, told.append)
    progress.update()  # no live file yet: nothing
    for index in (0, 0, 0, 2, 2, 3):  # stage 1 shorter than a poll: told when 2 is seen
        _live(tmp_path, index)
        progress.update()
    assert told == [0, 1, 2, 3]


def test_progress_lines_still_come_without_a_stage_listener(tmp_path: Path) -> None:
    lines: list[str] = []
    progress = Progress(tmp_path, lines.append)
    _live(tmp_path, 1)
    progress.update()
    assert len(lines) == 1 and lines[0].startswith("s1  t=")
