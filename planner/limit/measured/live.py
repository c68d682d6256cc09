"""`capplan limit`'s probe against a live endpoint: each level one Locust stage, watched
while it runs and ended once steady (planner.limit.measured.steady) or stopped once hopeless."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from contracts.errors import RunError, TargetError
from contracts.limit import Dimension
from contracts.run import Stage, StagePlan, StageSummary
from contracts.rundir import WORK_DIR, read_records
from planner.limit.measured.settle import cancelled_last, settle, target_probe
from planner.limit.measured.steady import LevelState, SteadyRules, assess
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.loadtest.run import LoadTestConfig, run_loadtest
from planner.slo.spec import Slo
from profiles.model import Profile


class LocustProbe:
    """Holds each level as a one-stage Locust load test appended to one run directory.

    Level k becomes stage `level-kk` (role "level") of `out_dir`'s records.parquet and
    stages.json, run with seed `seed * 1000 + k`. The stage is planned as long as the
    steady-state rules allow (`rules.max_level_s`); about once a second the records written
    so far are checked: once the level is steady and its window long enough
    (planner.limit.measured.steady), the stage is ended (in-flight requests drain, then count at
    their age); when the search's AbandonRule finds it hopeless, it is stopped at once.
    """

    def __init__(
        self,
        config: LoadTestConfig,
        out_dir: Path,
        *,
        dimension: Dimension,
        rules: SteadyRules,
        slo: Slo,
        arrival: str = "poisson",
        check_every_s: float = 1.0,
        append: bool = False,
        profile: Profile | None = None,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.profile = profile  # loaded once for every level (None: from config)
        self.echo = echo  # says how long a level waited for the server to settle
        self.arrival = arrival
        self.out_dir = out_dir
        self.dimension = dimension
        self.rules = rules
        self.slo = slo
        self.check_every_s = check_every_s
        self.levels = 0
        self.append = append  # the run directory already holds stages (a fast search's)

    def _stage(self, load: float) -> Stage:
        name = f"level-{self.levels:02d}"
        if self.dimension == "rate":
            return Stage(
                name=name,
                kind="open",
                role="level",
                duration_s=self.rules.max_level_s,
                rate_rps=load,
                arrival=self.arrival,
            )
        return Stage(
            name=name,
            kind="closed",
            role="level",
            duration_s=self.rules.max_level_s,
            users=max(1, int(round(load))),
        )

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        """Run one level until it is steady (or hopeless, or capped). Raises TargetError
        when no request could connect, and what run_loadtest raises (RunError, ConfigError)."""
        self.levels += 1
        stage = self._stage(load)
        watcher = _LevelWatcher(self, stage, abandon, load)
        summary = run_stage(
            self.config,
            self.out_dir,
            stage,
            seed_index=self.levels,
            append=self.append or self.levels > 1,
            progress=watcher,
            profile=self.profile,
            echo=self.echo,
        )
        records = read_records(self.out_dir).filter(pl.col("stage") == stage.name)
        duration_s = summary.duration_s
        if watcher.reason is not None and watcher.stopped_at_s is not None:
            duration_s = max(watcher.stopped_at_s - summary.start_s, 1e-3)
        state = watcher.state
        if state is None or watcher.reason is not None:
            state = assess(
                records,
                start_s=summary.start_s,
                now_s=summary.start_s + duration_s,
                rate_rps=load if self.dimension == "rate" else None,
                rules=self.rules,
                slo=self.slo,
            )
        return LevelMeasurement(
            load=load,
            stage=stage.name,
            records=records,
            duration_s=duration_s,
            warmup_s=min(state.warmup_s, 0.5 * duration_s),
            start_s=summary.start_s,
            abandoned=watcher.reason,
            # Ended by the watcher as steady: settled. Otherwise it ran to the cap.
            unstable=None if watcher.ended and not watcher.capped else state.unstable,
            steady=state.evidence(),
        )


def run_stage(
    config: LoadTestConfig,
    out_dir: Path,
    stage: Stage,
    *,
    seed_index: int,
    append: bool,
    progress: Callable[[str], None] | None,
    profile: Profile | None = None,
    echo: Callable[[str], None] | None = None,
    settle_first: bool = True,
) -> StageSummary:
    """Run one stage as a one-stage load test appended to `out_dir` and return its summary.

    A fresh seed per stage (`seed * 1000 + seed_index`): a repeated level sees new arrivals
    and lengths, so pooling its measurements narrows the noise instead of replaying the same
    sample. When the stage before cancelled requests, the stage waits until the server has
    worked them off (planner.limit.measured.settle; `settle_first=False`: it does not), and says how
    long through `echo`. Raises TargetError when no request could connect, and what
    run_loadtest raises.
    """
    if settle_first and append and cancelled_last(out_dir):
        settled = settle(target_probe(config))
        if echo is not None:
            echo(settled.line(stage.name))
    config = config.model_copy(update={"seed": config.seed * 1000 + seed_index})
    summaries = run_loadtest(
        config,
        StagePlan(name="limit", stages=[stage]),
        out_dir,
        append=append,
        progress=progress,
        profile=profile,
    )
    summary = next((s for s in summaries if s.name == stage.name), None)
    if summary is None:
        raise RunError(f"the load test returned no summary for stage {stage.name}")
    unreachable = {"connect_refused", "connect"}
    classes = set(summary.errors_by_class)
    if summary.completed == 0 and summary.errors and classes <= unreachable:
        raise TargetError(
            f"{config.host}: no request of {stage.name} reached the endpoint "
            f"({', '.join(f'{k}: {v}' for k, v in summary.errors_by_class.items())})"
        )
    return summary


class _LevelWatcher:
    """The load test's progress callback: ends the level once steady, stops it once hopeless."""

    def __init__(
        self, probe: LocustProbe, stage: Stage, rule: AbandonRule | None, load: float
    ) -> None:
        self.probe = probe
        self.stage = stage
        self.rule = rule
        self.load = load
        self.last_check = -math.inf
        self.reason: str | None = None
        self.stopped_at_s: float | None = None
        self.state: LevelState | None = None
        self.ended = False
        self.capped = False
        self.samples: list[tuple[float, float]] = []

    def __call__(self, line: str) -> None:
        if self.reason is not None or self.ended:
            return
        now = time.monotonic()
        if now - self.last_check < self.probe.check_every_s:
            return
        self.last_check = now
        work = self.probe.out_dir / WORK_DIR
        try:
            live = json.loads((work / "live.json").read_text())
        except (OSError, ValueError):
            return
        if live.get("stage") != self.stage.name:
            return
        now_s = float(live["t_s"])
        start_s = now_s - float(live["elapsed_s"])  # a one-stage plan starts with its stage
        self.samples.append((now_s, float(live.get("in_flight", 0))))
        records = read_records(self.probe.out_dir).filter(pl.col("stage") == self.stage.name)
        rules = self.probe.rules
        series = (
            np.array([t for t, _ in self.samples]),
            np.array([n for _, n in self.samples]),
        )
        state = assess(
            records,
            start_s=start_s,
            now_s=now_s,
            rate_rps=self.load if self.probe.dimension == "rate" else None,
            rules=rules,
            slo=self.probe.slo,
            in_flight=series,
        )
        self.state = state
        if self.rule is not None:
            # A runaway queue stretches the steady warm-up without end (its E2E grows), so
            # hopelessness is judged from the shortest warm-up on.
            reason = self.rule.hopeless(
                records,
                now_s=now_s,
                start_s=start_s,
                duration_s=rules.min_warmup_s + max(rules.min_window_s, state.window_s),
                warmup_s=rules.min_warmup_s,
                load=self.load,
                dimension=self.probe.dimension,
            )
            if reason is not None:
                self.reason = reason
                self.stopped_at_s = now_s
                (work / "stop").touch()  # the locustfile's graceful stop: cancels what is in flight
                return
        budget_s = self.rule.budget_s if self.rule is not None else None
        over_budget = budget_s is not None and now_s - start_s >= budget_s
        if state.done or over_budget:
            self.ended = True  # over its budget: judged as it stands, not unstable
            self.capped = state.capped and not over_budget
            (work / "end-stage").write_text(self.stage.name)
