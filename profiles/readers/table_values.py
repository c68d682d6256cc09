"""A table's cells as canonical values: token counts (whole, 0 to MAX_TOKENS, else null: the
row is skipped) and arrival times (datetimes, dates, epoch or relative numbers), with what a
skipped row's reason says was expected. profiles.readers.tabular plans and reads the table."""

from __future__ import annotations

import polars as pl

from profiles.readers.base import MAX_TOKENS

_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S%.f"

# What a row's timestamp must look like, by the kind the column was read as.
EXPECTED_TIME = {
    "epoch_s": "expected a date and time such as 2023-11-16 18:15:46.680 (ISO 8601)",
    "numeric": "expected a number (seconds; --time-unit for ms or us)",
}
EXPECTED_TOKENS = f"expected a whole number of tokens from 0 to {MAX_TOKENS:,}"


def count_expr(name: str, dtype: pl.DataType) -> pl.Expr:
    """A token count as i64, null where the value is missing, negative, not whole or above
    MAX_TOKENS (a corrupt row, as the JSONL readers take it)."""
    col = pl.col(name)
    if dtype.is_integer():
        return pl.when((col >= 0) & (col <= MAX_TOKENS)).then(col.cast(pl.Int64))
    as_float = col.cast(pl.Float64, strict=False)
    if dtype == pl.String:
        as_float = col.str.strip_chars().cast(pl.Float64, strict=False)
    good = as_float.is_finite() & (as_float >= 0) & (as_float <= MAX_TOKENS)
    good &= as_float == as_float.round(0)
    return pl.when(good).then(as_float.cast(pl.Int64, strict=False))


def arrival_expr(lf: pl.LazyFrame, col: str, dtype: pl.DataType, kind: str) -> tuple[pl.Expr, str]:
    """An expression giving raw arrival as f64 and its kind: 'epoch_s' or 'numeric'."""
    if isinstance(dtype, pl.Datetime):
        return pl.col(col).dt.epoch("us").cast(pl.Float64) / 1e6, "epoch_s"
    if isinstance(dtype, pl.Date):
        return pl.col(col).cast(pl.Datetime("us")).dt.epoch("us").cast(pl.Float64) / 1e6, "epoch_s"
    if dtype.is_numeric():
        return pl.col(col).cast(pl.Float64), "numeric"
    as_string = pl.col(col).cast(pl.String)
    if kind == "auto":
        sample = lf.select(as_string).head(200).collect().to_series().drop_nulls()
        numeric = sample.cast(pl.Float64, strict=False).is_not_null().sum()
        kind = "numeric" if len(sample) and numeric >= 0.5 * len(sample) else "datetime"
    if kind == "numeric":
        return as_string.str.strip_chars().cast(pl.Float64, strict=False), "numeric"
    text = (
        as_string.str.strip_chars()
        .str.replace(r"(Z|[+-]00:?00)$", "")
        .str.replace("T", " ", literal=True)
    )
    parsed = pl.coalesce(
        text.str.to_datetime(_DATETIME_FORMAT, strict=False, time_unit="us"),
        text.str.to_datetime("%Y-%m-%d", strict=False, time_unit="us"),
    )
    return parsed.dt.epoch("us").cast(pl.Float64) / 1e6, "epoch_s"
