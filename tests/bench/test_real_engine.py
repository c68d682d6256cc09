"""testkit/real_engine.py without a server: a server that dies before it is ready."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.real_engine import LlamaServer, wait_ready


def test_a_server_that_exits_says_its_code_and_its_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "print('no model at /x'); raise SystemExit(3)"], stdout=out
        )
    with pytest.raises(RuntimeError, match=r"(?s)test server exited with code 3.*no model at /x"):
        wait_ready(LlamaServer(proc, 1, "none"), 30.0, log, "test server")
