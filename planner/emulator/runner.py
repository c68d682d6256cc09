"""Ways to run the emulator: foreground (`serve`), a background thread, or a subprocess.

Tests and the demo use `running_emulator(config)` (a thread in this process) or
`emulator_subprocess(config)` (its own process and core, for timing-sensitive runs); both
bind a free port on 127.0.0.1 and yield the base URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from contracts.errors import RunError
from planner.emulator.server import EmulatorServer, Faults
from planner.engine import EngineConfig


def serve(
    config: EngineConfig,
    host: str = "127.0.0.1",
    port: int = 8000,
    speed: float = 1.0,
    seed: int = 0,
    faults: Faults | None = None,
    model_name: str | None = None,
    announce: Callable[[str], None] = print,
    stream_interval: int = 1,
) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM); `announce` gets the line with the URL."""

    async def main() -> None:
        server = EmulatorServer(
            config,
            speed=speed,
            seed=seed,
            faults=faults,
            model_name=model_name,
            stream_interval=stream_interval,
        )
        bound = await server.start(host, port)
        announce(
            f"capplan emulate: {config.model.name} on {config.gpu.name} x{config.tp}, "
            f"serving `{server.model_name}` at http://{host}:{bound} (time scale {speed:g}x)"
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await server.stop()

    asyncio.run(main())


class EmulatorThread:
    """An emulator on its own event loop in a daemon thread of this process."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        speed: float = 1.0,
        seed: int = 0,
        faults: Faults | None = None,
        model_name: str | None = None,
        keep_timelines: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.server = EmulatorServer(
            config,
            speed=speed,
            seed=seed,
            faults=faults,
            model_name=model_name,
            keep_timelines=keep_timelines,
        )
        self._host = host
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.base_url = ""

    def start(self) -> str:
        """Start serving and return the base URL (http://host:port)."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            self.server.start(self._host, self._port), self._loop
        )
        port = future.result(timeout=30)
        self.base_url = f"http://{self._host}:{port}"
        return self.base_url

    def call(self, func: Callable[[], object]) -> object:
        """Run `func` on the server's loop thread (to read engine state safely)."""

        async def run() -> object:
            return func()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()


@contextlib.contextmanager
def running_emulator(
    config: EngineConfig,
    *,
    speed: float = 1.0,
    seed: int = 0,
    faults: Faults | None = None,
    model_name: str | None = None,
    host: str = "127.0.0.1",
) -> Iterator[str]:
    """An emulator in a background thread on a free port; yields its base URL."""
    emulator = EmulatorThread(
        config, speed=speed, seed=seed, faults=faults, model_name=model_name, host=host
    )
    try:
        yield emulator.start()
    finally:
        emulator.stop()


class EmulatorProcess:
    """An emulator in its own Python process (`python -m capplan emulate`) on a free port.

    `start()` returns the base URL; `pid` is the server's process id (to read its CPU time);
    `stop()` ends it with SIGTERM. Raises RunError when the process exits or prints no URL
    within `startup_timeout_s`.
    """

    def __init__(
        self,
        config: EngineConfig,
        *,
        speed: float = 1.0,
        seed: int = 0,
        faults: Faults | None = None,
        model_name: str | None = None,
        host: str = "127.0.0.1",
        startup_timeout_s: float = 60.0,
        stream_interval: int = 1,
    ) -> None:
        self._config = config
        self._stream_interval = stream_interval
        self._faults = faults or Faults()
        self._speed = speed
        self._seed = seed
        self._model_name = model_name
        self._host = host
        self._timeout_s = startup_timeout_s
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RunError("the emulator process is not running")
        return self._proc.pid

    def start(self) -> str:
        self._tmp = tempfile.TemporaryDirectory(prefix="capplan-emulator-")
        tmp = Path(self._tmp.name)
        config_path = tmp / "engine.json"
        config_path.write_text(self._config.model_dump_json())
        faults = self._faults
        args = [
            sys.executable,
            "-m",
            "capplan",
            "emulate",
            "--engine-config",
            str(config_path),
            "--bind",
            self._host,
            "--port",
            "0",
            "--time-scale",
            repr(self._speed),
            "--seed",
            str(self._seed),
            "--stream-interval",
            str(self._stream_interval),
            "--error-rate",
            repr(faults.error_rate),
            "--drop-rate",
            repr(faults.drop_rate),
            "--stall-rate",
            repr(faults.stall_rate),
        ]
        if faults.reject_when_waiting is not None:
            args += ["--reject-when-waiting", str(faults.reject_when_waiting)]
        if self._model_name:
            args += ["--served-model-name", self._model_name]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._stderr = (tmp / "stderr.log").open("w")
        self._proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env
        )
        try:
            self.base_url = _read_url(self._proc, self._timeout_s, tmp / "stderr.log")
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, timeout_s=10.0)
            self._stderr.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


@contextlib.contextmanager
def emulator_subprocess(
    config: EngineConfig,
    *,
    speed: float = 1.0,
    seed: int = 0,
    faults: Faults | None = None,
    model_name: str | None = None,
    host: str = "127.0.0.1",
    startup_timeout_s: float = 60.0,
    stream_interval: int = 1,
) -> Iterator[str]:
    """An emulator in its own Python process on a free port; yields its base URL.

    Raises RunError when the process exits or prints no URL within `startup_timeout_s`.
    """
    emulator = EmulatorProcess(
        config,
        speed=speed,
        seed=seed,
        faults=faults,
        model_name=model_name,
        host=host,
        startup_timeout_s=startup_timeout_s,
        stream_interval=stream_interval,
    )
    try:
        yield emulator.start()
    finally:
        emulator.stop()


def _read_url(proc: subprocess.Popen[str], timeout_s: float, stderr_path: Path) -> str:
    assert proc.stdout is not None
    found: list[str] = []

    def reader() -> None:
        # Keep draining stdout after the URL line so the server never blocks on a full pipe.
        assert proc.stdout is not None
        for line in proc.stdout:
            if not found and " at http://" in line:
                found.append(line.split(" at ", 1)[1].split()[0])

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not found and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)  # polling the reader thread's result, with a deadline
    if not found:
        proc.kill()
        proc.wait()
        err = stderr_path.read_text(errors="replace").strip()
        raise RunError(f"the emulator subprocess did not start: {err[-2000:]}")
    return found[0]


def stop_process(proc: subprocess.Popen[Any], *, timeout_s: float) -> None:
    """SIGTERM a child process (a server finishing its log), then kill it after `timeout_s`."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
