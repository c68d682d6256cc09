"""Where independent simulation points run: local processes (the default) or a Dask cluster.

`parse_executor` reads `--executor` once, at the edge: `local`, or `dask://HOST:PORT` for a
running Dask distributed scheduler (`pip install -e '.[dask]'`; its workers need capplan
installed). `DaskPoints` hands a job to the cluster once (scattered to every worker) and
submits one task per point; a point's result does not depend on where it ran (the same
seeded simulation, no wall clock in it), so every executor gives the same results bit for
bit.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, cast

from contracts.errors import ConfigError

DASK_PREFIX = "dask://"
CONNECT_TIMEOUT_S = 10.0
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


class DaskPoints:
    """A connection to a Dask scheduler for one job's points; close it when done.

    Raises ConfigError when the `distributed` package is missing or no scheduler answers at
    the address within `CONNECT_TIMEOUT_S`.
    """

    def __init__(self, spec: ExecutorSpec, job: object) -> None:
        try:
            from distributed import Client
        except ImportError as err:
            raise ConfigError(
                f"--executor {spec.text} needs Dask distributed: pip install -e '.[dask]'"
            ) from err
        try:
            self._client = Client(
                f"tcp://{spec.address}", timeout=CONNECT_TIMEOUT_S, set_as_default=False
            )
        except (OSError, TimeoutError) as err:
            raise ConfigError(
                f"--executor {spec.text}: no Dask scheduler answered at {spec.address} "
                f"within {CONNECT_TIMEOUT_S:g} s ({err})"
            ) from err
        self._job = self._client.scatter(job, broadcast=True)

    def submit(self, fn: Callable[..., Any], *args: object) -> Future[Any]:
        """Run `fn(job, *args)` on a worker; the returned future's `result()` waits for it."""
        # A Dask future answers result() as a concurrent one does, which is all the pool asks.
        return cast("Future[Any]", self._client.submit(fn, self._job, *args, pure=False))

    def workers(self) -> int:
        """Workers the scheduler has now."""
        return len(self._client.scheduler_info().get("workers", {}))

    def close(self) -> None:
        self._client.close()
