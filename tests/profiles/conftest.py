"""Fixtures for the profiler tests: the shared public traces and small logs built in code."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
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


def _table(n: int, seed: int, start: float) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "timestamp": start + np.cumsum(rng.exponential(0.2, n)),
            "input_tokens": rng.integers(1, 4000, n),
            "output_tokens": rng.integers(1, 800, n),
            "model": rng.choice(["a", "b"], n),
        }
    )


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The logs the object-store tests upload (Parquet, CSV, gzip CSV, OpenAI JSONL) and
    compare with: a folder of local files."""
    folder = tmp_path_factory.mktemp("s3logs")
    _table(3000, 1, 1.7e9).write_parquet(folder / "day-1.parquet", row_group_size=500)
    _table(2000, 2, 1.7e9 + 700).write_parquet(folder / "day-2.parquet", row_group_size=500)
    _table(500, 3, 1.7e9).write_csv(folder / "small.csv")
    with gzip.open(folder / "small.csv.gz", "wb") as fh:
        fh.write((folder / "small.csv").read_bytes())
    build_openai_log(folder, n=200, seed=4)  # folder / "openai_4.jsonl"
    return folder
