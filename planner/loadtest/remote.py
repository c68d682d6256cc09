"""Load generation across hosts: the master's bind address, `capplan worker`, lost workers.

`capplan loadtest|limit|verify --master-bind HOST:PORT --expect-workers N` runs the Locust master
alone on that address; workers on other hosts join with `capplan worker --master HOST:PORT`
(or `locust -f locustfiles/llm.py --worker --master-host HOST --master-port PORT`). The
master sends each worker the plan, the profile and the options in its capplan_start message
and keeps the records; a worker lost mid-run is reported in run.json and stages.json and its
unreported requests are rows of class `lost` (locustfiles/lost.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

import locustfiles
from contracts.errors import ConfigError
from contracts.run import LostWorkerReport, StageSummary, StageValidity

LOCUSTFILE = Path(locustfiles.__file__).parent / "llm.py"


def parse_address(text: str, option: str) -> tuple[str, int]:
    """HOST:PORT as (host, port); raises ConfigError naming `option` when it is not one."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{option} {text!r}: expected HOST:PORT, e.g. 0.0.0.0:5557")
    return host.strip("[]"), int(port)


def master_args(bind: str, expect_workers: int, wait_s: float) -> list[str]:
    """Locust's options for a master alone on `bind` that starts once `expect_workers` joined."""
    host, port = parse_address(bind, "--master-bind")
    if expect_workers < 1:
        raise ConfigError("--master-bind needs --expect-workers N (N >= 1)")
    return [
        "--master",
        "--master-bind-host",
        host,
        "--master-bind-port",
        str(port),
        "--expect-workers",
        str(expect_workers),
        "--expect-workers-max-wait",
        str(int(wait_s)),
    ]


def locust_command(*args: str) -> list[str]:
    """`python -m locust -f <capplan's locustfile>` followed by `args`."""
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args]


def worker_command(master: str) -> list[str]:
    """The Locust command line of one worker joining the master at `master` (HOST:PORT)."""
    host, port = parse_address(master, "--master")
    return locust_command(
        "--worker",
        "--master-host",
        host,
        "--master-port",
        str(port),
        "--loglevel",
        "WARNING",
    )


class WorkerOptions(BaseModel):
    """What `capplan worker` was asked: each option's default declared once here (the CLI
    builds it with build_options; a master that is not HOST:PORT is refused in
    parse_address's words)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    master: str = Field(description="HOST:PORT of the master (its --master-bind)")
    once: bool = Field(default=False, description="exit after one run of the master")

    @field_validator("master", mode="after")
    @classmethod
    def _host_port(cls, master: str) -> str:
        parse_address(master, "--master")
        return master


def run_worker(options: WorkerOptions) -> int:
    """Serve as a load-generating worker of the master at `options.master` until Ctrl-C.

    A master runs one plan (a `capplan limit` level is one run), then quits and its workers
    end: this loop joins the next master at the same address unless `options.once`. Returns
    the exit code of the last Locust worker.
    """
    args = worker_command(options.master)
    while True:
        code = subprocess.call(args)
        if options.once or code not in (0,):
            return code


def read_lost(work: Path) -> list[LostWorkerReport]:
    """The master's `.work/lost_workers.json` as reports ([] when no worker was lost)."""
    path = work / "lost_workers.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return [
        LostWorkerReport(
            worker=w,
            slot=int(v["slot"]),
            of=int(v["of"]),
            lost_at_s=float(v["lost_at_s"]),
            lost_requests=int(v["lost_requests"] or 0),
        )
        for w, v in data.items()
    ]


def note_lost(summaries: list[StageSummary], lost: list[LostWorkerReport]) -> list[StageSummary]:
    """Stages with `lost` rows get a validity warning naming the lost workers."""
    if not lost:
        return summaries
    names = ", ".join(f"{r.worker} (slot {r.slot} of {r.of}, t={r.lost_at_s:.1f} s)" for r in lost)
    out = []
    for s in summaries:
        n = s.errors_by_class.get("lost", 0)
        if n:
            validity = s.validity or StageValidity()
            warning = f"{n} requests lost with a load-generating worker that died: {names}"
            validity = validity.model_copy(update={"warnings": [*validity.warnings, warning]})
            s = s.model_copy(update={"validity": validity})
        out.append(s)
    return out
