"""source.digest: the sha256 of the input files' bytes, started early by `capplan profile`.

The truth is hashlib over the files' bytes read here, independent of profiles.digest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import profiles.digest as digest
from capplan.cli import app
from profiles.digest import start_digest, started_digest
from profiles.readers.base import files_digest


def _sha256(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()


def _log(path: Path, rows: int = 40) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"2023-11-16 18:15:{i % 60:02d}.{i:06d},{100 + i},{20 + i}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_started_digest_is_the_files_sha256_taken_once(tmp_path: Path) -> None:
    a, b = _log(tmp_path / "a.csv"), _log(tmp_path / "b.csv", 7)
    start_digest([str(tmp_path / "*.csv")])  # a glob: the same files, sorted
    assert started_digest([a, b]) == _sha256(a, b)
    assert started_digest([a, b]) is None  # taken: a second reader hashes the files itself
    assert files_digest([a, b]) == _sha256(a, b)


def test_a_file_changed_since_the_start_is_hashed_again(tmp_path: Path) -> None:
    a = _log(tmp_path / "a.csv")
    start_digest([str(a)])
    with a.open("a") as fh:
        fh.write("2023-11-16 18:16:00.000000,5,5\n")
    assert started_digest([a]) is None
    assert files_digest([a]) == _sha256(a)


def test_a_digest_of_other_files_is_not_taken_and_not_kept(tmp_path: Path) -> None:
    a, b = _log(tmp_path / "a.csv"), _log(tmp_path / "b.csv", 7)
    start_digest([str(a)])
    start_digest([str(tmp_path / "missing.csv")])  # nothing started: the reader says why
    assert started_digest([a]) == _sha256(a)
    start_digest([str(a)])
    assert started_digest([a, b]) is None
    assert not digest._started  # the first reader discards it, so none lingers
    assert started_digest([a]) is None


@pytest.mark.parametrize(
    "error", [PermissionError(13, "Permission denied"), ValueError("a library's own failure")]
)
def test_a_digest_that_failed_leaves_the_error_to_the_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    a = _log(tmp_path / "a.csv")

    def unreadable(*_: object) -> None:
        raise error

    monkeypatch.setattr(digest, "hash_file", unreadable)
    start_digest([str(a)])
    assert digest._started[0][1].result(timeout=10) is None  # settled: no reader waits forever
    assert started_digest([a]) is None  # the reader's own digest names the file and error


def test_capplan_profile_writes_the_sha256_it_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _log(tmp_path / "a.csv"), _log(tmp_path / "b.csv", 7)
    out = tmp_path / "p.json"

    def hashed_again(*_: object) -> None:
        raise AssertionError("the reader hashed the files again")

    monkeypatch.setattr("profiles.readers.base.hash_file", hashed_again)
    res = CliRunner().invoke(app, ["profile", str(tmp_path / "*.csv"), "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["source"]["digest"] == _sha256(a, b)
    assert not digest._started
