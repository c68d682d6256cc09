"""Reading a large tabular log in chunks of rows, for the streaming profiler.

Each chunk goes through the same checks as a table read whole (`tabular.read_table`), so a
skipped row is counted and located the same way; only the memory differs.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import polars as pl

from contracts.errors import InputError
from profiles.digest import LogFile
from profiles.readers.base import (
    FileFrame,
    ReaderContext,
    first_line,
    json_table_batches,
    plain_file,
)
from profiles.readers.tabular import (
    TABLE_SPECS,
    TablePlan,
    canonical_rows,
    guess_mapping,
    plan_table,
)
from profiles.remote import polars_source

# The chunks carry, instead of `session_id`, whether a row has one (SESSION_SEEN), its hash
# (SESSION_HASH, `pl.col("session_id").hash()` as in profiles.sessions; null where it has
# none) and the number of trailing zero bits of that hash (SESSION_ZEROS, Int8; -1 where it
# has none): the hash sample of sessions keeps the rows whose hash has its low k bits zero,
# which a fold finds in SESSION_ZEROS (one byte a row) without reading the hashes.
SESSION_HASH = "session_hash"
SESSION_SEEN = "session_seen"
SESSION_ZEROS = "session_zeros"


class BrokenTable(Exception):
    """Only a whole read can read this table as the in-memory profiler does: polars cannot
    stream this CSV (a broken line), or a JSONL table's later lines bring a column that
    would have changed the guessed column mapping."""


def read_table_chunks(
    path: LogFile,
    ctx: ReaderContext,
    kind: str,
    chunk_rows: int,
) -> Iterator[FileFrame]:
    """One tabular file of reader kind `kind` as canonical chunks of about `chunk_rows` rows,
    in file order, each checked as `read_table` checks the whole file (units and the far-row
    reference come from the first chunk), with SESSION_SEEN, SESSION_HASH and SESSION_ZEROS
    in place of `session_id`. Parquet and CSV are read by polars' streaming engine in batches,
    JSONL tables by batches of lines. Raises BrokenTable where only a whole read can read the
    file."""
    with plain_file(path) as plain:
        if _is_jsonl(plain):
            yield from _jsonl_chunks(path, plain, ctx, kind, chunk_rows)
            return
        plan = plan_table(path, plain, ctx, TABLE_SPECS[kind](path, ctx))
        rows = 0
        try:
            batches = iter(_canonical(plan.lf, plan).collect_batches(chunk_size=chunk_rows))
            for df in batches:
                if df.height:
                    yield canonical_rows(df, plan, ctx, rows)
                    rows += df.height
        except pl.exceptions.PolarsError as err:
            if plan.kind == "csv":
                raise BrokenTable(str(path)) from err
            raise InputError(f"{path}: cannot read as {plan.kind} ({first_line(err)})") from err
    if rows == 0:
        raise InputError(f"{path}: empty file (a header and no rows)")


def _canonical(lf: pl.LazyFrame, plan: TablePlan) -> pl.LazyFrame:
    """The canonical columns of `lf`, with the session ids hashed in the same query (on
    polars' threads: the ids' strings are never gathered into a chunk)."""
    return with_session_hashes(lf.select(plan.exprs))


def with_session_hashes(lf: pl.LazyFrame) -> pl.LazyFrame:
    """`lf` with SESSION_SEEN, SESSION_HASH and SESSION_ZEROS in place of `session_id` (as
    it is when it has no `session_id`)."""
    if "session_id" not in lf.collect_schema().names():
        return lf
    sid, h = pl.col("session_id"), pl.col(SESSION_HASH)
    # 0 to 64 zero bits: a wrapping cast never wraps, and skips the strict cast's checks.
    zeros = h.bitwise_trailing_zeros().cast(pl.Int8, wrap_numerical=True).fill_null(-1)
    return (
        lf.with_columns(
            sid.is_not_null().alias(SESSION_SEEN),
            pl.when(sid.is_not_null()).then(sid.hash()).alias(SESSION_HASH),
        )
        .with_columns(zeros.alias(SESSION_ZEROS))
        .drop("session_id")
    )


def _jsonl_chunks(
    path: LogFile,
    plain: LogFile,
    ctx: ReaderContext,
    kind: str,
    chunk_rows: int,
) -> Iterator[FileFrame]:
    """A JSONL table in batches of `chunk_rows` objects, planned from the first batch."""
    batches = json_table_batches(plain, ctx.skips, path, chunk_rows)
    first = next(batches)
    names = first.columns
    spec = TABLE_SPECS[kind](path, ctx, names)
    plan = plan_table(path, plain, ctx, spec, (first.lazy(), "jsonl"))
    seen = set(names)
    rows = 0
    for df in chain([first], batches):
        if df.height:
            new = set(df.columns) - seen
            if new:
                seen |= new
                if kind == "table" and guess_mapping(sorted(seen), ctx.columns) != spec.mapping:
                    raise BrokenTable(str(path))
            missing = [pl.lit(None, pl.String).alias(c) for c in plan.names if c not in df.columns]
            lf = df.lazy().with_columns(missing)
            frame = _canonical(lf, plan).collect()
            yield canonical_rows(frame, plan, ctx, 0)
            rows += df.height
    if rows == 0:
        raise InputError(f"{path}: empty file (no usable line)")


def _is_jsonl(plain: LogFile) -> bool:
    with plain.open("rb") as fh:
        return fh.read(64).lstrip()[:1] == b"{"


def table_rows(path: LogFile) -> int | None:
    """Rows of a plain Parquet file from its footer (None for other files)."""
    with path.open("rb") as fh:
        if fh.read(4) != b"PAR1":
            return None
    try:
        return int(pl.scan_parquet(polars_source(path)).select(pl.len()).collect().item())
    except pl.exceptions.PolarsError:
        return None
