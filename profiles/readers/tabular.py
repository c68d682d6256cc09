"""Readers for tabular logs (CSV, Parquet, JSONL tables) through polars' lazy engine.

Azure LLM inference traces, BurstGPT and generic tables with a column mapping share one
path: scan lazily, parse and validate with expressions, and collect only the canonical
columns and a skip reason per row, so no Python object is made per row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from planner.errors import InputError
from profiles.readers.base import FileFrame, ReaderContext, SkipLog, plain_file, register_reader
from profiles.readers.timeunits import UNIT_SECONDS, numeric_unit, unit_warnings

# Canonical name -> source names tried, in order, when a generic table has no mapping.
_GUESSES: dict[str, tuple[str, ...]] = {
    "arrival": ("arrival_s", "arrival", "timestamp", "time", "ts", "created", "TIMESTAMP"),
    "input": ("input_tokens", "prompt_tokens", "input_length", "input", "ContextTokens"),
    "output": ("output_tokens", "completion_tokens", "output_length", "output"),
    "session": ("session_id", "session", "conversation_id"),
    "model": ("model",),
    "tenant": ("tenant",),
    "ok": ("ok",),
}
MAPPING_KEYS = tuple(_GUESSES)
_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S%.f"


@dataclass(frozen=True)
class TableSpec:
    """How one tabular format maps onto the canonical table."""

    fmt: str
    mapping: dict[str, str]  # canonical key (arrival, input, ...) -> source column
    time_kind: str  # "datetime": wall-clock strings; "numeric": numbers; "auto": decide
    default_unit: str = "s"  # unit of relative numeric timestamps
    check_units: bool = True  # warn when numeric timestamps look like the wrong unit
    zero_output_failed: bool = False  # BurstGPT: 0 response tokens marks a failed request
    header_lines: int = 1  # lines before the first data row (for file:line)


def parse_columns(spec: str | None) -> dict[str, str] | None:
    """Parse `arrival=ts,input=prompt,output=completion` into a mapping; InputError if bad."""
    if spec is None or not spec.strip():
        return None
    mapping: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise InputError(f"--columns: {part!r} is not KEY=COLUMN (e.g. arrival=ts)")
        if key not in MAPPING_KEYS:
            raise InputError(
                f"--columns: unknown key {key!r}; known keys: {', '.join(MAPPING_KEYS)}"
            )
        mapping[key] = value
    return mapping


def scan_table(path: Path, skips: SkipLog | None = None) -> tuple[pl.LazyFrame, str]:
    """A lazy scan of a plain (decompressed) CSV, Parquet or JSONL file and its kind.

    JSONL tables are parsed line by line (a malformed line is skipped and recorded in `skips`)
    and carry a `__line` column; CSV and Parquet are scanned by polars.
    """
    with path.open("rb") as fh:
        head = fh.read(64)
    try:
        if head[:4] == b"PAR1":
            return pl.scan_parquet(path), "parquet"
        if head.lstrip()[:1] == b"{":
            return _jsonl_table(path, skips or SkipLog()), "jsonl"
        return pl.scan_csv(path, infer_schema=False, truncate_ragged_lines=True), "csv"
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputError(f"{path}: cannot read as a table ({err})") from err


def _jsonl_table(path: Path, skips: SkipLog) -> pl.LazyFrame:
    columns: dict[str, list[object]] = {"__line": []}
    n = 0
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                skips.skip(str(path), lineno, "not valid JSON", err.msg)
                continue
            if not isinstance(obj, dict):
                skips.skip(str(path), lineno, "not a JSON object")
                continue
            for key, value in obj.items():
                if isinstance(value, dict | list):
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
    data = {
        k: pl.Series(k, v, dtype=pl.Int64 if k == "__line" else pl.String)
        for k, v in columns.items()
    }
    return pl.DataFrame(data).lazy()


def guess_mapping(names: list[str], given: dict[str, str] | None) -> dict[str, str]:
    """The given mapping completed with canonical or common column names found in `names`."""
    mapping = dict(given or {})
    for key, candidates in _GUESSES.items():
        if key in mapping:
            continue
        for cand in candidates:
            if cand in names:
                mapping[key] = cand
                break
    return mapping


def _token_expr(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Float64, strict=False)


def _is_count(e: pl.Expr) -> pl.Expr:
    return e.is_not_null() & e.is_finite() & (e >= 0) & (e == e.round(0))


def _arrival_expr(lf: pl.LazyFrame, col: str, dtype: pl.DataType, kind: str) -> tuple[pl.Expr, str]:
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


def read_table(path: Path, ctx: ReaderContext, spec: TableSpec) -> FileFrame:
    """Read one tabular file into canonical columns, recording each bad row in ctx.skips."""
    with plain_file(path) as plain:
        lf, kind = scan_table(plain, ctx.skips)
        try:
            schema = lf.collect_schema()
        except pl.exceptions.PolarsError as err:
            raise InputError(f"{path}: cannot read as {kind} ({err})") from err
        names = list(schema.names())
        if not names:
            raise InputError(f"{path}: empty file (no header)")
        mapping = spec.mapping
        for key in ("arrival", "input", "output"):
            if key not in mapping:
                raise InputError(
                    f"{path}: no {key} column found among {names}; pass --columns "
                    "arrival=COL,input=COL,output=COL"
                )
        for key, col in mapping.items():
            if col not in names:
                raise InputError(
                    f"{path}: missing column {col!r} (the {spec.fmt} format's {key}); "
                    f"found: {', '.join(names)}"
                )
        for col in ctx.extra_columns:
            if col not in names:
                raise InputError(f"{path}: --group-by column {col!r} not found; found: {names}")
        arrival, arrival_kind = _arrival_expr(
            lf, mapping["arrival"], schema[mapping["arrival"]], spec.time_kind
        )
        inp = _token_expr(mapping["input"])
        out = _token_expr(mapping["output"])
        reason = (
            pl.when(arrival.is_null() | ~arrival.is_finite())
            .then(pl.lit(f"bad or missing timestamp ({mapping['arrival']})"))
            .when(~_is_count(inp))
            .then(pl.lit(f"bad or missing input tokens ({mapping['input']})"))
            .when(~_is_count(out))
            .then(pl.lit(f"bad or missing output tokens ({mapping['output']})"))
            .otherwise(pl.lit(None, dtype=pl.String))
        )
        row = pl.col("__line") if "__line" in names else pl.int_range(pl.len(), dtype=pl.Int64)
        exprs = [
            row.cast(pl.Int64).alias("__row"),
            arrival.alias("arrival_s"),
            inp.cast(pl.Int64, strict=False).alias("input_tokens"),
            out.cast(pl.Int64, strict=False).alias("output_tokens"),
            reason.alias("__reason"),
        ]
        for key, canon in (("session", "session_id"), ("model", "model"), ("tenant", "tenant")):
            if key in mapping:
                exprs.append(pl.col(mapping[key]).cast(pl.String).alias(canon))
        if "ok" in mapping:
            exprs.append(
                pl.col(mapping["ok"])
                .cast(pl.String)
                .str.to_lowercase()
                .is_in(["true", "1", "ok"])
                .alias("ok")
            )
        elif spec.zero_output_failed:
            exprs.append((out > 0).fill_null(False).alias("ok"))
        for col in ctx.extra_columns:
            if col not in mapping.values():
                exprs.append(pl.col(col).cast(pl.String).alias(col))
        try:
            df = lf.select(exprs).collect(engine="streaming")
        except pl.exceptions.PolarsError as err:
            raise InputError(f"{path}: cannot read as {kind} ({err})") from err

    if df.height == 0:
        raise InputError(f"{path}: empty file (a header and no rows)")
    bad = df.filter(pl.col("__reason").is_not_null())
    if bad.height:
        counts = bad.group_by("__reason").len()
        first = bad.head(5)
        offset = _line_offset(kind, spec, names)
        examples = [
            f"{path}:{row + offset}: {why}"
            for row, why in zip(first["__row"].to_list(), first["__reason"].to_list(), strict=True)
        ]
        ctx.skips.add_counts(dict(zip(counts["__reason"], counts["len"], strict=True)), examples)
        df = df.filter(pl.col("__reason").is_null())
    rows = df["__row"]
    df = df.drop("__reason", "__row")
    raw = df["arrival_s"].to_numpy()
    absolute = arrival_kind == "epoch_s"
    if arrival_kind == "numeric" and raw.size:
        unit, absolute = numeric_unit(float(raw.min()), ctx.time_unit, spec.default_unit)
        if spec.check_units:
            ctx.warnings.extend(unit_warnings(raw, unit, absolute, str(path)))
        if unit != "s":
            df = df.with_columns(pl.col("arrival_s") * UNIT_SECONDS[unit])
    steps, first_line = _backwards(raw, rows.to_numpy(), _line_offset(kind, spec, names))
    return FileFrame(df, absolute, steps, first_line)


def _line_offset(kind: str, spec: TableSpec, names: list[str]) -> int:
    """What to add to a row number to get its file line (CSV header, 1-based rows)."""
    if "__line" in names:
        return 0
    return spec.header_lines + 1 if kind == "csv" else 1


def _backwards(raw: np.ndarray, rows: np.ndarray, line_offset: int) -> tuple[int, int | None]:
    if raw.size < 2:
        return 0, None
    down = np.flatnonzero(raw[1:] < raw[:-1])
    if down.size == 0:
        return 0, None
    return int(down.size), int(rows[down[0] + 1]) + line_offset


@register_reader("azure")
def read_azure(path: Path, ctx: ReaderContext) -> FileFrame:
    """Azure LLM inference traces: TIMESTAMP (2023: 7 fractional digits; 2024: mixed, +00:00)."""
    spec = TableSpec(
        "azure",
        {"arrival": "TIMESTAMP", "input": "ContextTokens", "output": "GeneratedTokens"},
        time_kind="datetime",
    )
    return read_table(path, ctx, spec)


@register_reader("burstgpt")
def read_burstgpt(path: Path, ctx: ReaderContext) -> FileFrame:
    """BurstGPT v1/v2, read by column name; 0 response tokens marks a failed request."""
    mapping = {
        "arrival": "Timestamp",
        "input": "Request tokens",
        "output": "Response tokens",
        "model": "Model",
    }
    with plain_file(path) as plain:
        names = scan_table(plain, SkipLog())[0].collect_schema().names()
    if "Session ID" in names:
        mapping["session"] = "Session ID"
    spec = TableSpec(
        "burstgpt", mapping, time_kind="numeric", check_units=False, zero_output_failed=True
    )
    return read_table(path, ctx, spec)


@register_reader("table")
def read_generic_table(path: Path, ctx: ReaderContext) -> FileFrame:
    """A generic CSV, Parquet or JSONL table; columns by --columns or by common names."""
    with plain_file(path) as plain:
        lf, _ = scan_table(plain, SkipLog())
        try:
            names = lf.collect_schema().names()
        except pl.exceptions.PolarsError as err:
            raise InputError(f"{path}: cannot read as a table ({err})") from err
    spec = TableSpec("table", guess_mapping(list(names), ctx.columns), time_kind="auto")
    return read_table(path, ctx, spec)
