"""`--columns` names a table's columns: given with the format detected, the logs are read by
those names even where the file looks like a format capplan knows (an Azure trace's layout was
used instead, without a word); with another format named, or a column the file lacks, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import load_profile


@pytest.fixture
def azure(tmp_path: Path) -> Path:
    """An Azure-trace-shaped CSV: prompts of 1,000-1,049 tokens, outputs of 10-59."""
    rows = "".join(
        f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.000,{1000 + i},{10 + i}\n" for i in range(50)
    )
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    return path


def _profile(tmp_path: Path, log: Path, *flags: str) -> tuple[int, str, Path]:
    out = tmp_path / "p.json"
    result = CliRunner().invoke(app, ["profile", str(log), *flags, "-o", str(out), "--quiet"])
    return result.exit_code, result.output, out


def test_named_columns_are_read_by_their_names_not_the_detected_layout(
    tmp_path: Path, azure: Path
) -> None:
    code, output, out = _profile(tmp_path, azure)  # detected: the Azure layout
    assert code == 0, output
    pairs = load_profile(out).lengths.sampler.pairs
    assert min(i for i, _ in pairs) >= 1000 and max(o for _, o in pairs) < 60
    swapped = "arrival=TIMESTAMP,input=GeneratedTokens,output=ContextTokens"
    code, output, out = _profile(tmp_path, azure, "--columns", swapped)
    assert code == 0, output
    pairs = load_profile(out).lengths.sampler.pairs
    assert max(i for i, _ in pairs) < 60 and min(o for _, o in pairs) >= 1000, pairs[:3]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--columns", "arrival=nope"], "missing column 'nope'"),
        (["--columns", "arrival=TIMESTAMP", "--log-format", "azure"], "not azure"),
    ],
)
def test_columns_that_cannot_apply_exit_2(
    tmp_path: Path, azure: Path, flags: list[str], said: str
) -> None:
    code, output, out = _profile(tmp_path, azure, *flags)
    assert code == 2 and said in output and "Traceback" not in output, output
    assert not out.exists()
