"""Shared pieces of the log readers: the ReadResult, skip accounting, file opening, the registry.

Every reader turns its files into the canonical request table (DESIGN.md): a polars frame,
one row per request, with `arrival_s` in seconds since the source's first request. Readers
are chosen by kind through `READERS`; an unknown kind names the known ones.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Protocol

import polars as pl

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

    def __call__(self, path: Path, ctx: ReaderContext) -> FileFrame: ...


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


def compression_of(path: Path) -> str | None:
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if magic == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


@contextmanager
def open_text(path: Path) -> Iterator[IO[str]]:
    """A text stream over `path`, decompressing gzip and zstd on the fly."""
    kind = compression_of(path)
    if kind == "gzip":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield fh
    elif kind == "zstd":
        import zstandard

        with path.open("rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            yield io.TextIOWrapper(reader, encoding="utf-8", errors="replace")
    else:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            yield fh


def head_bytes(path: Path, n: int = 65536) -> bytes:
    """The first `n` decompressed bytes of `path`."""
    kind = compression_of(path)
    if kind == "gzip":
        with gzip.open(path, "rb") as fh:
            return fh.read(n)
    if kind == "zstd":
        import zstandard

        with path.open("rb") as raw:
            return zstandard.ZstdDecompressor().stream_reader(raw).read(n)
    with path.open("rb") as fh:
        return fh.read(n)


@contextmanager
def plain_file(path: Path) -> Iterator[Path]:
    """`path` itself, or a decompressed temporary copy so polars can scan it lazily."""
    kind = compression_of(path)
    if kind is None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="capplan-") as tmp:
        out = Path(tmp) / path.name
        with out.open("wb") as dst:
            if kind == "gzip":
                with gzip.open(path, "rb") as src:
                    shutil.copyfileobj(src, dst, 1 << 20)
            else:
                import zstandard

                with path.open("rb") as raw:
                    zstandard.ZstdDecompressor().copy_stream(raw, dst)
        yield out


def files_digest(paths: list[Path]) -> str:
    """sha256 over the files' bytes, in order."""
    h = hashlib.sha256()
    for p in paths:
        with p.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()
