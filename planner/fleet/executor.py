"""Where independent simulation points run: local processes (the default) or a Dask cluster.

`parse_executor` reads `--executor` once, at the edge: `local`, or `dask://HOST:PORT` for a
running Dask distributed scheduler (`pip install -e '.[dask]'`; its workers need capplan
installed). `DaskPoints` hands a job to the cluster once (scattered to every worker) and
submits one task per point; a point's result does not depend on where it ran (the same
seeded simulation, no wall clock in it), so every executor gives the same results bit for
bit. `JobTasks` runs any job's independent tasks (whatif's candidates) on either executor:
spawned local processes, the Dask cluster, or this process alone.

Local worker processes (`start_local`) ignore Ctrl-C and exit when this process dies;
`stop_local` ends them at once when the block that used them was left by an exception
(Ctrl-C, or SIGTERM, which the CLI raises as Ctrl-C), since a running point can take tens of
seconds. Every wait here is one a signal breaks (`result_of`): polars, once imported,
takes SIGINT with SA_RESTART, so a plain `Future.result()` or thread join sleeps on
through Ctrl-C until the task ends (pola-rs/polars#21739).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar, cast

from contracts.errors import ConfigError
from contracts.executor import ExecutorSpec

CONNECT_TIMEOUT_S = 10.0
# How long a terminated worker is given to end before it is killed (SIGTERM ends it at once
# unless it is stuck in C code).
TERMINATE_WAIT_S = 5.0
# A wait on a future is cut into slices this long, so a pending Ctrl-C is raised between two.
WAIT_SLICE_S = 0.1

T = TypeVar("T")


def result_of(future: Future[T]) -> T:
    """`future.result()` (raising what the task raised), waiting in slices of `WAIT_SLICE_S`
    so that Ctrl-C (or SIGTERM in the CLI) is raised within one, whoever handles SIGINT."""
    while not future.done():
        if isinstance(future, Future):
            concurrent.futures.wait([future], timeout=WAIT_SLICE_S)
        else:  # a Dask future: its result() waits in slices of 10 s
            time.sleep(WAIT_SLICE_S)
    return future.result()


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
        self._submitted: list[Any] = []

    def submit(self, fn: Callable[..., Any], *args: object) -> Future[Any]:
        """Run `fn(job, *args)` on a worker; the returned future's `result()` waits for it."""
        future = self._client.submit(fn, self._job, *args, pure=False)
        self._submitted.append(future)
        # A Dask future answers result() as a concurrent one does, which is all the pool asks.
        return cast("Future[Any]", future)

    def workers(self) -> int:
        """Workers the scheduler has now."""
        return len(self._client.scheduler_info().get("workers", {}))

    def close(self, at_once: bool = False) -> None:
        """Disconnect; `at_once` (the job was given up) cancels the tasks not finished first,
        so the scheduler drops the queued ones (a task already running on a worker ends
        there, its result unread)."""
        if at_once:
            self._client.cancel([f for f in self._submitted if not f.done()])
        self._client.close()


def start_local(
    workers: int, initializer: Callable[[Any], None], job: object
) -> ProcessPoolExecutor:
    """`workers` spawned processes, each started by `initializer(job)`, that ignore Ctrl-C
    (this process ends them: `stop_local`) and exit when this process dies."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_local_worker,
        initargs=(initializer, job),
    )


def stop_local(pool: ProcessPoolExecutor, at_once: bool) -> None:
    """End `pool`'s workers: after the tasks they are running (those not started are
    cancelled), or, `at_once`, now: the running ones terminated. Interrupted while it waits,
    it ends them at once and lets the interruption go on."""
    # The pool's own list of its processes (private; Python 3.14's terminate_workers reads
    # it the same way): shutdown forgets it, so it is copied first.
    processes = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    try:
        if not at_once:
            # The pool's thread sends each worker its end once the running tasks are done;
            # a wait on the workers' sentinels is a select, which a signal breaks.
            pending = [p.sentinel for p in processes]
            while pending:
                ended = multiprocessing.connection.wait(pending)
                pending = [s for s in pending if s not in ended]
            return
    except BaseException:
        _terminate(processes)
        raise
    _terminate(processes)


def _terminate(processes: Sequence[BaseProcess]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(TERMINATE_WAIT_S)
        if process.exitcode is None:
            process.kill()
            process.join()


def _start_local_worker(initializer: Callable[[Any], None], job: object) -> None:
    # Ctrl-C reaches the whole process group: the parent decides, and ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent.sentinel,), daemon=True).start()
    initializer(job)


def _exit_with_parent(sentinel: int) -> None:
    """Wait for the parent to end (SIGKILL gives it no time to end its workers) and exit."""
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


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
    Use it as a context manager: the workers or the connection end with it, at once when
    it is left by an exception (`stop_local`). Raises ConfigError as `DaskPoints` does.
    """

    def __init__(self, spec: ExecutorSpec, job: object, workers: int) -> None:
        self._job = job
        self._dask = DaskPoints(spec, job) if spec.kind == "dask" else None
        self._local: ProcessPoolExecutor | None = None
        if self._dask is None and workers > 1:
            self._local = start_local(workers, _start_worker, job)

    def __enter__(self) -> JobTasks:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._dask is not None:
            self._dask.close(at_once=exc_type is not None)
        if self._local is not None:
            stop_local(self._local, at_once=exc_type is not None)

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
