"""Fixtures for the profiler tests: the shared public traces and small logs built in code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.logs import build_openai_log
from tests.helpers.missing import missing
from tests.helpers.shared_data import SHARED_DATA


@pytest.fixture
def shared_data() -> Path:
    """shared/data beside the checkout (absent: fails in CI, skips elsewhere)."""
    if not (SHARED_DATA / "AzureLLMInferenceTrace_conv.csv").is_file():
        missing(f"shared traces not found at {SHARED_DATA.resolve()} (beside the checkout)")
    return SHARED_DATA


@pytest.fixture
def openai_log(tmp_path: Path) -> Callable[..., tuple[Path, float, dict]]:
    """Builder of OpenAI JSONL logs with a known hit ratio (see build_openai_log)."""

    def build(n: int = 300, seed: int = 1, usage: bool = True) -> tuple[Path, float, dict]:
        return build_openai_log(tmp_path, n=n, seed=seed, usage=usage)

    return build
