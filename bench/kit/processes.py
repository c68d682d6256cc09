"""Child processes of the test servers (nginx, moto's S3): a free loopback port, a clean stop."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_child(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not gone within `timeout_s`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
