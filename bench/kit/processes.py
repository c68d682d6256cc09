"""Child processes of the test servers (nginx, moto's S3): a clean stop. (A free loopback port
is planner.loadtest.netutil's free_port.)"""

from __future__ import annotations

import subprocess


def stop_child(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not gone within `timeout_s`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
