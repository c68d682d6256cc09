"""Fixtures for the profiler tests: the shared public traces and small logs built in code."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.profiles.logs import build_openai_log

# ../shared/data next to the checkout, or where CAPPLAN_SHARED_DATA points (a git worktree
# elsewhere).
SHARED_DATA = Path(
    os.environ.get("CAPPLAN_SHARED_DATA")
    or Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
)


@pytest.fixture
def shared_data() -> Path:
    """../shared/data next to the repository checkout (skips when absent)."""
    if not (SHARED_DATA / "AzureLLMInferenceTrace_conv.csv").is_file():
        pytest.skip(f"shared traces not found at {SHARED_DATA.resolve()} (a sibling of the repo)")
    return SHARED_DATA


@pytest.fixture
def openai_log(tmp_path: Path) -> Callable[..., tuple[Path, float, dict]]:
    """Builder of OpenAI JSONL logs with a known hit ratio (see build_openai_log)."""

    def build(n: int = 300, seed: int = 1, usage: bool = True) -> tuple[Path, float, dict]:
        return build_openai_log(tmp_path, n=n, seed=seed, usage=usage)

    return build
