"""Resuming the limit search (planner.limit.ledger): the finished levels are replayed from
search.json, none is measured again, and the answer is the one of a search never stopped;
a run that is not the same search is refused with exit 2."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import ConfigError, InputError
from contracts.limit import LimitResult
from contracts.searchlog import SearchIdentity, read_search_log
from planner.limit.fast.live import run_fast_search
from planner.limit.fast.steps import Closed, FastConfig, FastResult, Open, Taken
from planner.limit.ledger import ReplayDriver, ReplayProbe, SearchLedger
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.edge import search_limit
from planner.limit.options import LimitOptions
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import parse_slo
from profiles.model import save_profile
from profiles.presets import preset_profile
from testkit.fast_driver import Driver
from testkit.profiles import make_profile
from testkit.sim_server import ServerSpec
from tests.planner.limit.test_search import CurveProbe

SLO = "ttft:p95<=1s"
IDENTITY = SearchIdentity(
    host="http://127.0.0.1:8000",
    model="m",
    profile_source="preset:chat",
    profile_digest="d1",
    slo=SLO,
    dimension="rate",
    method="measured",
    seed=0,
)
OPTIONS: dict[str, Any] = {"tolerance": 0.05, "start": 4.0}


@dataclass
class SeededProbe(CurveProbe):
    """A CurveProbe whose n-th run of a load draws the same sample whatever ran before
    (seeded by the load and n), keeping each stage's rows as a run directory does; its
    `stop_at`-th call is stopped mid-level (KeyboardInterrupt, as Ctrl-C or SIGTERM)."""

    rows: dict[str, pl.DataFrame] = field(default_factory=dict)
    visits: Counter[float] = field(default_factory=Counter)
    loads: list[float] = field(default_factory=list)
    stop_at: int | None = None

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        self.loads.append(load)
        if self.stop_at is not None and len(self.loads) == self.stop_at:
            raise KeyboardInterrupt
        visit = self.visits[load]
        self.visits[load] += 1
        self.rng = np.random.default_rng([11, round(load * 1000), visit])
        self.clock_s = 0.0
        measured = super().measure(load, abandon=abandon)
        stage = f"level-{load:g}-{visit}"
        self.rows[stage] = measured.records
        return replace(measured, stage=stage)


def _config() -> SearchConfig:
    return SearchConfig(slo=parse_slo(SLO), start=4.0, resamples=100)


def _search(
    out: Path, probe: SeededProbe, *, resume: bool, config: SearchConfig | None = None
) -> tuple[LimitResult, list[str]]:
    rows = probe.rows.__getitem__
    if resume:
        ledger = SearchLedger.resumed(out, IDENTITY, OPTIONS, rows=rows)
    else:
        ledger = SearchLedger.fresh(out, IDENTITY, OPTIONS, rows=rows)
    lines: list[str] = []
    limit = search_limit(
        ReplayProbe(ledger, probe),
        config or _config(),
        out,
        echo=lines.append,
        clock=ledger.clock,
        recorded=lambda: ledger.replaying,
    )
    ledger.finish()
    return limit, lines


def _interrupted(out: Path, stop_at: int) -> SeededProbe:
    probe = SeededProbe(np.random.default_rng(0), stop_at=stop_at)
    with pytest.raises(KeyboardInterrupt):
        _search(out, probe, resume=False)
    return probe


def _resumed_probe(first: SeededProbe) -> SeededProbe:
    """The probe of the resumed run: the same server and run directory (rows), its seeds
    going on after the recorded runs."""
    return SeededProbe(np.random.default_rng(0), rows=first.rows, visits=first.visits)


def test_a_resumed_search_measures_no_finished_level_again_and_answers_the_same(
    tmp_path: Path,
) -> None:
    whole = SeededProbe(np.random.default_rng(0))
    expected, _ = _search(tmp_path / "whole", whole, resume=False)
    assert len(whole.loads) >= 6  # the stop below falls mid-search

    out = tmp_path / "stopped"
    first = _interrupted(out, stop_at=4)  # three levels end, the fourth is stopped mid-way
    assert [s.load for s in read_search_log(out).steps] == whole.loads[:3]
    second = _resumed_probe(first)
    limit, lines = _search(out, second, resume=True)

    assert second.loads == whole.loads[3:]  # the stopped level from its start, then on
    assert (limit.feasible_max, limit.infeasible_min) == (
        expected.feasible_max,
        expected.infeasible_min,
    )
    assert [lv.load for lv in limit.levels] == [lv.load for lv in expected.levels]
    assert [lv.stages for lv in limit.levels] == [lv.stages for lv in expected.levels]
    assert [line.endswith("(recorded)") for line in lines[:4]] == [True] * 3 + [False]
    log = read_search_log(out)
    assert log.finished and len(log.steps) == len(whole.loads)
    assert len({s.stage for s in log.steps}) == len(log.steps)  # no stage measured twice


def test_resuming_twice_after_two_stops_still_repeats_no_level(tmp_path: Path) -> None:
    whole = SeededProbe(np.random.default_rng(0))
    expected, _ = _search(tmp_path / "whole", whole, resume=False)
    out = tmp_path / "stopped"
    first = _interrupted(out, stop_at=3)
    second = _resumed_probe(first)
    second.stop_at = 2  # one level ends, the next is stopped
    with pytest.raises(KeyboardInterrupt):
        _search(out, second, resume=True)
    third = _resumed_probe(second)
    limit, _ = _search(out, third, resume=True)
    assert second.loads[:1] + third.loads == whole.loads[2:]
    assert limit.feasible_max == expected.feasible_max


def test_a_resumed_search_that_asks_for_another_level_is_refused(tmp_path: Path) -> None:
    first = _interrupted(tmp_path, stop_at=3)
    other = replace(_config(), start=5.0)  # another search: its first level differs
    with pytest.raises(ConfigError, match="asks for level 5 where the run measured level 4"):
        _search(tmp_path, _resumed_probe(first), resume=True, config=other)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"host": "http://127.0.0.1:9000"}, "'http://127.0.0.1:8000'; this run has 'http://127.0"),
        ({"profile_digest": "d2"}, "profile digest 'd1'; this run has 'd2'"),
        ({"slo": "ttft:p95<=2s"}, "slo 'ttft:p95<=1s'; this run has 'ttft:p95<=2s'"),
    ],
)
def test_another_endpoint_profile_or_slo_is_refused_naming_both(
    tmp_path: Path, change: dict[str, str], named: str
) -> None:
    _interrupted(tmp_path, stop_at=2)
    with pytest.raises(ConfigError, match="the search there ran with") as err:
        SearchLedger.resumed(tmp_path, IDENTITY.model_copy(update=change), OPTIONS)
    assert named in str(err.value)


def test_changed_level_options_are_refused_and_the_load_generator_may_change(
    tmp_path: Path,
) -> None:
    _interrupted(tmp_path, stop_at=2)
    with pytest.raises(ConfigError, match="tolerance 0.05; this run asks 0.1"):
        SearchLedger.resumed(tmp_path, IDENTITY, {**OPTIONS, "tolerance": 0.1})
    SearchLedger.resumed(tmp_path, IDENTITY, {**OPTIONS, "workers": 4})  # no error


def test_a_finished_search_or_a_folder_without_one_has_nothing_to_resume(tmp_path: Path) -> None:
    _search(tmp_path / "done", SeededProbe(np.random.default_rng(0)), resume=False)
    with pytest.raises(ConfigError, match="has finished"):
        SearchLedger.resumed(tmp_path / "done", IDENTITY, OPTIONS)
    with pytest.raises(InputError, match="no limit search to resume"):
        SearchLedger.resumed(tmp_path, IDENTITY, OPTIONS)


# --------------------------------------------------------------------------- the CLI


def _logged_run(out: Path, profile: str | None = None) -> None:
    """A run directory whose search.json records a search of the chat preset."""
    options = LimitOptions(
        host="http://127.0.0.1:8000",
        model="m",
        slo=parse_slo(SLO),
        out_dir=out,
        profile=profile,
    )
    digest = preset_profile("chat").digest()
    out.mkdir(parents=True)
    SearchLedger.fresh(out, options.identity(digest), options.recorded())


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(app, ["limit", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


def test_cli_resume_of_a_folder_without_a_search_exits_2_naming_it(tmp_path: Path) -> None:
    output = _cli("--resume", str(tmp_path))
    assert f"{tmp_path}: no limit search to resume here" in output


def test_cli_resume_against_another_endpoint_exits_2_naming_both(tmp_path: Path) -> None:
    _logged_run(tmp_path / "run")
    output = _cli("--resume", str(tmp_path / "run"), "--host", "http://127.0.0.1:9")
    assert "'http://127.0.0.1:8000'" in output and "'http://127.0.0.1:9'" in output


def test_cli_resume_with_another_profile_exits_2_naming_both_digests(tmp_path: Path) -> None:
    _logged_run(tmp_path / "run")
    other = tmp_path / "other.json"
    save_profile(make_profile([(64, 32)]), other)
    output = _cli("--resume", str(tmp_path / "run"), "--profile", str(other))
    chat = preset_profile("chat").digest()
    assert f"profile digest {chat!r}" in output
    assert repr(make_profile([(64, 32)]).digest()) in output


def test_cli_resume_with_another_slo_exits_2_naming_both(tmp_path: Path) -> None:
    """The ledger refuses it (test_another_endpoint_profile_or_slo_is_refused_naming_both);
    this is the user's view: exit 2, both SLOs named, no traceback."""
    _logged_run(tmp_path / "run")
    output = " ".join(_cli("--resume", str(tmp_path / "run"), "--slo", "ttft:p95<=5s").split())
    assert "slo" in output.lower() and "ttft:p95<=5s" in output
    assert parse_slo(SLO).text in output


def test_cli_without_resume_needs_host_slo_and_output(tmp_path: Path) -> None:
    output = _cli("--slo", SLO, "-o", str(tmp_path / "x"))
    assert "missing option --host (needed unless --resume RUN_DIR)" in output


def test_cli_refuses_a_fresh_search_into_a_run_and_points_to_resume(tmp_path: Path) -> None:
    _logged_run(tmp_path / "run")
    (tmp_path / "run" / "run.json").write_text("{}")
    output = _cli("--host", "http://127.0.0.1:9", "--slo", SLO, "-o", str(tmp_path / "run"))
    assert f"capplan limit --resume {tmp_path / 'run'}" in output


# --------------------------------------------------------------------------- the fast search


class ScriptedServer:
    """A server that answers the search's i-th step with what a simulated slot server
    (testkit/fast_driver.py) measured at the i-th step of a search never stopped, so a
    stopped and resumed search sees what the whole one saw; it refuses a step the whole
    search did not ask for at that point, and its `stop_at`-th call is stopped mid-step."""

    def __init__(self, script: list[tuple[Any, Taken]], done: int, stop_at: int | None = None):
        self.script = script
        self.position = done  # the steps the run directory already holds
        self.stop_at = stop_at
        self.calls: list[Any] = []
        self.opened: list[tuple[str, float, float, float]] = []
        self.last_stage = ""

    def _take(self, step: Any) -> Taken:
        self.calls.append(step)
        if self.stop_at is not None and len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        asked, taken = self.script[self.position]
        assert step == asked, f"step {self.position}: {step} where the whole search had {asked}"
        self.position += 1
        self.last_stage = f"step-{self.position:02d}"
        ROWS[self.last_stage] = taken.records
        return taken

    def closed(self, step: Closed) -> Taken:
        return self._take(step)

    def open(self, step: Open) -> Taken:
        taken = self._take(step)
        self.opened.append((self.last_stage, step.rate, taken.start_s, taken.end_s - taken.start_s))
        return taken


ROWS: dict[str, pl.DataFrame] = {}
LINES: list[str] = []  # what the whole fast search printed
FAST_IDENTITY = IDENTITY.model_copy(update={"method": "fast", "slo": "ttft:p95<=500ms"})


def _fast_config() -> FastConfig:
    slo = parse_slo("ttft:p95<=500ms")
    return FastConfig(slo, seed=0, curve_requests=5_000, root_requests=5_000, bootstrap=2)


def _script() -> tuple[list[tuple[Any, Taken]], FastResult]:
    """Every step of a whole fast search on a simulated 8-slot server with its answer, and
    the search's result."""
    config = _fast_config()
    driver = Driver(ServerSpec(8, 0.05, 0.01, (32, 96)), 3, drain_s=1.5)
    script: list[tuple[Any, Taken]] = []

    class Recording:
        def closed(self, step: Closed) -> Taken:
            script.append((step, driver.closed(step)))
            return script[-1][1]

        def open(self, step: Open) -> Taken:
            script.append((step, driver.open(step)))
            return script[-1][1]

    return script, run_fast_search(config, Recording(), echo=LINES.append)


def _fast(
    out: Path, server: ScriptedServer, *, resume: bool, echo: Any = lambda _: None
) -> FastResult:
    make = SearchLedger.resumed if resume else SearchLedger.fresh
    ledger = make(out, FAST_IDENTITY, OPTIONS, rows=ROWS.__getitem__)
    driver = ReplayDriver(ledger, server)  # type: ignore[arg-type]
    return run_fast_search(
        _fast_config(), driver, echo=echo, clock=ledger.clock, recorded=lambda: ledger.replaying
    )


@pytest.mark.slow  # three fast searches: about a minute on two shared cores
def test_a_resumed_fast_search_replays_its_steps_and_answers_the_same(tmp_path: Path) -> None:
    script, whole = _script()
    assert len(script) >= 6 and whole.limit is not None
    # each confirmation line's bound on the chunks left holds
    confirms = [line for line in LINES if line.startswith("confirm ")]
    for k, line in enumerate(confirms):
        found = re.search(r"\((\d+) chunks?\)", line)  # "(1 chunk)", "(3 chunks)"
        bound = int(found.group(1)) if found else 0  # "left ~0s": none left
        assert bound >= len(confirms) - k - 1, line
    opens = [k for k, (step, _) in enumerate(script, 1) if isinstance(step, Open)]
    stop_at = opens[1]  # stopped in the second confirmation chunk
    with pytest.raises(KeyboardInterrupt):
        _fast(tmp_path, ScriptedServer(script, 0, stop_at=stop_at), resume=False)
    assert len(read_search_log(tmp_path).steps) == stop_at - 1
    second = ScriptedServer(script, stop_at - 1)
    lines: list[str] = []
    result = _fast(tmp_path, second, resume=True, echo=lines.append)
    steps = [line for line in lines if line.startswith(("characterise ", "confirm "))]
    assert [line.endswith("(recorded)") for line in steps] == [True] * (stop_at - 1) + [False] * (
        len(script) - stop_at + 1
    )
    assert second.calls == [step for step, _ in script[stop_at - 1 :]]  # none again
    assert (result.limit, result.low, result.high) == (whole.limit, whole.low, whole.high)
    assert [s.stage for s in read_search_log(tmp_path).steps] == [
        f"step-{k:02d}" for k in range(1, len(script) + 1)
    ]


def test_a_log_with_an_option_this_version_lacks_is_refused(tmp_path: Path) -> None:
    _logged_run(tmp_path / "run")
    path = tmp_path / "run" / "search.json"
    path.write_text(path.read_text().replace('"options": {', '"options": {"warp": 9, ', 1))
    output = _cli("--resume", str(tmp_path / "run"))
    assert "search.json holds options this capplan does not know (warp)" in output


def test_a_logged_option_out_of_its_bound_is_refused_naming_it(tmp_path: Path) -> None:
    """search.json's options are read into LimitOptions, bounds and all: a hand-edited level
    duration is refused naming the file and the option, not passed to the search."""
    _logged_run(tmp_path / "run")
    path = tmp_path / "run" / "search.json"
    text = path.read_text()
    assert '"level_duration_s": 30.0' in text
    path.write_text(text.replace('"level_duration_s": 30.0', '"level_duration_s": -30.0', 1))
    output = " ".join(_cli("--resume", str(tmp_path / "run")).split())
    assert "search.json's option level_duration_s -30: expected a finite number > 0" in output


def test_cli_resume_with_a_value_out_of_its_bound_names_the_option(tmp_path: Path) -> None:
    """A value given with --resume is held to the same bound as on a fresh run (the model's),
    named as typed, before the ledger compares it with the logged one."""
    _logged_run(tmp_path / "run")
    output = " ".join(_cli("--resume", str(tmp_path / "run"), "--level-duration", "0").split())
    assert "--level-duration 0: expected a finite number > 0" in output
