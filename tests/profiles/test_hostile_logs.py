"""Logs that used to break the profiler: long RAG lines, truncated files, hostile JSON (issue 17).

Each goes through `capplan profile` as a user runs it: exit 0 with the bad lines counted, or
exit 2 with one message naming the file; never a traceback.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import zstandard
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import Profile, load_profile
from profiles.readers.base import LONG_LINE_REASON, MAX_LINE_BYTES, read_lines
from profiles.tokenize import synthetic_text
from testkit.logs import write_jsonl

runner = CliRunner()


def _profile(log: Path, *extra: str) -> tuple[int, str, Profile | None]:
    out = log.with_name(log.name + ".profile.json")
    res = runner.invoke(app, ["profile", str(log), "-o", str(out), "-q", *extra])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output, (load_profile(out) if res.exit_code == 0 else None)


def _one_error(output: str, log: Path) -> str:
    """The CLI's one error line, which must name the file."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert str(log) in lines[0]
    return lines[0]


def _chat(i: int, content: str, prompt_tokens: int = 7) -> dict:
    return {
        "timestamp": 1_700_000_000 + i,
        "request": {"model": "m", "messages": [{"role": "user", "content": content}]},
        "response": {"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3 + i}},
    }


def test_rag_log_with_300_kb_lines_is_detected_and_read(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    objs = [_chat(i, synthetic_text(60_000, rng), prompt_tokens=60_000 + i) for i in range(6)]
    log = write_jsonl(tmp_path / "rag.jsonl", objs)
    first_line = log.read_bytes().split(b"\n", 1)[0]
    assert len(first_line) > 250_000  # the first object alone is far past the old 64 KiB window
    code, output, prof = _profile(log)
    assert code == 0, output
    assert prof is not None and prof.source.format == "openai-jsonl"
    assert prof.source.rows == 6 and prof.source.rows_skipped == 0
    assert prof.lengths.input.max == 60_005 and prof.lengths.output.max == 8


def test_lines_longer_than_the_cap_are_read_past_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "cap.jsonl"
    with log.open("w") as fh:
        fh.write(json.dumps(_chat(0, "x" * (MAX_LINE_BYTES + 10))) + "\n")  # line 1: too long
        for i in range(1, 4):
            fh.write(json.dumps(_chat(i, "hello there")) + "\n")
    code, output, prof = _profile(log)
    assert code == 0, output
    assert prof is not None and prof.source.format == "openai-jsonl"  # detected past line 1
    assert prof.source.rows == 3 and prof.source.skip_reasons == {LONG_LINE_REASON: 1}
    assert prof.source.skip_examples == [f"{log}:1: {LONG_LINE_REASON}"]


@pytest.mark.parametrize("compress", ["none", "gzip", "zstd"])
def test_read_lines_skips_long_lines_whole_and_keeps_line_numbers(
    tmp_path: Path, compress: str
) -> None:
    body = b"\xef\xbb\xbfshort\n" + b"y" * 5000 + b"\n\nab\xffc\r\n" + b"z" * 40
    if compress == "gzip":
        body = gzip.compress(body)
    elif compress == "zstd":
        body = zstandard.ZstdCompressor().compress(body)
    path = tmp_path / "lines.txt"
    path.write_bytes(body)
    got = list(read_lines(path, max_line_bytes=16))
    assert got == [(1, "short\n"), (2, None), (3, "\n"), (4, "ab\ufffdc\r\n"), (5, None)]


def test_truncated_parquet_is_one_clean_error(tmp_path: Path) -> None:
    frame = pl.DataFrame({"arrival_s": [0.0, 1.0, 2.5], "input_tokens": [5, 6, 7]})
    whole = tmp_path / "whole.parquet"
    frame.with_columns(output_tokens=pl.lit(3)).write_parquet(whole)
    data = whole.read_bytes()
    log = tmp_path / "cut.parquet"
    log.write_bytes(data[: len(data) // 2])
    for extra in ((), ("--log-format", "table")):
        code, output, _ = _profile(log, *extra)
        assert code == 2
        assert "truncated or not a Parquet file" in _one_error(output, log)
    zipped = tmp_path / "cut.parquet.gz"
    zipped.write_bytes(gzip.compress(data[:-7]))
    code, output, _ = _profile(zipped)
    assert code == 2 and "truncated or not a Parquet file" in _one_error(output, zipped)


@pytest.mark.parametrize("kind", ["openai", "mooncake", "table"])
def test_deeply_nested_json_line_is_skipped_and_counted(tmp_path: Path, kind: str) -> None:
    good = {
        "openai": [_chat(i, "hi there") for i in range(4)],
        "mooncake": [
            {"timestamp": 1000 * i, "input_length": 40, "output_length": 5, "hash_ids": [1, i]}
            for i in range(4)
        ],
        "table": [{"arrival_s": i, "input_tokens": 9, "output_tokens": 2} for i in range(4)],
    }[kind]
    log = tmp_path / f"{kind}.jsonl"
    deep = '{"a":' * 50_000 + "1" + "}" * 50_000
    text = [json.dumps(o) for o in good]
    text.insert(2, deep)
    text.append("[" * 50_000 + "]" * 50_000)
    text.append('{"n": ' + "9" * 5000 + "}")  # over Python's 4300-digit int limit
    log.write_text("\n".join(text) + "\n")
    code, output, prof = _profile(log)
    assert code == 0, output
    assert prof is not None and prof.source.rows == 4
    assert prof.source.skip_reasons == {"JSON nested too deeply": 2, "not valid JSON": 1}
    assert prof.source.skip_examples[0] == f"{log}:3: JSON nested too deeply"


def _compress(kind: str, data: bytes) -> bytes:
    return gzip.compress(data) if kind == "gzip" else zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
@pytest.mark.parametrize("table", ["jsonl", "csv"])
def test_truncated_compressed_log_is_one_clean_error(tmp_path: Path, kind: str, table: str) -> None:
    rows = [{"arrival_s": i / 4, "input_tokens": 100 + i, "output_tokens": 9} for i in range(4000)]
    frame = pl.DataFrame(rows)
    plain = frame.write_ndjson() if table == "jsonl" else frame.write_csv()
    data = _compress(kind, plain.encode())
    log = tmp_path / f"cut.{table}.{kind}"
    log.write_bytes(data[: len(data) * 2 // 3])
    code, output, _ = _profile(log)
    assert code == 2 and f"the {kind} stream ends early" in _one_error(output, log)


def test_zstd_log_of_several_frames_is_read_whole(tmp_path: Path) -> None:
    rows = [{"arrival_s": i / 4, "input_tokens": 100 + i, "output_tokens": 9} for i in range(400)]
    frame = pl.DataFrame(rows)
    log = tmp_path / "frames.jsonl.zst"
    log.write_bytes(
        _compress("zstd", frame.head(150).write_ndjson().encode())
        + _compress("zstd", frame.tail(250).write_ndjson().encode())
    )
    code, output, prof = _profile(log)
    assert code == 0, output
    assert prof is not None and prof.source.rows == 400 and prof.source.rows_skipped == 0


def test_corrupt_compressed_data_is_one_clean_error(tmp_path: Path) -> None:
    rows = [{"arrival_s": i / 4, "input_tokens": 100 + i, "output_tokens": 9} for i in range(4000)]
    plain = "".join(json.dumps(r) + "\n" for r in rows).encode()
    for kind in ("gzip", "zstd"):
        broken = bytearray(_compress(kind, plain))
        broken[len(broken) // 2] ^= 0xFF
        log = tmp_path / f"bad.jsonl.{kind}"
        log.write_bytes(bytes(broken))
        code, output, _ = _profile(log)
        assert code == 2 and "corrupt" in _one_error(output, log)
