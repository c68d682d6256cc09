"""Where independent simulation points run, as an option: `local` (worker processes on this
machine) or a Dask distributed scheduler's address. The value and its parsing live here, so
every layer that carries the option (the planner that runs the points, the review options
the report layer holds) reads one definition; planner.fleet.executor runs them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from contracts.errors import ConfigError

DASK_PREFIX = "dask://"
EXECUTOR_HELP = (
    "Where simulation points run: local (worker processes on this machine) or "
    "dask://HOST:PORT (a Dask distributed scheduler; pip install -e '.[dask]')."
)


@dataclass(frozen=True)
class ExecutorSpec:
    """`local`, or a Dask scheduler's address (`tcp://HOST:PORT`)."""

    kind: Literal["local", "dask"] = "local"
    address: str | None = None

    @property
    def text(self) -> str:
        return "local" if self.kind == "local" else f"{DASK_PREFIX}{self.address}"


LOCAL = ExecutorSpec()


def parse_executor(text: str) -> ExecutorSpec:
    """`local` or `dask://HOST:PORT` as an ExecutorSpec. Raises ConfigError for anything else,
    naming the option and the expected forms."""
    value = text.strip()
    if value == "local":
        return LOCAL
    if value.startswith(DASK_PREFIX):
        host, sep, port = value[len(DASK_PREFIX) :].rpartition(":")
        if sep and host and port.isdigit() and 0 < int(port) < 65536:
            return ExecutorSpec(kind="dask", address=f"{host}:{int(port)}")
    raise ConfigError(
        f"--executor {text!r}: expected 'local' or 'dask://HOST:PORT' (e.g. dask://127.0.0.1:8786)"
    )
