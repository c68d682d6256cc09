"""The OpenAI-compatible emulator: the engine model served over HTTP in real time."""

from planner.emulator.protocol import ParsedRequest, RequestRejected, parse_request
from planner.emulator.runner import (
    EmulatorProcess,
    EmulatorThread,
    emulator_subprocess,
    running_emulator,
    serve,
)
from planner.emulator.server import EmulatorServer, Faults

__all__ = [
    "EmulatorProcess",
    "EmulatorServer",
    "EmulatorThread",
    "Faults",
    "ParsedRequest",
    "RequestRejected",
    "emulator_subprocess",
    "parse_request",
    "running_emulator",
    "serve",
]
