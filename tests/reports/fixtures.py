"""Kept for tests written against this path: the report's inputs are bench.kit.report_inputs."""

from bench.kit.report_inputs import (
    LIMIT_RPS,
    PEAK_RPS,
    REFUSED_MESSAGE,
    SLO_TTFT_S,
    STAGES,
    TIMEOUT_MESSAGE,
    FixturePaths,
    build_limit,
    build_plan,
    build_profile,
    build_run,
    write_fixture,
)

__all__ = [
    "LIMIT_RPS",
    "PEAK_RPS",
    "REFUSED_MESSAGE",
    "SLO_TTFT_S",
    "STAGES",
    "TIMEOUT_MESSAGE",
    "FixturePaths",
    "build_limit",
    "build_plan",
    "build_profile",
    "build_run",
    "write_fixture",
]
