"""Reading a large tabular log in chunks of rows, for the streaming profiler.

Each chunk goes through the same checks as a table read whole (`tabular.read_table`), so a
skipped row is counted and located the same way; only the memory differs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from contracts.errors import InputError
from profiles.readers.base import FileFrame, ReaderContext, first_line, plain_file
from profiles.readers.tabular import TableSpec, canonical_rows, plan_table

# The chunks carry this u64 column (null where the id is) instead of `session_id`: the same
# hash as `pl.col("session_id").hash()` in profiles.sessions.
SESSION_HASH = "session_hash"


class BrokenTable(Exception):
    """polars cannot stream this CSV (a broken line): read it whole, line by line, instead."""


def read_table_chunks(
    path: Path, ctx: ReaderContext, spec: TableSpec, chunk_rows: int
) -> Iterator[FileFrame]:
    """One tabular file as canonical chunks of about `chunk_rows` rows, in file order, each
    checked as `read_table` checks the whole file (units and the far-row reference come from
    the first chunk), with SESSION_HASH in place of `session_id`. Parquet is read by row
    slices, CSV by polars' streaming batches.
    Raises BrokenTable where only the line-by-line reader can read the file."""
    with plain_file(path) as plain:
        plan = plan_table(path, plain, ctx, spec)
        selected = plan.lf.select(plan.exprs)
        if "session_id" in selected.collect_schema().names():
            # The folds need only each session id's hash: hashed in the scan, on polars'
            # threads, the ids' strings are never gathered into a chunk.
            sid = pl.col("session_id")
            hashed = pl.when(sid.is_not_null()).then(sid.hash()).alias(SESSION_HASH)
            selected = selected.with_columns(hashed).drop("session_id")
        rows = 0
        try:
            if plan.kind == "parquet":
                batches: Iterator[pl.DataFrame] = (
                    selected.slice(start, chunk_rows).collect()
                    for start in range(0, _parquet_rows(plain), chunk_rows)
                )
            elif plan.kind == "csv":
                batches = iter(selected.collect_batches(chunk_size=chunk_rows))
            else:
                batches = iter([selected.collect()])
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


def _parquet_rows(path: Path) -> int:
    return int(pl.scan_parquet(path).select(pl.len()).collect().item())


def table_rows(path: Path) -> int | None:
    """Rows of a plain Parquet file from its footer (None for other files)."""
    with path.open("rb") as fh:
        if fh.read(4) != b"PAR1":
            return None
    try:
        return _parquet_rows(path)
    except pl.exceptions.PolarsError:
        return None
