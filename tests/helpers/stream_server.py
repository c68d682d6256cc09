"""Kept for tests written against this path: the streaming server is bench.kit.stream_server."""

from bench.kit.stream_server import (
    ROOT,
    ServerProcess,
    fault_message,
    launch,
    make_app,
    start_server,
    stream_tokens,
)

__all__ = [
    "ROOT",
    "ServerProcess",
    "fault_message",
    "launch",
    "make_app",
    "start_server",
    "stream_tokens",
]
