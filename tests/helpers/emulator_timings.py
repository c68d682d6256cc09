"""Run the emulator in its own process and, on SIGTERM, dump its engine's own request timings.

`python -m tests.helpers.emulator_timings ENGINE_JSON PORT_FILE TIMINGS_FILE` serves on a
free port (written to PORT_FILE) and, when terminated, writes one JSON object per finished
request (ttft_s, tpot_s, output_tokens; engine seconds, speed 1) to TIMINGS_FILE. A test
compares what the load generator measured with what the engine itself timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from planner.emulator.runner import stop_process

ROOT = Path(__file__).resolve().parents[2]


async def _main(engine_json: Path, port_file: Path, timings_file: Path) -> None:
    from planner.emulator.server import EmulatorServer
    from planner.engine import EngineConfig

    config = EngineConfig.model_validate_json(engine_json.read_text())
    server = EmulatorServer(config, speed=1.0, seed=0, keep_timelines=True)
    port = await server.start("127.0.0.1", 0)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, port_file)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    rows = [
        {"ttft_s": t.ttft_s, "tpot_s": t.tpot_s, "output_tokens": t.output_tokens}
        for t in server.engine.timelines().values()
        if t.ttft_s is not None and not t.aborted
    ]
    timings_file.write_text(json.dumps(rows))
    await server.stop()


@contextlib.contextmanager
def emulator_with_timings(config_json: str, workdir: Path) -> Iterator[tuple[str, Path]]:
    """Yields (base URL, timings file); the file is written when the block exits."""
    engine_json, port_file, timings = (
        workdir / "engine.json",
        workdir / "port",
        workdir / "own.json",
    )
    engine_json.write_text(config_json)
    port_file.unlink(missing_ok=True)
    timings.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "tests.helpers.emulator_timings",
        str(engine_json),
        str(port_file),
        str(timings),
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the emulator did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}", timings
    finally:
        stop_process(proc, timeout_s=30.0)


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
