"""Shared pieces of the log readers: the ReadResult, skip accounting, file opening, the registry.

Every reader turns its files into the canonical request table (DESIGN.md): a polars frame,
one row per request, with `arrival_s` in seconds since the source's first request. Readers
are chosen by kind through `READERS`; an unknown kind names the known ones.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol

import polars as pl

from contracts.errors import InputError
from profiles.digest import LogFile, hash_file, started_digest
from profiles.remote import RemoteFile, describe_error
from profiles.tokenize import Tokenizer

# Column order and dtypes of the canonical request table.
CANONICAL_COLUMNS: dict[str, pl.DataType] = {
    "arrival_s": pl.Float64(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "session_id": pl.String(),
    "model": pl.String(),
    "tenant": pl.String(),
    "ok": pl.Boolean(),
    "block_hashes": pl.List(pl.UInt64()),
    "hash_tokens": pl.Int64(),
    "cached_tokens": pl.Int64(),
}
REQUIRED_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")
MAX_SKIP_EXAMPLES = 5
# Longest line the line readers (JSONL, the CSV fallback) take: a 60k-token RAG prompt is
# about 300 KB, so this leaves two orders of magnitude. A longer line is read past in chunks,
# never held whole, and skipped and counted; it is never cut into a wrong parse.
MAX_LINE_BYTES = 64 << 20
LONG_LINE_REASON = f"line longer than {MAX_LINE_BYTES >> 20} MiB"
MAX_TOKENS = 100_000_000  # no prompt or answer is this long: larger counts are corrupt
# A field's value quoted in a skipped row's reason only where it reads as data (a number, a
# date, a time): a broken log may hold prompt text in any field, and prompt text never leaves
# the reader.
_DATA_LIKE = re.compile(r"[\w:.+\-/ ]{1,40}")


def shown(value: object) -> str:
    """`value` for a skipped row's reason: its repr where it is a number, null, a boolean or a
    short string of digits, dates and times; otherwise only its type and size ("a
    20-character string"), so no text of the log is written into the profile."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        if _DATA_LIKE.fullmatch(value) and any(c.isdigit() for c in value):
            return repr(value)
        return f"a {len(value)}-character string"
    return f"a JSON {type(value).__name__}"


@dataclass
class SkipLog:
    """Rows skipped while reading: a count per reason and the first few `file:line: why`."""

    reasons: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def skip(self, file: str, line: int, reason: str, detail: str = "") -> None:
        self.reasons[reason] += 1
        if len(self.examples) < MAX_SKIP_EXAMPLES:
            self.examples.append(f"{file}:{line}: {reason}{': ' + detail if detail else ''}")

    def add_counts(self, reasons: dict[str, int], examples: list[str]) -> None:
        self.reasons.update(reasons)
        room = MAX_SKIP_EXAMPLES - len(self.examples)
        self.examples.extend(examples[: max(room, 0)])

    @property
    def total(self) -> int:
        return sum(self.reasons.values())


@dataclass
class FileFrame:
    """One file's part of the canonical table, before files are merged."""

    frame: pl.DataFrame  # canonical columns; arrival as absolute or relative seconds
    absolute_time: bool  # arrival_s is epoch seconds (UTC) rather than seconds from a start
    backwards_steps: int = 0  # times the timestamp went down from one row to the next
    first_backwards_line: int | None = None


@dataclass(frozen=True)
class ArrivalDraw:
    """How a table of lengths is sent, as vLLM's benchmark (--request-rate, --burstiness) and
    guidellm (--rate-type poisson) send a dataset: gamma gaps of `shape` (1: Poisson) at
    `rate_rps`, seeded."""

    rate_rps: float
    shape: float = 1.0
    seed: int = 0


@dataclass
class ReaderContext:
    """What every reader needs besides the file: options and the place to record skips."""

    columns: dict[str, str] | None
    tokenizer: Tokenizer
    block_tokens: int
    skips: SkipLog
    warnings: list[str]
    time_unit: str = "auto"
    extra_columns: tuple[str, ...] = ()
    tokens_estimated: bool = False  # some token count came from the tokenizer
    tokenizer_used: bool = False  # the tokenizer read prompt text (counts or block hashes)
    # A table of lengths without arrival times (a benchmark dataset) gets drawn ones (None:
    # the file's own); the draw's clock and count continue across chunks and files
    draw: ArrivalDraw | None = None
    arrival_clock_s: float = 0.0
    arrivals_drawn: int = 0


@dataclass(frozen=True)
class ReadResult:
    """The canonical request table of a set of logs, with what was skipped and why.

    `frame` is sorted by `arrival_s` (seconds since the first request). `block_tokens` is the
    size of the blocks behind `block_hashes` (512 for Mooncake, `--block-tokens` for text).
    """

    frame: pl.DataFrame
    format: str
    files: list[str]
    rows_skipped: int
    skip_reasons: dict[str, int]
    skip_examples: list[str]
    tokens_estimated: bool
    tokenizer: str | None
    warnings: list[str]
    first_timestamp: datetime | None
    block_tokens: int
    digest: str

    @property
    def has_hashes(self) -> bool:
        return "block_hashes" in self.frame.columns


class Reader(Protocol):
    """Reads one file into its part of the canonical table."""

    def __call__(self, path: LogFile, ctx: ReaderContext) -> FileFrame: ...


READERS: dict[str, Reader] = {}


def register_reader(kind: str) -> Callable[[Reader], Reader]:
    """Register a reader under `kind`; a second reader for the same kind is a bug."""

    def deco(func: Reader) -> Reader:
        if kind in READERS:
            raise ValueError(f"reader kind {kind!r} registered twice")
        READERS[kind] = func
        return func

    return deco


def known_formats() -> str:
    return ", ".join(["auto", *sorted(READERS)])


def compression_of(path: LogFile) -> str | None:
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if magic == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


@contextmanager
def open_bytes(path: LogFile) -> Iterator[io.BufferedIOBase]:
    """A buffered binary stream over `path`, decompressing gzip and zstd on the fly."""
    kind = compression_of(path)
    if kind == "gzip":
        with path.open("rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as fh:
            yield fh  # type: ignore[misc]
    elif kind == "zstd":
        with path.open("rb") as raw:
            yield io.BufferedReader(_ZstdFrames(raw), 1 << 20)
    else:
        with path.open("rb") as fh:
            yield fh


class _ZstdFrames(io.RawIOBase):
    """Decompressed bytes of a zstd file, frame after frame; EOFError where a frame is cut off.

    zstandard's own stream reader ends quietly at a truncated frame; a log copied while it was
    being written must not pass for a complete one.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        import zstandard

        self._raw = raw
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._frame = self._new()
        self._pending = b""
        self._in_frame = False  # compressed bytes of the current frame have been fed

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            if self._frame.eof:
                rest = self._frame.unused_data
                self._frame, self._in_frame = self._new(), False
            else:
                rest = self._raw.read(1 << 20)
                if not rest:
                    if self._in_frame:
                        raise EOFError("zstd stream ends in the middle of a frame")
                    return 0
            if rest:
                self._in_frame = True
                self._pending = self._frame.decompress(rest)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def read_lines(
    path: LogFile, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, str | None]]:
    """(line number, text) for each line of `path` (UTF-8, bad bytes replaced, BOM dropped).

    The text is None for a line longer than `max_line_bytes`: it is read past in chunks and
    never held whole, so one huge line costs no more memory than the cap.
    """
    with open_bytes(path) as fh:
        lineno = 0
        while raw := fh.readline(max_line_bytes + 1):
            lineno += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                yield lineno, None
                continue
            text = raw.decode("utf-8", errors="replace")
            yield lineno, (text.lstrip("\ufeff") if lineno == 1 else text)


def parse_json_line(line: str) -> tuple[Any, str, str]:
    """(value, "", "") for a line of JSON, or (None, skip reason, detail) when it does not parse.

    Besides malformed JSON, the decoder raises RecursionError on deeply nested values and
    ValueError on integers of more than 4300 digits: both are bad lines like any other.
    """
    try:
        return json.loads(line), "", ""
    except json.JSONDecodeError as err:
        return None, "not valid JSON", err.msg
    except RecursionError:
        return None, "JSON nested too deeply", ""
    except ValueError as err:
        return None, "not valid JSON", first_line(err)


def json_objects(
    path: LogFile, skips: SkipLog, source: LogFile | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; any other line is skipped and counted.

    `source` is the file the user named, for the skip records, when `path` is a decompressed copy.
    """
    name = str(source or path)
    for lineno, line in read_lines(path):
        if line is None:
            skips.skip(name, lineno, LONG_LINE_REASON)
            continue
        if not line.strip():
            continue
        obj, reason, detail = parse_json_line(line)
        if reason:
            skips.skip(name, lineno, reason, detail)
        elif not isinstance(obj, dict):
            skips.skip(name, lineno, "not a JSON object")
        else:
            yield lineno, obj


def head_bytes(path: LogFile, n: int = 65536) -> bytes:
    """The first `n` decompressed bytes of `path`."""
    with open_bytes(path) as fh:
        return fh.read(n)


def first_line(err: BaseException) -> str:
    """The first line of an error's message (library messages can run to many lines)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _read_errors() -> tuple[type[BaseException], ...]:
    import zstandard

    # PanicException (a Rust panic inside polars) derives from BaseException, not Exception.
    return (
        pl.exceptions.PolarsError,
        pl.exceptions.PanicException,
        OSError,
        EOFError,
        zlib.error,
        zstandard.ZstdError,
        UnicodeError,
        RecursionError,
    )


def read_error_message(path: LogFile, err: BaseException) -> str:
    """One line naming `path` and what a library's error while reading it means for the user."""
    import zstandard

    if isinstance(path, RemoteFile):
        remote = describe_error(path.url, path.bucket, path.key, err)
        if remote is not None:
            return remote
    kind = compression_of(path) if path.is_file() else None
    if isinstance(err, EOFError):
        return f"{path}: the {kind or 'compressed'} stream ends early (a truncated file?)"
    if isinstance(err, zlib.error | gzip.BadGzipFile | zstandard.ZstdError):
        return f"{path}: corrupt {kind or 'compressed'} data ({first_line(err)})"
    if isinstance(err, RecursionError):
        return f"{path}: a value is nested too deeply to read"
    if isinstance(err, pl.exceptions.PanicException):
        return f"{path}: cannot read this file, it looks corrupt (polars: {first_line(err)})"
    return f"{path}: cannot read ({first_line(err)})"


@contextmanager
def reading(path: LogFile) -> Iterator[None]:
    """Turn any library error raised while reading `path` into one InputError naming it."""
    try:
        yield
    except InputError:
        raise
    except _read_errors() as err:
        raise InputError(read_error_message(path, err)) from err


@contextmanager
def plain_file(path: LogFile) -> Iterator[LogFile]:
    """`path` itself, or a decompressed temporary copy so polars can scan it lazily."""
    kind = compression_of(path)
    if kind is None:
        yield path
        return
    if isinstance(path, RemoteFile):
        raise InputError(
            f"{path}: a {kind}-compressed table in object storage cannot be scanned in place "
            "(capplan writes nothing to disk for it); store it as Parquet or uncompressed CSV, "
            "or copy it here"
        )
    with tempfile.TemporaryDirectory(prefix="capplan-") as tmp:
        out = Path(tmp) / path.name
        with out.open("wb") as dst, open_bytes(path) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
        yield out


def files_digest(paths: list[LogFile]) -> str:
    """sha256 over the files' bytes, in order (the one `capplan profile` started as it
    started, where it did: profiles.digest); InputError naming a file that cannot be read."""
    early = started_digest(paths)
    if early is not None:
        return early
    h = hashlib.sha256()
    for p in paths:
        with reading(p):
            hash_file(h, p)
    return h.hexdigest()


def json_table_batches(
    path: LogFile, skips: SkipLog, source: LogFile | None = None, rows: int | None = None
) -> Iterator[pl.DataFrame]:
    """The JSON objects of `path` as frames of `rows` objects (all of them in one frame when
    None): a String column per scalar key (nested values are left out), null where an object
    lacks the key, and `__line`, the file line. Bad lines are skipped into `skips`."""
    columns: dict[str, list[object]] = {"__line": []}
    n = yielded = 0
    for lineno, obj in json_objects(path, skips, source):
        for key, value in obj.items():
            if isinstance(value, dict | list) or key == "__line":
                continue
            col = columns.get(key)
            if col is None:
                col = columns[key] = [None] * n
            col.append(None if value is None else str(value))
        columns["__line"].append(lineno)
        n += 1
        for col in columns.values():
            if len(col) < n:
                col.append(None)
        if rows is not None and n >= rows:
            yield _string_frame(columns)
            columns, n, yielded = {"__line": []}, 0, yielded + 1
    if n or not yielded:
        yield _string_frame(columns)


def _string_frame(columns: dict[str, list[object]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            k: pl.Series(k, v, dtype=pl.Int64 if k == "__line" else pl.String)
            for k, v in columns.items()
        }
    )
