"""The fast search against a live endpoint: each step one Locust stage appended to the run
directory, and limit.json written from the result.

A closed step is a closed-loop stage of `users` users, ended (the `.work/end-stage` file)
once `requests` requests ended after the first round and `min_s` passed. An open step is an
open-loop stage at the rate for its duration. The load test drains and cancels what is in
flight at each stage's end, so every open step starts a new chain on a server that is idle
but for what the drain left: the search runs with `chained=False` (no warm burst; the model
replays each chunk from its own start, so a transient is compared with the same transient).
When the model is inadequate, the measured search (planner.limit) takes over in the same
run directory and its answer is the answer.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import polars as pl

from contracts.run import Stage, StageSummary
from contracts.rundir import WORK_DIR, read_records
from planner.limit.fast.closed import fast_concurrency
from planner.limit.fast.search import fast_search
from planner.limit.fast.steps import (
    Asked,
    Closed,
    FastConfig,
    FastResult,
    KnownModel,
    Open,
    Taken,
)
from planner.limit.measured.live import run_stage
from planner.limit.measured.progress import (
    Left,
    closed_steps_left,
    fast_chunks_left,
    format_clock,
    progress_note,
)
from planner.loadtest.run import LoadTestConfig
from profiles.model import Profile

Echo = Callable[[str], None]


class StepDriver(Protocol):
    """Runs the fast search's steps: LiveDriver, or planner.limit.ledger's ReplayDriver."""

    def closed(self, step: Closed) -> Taken: ...

    def open(self, step: Open) -> Taken: ...


class LiveDriver:
    """Runs the fast search's steps as stages of one run directory."""

    def __init__(
        self,
        config: LoadTestConfig,
        out_dir: Path,
        *,
        arrival: str = "poisson",
        append: bool = False,
        profile: Profile | None = None,
        echo: Echo | None = None,
    ) -> None:
        self.config = config
        self.profile = profile  # loaded once for every step (None: from config)
        self.echo = echo  # says how long a step waited for the server to settle
        self.out_dir = out_dir
        self.arrival = arrival
        self.stages = 0
        self.append = append
        self.opened: list[tuple[str, float, float, float]] = []  # (stage, rate, start, held)
        self.last_stage = ""  # the stage of the latest step

    def _run(self, stage: Stage, progress: Callable[[str], None] | None) -> StageSummary:
        self.last_stage = stage.name
        return run_stage(
            self.config,
            self.out_dir,
            stage,
            seed_index=self.stages,
            append=self.append or self.stages > 1,
            progress=progress,
            profile=self.profile,
            echo=self.echo,
        )

    def closed(self, step: Closed) -> Taken:
        self.stages += 1
        name = f"characterise-{self.stages:02d}"
        stage = Stage(name=name, kind="closed", role="level", duration_s=step.max_s,
                      users=step.users)  # fmt: skip
        watcher = _ClosedWatcher(self.out_dir, name, step)
        summary = self._run(stage, watcher)
        return self._taken(name, summary)

    def open(self, step: Open) -> Taken:
        self.stages += 1
        name = f"confirm-{self.stages:02d}"
        stage = Stage(name=name, kind="open", role="level", duration_s=step.duration_s,
                      rate_rps=step.rate, arrival=self.arrival)  # fmt: skip
        summary = self._run(stage, None)
        self.opened.append((name, step.rate, summary.start_s, summary.duration_s))
        return self._taken(name, summary)

    def levels(self) -> list[tuple[float, list[str], pl.DataFrame, float, float]]:
        """The confirmation levels: rate, stage names, records, first start, seconds held."""
        records = read_records(self.out_dir)
        out: list[tuple[float, list[str], pl.DataFrame, float, float]] = []
        for rate in dict.fromkeys(r for _, r, _, _ in self.opened):
            mine = [o for o in self.opened if o[1] == rate]
            names = [o[0] for o in mine]
            out.append((rate, names, records.filter(pl.col("stage").is_in(names)), mine[0][2],
                        sum(o[3] for o in mine)))  # fmt: skip
        return out

    def _taken(self, name: str, summary: StageSummary) -> Taken:
        records = read_records(self.out_dir).filter(pl.col("stage") == name)
        return Taken(
            records=records, start_s=summary.start_s, end_s=summary.start_s + summary.duration_s
        )


class _ClosedWatcher:
    """Ends a closed step's stage once enough requests ended after its first round."""

    def __init__(self, out_dir: Path, stage: str, step: Closed) -> None:
        self.out_dir = out_dir
        self.stage = stage
        self.step = step
        self.last = -math.inf
        self.ended = False

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        if self.ended or now - self.last < 1.0:
            return
        self.last = now
        work = self.out_dir / WORK_DIR
        try:
            live = json.loads((work / "live.json").read_text())
        except (OSError, ValueError):
            return
        if live.get("stage") != self.stage or float(live["elapsed_s"]) < self.step.min_s:
            return
        records = read_records(self.out_dir).filter(pl.col("stage") == self.stage)
        after_first = max(records.height - self.step.users, 0)
        if after_first >= self.step.requests:
            self.ended = True
            (work / "end-stage").write_text(self.stage)


def run_fast_search(
    config: FastConfig,
    driver: StepDriver,
    *,
    known: KnownModel | None = None,
    asked: Asked | None = None,
    echo: Echo = print,
    clock: Callable[[], float] = time.perf_counter,
    recorded: Callable[[], bool] = lambda: False,
    closed_loop: bool = False,
) -> FastResult:
    """Drive the fast search with `driver`, printing a line per step with the elapsed wall
    time (on `clock`) and at most how long is left; with a `known` model (the server's
    engine model) there is no characterisation; `asked`: the sizes the load test draws, for
    the characterised model. `recorded()` true: the step was answered from the run's log (a
    resumed run), and its line says so. `closed_loop`: the concurrency dimension's search
    (planner.limit.fast.closed), its answer in users."""
    search = (
        fast_concurrency(config, asked=asked, note=echo)
        if closed_loop
        else fast_search(replace(config, chained=False), known=known, asked=asked, note=echo)
    )
    progress = _FastProgress(config, clock)
    try:
        step = next(search)
        while True:
            if isinstance(step, Closed):
                taken = driver.closed(step)
                ok = int(taken.records["ok"].fill_null(False).sum())
                echo(f"characterise {step.users:3d} users  {ok} ok in "
                     f"{taken.end_s - taken.start_s:.0f} s  {progress.closed(step)}"
                     + ("  (recorded)" if recorded() else ""))  # fmt: skip
            else:
                assert isinstance(step, Open)
                taken = driver.open(step)
                echo(f"confirm {step.rate:.4g} req/s  {taken.records.height} requests in "
                     f"{step.duration_s:.0f} s  {progress.open(step)}"
                     + ("  (recorded)" if recorded() else ""))  # fmt: skip
            step = search.send(taken)
    except StopIteration as stop:
        result: FastResult = stop.value
    return result


class _FastProgress:
    """Elapsed time and the most time left after each step (planner.limit.measured.progress)."""

    def __init__(self, config: FastConfig, clock: Callable[[], float]) -> None:
        self.config = config
        self.clock = clock
        self.started = clock()
        self.last = self.started
        self.rates: list[float] = []
        self.chunks = 0
        self.open_s: list[float] = []

    def _took(self) -> float:
        now = self.clock()
        took, self.last = now - self.last, now
        return took

    def closed(self, step: Closed) -> str:
        self._took()
        steps = closed_steps_left(self.config, step.users)
        elapsed = format_clock(self.last - self.started)
        return f"elapsed {elapsed}  left: at most {steps} more steps, then the confirmation"

    def open(self, step: Open) -> str:
        self.open_s.append(self._took())
        if not self.rates or self.rates[-1] != step.rate:
            self.rates.append(step.rate)
            self.chunks = 0
        self.chunks += 1
        chunks = fast_chunks_left(self.config, self.chunks, len(self.rates) - 1)
        per_chunk_s = sum(self.open_s) / len(self.open_s)
        left = Left(chunks, at_most=True)
        return progress_note(self.last - self.started, left, per_chunk_s, unit="chunks")
