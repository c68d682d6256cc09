"""How many local load processes a plan needs: `--workers auto` for `capplan loadtest` and `limit`.

One capplan load process sends on schedule (schedule-lag p99 <= 5 ms) up to a rate that
depends on the machine. `bench/loadgen_capacity.py --save` measures it once per machine and
caches it (`$XDG_CACHE_HOME/capplan/loadgen_capacity.json`, else `~/.cache/...`); without a
cache the figure of the bench run quoted in the README stands in, marked as an estimate.
`choose_workers` turns a plan's peak offered rate into a worker count: one process while the
peak fits, else enough workers that each one's share of the arrivals fits, at most one per
CPU. Workers split one schedule (arrival k goes to worker k mod N), so the combined arrivals
are still the asked process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import ConfigError
from contracts.jsonio import read_json, validate, write_model
from contracts.run import StagePlan

CAPACITY_SCHEMA = "capplan.loadgen_capacity/1"

# One process's rate at schedule-lag p99 <= 5 ms in the bench runs quoted in the README
# (bench/loadgen_capacity.py: 16-token streamed answers, zero-delay server, 10 s levels, on
# the shared 2-core development machine): 1450 req/s passed and 1500 failed on a quiet
# machine; the busier the machine, the lower (182 req/s at load average 3): an estimate.
ESTIMATED_PROCESS_RPS = 1450.0


class ProcessCapacity(BaseModel):
    """What one load process holds on this machine (the cache file's content)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(default=CAPACITY_SCHEMA, alias="schema")
    rate_rps: float = Field(gt=0, description="highest rate with schedule-lag p99 <= lag_p99_s")
    lag_p99_s: float = Field(default=0.005, gt=0)
    cpus: int = Field(ge=1, description="os.cpu_count() when measured")
    source: str = Field(description="how the figure was obtained")


@dataclass(frozen=True)
class WorkerChoice:
    """The outcome of `--workers auto`: the count and the sentence that explains it."""

    workers: int  # 0: one process; N: N local workers and a master
    peak_rps: float | None
    per_process_rps: float
    reason: str


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "capplan" / "loadgen_capacity.json"


def load_capacity(path: Path | None = None) -> ProcessCapacity:
    """The cached measurement, or the bench's figure as an estimate when none is cached.

    Raises InputError when a cache file exists but is not a capacity file."""
    path = path or cache_path()
    if not path.exists():
        return ProcessCapacity(
            rate_rps=ESTIMATED_PROCESS_RPS,
            cpus=os.cpu_count() or 1,
            source="estimate from the README's bench run (no measurement cached on this "
            "machine: run bench/loadgen_capacity.py --save)",
        )
    return validate(
        ProcessCapacity, read_json(path, "load-generator capacity"), path, CAPACITY_SCHEMA
    )


def save_capacity(capacity: ProcessCapacity, path: Path | None = None) -> Path:
    path = path or cache_path()
    write_model(path, capacity, "load-generator capacity")
    return path


def plan_peak_rps(plan: StagePlan) -> float | None:
    """The highest mean arrival rate of the plan's open stages (None: no rate-driven stage)."""
    rates = [s.rate_rps for s in plan.stages if s.kind == "open" and s.rate_rps is not None]
    return max(rates) if rates else None


def choose_workers(
    peak_rps: float | None, capacity: ProcessCapacity, cpus: int | None = None
) -> WorkerChoice:
    """Workers for a peak offered rate: 0 (one process) while it fits one process, else
    ceil(peak / per-process rate) workers, at most `cpus` (default: os.cpu_count())."""
    cpus = cpus or os.cpu_count() or 1
    per = capacity.rate_rps
    held = f"one process holds {per:.0f} req/s here ({capacity.source})"
    if peak_rps is None:
        return WorkerChoice(0, None, per, f"no peak rate to size for: one process; {held}")
    if peak_rps <= per:
        return WorkerChoice(0, peak_rps, per, f"peak {peak_rps:g} req/s: one process; {held}")
    need = math.ceil(peak_rps / per)
    if need > cpus:
        return WorkerChoice(
            cpus,
            peak_rps,
            per,
            f"peak {peak_rps:g} req/s needs {need} processes but this machine has {cpus} "
            f"CPUs: {cpus} workers, expect schedule lag (add load machines, README "
            f"'Workers'); {held}",
        )
    return WorkerChoice(
        need, peak_rps, per, f"peak {peak_rps:g} req/s: {need} local workers; {held}"
    )


def parse_workers(text: str) -> int | None:
    """`--workers`: a count >= 0, or None for `auto`. Raises ConfigError otherwise."""
    if text.strip().lower() == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise ConfigError(f"--workers {text.strip()}: expected a count (0: one process) or 'auto'")
    return n
