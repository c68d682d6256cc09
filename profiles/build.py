"""Building a Profile: read logs into the canonical table, then compute every statistic.

`build_profile(paths, ...)` is what `capplan profile` calls; `profiles.assemble`'s
`profile_from_result` and `body_from_frame` work on a table already read (tests, presets, other
tools).
"""

from __future__ import annotations

from contracts.errors import InputError
from profiles.assemble import GROUPABLE, profile_from_result
from profiles.model import Limitation, Profile
from profiles.readers import read_requests
from profiles.readers.base import ArrivalDraw
from profiles.readers.drawn import drawn_assumption
from profiles.tokenize import Tokenizer

__all__ = ["build_profile"]


def build_profile(
    paths: list[str],
    *,
    fmt: str = "auto",
    columns: dict[str, str] | str | None = None,
    group_by: str | None = None,
    tokenizer: Tokenizer | str | None = None,
    block_tokens: int = 16,
    cache_tokens: list[int] | None = None,
    seed: int = 0,
    time_unit: str = "auto",
    chunk_rows: int | None = None,
    draw: ArrivalDraw | None = None,
) -> Profile:
    """Profile request logs: read `paths` (files or globs) and compute every statistic.

    A large tabular log, Mooncake trace or OpenAI-style log (Parquet over STREAM_ABOVE_ROWS
    rows, other files over STREAM_ABOVE_BYTES) is read in chunks of `chunk_rows` rows
    (default CHUNK_ROWS, TEXT_CHUNK_ROWS for OpenAI-style logs) and folded, so memory stays
    bounded whatever its length, but for the block hashes the prefix statistics keep;
    `chunk_rows` set forces that path for any such log (see profiles.stream for when it
    still reads the log whole).

    `draw` sends a table of lengths without arrival times (a benchmark dataset) as vLLM's
    benchmark and guidellm send a dataset (`profiles.readers.drawn`); `source.limitations`
    says so.

    Raises InputError (exit code 2 at the CLI) for unknown formats, missing columns, empty
    files or logs with no usable row; bad rows are skipped and listed in `source`.
    """
    fmt = _format_for_columns(fmt, columns)
    extra: tuple[str, ...] = ()
    if group_by is not None and group_by not in GROUPABLE:
        extra = (group_by,)
    if cache_tokens is not None and any(c <= 0 for c in cache_tokens):
        raise InputError("--cache-tokens sizes must be positive token counts")
    if draw is not None:
        _check_lengths_table(paths, fmt, draw)
    from profiles.stream import profile_in_chunks

    streamed = profile_in_chunks(
        paths,
        fmt=fmt,
        columns=columns,
        group_by=group_by,
        tokenizer=tokenizer,
        block_tokens=block_tokens,
        cache_tokens=cache_tokens,
        seed=seed,
        time_unit=time_unit,
        chunk_rows=chunk_rows,
        draw=draw,
    )
    if streamed is None:
        result = read_requests(
            paths, fmt, columns, tokenizer, block_tokens, time_unit=time_unit,
            extra_columns=extra, draw=draw,
        )  # fmt: skip
        streamed = profile_from_result(
            result, group_by=group_by, cache_tokens=cache_tokens, seed=seed
        )
    if draw is not None:
        streamed.source.limitations.append(
            Limitation(unknown="arrival times: the table holds lengths only",
                       assumption=drawn_assumption(draw))
        )  # fmt: skip
    return streamed


def _format_for_columns(fmt: str, columns: dict[str, str] | str | None) -> str:
    """The reader for logs whose columns the user named: `--columns` maps a generic table's
    columns, so with the format detected it reads the logs as a table (an Azure or BurstGPT
    file whose columns are named is read by those names, not by its own layout: a bug hunt
    swapped input and output and got the file's own, silently); with another format named,
    InputError."""
    if not columns:
        return fmt
    if fmt == "auto":
        return "table"
    if fmt != "table":
        raise InputError(
            f"--columns names a table's columns: it reads the logs as --log-format table, "
            f"not {fmt} (whose columns capplan knows); drop one of them"
        )
    return fmt


def _check_lengths_table(paths: list[str], fmt: str, draw: ArrivalDraw) -> None:
    """InputError unless `paths` are generic tables (a format with its own arrival times
    keeps them) and the rate is positive."""
    from profiles.readers import expand_paths, format_of

    if not draw.rate_rps > 0:
        raise InputError(f"--rate-rps must be > 0, got {draw.rate_rps:g}")
    kind = format_of(expand_paths(paths), fmt)
    if kind != "table":
        raise InputError(
            f"--rate-rps gives arrival times to a table of lengths (CSV, Parquet or JSONL "
            f"with input and output columns); these logs are {kind}, with their own arrival times"
        )
