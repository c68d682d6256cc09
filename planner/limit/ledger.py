"""The limit search's log in its run directory (search.json) while it runs, and its replay
on `capplan limit --resume RUN_DIR`.

Both searches are pure generators (planner.limit.measured.search, planner.limit.fast.search), so a
search fed the same measurements asks for the same loads in the same order. A resumed run
therefore starts the search afresh and answers its first requests from the log: the probe
(`ReplayProbe`) or driver (`ReplayDriver`) checks that the search asks for what the log
recorded at that step — anything else means the options or the code changed, and the run is
not the same search (ConfigError) — and hands back the recorded stage's rows from
records.parquet. Once the log is spent, every step runs live and is appended to the log as
it ends. A step stopped mid-way (Ctrl-C, SIGTERM, a crash) was never logged: it is run again
from its start under a new stage name; its rows stay in records.parquet, outside every
verdict. No step that ended is measured twice.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from contracts.errors import ConfigError
from contracts.rundir import read_records, read_run_info
from contracts.searchlog import (
    SearchIdentity,
    SearchLog,
    SearchStep,
    StepKind,
    read_search_log,
    write_search_log,
)
from planner.limit.fast.live import LiveDriver
from planner.limit.fast.steps import Closed, Open, Taken
from planner.limit.options import FREE_ON_RESUME
from planner.limit.probe import AbandonRule, LevelMeasurement, Probe

Clock = Callable[[], float]


class SearchLedger:
    """search.json of one run directory: the steps to replay, then the steps to keep.

    `clock()` is the wall clock plus the recorded wall seconds of the steps replayed so far,
    so elapsed times and estimates read as if the run had never stopped; `replaying` says
    whether the latest step came from the log. `rows(stage)` gives a logged stage's records
    (default: from records.parquet; a test's fake probe keeps its own).
    """

    def __init__(
        self,
        out_dir: Path,
        log: SearchLog,
        *,
        clock: Clock = time.perf_counter,
        rows: Callable[[str], pl.DataFrame] | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.log = log
        self._to_replay = list(log.steps)
        self._next = 0
        self._records: pl.DataFrame | None = None
        self._rows = rows  # a stage's records (None: from records.parquet)
        self._wall = clock
        self._replayed_s = 0.0
        self.replaying = False

    @classmethod
    def fresh(
        cls, out_dir: Path, identity: SearchIdentity, options: dict[str, Any], **kw: Any
    ) -> SearchLedger:
        """A new log for a search starting in `out_dir`, written at once."""
        ledger = cls(out_dir, SearchLog(identity=identity, options=options), **kw)
        write_search_log(out_dir, ledger.log)
        return ledger

    @classmethod
    def resumed(
        cls, out_dir: Path, identity: SearchIdentity, options: dict[str, Any], **kw: Any
    ) -> SearchLedger:
        """The log of `out_dir` to continue. Raises InputError when the folder holds no
        search, ConfigError when it has finished or when `identity` or `options` differ
        from the recorded ones (the endpoint, the profile's digest, the SLO...)."""
        log = read_search_log(out_dir)
        if log.finished:
            raise ConfigError(
                f"{out_dir}: its limit search has finished (limit.json holds the answer); "
                "nothing to resume"
            )
        same_search(out_dir, log, identity, options)
        ledger = cls(out_dir, log, **kw)
        logged = {s.stage for s in log.steps}
        plan = read_run_info(out_dir).plan.stages if (out_dir / "run.json").exists() else []
        cut = [s.name for s in plan if s.role == "level" and s.name not in logged]
        log.discarded = [*log.discarded, *(n for n in cut if n not in log.discarded)]
        write_search_log(out_dir, log)
        return ledger

    @property
    def recorded_steps(self) -> int:
        return len(self._to_replay)

    def clock(self) -> float:
        return self._wall() + self._replayed_s

    def recorded(self, kind: StepKind, asked: dict[str, Any], what: str) -> SearchStep | None:
        """The next logged step when the search asks for it again, None once the log is
        spent. Raises ConfigError when the search asks for something else than the log
        holds at this step."""
        if self._next >= len(self._to_replay):
            self.replaying = False
            return None
        step = self._to_replay[self._next]
        if step.kind != kind or not all(_same(getattr(step, k), v) for k, v in asked.items()):
            raise ConfigError(
                f"{self.out_dir}: step {self._next + 1} of the resumed search asks for {what} "
                f"where the run measured {describe(step)} (stage {step.stage}): not the same "
                "search (its options or capplan's version differ); start a new run"
            )
        self._next += 1
        self._replayed_s += step.wall_s
        self.replaying = True
        return step

    def rows(self, stage: str) -> pl.DataFrame:
        """The records of a logged stage (records.parquet, read once)."""
        if self._rows is not None:
            return self._rows(stage)
        if self._records is None:
            self._records = read_records(self.out_dir)
        return self._records.filter(pl.col("stage") == stage)

    def keep(self, step: SearchStep) -> None:
        """Append a step that ended to the log (written at once)."""
        self.log.steps.append(step)
        write_search_log(self.out_dir, self.log)

    def finish(self) -> None:
        """The search answered: the log says so. Raises ConfigError when it answered before
        replaying every logged step (it is not the search that was logged)."""
        if self._next < len(self._to_replay):
            raise ConfigError(
                f"{self.out_dir}: the resumed search answered after {self._next} of the "
                f"{len(self._to_replay)} logged steps: not the same search; start a new run"
            )
        self.log.finished = True
        write_search_log(self.out_dir, self.log)

    def resume_line(self) -> str:
        """What a resumed run says before its first step."""
        line = f"resuming {self.out_dir}: finished steps in search.json: {len(self._to_replay)}"
        if self.log.discarded:
            line += (
                f"; {', '.join(self.log.discarded)} stopped mid-way: run again from the start "
                "(its rows stay in records.parquet, outside the verdict)"
            )
        return line + "; no finished level is repeated"


def same_search(
    out_dir: Path, log: SearchLog, identity: SearchIdentity, options: dict[str, Any]
) -> None:
    """Raise ConfigError naming the first field where the resumed run differs from the log."""
    now = identity.model_dump()
    for name, was in log.identity.model_dump().items():
        if name != "profile_source" and now[name] != was:  # a moved profile file is the same
            label = name.replace("_", " ")
            raise ConfigError(
                f"{out_dir}: the search there ran with {label} {was!r}; this run has "
                f"{now[name]!r}: a resumed search keeps its endpoint, profile and SLO"
            )
    for name in sorted(set(log.options) | set(options)):
        was, asked = log.options.get(name), options.get(name)
        if name not in FREE_ON_RESUME and not _same(was, asked):
            raise ConfigError(
                f"{out_dir}: the search there ran with {name} {was!r}; this run asks "
                f"{asked!r}: a resumed search keeps the options that shape its levels"
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def describe(step: SearchStep) -> str:
    """A logged step as the search would ask for it."""
    if step.kind == "level":
        return f"level {step.load:g}"
    if step.kind == "closed":
        return f"closed loop of {step.users} users"
    return f"open loop at {step.rate:g} req/s for {step.duration_s:g} s"


def last_index(out_dir: Path, prefixes: Sequence[str]) -> int:
    """The highest NN among the run's stages named PREFIX-NN (0: none), so that a resumed
    run names its stages after every one the run already has."""
    if not (Path(out_dir) / "run.json").exists():
        return 0
    pattern = re.compile(rf"^(?:{'|'.join(map(re.escape, prefixes))})-(\d+)$")
    found = [pattern.match(s.name) for s in read_run_info(out_dir).plan.stages]
    return max((int(m.group(1)) for m in found if m), default=0)


class ReplayProbe:
    """A Probe that answers from the ledger while it holds levels, then measures with
    `live` and logs every level that ends (one stopped mid-way raises, unlogged)."""

    def __init__(self, ledger: SearchLedger, live: Probe) -> None:
        self.ledger = ledger
        self.live = live

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        step = self.ledger.recorded("level", {"load": load}, f"level {load:g}")
        if step is not None:
            return LevelMeasurement(
                load=load,
                stage=step.stage,
                records=self.ledger.rows(step.stage),
                duration_s=step.held_s or 0.0,
                warmup_s=step.warmup_s or 0.0,
                start_s=step.start_s,
                abandoned=step.abandoned,
                unstable=step.unstable,
                steady=step.steady,
            )
        began = self.ledger.clock()
        m = self.live.measure(load, abandon=abandon)
        end_s = None if m.start_s is None else m.start_s + m.duration_s
        self.ledger.keep(
            SearchStep(
                kind="level",
                stage=m.stage,
                start_s=m.start_s,
                end_s=end_s,
                wall_s=max(self.ledger.clock() - began, 0.0),
                load=m.load,
                held_s=m.duration_s,
                warmup_s=m.warmup_s,
                abandoned=m.abandoned,
                unstable=m.unstable,
                steady=m.steady,
            )
        )
        return m


class ReplayDriver:
    """The fast search's driver (planner.limit.fast.live) that answers from the ledger while
    it holds steps, then runs them with `live` and logs each one that ends."""

    def __init__(self, ledger: SearchLedger, live: LiveDriver) -> None:
        self.ledger = ledger
        self.live = live

    def closed(self, step: Closed) -> Taken:
        asked = {"users": step.users, "requests": step.requests, "min_s": step.min_s,
                 "max_s": step.max_s}  # fmt: skip
        logged = self.ledger.recorded("closed", asked, f"closed loop of {step.users} users")
        if logged is not None:
            return self._taken(logged)
        began = self.ledger.clock()
        taken = self.live.closed(step)
        self._keep("closed", asked, taken, began)
        return taken

    def open(self, step: Open) -> Taken:
        asked = {"rate": step.rate, "duration_s": step.duration_s, "burst": step.burst,
                 "fresh": step.fresh}  # fmt: skip
        what = f"open loop at {step.rate:g} req/s for {step.duration_s:g} s"
        logged = self.ledger.recorded("open", asked, what)
        if logged is not None:
            assert logged.start_s is not None and logged.end_s is not None
            held_s = logged.end_s - logged.start_s
            self.live.opened.append((logged.stage, step.rate, logged.start_s, held_s))
            return self._taken(logged)
        began = self.ledger.clock()
        taken = self.live.open(step)
        self._keep("open", asked, taken, began)
        return taken

    def levels(self) -> list[tuple[float, list[str], pl.DataFrame, float, float]]:
        return self.live.levels()

    def _taken(self, logged: SearchStep) -> Taken:
        assert logged.start_s is not None and logged.end_s is not None
        rows = self.ledger.rows(logged.stage)
        return Taken(records=rows, start_s=logged.start_s, end_s=logged.end_s)

    def _keep(self, kind: StepKind, asked: dict[str, Any], taken: Taken, began: float) -> None:
        step = SearchStep(
            kind=kind,
            stage=self.live.last_stage,
            start_s=taken.start_s,
            end_s=taken.end_s,
            wall_s=max(self.ledger.clock() - began, 0.0),
            **asked,
        )
        self.ledger.keep(step)
