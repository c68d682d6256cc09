"""The run directory, owned here: its file names, run.json, stages.json, the per-request
records and scraped server metrics (msgpack part files while a run writes, Parquet after) and
the running load test's scratch files.

The load generator (its part writers, a plain Locust run's start and end), `capplan loadtest`
and the limit search (through planner.loadtest: the run's start, consolidation, summaries)
and the report (its loaders) read and write the run directory through this module; limit.json
in it is the limit search's own file (contracts.limit), named here for its readers.

While a run goes, the process that writes (the local runner or the master) appends a part file
about every second (`records.parts/part-NNNNNN.msgpack`), written to a temporary name and
renamed, so a crash or Ctrl-C loses at most the last second and a reader never sees half a
file. At the end `consolidate_run` merges the parts into `records.parquet` and
`server_metrics.parquet`. `read_records` reads the consolidated file plus any parts not yet
merged, so a run still going (or one that crashed) reads the same as a finished one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import msgpack
import polars as pl
from pydantic import ValidationError

from contracts.errors import InputError
from contracts.jsonio import first_error, read_json, validate, write_atomic
from contracts.run import (
    RECORD_COLUMNS,
    RUN_SCHEMA,
    SERVER_METRIC_COLUMNS,
    RunInfo,
    StageSummary,
)

RUN_FILE = "run.json"
STAGES_FILE = "stages.json"
RECORDS_FILE = "records.parquet"
RECORDS_PARTS = "records.parts"
METRICS_FILE = "server_metrics.parquet"
METRICS_PARTS = "server_metrics.parts"
LOG_FILE = "locust.log"
# The running load test's scratch files under WORK_DIR, between capplan and the Locust
# process that writes the run; the folder is removed when the run is finished.
WORK_DIR = ".work"
STAGE_PLAN_FILE = (
    "stage_plan.json"  # the stages the load test runs (not plan.json, the capacity plan)
)
WORK_PROFILE_FILE = "profile.json"  # the profile its requests are drawn from
LIVE_FILE = "live.json"  # progress, rewritten about every second by the writing process
START_FILE = "start.json"  # the plan's start on the run clock, written once the plan starts
STAGE_ENDS_FILE = "stage_ends.json"  # stages ended early (steady, recovered): their end times
LOST_FILE = "lost_workers.json"  # workers the master lost mid-run
STOP_FILE = "stop"  # capplan asks the run to stop gracefully (Ctrl-C, a hopeless level)
STOPPED_FILE = "stopped.json"  # when the run stopped early, on the run clock: {"stop_s": t}
END_STAGE_FILE = "end-stage"  # capplan asks the run to end the stage named inside
DRIVER_ERROR_FILE = "driver_error.json"  # the load generator failed: {"error": "Class: text"}

RECORD_NAMES: tuple[str, ...] = tuple(RECORD_COLUMNS)
METRIC_NAMES: tuple[str, ...] = tuple(SERVER_METRIC_COLUMNS)

# Columns a file written by an older capplan (or another scraper) may lack: they read as
# null. Any other missing column means the file is not a capplan table: reading it is an error.
LATER_COLUMNS = frozenset({"error_message", "itl_gaps_s", "labels", "type"})
# server_metrics.parquet of an early layout named the sample's metric `metric`.
_METRIC_RENAMES = {"metric": "name"}


# --- records and server metrics ------------------------------------------------------------


class PartWriter:
    """Appends rows (tuples in column order) as numbered msgpack part files in `folder`.

    msgpack because a part is written inside the load generator's event loop: packing a
    second's rows takes tens of microseconds, where building an Arrow frame takes
    milliseconds and would delay scheduled sends. Parts become Parquet at consolidation.
    """

    def __init__(self, folder: Path, schema: dict[str, Any]) -> None:
        self._folder = folder
        self._schema = schema
        folder.mkdir(parents=True, exist_ok=True)
        existing = [int(p.name.split("-")[1].split(".")[0]) for p in folder.glob("part-*.msgpack")]
        self._seq = max(existing, default=0)

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        self._seq += 1
        final = self._folder / f"part-{self._seq:06d}.msgpack"
        tmp = final.with_suffix(".tmp")
        tmp.write_bytes(msgpack.packb([list(r) for r in rows], use_bin_type=True))
        os.replace(tmp, final)


def _read_part(path: Path, schema: dict[str, Any]) -> pl.DataFrame:
    rows = msgpack.unpackb(path.read_bytes(), raw=False)
    return pl.DataFrame([list(r) for r in rows], schema=schema, orient="row")


def _read_parquet(path: Path, schema: dict[str, Any]) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except Exception as err:  # polars raises several unrelated types for a bad file
        raise InputError(f"{path}: cannot read it as Parquet ({err})") from err
    frame = frame.rename({k: v for k, v in _METRIC_RENAMES.items() if k in frame.columns})
    missing = [c for c in schema if c not in frame.columns and c not in LATER_COLUMNS]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(schema)}"
        )
    return frame


def _conform(frame: pl.DataFrame, schema: dict[str, Any]) -> pl.DataFrame:
    """`frame` in `schema`'s column order and types; a LATER_COLUMNS column that a file
    written by an older capplan lacks reads as null, so such a run can still be appended to."""
    missing = [
        pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in schema.items()
        if name not in frame.columns
    ]
    return frame.with_columns(missing).select(list(schema)).cast(pl.Schema(schema))


def read_table(
    run_dir: Path, file_name: str, parts_name: str, schema: dict[str, Any]
) -> pl.DataFrame:
    """The consolidated file (if any) plus every complete part file, in write order.

    Raises InputError when the consolidated file is not a table of `schema`."""
    frames: list[pl.DataFrame] = []
    path = Path(run_dir) / file_name
    if path.exists():
        frames.append(_read_parquet(path, schema))
    parts = sorted((Path(run_dir) / parts_name).glob("part-*.msgpack"))
    frames.extend(_read_part(p, schema) for p in parts)
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat([_conform(f, schema) for f in frames], how="vertical")


def consolidate(run_dir: Path, file_name: str, parts_name: str, schema: dict[str, Any]) -> int:
    """Merge the parts into `file_name` (kept rows first), delete the parts; returns rows."""
    table = read_table(run_dir, file_name, parts_name, schema)
    tmp = Path(run_dir) / (file_name + ".tmp")
    table.write_parquet(tmp)
    os.replace(tmp, Path(run_dir) / file_name)
    parts_dir = Path(run_dir) / parts_name
    if parts_dir.exists():
        for p in parts_dir.glob("part-*"):
            p.unlink()
        parts_dir.rmdir()
    return table.height


def consolidate_run(run_dir: Path) -> None:
    """Merge the record and server-metric parts of `run_dir` into their Parquet files."""
    consolidate(run_dir, RECORDS_FILE, RECORDS_PARTS, RECORD_COLUMNS)
    consolidate(run_dir, METRICS_FILE, METRICS_PARTS, SERVER_METRIC_COLUMNS)


def records_writer(run_dir: Path) -> PartWriter:
    """The part writer of the run's per-request records (RECORD_COLUMNS order)."""
    return PartWriter(Path(run_dir) / RECORDS_PARTS, RECORD_COLUMNS)


def metrics_writer(run_dir: Path) -> PartWriter:
    """The part writer of the run's scraped server samples (SERVER_METRIC_COLUMNS order)."""
    return PartWriter(Path(run_dir) / METRICS_PARTS, SERVER_METRIC_COLUMNS)


def read_records(run_dir: Path) -> pl.DataFrame:
    """Every record written so far (consolidated file plus unmerged parts), RECORD_COLUMNS."""
    return read_table(run_dir, RECORDS_FILE, RECORDS_PARTS, RECORD_COLUMNS)


def read_server_metrics(run_dir: Path) -> pl.DataFrame:
    """Scraped Prometheus samples (t_s, name, labels, type, value) written so far."""
    return read_table(run_dir, METRICS_FILE, METRICS_PARTS, SERVER_METRIC_COLUMNS)


def holds_records(run_dir: Path) -> bool:
    """The run directory has records, consolidated or in parts."""
    path = Path(run_dir)
    return (path / RECORDS_FILE).exists() or any((path / RECORDS_PARTS).glob("part-*.msgpack"))


def read_work_json(run_dir: Path, name: str) -> Any:
    """A scratch JSON file of the running load test (LIVE_FILE, START_FILE, ...), or None
    while it is absent or being replaced."""
    try:
        return json.loads((Path(run_dir) / WORK_DIR / name).read_text())
    except (OSError, ValueError):
        return None


# --- run.json and stages.json ----------------------------------------------------------------


def holds_run(run_dir: Path) -> bool:
    """Something of a run is already in `run_dir` (run.json or records)."""
    path = Path(run_dir)
    return any((path / name).exists() for name in (RUN_FILE, RECORDS_FILE, RECORDS_PARTS))


def fresh_dir(base: Path) -> Path:
    """`base`, or `base-2`, `base-3`, ... when it already holds a run (web UI: one per test)."""
    path, k = base, 1
    while holds_run(path):
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def read_run_info(run_dir: Path) -> RunInfo:
    """run_dir/run.json; InputError naming the file (and the first bad field) otherwise."""
    path = Path(run_dir) / RUN_FILE
    if not path.exists():
        raise InputError(f"{path}: no run.json (not a capplan run directory)")
    return validate(RunInfo, read_json(path, "run"), path, RUN_SCHEMA)


def write_run_info(run_dir: Path, info: RunInfo) -> None:
    write_atomic(Path(run_dir) / RUN_FILE, info.model_dump_json(by_alias=True, indent=2))


def read_stages(run_dir: Path, *, required: bool = False) -> list[StageSummary]:
    """run_dir/stages.json as StageSummary objects (a list, or {"stages": [...]}).

    Without it: [] (a run still going), or InputError when `required`. A bad file is an
    InputError naming the file, the stage and the field."""
    path = Path(run_dir) / STAGES_FILE
    if not path.exists() and not required:
        return []
    data = read_json(path, "stages")
    if isinstance(data, dict) and "stages" in data:
        data = data["stages"]
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of stage summaries")
    stages = []
    for i, item in enumerate(data):
        try:
            stages.append(StageSummary.model_validate(item))
        except ValidationError as err:
            raise InputError(f"{path}: stage {i}: {first_error(err)}") from err
    return stages


def write_stages(run_dir: Path, stages: Sequence[StageSummary]) -> None:
    text = json.dumps([s.model_dump() for s in stages], indent=2)
    write_atomic(Path(run_dir) / STAGES_FILE, text)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def new_run_info(out: Path, **fields: Any) -> RunInfo:
    """run.json's account of a run in `out` starting now: its name, this command line, the
    capplan and Locust versions and the start time, with `fields` (RunInfo's others)."""
    return RunInfo.model_validate(
        {
            "name": out.name,
            "command": list(sys.argv),
            "capplan_version": dist_version("llm-capacity-planner"),
            "locust_version": dist_version("locust"),
            "started_at": now_iso(),
            **fields,
        }
    )
