"""Readers: format detection, each format, compression, several files, and broken input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import zstandard

from contracts.errors import InputError
from profiles.readers import READERS, detect_format, read_requests
from profiles.samples import sample_path
from testkit.logs import write_jsonl

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def test_registry_lists_every_format() -> None:
    assert set(READERS) == {"azure", "burstgpt", "mooncake", "openai-jsonl", "otlp", "table"}


def test_detects_each_shared_trace(shared_data: Path) -> None:
    assert detect_format(shared_data / "AzureLLMInferenceTrace_conv.csv") == "azure"
    assert detect_format(shared_data / "burstgpt_head42.csv") == "burstgpt"
    assert detect_format(shared_data / "mooncake_synthetic_trace.jsonl") == "mooncake"


def test_sample_is_ten_minutes_of_azure_conv() -> None:
    r = read_requests([str(sample_path("azure_conv"))])
    assert r.format == "azure" and r.frame.height > 2000
    assert 590 < r.frame["arrival_s"].max() < 600  # type: ignore[operator]
    assert sample_path("azure_conv").stat().st_size < 300_000
    with pytest.raises(InputError, match="known samples: azure_conv"):
        sample_path("nope")


def test_azure_2024_mixed_timestamp_formats(tmp_path: Path) -> None:
    f = tmp_path / "azure2024.csv"
    f.write_text(
        AZURE_HEADER
        + "2024-05-10 00:00:00.0040000+00:00,100,10\n"
        + "2024-05-10 00:00:01+00:00,200,20\n"
        + "2024-05-10 00:00:02.5+00:00,300,30\n"
    )
    r = read_requests([str(f)])
    assert r.format == "azure"
    assert r.frame["arrival_s"].to_list() == pytest.approx([0.0, 0.996, 2.496])
    assert r.first_timestamp is not None and r.first_timestamp.year == 2024


def test_gzip_and_zstd_read_like_plain(tmp_path: Path) -> None:
    plain = sample_path("azure_conv")
    data = plain.read_bytes()
    gz = tmp_path / "a.csv.gz"
    gz.write_bytes(gzip.compress(data))
    zst = tmp_path / "a.csv.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(data))
    base = read_requests([str(plain)]).frame
    for path in (gz, zst):
        r = read_requests([str(path)])
        assert r.format == "azure"
        assert r.frame.equals(base)


def test_several_files_and_globs_merge_in_arrival_order(tmp_path: Path) -> None:
    lines = sample_path("azure_conv").read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    # The second half first: files given out of time order still merge sorted.
    (tmp_path / "part1.csv").write_text(header + "".join(rows[1000:]))
    (tmp_path / "part2.csv").write_text(header + "".join(rows[:1000]))
    r = read_requests([str(tmp_path / "part*.csv")])
    assert len(r.files) == 2 and r.frame.height == len(rows)
    assert r.frame["arrival_s"].is_sorted()
    assert r.warnings == []
    with pytest.raises(InputError, match="no file matches"):
        read_requests([str(tmp_path / "none*.csv")])


def test_generic_parquet_with_column_mapping(tmp_path: Path) -> None:
    f = tmp_path / "log.parquet"
    pl.DataFrame(
        {
            "ts": [1_700_000_000_000 + 250 * i for i in range(40)],  # epoch milliseconds
            "prompt": list(range(1, 41)),
            "completion": [5] * 40,
            "conv": [f"c{i % 4}" for i in range(40)],
        }
    ).write_parquet(f)
    r = read_requests([str(f)], columns="arrival=ts,input=prompt,output=completion,session=conv")
    assert r.format == "table"
    assert r.first_timestamp is not None and r.first_timestamp.year == 2023
    assert r.frame["arrival_s"][-1] == pytest.approx(39 * 0.25)
    assert r.frame["session_id"].n_unique() == 4
    with pytest.raises(InputError, match="no input column found"):
        read_requests([str(f)])


def test_generic_csv_and_jsonl_tables_by_common_names(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n0.0,10,1\n0.5,20,2\n1.5,30,3\n")
    r = read_requests([str(csv)])
    assert r.frame["input_tokens"].to_list() == [10, 20, 30]
    assert r.first_timestamp is None  # relative times
    js = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"time": f"2024-01-01T00:00:0{i}Z", "prompt_tokens": i, "completion_tokens": 1}
            for i in range(5)
        ],
    )
    r = read_requests([str(js)])
    assert r.format == "table"
    assert r.frame["arrival_s"].to_list() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_mooncake_records_and_bad_lines(tmp_path: Path) -> None:
    f = tmp_path / "mc.jsonl"
    f.write_text(
        json.dumps({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})
        + "\n{not json\n"
        + json.dumps({"timestamp": 1000, "input_length": -3, "output_length": 5, "hash_ids": []})
        + "\n"
        + json.dumps(
            {"timestamp": 2000, "input_length": 600, "output_length": 7, "hash_ids": [1, 3]}
        )
        + "\n"
    )
    r = read_requests([str(f)])
    assert r.format == "mooncake" and r.block_tokens == 512
    assert r.frame["arrival_s"].to_list() == [0.0, 2.0]
    assert r.rows_skipped == 2
    assert r.skip_examples[0].startswith(f"{f}:2: not valid JSON")
    assert r.skip_examples[1].startswith(f"{f}:3: bad field")


def test_csv_bad_rows_are_skipped_with_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.csv"
    good = "".join(f"2023-11-16 18:00:{i:02d}.0000000,{100 + i},10\n" for i in range(20))
    f.write_text(
        AZURE_HEADER
        + good
        + "2023-11-16 18:01:00.0,abc,5\nnot-a-time,5,5\n2023-11-16 18:01:01.0,7,\n"
        # a count no request has (the JSONL readers skipped it; a CSV kept 200 M tokens)
        + "2023-11-16 18:01:02.0,200000000,5\n"
    )
    r = read_requests([str(f)])
    assert r.frame.height == 20
    assert r.rows_skipped == 4
    # each names the file, line and column, and what was expected there
    tokens = "expected a whole number of tokens from 0 to 100,000,000"
    assert r.skip_examples == [
        f"{f}:22: bad or missing input tokens (ContextTokens): {tokens}",
        f"{f}:23: bad or missing timestamp (TIMESTAMP): expected a date and time such as "
        "2023-11-16 18:15:46.680 (ISO 8601)",
        f"{f}:24: bad or missing output tokens (GeneratedTokens): {tokens}",
        f"{f}:25: bad or missing input tokens (ContextTokens): {tokens}",
    ]


def test_many_bad_rows_show_the_first_few_and_count_the_rest(tmp_path: Path) -> None:
    rows = [f"{i},10,1" if i % 2 else f"{i},x,1" for i in range(100)]
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    r = read_requests([str(f)])
    assert r.rows_skipped == 50 and len(r.skip_examples) == 5
    assert sum(r.skip_reasons.values()) == 50


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("", "empty file"),
        ("   \n\n", "empty file"),
        (AZURE_HEADER, "empty file"),
        (AZURE_HEADER + "x,y,z\n", "no usable rows"),
        ("a,b,c\n1,2,3\n", "no arrival column found"),
    ],
)
def test_unusable_files_raise_one_clear_error(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "x.csv"
    f.write_text(content)
    with pytest.raises(InputError, match=match):
        read_requests([str(f)])


def test_unknown_format_and_missing_column_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,5\n")
    with pytest.raises(InputError, match="known formats: auto, azure, burstgpt"):
        read_requests([str(f)], fmt="weblog")
    with pytest.raises(InputError, match="missing column 'GeneratedTokens'"):
        read_requests([str(f)], fmt="azure")
    with pytest.raises(InputError, match="file not found"):
        read_requests([str(tmp_path / "absent.csv")])
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01\x02garbage")
    with pytest.raises(InputError, match="cannot tell the format"):
        read_requests([str(binary)])


def test_backwards_timestamps_are_sorted_with_a_warning(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,input_tokens,output_tokens\n0,1,1\n2,2,2\n1,3,3\n3,4,4\n")
    r = read_requests([str(f)])
    assert r.frame["input_tokens"].to_list() == [1, 3, 2, 4]
    assert any("go backwards 1 time(s) (first at line 4)" in w for w in r.warnings)


def test_milliseconds_read_as_seconds_warns_with_evidence(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    t = np.cumsum(np.random.default_rng(0).integers(100, 400, size=200))
    f.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{x},10,2\n" for x in t))
    r = read_requests([str(f)])
    assert any("may be milliseconds" in w and "median gap" in w for w in r.warnings)
    fixed = read_requests([str(f)], time_unit="ms")
    assert fixed.frame["arrival_s"][-1] == pytest.approx((t[-1] - t[0]) / 1000)


def test_unclosed_quote_skips_only_that_line(tmp_path: Path) -> None:
    f = tmp_path / "q.csv"
    f.write_text(
        AZURE_HEADER
        + "2023-11-16 18:15:46.68,374,44\n"
        + '"2023-11-16 18:15:47.0,12,3\n'
        + "2023-11-16 18:15:48.0,13,4\n"
        + "2023-11-16 18:15:49.0,14,5,6\n"
    )
    r = read_requests([str(f)])
    assert r.frame["input_tokens"].to_list() == [374, 13]
    assert r.skip_examples == [
        f"{f}:3: malformed CSV line: unexpected end of data",
        f"{f}:5: wrong number of fields: expected 3, found 4",
    ]


def test_byte_order_mark_and_crlf(tmp_path: Path) -> None:
    f = tmp_path / "bom.csv"
    f.write_bytes(
        b"\xef\xbb\xbf"
        + AZURE_HEADER.encode().replace(b"\n", b"\r\n")
        + b"2023-11-16 18:15:46.68,374,44\r\n2023-11-16 18:15:47.0,12,3\r\n"
    )
    r = read_requests([str(f)])
    assert r.format == "azure" and r.frame["output_tokens"].to_list() == [44, 3]


def test_a_corrupt_timestamp_far_from_the_rest_is_skipped(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    rows = [f"{1_700_000_000 + i},10,2" for i in range(30)]
    rows[7] = "1e30,10,2"
    rows[9] = "5,10,2"
    f.write_text("ts,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    r = read_requests([str(f)])
    assert r.frame.height == 28
    assert r.first_timestamp is not None and r.first_timestamp.year == 2023
    assert [e.split(": ")[0] for e in r.skip_examples] == [f"{f}:9", f"{f}:11"]
    assert all("far from the rest" in e for e in r.skip_examples)


def test_a_skipped_row_s_reason_quotes_data_not_text(tmp_path: Path) -> None:
    """A broken log may hold prompt text in any field: the skipped row's reason (kept in the
    profile's skip_examples) quoted it (a bug hunt found 'zanzibarquux' in profile.json). It
    now quotes a field only where it reads as data (a number, a date, a time)."""
    from profiles.readers.base import shown

    good = {"timestamp": 1700000000, "request": {"model": "m", "messages": [{"role": "user",
            "content": "hi"}]}, "response": {"usage": {"prompt_tokens": 5,
            "completion_tokens": 5}}}  # fmt: skip
    bad = json.loads(json.dumps(good))
    bad["timestamp"] = "zanzibarquux at noon"
    worse = json.loads(json.dumps(good))
    worse["response"]["usage"]["prompt_tokens"] = "zanzibarquux"
    f = tmp_path / "oa.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in (good, bad, worse, good)))
    r = read_requests([str(f)])
    assert r.rows_skipped == 2
    said = " ".join(r.skip_examples)
    assert "zanzibarquux" not in said and "a 20-character string" in said, said
    assert "a 12-character string" in said
    assert shown("2023-13-45 10:00") == "'2023-13-45 10:00'" and shown(-3) == "-3"
    assert shown("abc") == "a 3-character string" and shown([1]) == "a JSON list"


def test_one_mistyped_year_is_named_not_silently_stretched(tmp_path: Path) -> None:
    """One row a year after the rest made the log a year long (mean rate 0, a planning peak of
    0 req/s) with only "timestamps go backwards" said about the next row (a bug hunt). The
    gap is now named with both sides; an ordinary log says nothing."""
    rows = [f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.000,{100 + i},10" for i in range(40)]
    f = tmp_path / "far.csv"
    far = rows.copy()
    far[12] = "2024-11-16 18:00:12.000,112,10"
    f.write_text(AZURE_HEADER + "\n".join(far) + "\n")
    said = " ".join(read_requests([str(f)]).warnings)
    assert "39 request(s) end at 2023-11-16 18:00:39 and 1 begins at 2024-11-16 18:00:12" in said
    assert "366.0 days later" in said, said
    f.write_text(AZURE_HEADER + "\n".join(rows) + "\n")
    assert not read_requests([str(f)]).warnings
