"""Where independent simulation points run: local processes (the default) or a Dask cluster.

`parse_executor` reads `--executor` once, at the edge: `local`, or `dask://HOST:PORT` for a
running Dask distributed scheduler (`pip install -e '.[dask]'`; its workers need capplan
installed). `DaskPoints` hands a job to the cluster once (scattered to every worker) and
submits one task per point; a point's result does not depend on where it ran (the same
seeded simulation, no wall clock in it), so every executor gives the same results bit for
bit. `JobTasks` runs any job's independent tasks (whatif's candidates) on either executor:
spawned local processes, the Dask cluster, or this process alone.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, cast

from contracts.errors import ConfigError
from contracts.executor import ExecutorSpec

CONNECT_TIMEOUT_S = 10.0


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


_JOB: object = None


def _start_worker(job: object) -> None:
    global _JOB
    _JOB = job


def _in_worker(fn: Callable[..., Any], *args: object) -> Any:
    return fn(_JOB, *args)


class JobTasks:
    """Independent tasks of one job: `submit(fn, *args)` runs `fn(job, *args)` on the Dask
    cluster (`spec` dask), on `workers` spawned local processes (each given the job once), or
    here at once (`workers` 1). `fn` must be a module-level function (it is pickled by name).
    Use it as a context manager: the workers or the connection end with it. Raises
    ConfigError as `DaskPoints` does.
    """

    def __init__(self, spec: ExecutorSpec, job: object, workers: int) -> None:
        self._job = job
        self._dask = DaskPoints(spec, job) if spec.kind == "dask" else None
        self._local: ProcessPoolExecutor | None = None
        if self._dask is None and workers > 1:
            self._local = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(job,),
            )

    def __enter__(self) -> JobTasks:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dask is not None:
            self._dask.close()
        if self._local is not None:
            self._local.shutdown(wait=True, cancel_futures=True)

    def submit(self, fn: Callable[..., Any], *args: object) -> Future[Any]:
        """Start `fn(job, *args)`; the future's `result()` waits for it (raises what it raised)."""
        if self._dask is not None:
            return self._dask.submit(fn, *args)
        if self._local is not None:
            return self._local.submit(_in_worker, fn, *args)
        done: Future[Any] = Future()
        try:
            done.set_result(fn(self._job, *args))
        except Exception as err:  # handed to result(), as a worker's would be
            done.set_exception(err)
        return done
