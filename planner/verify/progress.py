"""How far `capplan verify` is, for people: one line as the run enters each stage, with the
elapsed wall time and the time left, in the words and format of the limit search's lines
(planner.limit.measured.progress).

The time left is the stages' planned lengths from the one entered, in wall seconds (a stage's
length is in the endpoint's time: divided by `--time-scale`). The recovery stage ends as soon
as the SLO's TTFT has recovered, so with a recovery stage ahead the estimate is an upper bound
and says so (`<=`). The clock is injected; the lines go to `echo` whole, never wrapped, so a
piped output keeps one line per stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from contracts.run import StagePlan
from planner.limit.measured.progress import Left, format_clock, time_note


class StageLines:
    """`on_stage` for planner.loadtest.run.run_loadtest: prints each stage's line as it starts."""

    def __init__(
        self,
        plan: StagePlan,
        echo: Callable[[str], None],
        *,
        time_scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._plan = plan
        self._echo = echo
        self._scale = time_scale
        self._clock = clock
        self._started = clock()

    def __call__(self, index: int) -> None:
        """The line of stage `index` of the plan (an index past the last one is ignored)."""
        stages = self._plan.stages
        if not 0 <= index < len(stages):
            return
        stage = stages[index]
        ahead = stages[index:]
        left = Left(len(ahead), at_most=any(s.role == "recovery" for s in ahead))
        left_s = sum(s.duration_s for s in ahead) / self._scale
        rate = f" at {stage.rate_rps:.3g} req/s" if stage.rate_rps is not None else ""
        upto = "up to " if stage.role == "recovery" else ""
        self._echo(
            f"stage {index + 1}/{len(stages)} {stage.name}{rate} for {upto}"
            f"{format_clock(stage.duration_s / self._scale)}  "
            + time_note(self._clock() - self._started, left, left_s, "stages")
        )

    def note(self, line: str) -> None:
        """`progress` for run_loadtest: its notes (waiting for remote workers) pass through;
        its live figures (`<stage>  t=...`, planner.loadtest.processes.format_progress) do
        not, the stage lines say how far the run is."""
        if "  t=" not in line:
            self._echo(line)

    def done(self, what: str) -> None:
        """The closing line: the stages are over and `what` comes next."""
        elapsed = format_clock(self._clock() - self._started)
        self._echo(f"stages done  elapsed {elapsed}; {what}")
