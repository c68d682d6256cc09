"""How far `capplan verify` is, for people: one line as the run enters each stage, with the
elapsed wall time and the time left, in the words and format of the limit search's lines
(planner.limit.measured.progress).

A stage's rate and length are the endpoint's (engine) time, as the plan states them; with
`--time-scale` S the line says so and gives the length in wall seconds too (divided by S).
The elapsed time and the time left are wall seconds. The time left is the stages' planned
lengths from the one entered plus the wait for requests still in flight after the last one
(the load test's `drain_s`, in engine time too). The recovery stage ends as soon as the SLO's
TTFT has recovered and the wait as soon as nothing is in flight, so the time left is an upper
bound and says so (`<=`); Locust's own stop (a second or two) is not in it. The clock is
injected; the lines go to `echo` whole, never wrapped, so a piped output keeps one line per
stage.
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
        drain_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._plan = plan
        self._echo = echo
        self._scale = time_scale
        self._drain_s = drain_s
        self._clock = clock
        self._started = clock()

    def __call__(self, index: int) -> None:
        """The line of stage `index` of the plan (an index past the last one is ignored)."""
        stages = self._plan.stages
        if not 0 <= index < len(stages):
            return
        stage = stages[index]
        ahead = stages[index:]
        recovery = any(s.role == "recovery" for s in ahead)
        left = Left(len(ahead), at_most=recovery or self._drain_s > 0)
        left_s = (sum(s.duration_s for s in ahead) + self._drain_s) / self._scale
        rate = f" at {stage.rate_rps:.3g} req/s" if stage.rate_rps is not None else ""
        upto = "up to " if stage.role == "recovery" else ""
        length = format_clock(stage.duration_s)
        if self._scale != 1.0:
            wall = format_clock(stage.duration_s / self._scale)
            length += f" of engine time ({wall} of wall time at --time-scale {self._scale:g})"
        self._echo(
            f"stage {index + 1}/{len(stages)} {stage.name}{rate} for {upto}{length}  "
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
