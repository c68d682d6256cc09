"""Hypothesis strategies for request logs of random shape: CSV, JSONL and Parquet files whose
structure, value types, text encoding, truncation, corruption and compression are all drawn.

Values mix plausible ones (so that many cases get through to the statistics) with hostile ones
(NaN, huge or negative numbers, odd strings, nested JSON, deep nesting, broken quotes).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import polars as pl
import zstandard
from hypothesis import strategies as st

# Column and key names of every known format, so that drawn files often look like one of them.
KNOWN_NAMES = (
    "arrival_s",
    "timestamp",
    "TIMESTAMP",
    "Timestamp",
    "ContextTokens",
    "GeneratedTokens",
    "Request tokens",
    "Response tokens",
    "Model",
    "Session ID",
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
    "input_length",
    "output_length",
    "session_id",
    "model",
    "tenant",
    "ok",
    "hash_ids",
)
FORMATS = ("openai-jsonl", "azure", "burstgpt", "mooncake", "table")


@dataclass(frozen=True)
class FuzzLog:
    """One drawn log file: its bytes, a file name and the `capplan profile` options to use."""

    data: bytes
    name: str
    options: tuple[str, ...]
    recipe: str  # how it was made, for the failure report


_plausible_time = st.one_of(
    st.floats(0, 5000, allow_nan=False),
    st.integers(1_600_000_000, 1_800_000_000),
    st.integers(1_600_000_000_000, 1_800_000_000_000),
    st.sampled_from(
        ["2024-05-10T12:00:01.5Z", "2023-11-16 18:15:46.6805900", "2024-05-10 12:00:03+00:00"]
    ),
)
_plausible_count = st.integers(0, 5000)
# One kind per column, so that a column is mostly consistent (epoch s, ms, ISO, counts, names).
_column_kinds = (
    st.floats(0, 5000, allow_nan=False),
    st.integers(1_600_000_000, 1_800_000_000),
    st.integers(1_600_000_000_000, 1_800_000_000_000),
    st.integers(1_700_000_000, 1_700_100_000).map(
        lambda s: datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    ),
    _plausible_count,
    st.sampled_from(["m1", "m2", "true", "false"]),
)
_hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),  # NaN and infinities included
    st.text(max_size=12),
    st.sampled_from(["", "NaN", "-1", "1e400", "0x10", " 12 ", "\u2028", '"', "a,b", "\\"]),
)
scalars = st.one_of(_plausible_time, _plausible_count, _hostile)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
names = st.one_of(st.sampled_from(KNOWN_NAMES), st.text(max_size=8))


def _rarely(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in `one_in` draws; False is the simple case Hypothesis shrinks towards."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


def _maybe(draw: st.DrawFn, plausible: st.SearchStrategy[Any]) -> Any:
    """Mostly a plausible value, sometimes any JSON value."""
    return draw(json_values) if _rarely(draw, 8) else draw(plausible)


@st.composite
def openai_record(draw: st.DrawFn) -> dict[str, Any]:
    """An OpenAI-style request record with optional, sometimes ill-typed, parts."""
    rec: dict[str, Any] = {}
    if not _rarely(draw, 10):
        rec[draw(st.sampled_from(["timestamp", "time", "created_at", "ts"]))] = _maybe(
            draw, _plausible_time
        )
    request: dict[str, Any] = {}
    if draw(st.booleans()):
        request["model"] = _maybe(draw, st.sampled_from(["m1", "m2"]))
    shape = draw(st.sampled_from(["messages", "prompt", "none"]))
    if shape == "messages":
        request["messages"] = _maybe(
            draw,
            st.lists(
                st.fixed_dictionaries(
                    {"role": st.sampled_from(["system", "user"]), "content": st.text(max_size=80)}
                ),
                max_size=3,
            ),
        )
    elif shape == "prompt":
        request["prompt"] = _maybe(draw, st.text(max_size=80) | st.lists(st.integers(0, 99)))
    usage: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens"):
        if not _rarely(draw, 5):
            usage[key] = _maybe(draw, _plausible_count)
    if draw(st.booleans()):
        usage["prompt_tokens_details"] = {"cached_tokens": _maybe(draw, _plausible_count)}
    response: dict[str, Any] = {"usage": usage}
    if draw(st.booleans()):
        response["choices"] = [{"message": {"content": draw(st.text(max_size=40))}}]
    where = draw(st.sampled_from(["nested", "body", "flat"]))
    if where == "nested":
        rec.update(request=request, response=response)
    elif where == "body":
        rec.update(body=request, usage=usage)
    else:
        rec.update(request | {"usage": usage})
    for key in ("status_code", "error", "user", "session_id", "tenant", "metadata"):
        if _rarely(draw, 6):
            rec[key] = draw(json_values)
    return rec


@st.composite
def mooncake_record(draw: st.DrawFn) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "timestamp": _maybe(draw, st.integers(0, 10_000_000)),
        "input_length": _maybe(draw, _plausible_count),
        "output_length": _maybe(draw, _plausible_count),
    }
    if draw(st.booleans()):
        rec["hash_ids"] = _maybe(draw, st.lists(st.integers(0, 2**64 - 1), max_size=6))
    return rec


@st.composite
def table(draw: st.DrawFn) -> tuple[list[str], list[list[Any]]]:
    """Column names (often a known format's) and rows of mixed values."""
    known = draw(
        st.sampled_from(
            [
                ["TIMESTAMP", "ContextTokens", "GeneratedTokens"],
                ["Timestamp", "Model", "Request tokens", "Response tokens"],
                ["arrival_s", "input_tokens", "output_tokens", "model"],
                [],
            ]
        )
    )
    cols = list(dict.fromkeys(known + draw(st.lists(names, max_size=3))))
    kinds = [draw(st.sampled_from(_column_kinds)) for _ in cols]
    rows = [
        [draw(scalars) if _rarely(draw, 15) else draw(kind) for kind in kinds]
        for _ in range(draw(st.integers(3, 30)))
    ]
    return cols, rows


def _cell(value: Any) -> str:
    return (
        ""
        if value is None
        else (json.dumps(value) if isinstance(value, dict | list) else str(value))
    )


@st.composite
def csv_bytes(draw: st.DrawFn) -> tuple[bytes, str]:
    cols, rows = draw(table())
    buf = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    writer = csv.writer(buf, quoting=quoting, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(cols)
    for row in rows:
        cells = [_cell(v) for v in row]
        if _rarely(draw, 10):  # a ragged or broken line
            cells = cells[: draw(st.integers(0, len(cells)))] + draw(
                st.lists(st.sampled_from(['"', "x", ""]), max_size=2)
            )
        writer.writerow(cells)
    return buf.getvalue().encode("utf-8", errors="surrogatepass"), "csv"


_junk_lines = st.one_of(
    st.text(max_size=30),
    st.just("{"),
    st.just('{"timestamp": 1, "usage": '),
    st.integers(50, 3000).map(lambda d: '{"a":' * d + "1" + "}" * d),
    st.integers(50, 3000).map(lambda d: "[" * d + "]" * d),
    st.just("[1, 2, 3]"),
    st.just('{"n": ' + "7" * 4400 + "}"),
)


@st.composite
def jsonl_bytes(draw: st.DrawFn) -> tuple[bytes, str]:
    kind = draw(st.sampled_from(["openai", "mooncake", "table"]))
    if kind == "openai":
        records = draw(st.lists(openai_record(), min_size=3, max_size=30))
    elif kind == "mooncake":
        records = draw(st.lists(mooncake_record(), min_size=3, max_size=30))
    else:
        cols, rows = draw(table())
        records = [dict(zip(cols, row, strict=True)) for row in rows]
    lines = [json.dumps(r, allow_nan=True) for r in records]
    for _ in range(draw(st.integers(0, 3)) if _rarely(draw, 3) else 0):
        lines.insert(draw(st.integers(0, len(lines))), draw(_junk_lines))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return (end.join(lines) + end).encode("utf-8", errors="surrogatepass"), "jsonl"


_column_values = {
    "int": st.lists(
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=20
    ),
    "float": st.lists(st.one_of(st.none(), st.floats()), min_size=1, max_size=20),
    "text": st.lists(st.one_of(st.none(), st.text(max_size=10)), min_size=1, max_size=20),
    "bool": st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=20),
    "time": st.lists(st.one_of(st.none(), st.datetimes()), min_size=1, max_size=20),
    "list": st.lists(st.lists(st.integers(0, 99), max_size=3), min_size=1, max_size=20),
}


_plausible_columns = (
    st.floats(0, 5000, allow_nan=False),
    st.integers(1_600_000_000, 1_800_000_000),
    st.datetimes(datetime(2023, 1, 1), datetime(2025, 1, 1)),
    _plausible_count,
    st.sampled_from(["m1", "m2"]),
)


@st.composite
def parquet_bytes(draw: st.DrawFn) -> tuple[bytes, str]:
    """A Parquet file: table()'s column names, each column of one (usually plausible) type."""
    cols, rows = draw(table())
    length = max(len(rows), 1)
    data: dict[str, pl.Series] = {}
    for col in cols:
        if _rarely(draw, 4):
            values = draw(_column_values[draw(st.sampled_from(sorted(_column_values)))])
        else:
            plausible = draw(st.sampled_from(_plausible_columns))
            values = draw(st.lists(plausible, min_size=length, max_size=length))
        data[col] = pl.Series(col, (values * length)[:length], strict=False)
    buf = io.BytesIO()
    compression = draw(st.sampled_from(["uncompressed", "snappy", "zstd", "gzip"]))
    pl.DataFrame(data).write_parquet(buf, compression=compression)  # type: ignore[arg-type]
    return buf.getvalue(), "parquet"


def _encode(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    if not _rarely(draw, 3):
        return data, "utf-8"
    how = draw(st.sampled_from(["bom", "latin-1", "utf-16", "bad bytes"]))
    if how == "bom":
        return b"\xef\xbb\xbf" + data, how
    if how in ("latin-1", "utf-16"):
        return data.decode("utf-8", errors="replace").encode(how, errors="replace"), how
    if how == "bad bytes" and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:], how
    return data, "utf-8"


@st.composite
def fuzz_logs(draw: st.DrawFn) -> FuzzLog:
    """A log file of random format, shape and damage, with `capplan profile` options."""
    data, suffix = draw(st.one_of(csv_bytes(), jsonl_bytes(), parquet_bytes()))
    steps = [suffix]
    if suffix != "parquet":
        data, how = _encode(draw, data)
        steps.append(how)
    if len(data) > 1 and _rarely(draw, 6):
        data = data[: draw(st.integers(1, len(data) - 1))]
        steps.append(f"cut to {len(data)} bytes")
    if data and _rarely(draw, 10):
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        steps.append(f"byte {at} flipped")
    compress = draw(st.sampled_from(["gzip", "zstd"])) if _rarely(draw, 3) else "none"
    name = f"log.{suffix}"
    if compress != "none":
        data = (
            gzip.compress(data) if compress == "gzip" else zstandard.ZstdCompressor().compress(data)
        )
        name += ".gz" if compress == "gzip" else ".zst"
        steps.append(compress)
        if _rarely(draw, 6):
            data = data[: draw(st.integers(0, len(data) - 1))]
            steps.append(f"stream cut to {len(data)} bytes")
    options: list[str] = [
        "--log-format",
        draw(st.sampled_from(FORMATS)) if _rarely(draw, 4) else "auto",
    ]
    if _rarely(draw, 10):
        options += ["--group-by", draw(st.sampled_from(["model", "tenant", "session_id", "Model"]))]
    if _rarely(draw, 10):
        options += ["--time-unit", draw(st.sampled_from(["s", "ms", "us", "ns"]))]
    return FuzzLog(data, name, tuple(options), ", ".join(steps))
