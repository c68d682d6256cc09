"""Typed contract of search.json (`"schema": "capplan.limit-search/1"`): the limit search's
log in its run directory, what `capplan limit --resume RUN_DIR` continues from.

Owned by the limit search (planner.limit.resume). It holds what makes the search the same
search (the endpoint, model, profile digest, SLO, dimension, method, seed: `identity`; the
other options that change the levels: `options`) and every step that ended, in the order
the search asked for them: what was asked, the stage of the run directory that measured it
(its rows in records.parquet) and what the probe made of it. A step that did not end (the
run was stopped mid-level) is never written here: its rows stay in records.parquet, named
in `discarded` once a resume has run the step again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import InputError
from contracts.jsonio import read_json, validate, write_model

SEARCH_SCHEMA = "capplan.limit-search/1"
SEARCH_FILE = "search.json"

StepKind = Literal["level", "closed", "open"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchIdentity(_Model):
    """What a resumed search must share with the recorded one."""

    host: str = Field(description="base URL of the endpoint")
    model: str = Field(description="model name sent in each request")
    profile_source: str = Field(description="profile path or 'preset:<name>'")
    profile_digest: str = Field(description="digest of the profile the requests are drawn from")
    slo: str = Field(description="the SLO spec as given")
    success_only: bool = False
    dimension: Literal["rate", "concurrency"]
    method: Literal["measured", "fast"]
    seed: int


class SearchStep(_Model):
    """One step that ended: a measured level (`level`: `load`), a closed-loop step of the
    fast search (`closed`: users, requests, min_s, max_s) or an open-loop one (`open`: rate,
    duration_s, burst, fresh); the stage that measured it and, for a level, what the probe
    made of it (held_s, warmup_s, abandoned, unstable, steady). Times on the run clock."""

    kind: StepKind
    stage: str = Field(min_length=1, description="its stage in records.parquet and stages.json")
    start_s: float | None = Field(default=None, description="stage start, run clock (s)")
    end_s: float | None = Field(default=None, description="end of what it measured (s)")
    wall_s: float = Field(ge=0, description="wall seconds the step took")
    load: float | None = Field(default=None, description="level: req/s or users")
    users: int | None = None
    requests: int | None = None
    min_s: float | None = None
    max_s: float | None = None
    rate: float | None = Field(default=None, description="open step: req/s")
    duration_s: float | None = None
    burst: int | None = None
    fresh: bool | None = None
    held_s: float | None = Field(default=None, description="level: how long it was held (s)")
    warmup_s: float | None = None
    abandoned: str | None = None
    unstable: str | None = None
    steady: str | None = None


class SearchLog(_Model):
    """search.json: the search's identity, its options and the steps that ended."""

    schema_: str = Field(default=SEARCH_SCHEMA, alias="schema")
    identity: SearchIdentity
    options: dict[str, Any] = Field(
        description="the other options of `capplan limit` (planner.limit.run.LimitOptions)"
    )
    steps: list[SearchStep] = Field(default_factory=list)
    discarded: list[str] = Field(
        default_factory=list, description="stages stopped mid-way, run again on resume"
    )
    finished: bool = Field(default=False, description="the search answered (limit.json)")


def read_search_log(run_dir: Path) -> SearchLog:
    """run_dir/search.json; InputError naming the folder when it holds no limit search."""
    path = Path(run_dir) / SEARCH_FILE
    if not path.exists():
        raise InputError(
            f"{run_dir}: no limit search to resume here (no {SEARCH_FILE}; "
            "`capplan limit -o DIR` writes one)"
        )
    return validate(SearchLog, read_json(path, "limit search log"), path, SEARCH_SCHEMA)


def write_search_log(run_dir: Path, log: SearchLog) -> None:
    """search.json, written atomically (a stop while it is written keeps the last one)."""
    write_model(Path(run_dir) / SEARCH_FILE, log, "limit search log")
