"""Log readers: detect a log's format, read its files into the canonical request table.

`read_requests(paths, fmt="auto", ...)` is the entry point; formats are registered by kind in
`READERS` (azure, burstgpt, mooncake, openai-jsonl, otlp, table).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
import polars as pl

from contracts.errors import InputError
from profiles.digest import LogFile, expand_paths
from profiles.readers import jsonl as _jsonl  # noqa: F401  (registers readers)
from profiles.readers import otlp as _otlp  # (registers the OTLP reader)
from profiles.readers import tabular as _tabular  # noqa: F401  (registers readers)
from profiles.readers.base import (
    CANONICAL_COLUMNS,
    MAX_LINE_BYTES,
    READERS,
    ArrivalDraw,
    FileFrame,
    ReaderContext,
    ReadResult,
    SkipLog,
    files_digest,
    head_bytes,
    known_formats,
    parse_json_line,
    read_lines,
    reading,
)
from profiles.readers.tabular import check_parquet_footer, parse_columns
from profiles.readers.timeunits import check_time_unit
from profiles.remote import polars_source
from profiles.tokenize import Tokenizer, load_tokenizer

__all__ = [
    "READERS",
    "ReadResult",
    "detect_format",
    "expand_paths",
    "known_formats",
    "parse_columns",
    "read_requests",
]

DETECT_LINES = 1000  # JSONL detection looks for a JSON object in this many first lines

_AZURE = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
_BURSTGPT = {"Timestamp", "Request tokens", "Response tokens"}
_OPENAI_KEYS = {"messages", "prompt", "request", "response", "usage", "body"}


def detect_format(path: LogFile) -> str:
    """The reader kind for `path`, from its header (CSV), first object (JSONL) or magic bytes.

    Raises InputError for an empty, binary, truncated or undecodable file. JSONL lines of any
    length up to MAX_LINE_BYTES count: a RAG log's first object can be hundreds of KB.
    """
    with reading(path):
        head = head_bytes(path)
        if not head.strip():
            raise InputError(f"{path}: empty file")
        if head[:4] == b"PAR1":
            names: set[str] = set()
            if _is_plain(path):
                check_parquet_footer(path)
                names = set(pl.read_parquet_schema(polars_source(path)).keys())
            return _by_names(names)
        text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
        if "\x00" in text:
            raise InputError(
                f"{path}: cannot tell the format (not CSV, JSONL or Parquet); "
                f"pass --log-format, one of {known_formats()}"
            )
        if text.lstrip().startswith("{"):
            return _detect_jsonl(path, text)
        header = text.splitlines()[0]
        return _by_names({n.strip().strip('"').strip() for n in header.split(",")})


def _detect_jsonl(path: LogFile, head: str) -> str:
    too_long = 0
    first = True
    for lineno, line in read_lines(path):
        if lineno > DETECT_LINES:
            break
        if line is None:
            too_long += 1
            continue
        if not line.strip():
            continue
        obj, reason, _ = parse_json_line(line)
        if first and reason and _otlp.looks_otlp(head):
            return "otlp"  # one pretty-printed OTLP document (a Jaeger or Tempo export)
        first = False
        if isinstance(obj, dict):
            if _otlp.is_otlp(obj):
                return "otlp"
            if "hash_ids" in obj or {"input_length", "output_length"} <= obj.keys():
                return "mooncake"
            if _OPENAI_KEYS & obj.keys():
                return "openai-jsonl"
            return "table"
    longer = f" ({too_long} longer than {MAX_LINE_BYTES >> 20} MiB)" if too_long else ""
    raise InputError(
        f"{path}: starts like JSONL but none of its first {DETECT_LINES:,} lines{longer} "
        "is a JSON object"
    )


def _is_plain(path: LogFile) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == b"PAR1"


def _by_names(names: set[str]) -> str:
    if names >= _AZURE:
        return "azure"
    if names >= _BURSTGPT:
        return "burstgpt"
    return "table"


def read_requests(
    paths: list[str],
    fmt: str = "auto",
    columns: dict[str, str] | str | None = None,
    tokenizer: Tokenizer | str | None = None,
    block_tokens: int = 16,
    *,
    time_unit: str = "auto",
    extra_columns: tuple[str, ...] = (),
    draw: ArrivalDraw | None = None,
) -> ReadResult:
    """Read log files (globs allowed, gzip/zstd) into the canonical request table.

    `fmt` is a reader kind or "auto" (detected per file; all files must agree). `columns`
    maps canonical keys (arrival, input, output, session, model, tenant, ok) to a generic
    table's columns, as a dict or as "arrival=ts,input=...". `tokenizer` is a Tokenizer, a
    tokenizer.json path, or None for the approximate one. `extra_columns` are source columns
    kept as they are (for --group-by on tables). Raises InputError for an unknown format, a
    missing column, an empty file or no usable rows; bad rows are skipped and counted.
    """
    ctx = reader_context(fmt, columns, tokenizer, block_tokens, time_unit, extra_columns, draw)
    files = expand_paths(paths)
    # hashlib releases the GIL on large buffers: hash the files while polars reads them.
    with ThreadPoolExecutor(max_workers=1) as pool:
        digest = pool.submit(files_digest, files)
        return _read_all(files, fmt, ctx, digest)


def reader_context(
    fmt: str,
    columns: dict[str, str] | str | None,
    tokenizer: Tokenizer | str | None,
    block_tokens: int,
    time_unit: str,
    extra_columns: tuple[str, ...],
    draw: ArrivalDraw | None = None,
) -> ReaderContext:
    """The readers' context for these options; InputError for a bad one."""
    if fmt != "auto" and fmt not in READERS:
        raise InputError(f"unknown format {fmt!r}; known formats: {known_formats()}")
    if block_tokens < 1:
        raise InputError(f"--block-tokens must be at least 1 (got {block_tokens})")
    check_time_unit(time_unit)
    mapping = parse_columns(columns) if isinstance(columns, str) else columns
    tok = (
        tokenizer
        if tokenizer is not None and not isinstance(tokenizer, str)
        else load_tokenizer(tokenizer)
    )
    return ReaderContext(
        columns=mapping,
        tokenizer=tok,
        block_tokens=block_tokens,
        skips=SkipLog(),
        warnings=[],
        time_unit=time_unit,
        extra_columns=extra_columns,
        draw=draw,
    )


# A gap between two arrivals this long that is also most of the log's span is a mistyped date
# more often than a pause: said, since every rate and peak is taken over the whole span.
LONG_GAP_S = 86_400.0


def gap_warning(arrival_s: np.ndarray, t0: float, absolute: bool) -> str | None:
    """The warning for sorted arrivals (seconds after `t0`) split by one gap of a day or more
    that is over half their span, naming both sides; None otherwise."""
    if arrival_s.size < 3:
        return None
    gaps = np.diff(arrival_s)
    i = int(np.argmax(gaps))
    gap = float(gaps[i])
    if gap < LONG_GAP_S or gap < 0.5 * float(arrival_s[-1]):
        return None

    def when(t: float) -> str:
        if not absolute:
            return f"{t:,.0f} s"
        return datetime.fromtimestamp(t0 + t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")

    before, after = i + 1, arrival_s.size - i - 1
    return (
        f"{before:,} request(s) end at {when(float(arrival_s[i]))} and {after:,} "
        f"{'begins' if after == 1 else 'begin'} at "
        f"{when(float(arrival_s[i + 1]))}, {gap / 86_400:.1f} days later: rates and peaks are "
        "taken over the whole span; if a date is mistyped, fix or drop those rows"
    )


def format_of(files: list[LogFile], fmt: str) -> str:
    """The one reader kind of `files`; InputError when they are in different formats."""
    kinds = {str(p): (fmt if fmt != "auto" else detect_format(p)) for p in files}
    distinct = sorted(set(kinds.values()))
    if len(distinct) > 1:
        listing = "; ".join(f"{p}: {k}" for p, k in kinds.items())
        raise InputError(f"the files are in different formats ({listing}); profile them apart")
    return distinct[0]


def no_usable_rows(files: list[LogFile], skips: SkipLog) -> InputError:
    """The error for logs of which no row could be used, with the main reasons."""
    reasons = ", ".join(f"{why}: {n}" for why, n in skips.reasons.most_common(3))
    where = "; ".join(skips.examples[:3])
    return InputError(
        f"{', '.join(str(p) for p in files)}: no usable rows ({skips.total} skipped"
        + (f" - {reasons}; e.g. {where}" if reasons else "")
        + ")"
    )


def _read_all(
    files: list[LogFile], fmt: str, ctx: ReaderContext, digest: Future[str]
) -> ReadResult:
    kind = format_of(files, fmt)
    parts: list[FileFrame] = []
    for p in files:
        if p.stat().st_size == 0:
            raise InputError(f"{p}: empty file")
        with reading(p):
            part = READERS[kind](p, ctx)
        if part.backwards_steps:
            ctx.warnings.append(
                f"{p}: timestamps go backwards {part.backwards_steps} time(s) (first at line "
                f"{part.first_backwards_line}); requests were sorted by arrival"
            )
        parts.append(part)
    if len({part.absolute_time for part in parts}) > 1:
        raise InputError("some files have wall-clock timestamps and others relative times")
    frames = [part.frame for part in parts if part.frame.height]
    if not frames:
        raise no_usable_rows(files, ctx.skips)
    frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    if len(frames) > 1 or parts[0].backwards_steps:
        frame = frame.sort("arrival_s", maintain_order=True)
    t0 = float(frame["arrival_s"][0])
    frame = frame.with_columns(pl.col("arrival_s") - t0)
    gap = gap_warning(frame["arrival_s"].to_numpy(), t0, parts[0].absolute_time)
    if gap is not None:
        ctx.warnings.append(f"{', '.join(str(p) for p in files)}: {gap}")
    ordered = [c for c in CANONICAL_COLUMNS if c in frame.columns]
    frame = frame.select(ordered + [c for c in frame.columns if c not in CANONICAL_COLUMNS])
    first = datetime.fromtimestamp(t0, tz=UTC) if parts[0].absolute_time else None
    return ReadResult(
        frame=frame,
        format=kind,
        files=[str(p) for p in files],
        rows_skipped=ctx.skips.total,
        skip_reasons=dict(ctx.skips.reasons),
        skip_examples=list(ctx.skips.examples),
        tokens_estimated=ctx.tokens_estimated,
        tokenizer=ctx.tokenizer.name if ctx.tokens_estimated or ctx.tokenizer_used else None,
        warnings=ctx.warnings,
        first_timestamp=first,
        block_tokens=ctx.block_tokens,
        digest=digest.result(),
    )
