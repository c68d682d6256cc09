"""Local networking helpers shared by the load test, the tests and the benches."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it).

    The port is released before returning, so another process could take it first; callers
    start their server on it at once.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
