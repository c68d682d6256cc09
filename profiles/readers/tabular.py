"""Readers for tabular logs (CSV, Parquet, JSONL tables) through polars' lazy engine.

Azure LLM inference traces, BurstGPT and generic tables with a column mapping share one
path: scan lazily, parse and validate with expressions, and collect only the canonical
columns and a skip reason per row, so no Python object is made per row.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
import polars as pl

from contracts.errors import InputError
from profiles.digest import LogFile
from profiles.readers.base import (
    LONG_LINE_REASON,
    FileFrame,
    ReaderContext,
    SkipLog,
    first_line,
    json_table_batches,
    plain_file,
    read_lines,
    register_reader,
)
from profiles.readers.drawn import LENGTHS_ONLY_HINT, drawn_arrivals, drawn_columns
from profiles.readers.table_values import (
    EXPECTED_TIME,
    EXPECTED_TOKENS,
    arrival_expr,
    count_expr,
)
from profiles.readers.timeunits import (
    FAR_REASON,
    MAX_SPAN_S,
    UNIT_SECONDS,
    far_from_median,
    numeric_unit,
    typical,
    unit_warnings,
)
from profiles.remote import polars_source

# Canonical name -> source names tried, in order, when a generic table has no mapping.
_GUESSES: dict[str, tuple[str, ...]] = {
    "arrival": ("arrival_s", "arrival", "timestamp", "time", "ts", "created", "TIMESTAMP"),
    "input": ("input_tokens", "prompt_tokens", "input_length", "input", "ContextTokens"),
    "output": ("output_tokens", "completion_tokens", "output_length", "output", "GeneratedTokens"),
    "session": ("session_id", "session", "conversation_id"),
    "model": ("model",),
    "tenant": ("tenant",),
    "ok": ("ok",),
}
MAPPING_KEYS = tuple(_GUESSES)


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


def scan_table(
    path: LogFile, skips: SkipLog | None = None, source: LogFile | None = None
) -> tuple[pl.LazyFrame, str]:
    """A lazy scan of a plain (decompressed) CSV, Parquet or JSONL file and its kind.

    JSONL tables are parsed line by line (a malformed line is skipped and recorded in `skips`)
    and carry a `__line` column; CSV and Parquet are scanned by polars. InputError for a
    Parquet file without its footer (truncated) or one polars cannot open. `source` is the
    file the user named, for messages, when `path` is a decompressed copy.
    """
    shown = source or path
    with path.open("rb") as fh:
        head = fh.read(64)
    try:
        if head[:4] == b"PAR1":
            check_parquet_footer(path, shown)
            return pl.scan_parquet(polars_source(path)), "parquet"
        if head.lstrip()[:1] == b"{":
            frame = next(json_table_batches(path, skips or SkipLog(), shown))
            return frame.lazy(), "jsonl"
        lf = pl.scan_csv(
            polars_source(path),
            infer_schema=False,
            truncate_ragged_lines=True,
            encoding="utf8-lossy",
        )
        return lf, "csv"
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputError(f"{shown}: cannot read as a table ({first_line(err)})") from err


def check_parquet_footer(path: LogFile, source: LogFile | None = None) -> None:
    """InputError unless `path` ends with the Parquet magic, as every complete Parquet file does."""
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(size - 4, 0))
        tail = fh.read(4)
    if size < 12 or tail != b"PAR1":
        raise InputError(
            f"{source or path}: truncated or not a Parquet file (it starts with the Parquet "
            "magic but does not end with it; a file copied while it was being written looks "
            "like this)"
        )


def _csv_lines_table(
    path: LogFile, names: list[str], skips: SkipLog, source: LogFile
) -> pl.LazyFrame:
    """A CSV file read one physical line at a time (quotes never span lines), as strings."""
    name = str(source)
    columns: list[list[str | None]] = [[] for _ in names]
    lines: list[int] = []
    for lineno, line in read_lines(path):
        if lineno == 1:
            continue
        if line is None:
            skips.skip(name, lineno, LONG_LINE_REASON)
            continue
        if not line.strip():
            continue
        try:
            fields = next(csv.reader([line], strict=True))
        except csv.Error as err:
            skips.skip(name, lineno, "malformed CSV line", str(err))
            continue
        if len(fields) != len(names):
            skips.skip(
                name,
                lineno,
                "wrong number of fields",
                f"expected {len(names)}, found {len(fields)}",
            )
            continue
        for col, value in zip(columns, fields, strict=True):
            col.append(value if value != "" else None)
        lines.append(lineno)
    data = {n: pl.Series(n, c, dtype=pl.String) for n, c in zip(names, columns, strict=True)}
    data["__line"] = pl.Series("__line", lines, dtype=pl.Int64)
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


def _listing(names: list[str]) -> str:
    """Column names for a one-line message: as they are, or quoted where one has a newline."""
    return ", ".join(n if n.isprintable() else repr(n) for n in names)


@dataclass
class TablePlan:
    """What reading one table needs once its schema is known: the scan, the canonical
    expressions, and the decisions later chunks must share with the first."""

    path: LogFile  # the file the user named
    plain: LogFile  # the file polars reads (a decompressed copy of a gzip/zstd file)
    lf: pl.LazyFrame
    kind: str  # csv, parquet, jsonl
    names: list[str]
    exprs: list[pl.Expr]
    mapping: dict[str, str]
    arrival_kind: str  # epoch_s, numeric, or drawn (at --rate-rps: profiles.readers.drawn)
    spec: TableSpec
    unit: str | None = None  # of numeric timestamps, from the first rows read
    absolute: bool = False
    median_s: float | None = None  # typical arrival of the first rows (far-row reference)


def plan_table(
    path: LogFile,
    plain: LogFile,
    ctx: ReaderContext,
    spec: TableSpec,
    scanned: tuple[pl.LazyFrame, str] | None = None,
) -> TablePlan:
    """How to read `plain` (the file `path` names, decompressed) as canonical columns:
    InputError for a missing column. `scanned` is the scan to plan from when not the whole
    file's (a JSONL table's first batch)."""
    lf, kind = scanned or scan_table(plain, ctx.skips, path)
    try:
        schema = lf.collect_schema()
    except pl.exceptions.PolarsError as err:
        raise InputError(f"{path}: cannot read as {kind} ({first_line(err)})") from err
    names = list(schema.names())
    shown = [n for n in names if n != "__line"]
    if not names:
        raise InputError(f"{path}: empty file (no header)")
    mapping = spec.mapping
    drawn = ctx.draw is not None  # a table of lengths, sent at --rate-rps
    for key in drawn_columns(path, mapping) if drawn else ("arrival", "input", "output"):
        if key not in mapping:
            lengths_only = key == "arrival" and "input" in mapping and "output" in mapping
            raise InputError(
                f"{path}: no {key} column found among {shown}; pass --columns "
                "arrival=COL,input=COL,output=COL" + (LENGTHS_ONLY_HINT if lengths_only else "")
            )
    for key, col in mapping.items():
        if col not in names:
            raise InputError(
                f"{path}: missing column {col!r} (the {spec.fmt} format's {key}); "
                f"found: {_listing(shown)}"
            )
    for col in ctx.extra_columns:
        if col not in names:
            raise InputError(f"{path}: --group-by column {col!r} not found; found: {shown}")
    if drawn:  # drawn after reading (canonical_rows), continuing across chunks and files
        arrival, arrival_kind = pl.lit(0.0, dtype=pl.Float64), "drawn"
    else:
        arrival, arrival_kind = arrival_expr(
            lf, mapping["arrival"], schema[mapping["arrival"]], spec.time_kind
        )
    inp = count_expr(mapping["input"], schema[mapping["input"]])
    out = count_expr(mapping["output"], schema[mapping["output"]])
    exprs = [
        pl.when(arrival.is_finite()).then(arrival).alias("arrival_s"),
        inp.alias("input_tokens"),
        out.alias("output_tokens"),
    ]
    if "__line" in names:
        exprs.append(pl.col("__line").cast(pl.Int64))
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
    return TablePlan(path, plain, lf, kind, names, exprs, mapping, arrival_kind, spec)


def read_table(path: LogFile, ctx: ReaderContext, spec: TableSpec) -> FileFrame:
    """Read one tabular file into canonical columns, recording each bad row in ctx.skips."""
    with plain_file(path) as plain:
        plan = plan_table(path, plain, ctx, spec)
        try:
            # The default engine: as lazy (projection and predicate pushdown) and, for a table
            # that fits in memory, faster than the streaming engine, whose many small chunks
            # then cost a rechunk.
            df = plan.lf.select(plan.exprs).collect()
        except pl.exceptions.PolarsError as err:
            if plan.kind != "csv":
                raise InputError(f"{path}: cannot read as {plan.kind} ({first_line(err)})") from err
            # polars stops at a broken line (an unclosed quote): read line by line instead,
            # so only the broken lines are skipped.
            plan.lf = _csv_lines_table(plain, plan.names, ctx.skips, path)
            plan.names = [*plan.names, "__line"]
            plan.exprs.append(pl.col("__line"))
            df = plan.lf.select(plan.exprs).collect()
    if df.height == 0:
        raise InputError(f"{path}: empty file (a header and no rows)")
    return canonical_rows(df, plan, ctx, 0)


def canonical_rows(
    df: pl.DataFrame, plan: TablePlan, ctx: ReaderContext, first_row: int
) -> FileFrame:
    """Skip bad rows, settle the timestamps' unit and drop far rows in rows read from
    `plan.path`, the first of them its row `first_row` (0-based, for line numbers)."""
    path, spec = plan.path, plan.spec
    if plan.arrival_kind == "drawn":
        df = df.with_columns(pl.Series("arrival_s", drawn_arrivals(ctx, df.height)))
    offset = _line_offset(plan.kind, spec, plan.names) + first_row
    lines = df["__line"].to_numpy() if "__line" in df.columns else None
    required = ("arrival_s", "input_tokens", "output_tokens")
    if sum(df[c].null_count() for c in required):
        df = _skip_bad_rows(df, path, ctx, plan.mapping, offset, plan.arrival_kind)
        lines = df["__line"].to_numpy()
    df, raw = _contiguous_arrivals(df.drop("__line", strict=False))
    if plan.unit is None:
        plan.unit, plan.absolute = "s", plan.arrival_kind == "epoch_s"
        if plan.arrival_kind == "numeric" and raw.size:
            plan.unit, plan.absolute = numeric_unit(typical(raw), ctx.time_unit, spec.default_unit)
            if spec.check_units:
                ctx.warnings.extend(unit_warnings(raw, plan.unit, plan.absolute, str(path)))
    if plan.unit != "s":
        df, raw = _contiguous_arrivals(
            df.with_columns(pl.col("arrival_s") * UNIT_SECONDS[plan.unit])
        )
    if _sorted_and_near(raw, plan.median_s):  # the usual chunk: one pass over it
        return FileFrame(df, plan.absolute, 0, None)
    far = far_from_median(raw, plan.median_s)
    if plan.median_s is None and raw.size:
        plan.median_s = typical(raw[~far])
    if far.any():
        where = np.flatnonzero(far)
        at = lines[where] if lines is not None else where + offset
        for line in at[:5]:
            ctx.skips.skip(str(path), int(line), FAR_REASON)
        ctx.skips.reasons[FAR_REASON] += max(0, where.size - 5)
        keep = pl.Series(~far)
        df, raw = _contiguous_arrivals(df.filter(keep))
        lines = lines[~far] if lines is not None else np.flatnonzero(~far) + offset
        offset = 0
    steps, first_back = _backwards(raw, lines, offset)
    return FileFrame(df, plan.absolute, steps, first_back)


def _contiguous_arrivals(df: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """`df` with its arrivals in one buffer, and that buffer as a (read-only) numpy view.

    Readers of the frame take the arrivals as numpy: a polars column of many chunks would be
    copied again for each. Rechunking in polars rather than wrapping a numpy copy in a new
    Series saves a copy, and polars' import of numpy.ma (about 15 ms) on the way."""
    arrivals = df["arrival_s"].rechunk()
    return df.with_columns(arrivals), arrivals.to_numpy()


def _sorted_and_near(raw: np.ndarray, median_s: float | None) -> bool:
    """`raw` never goes down and all of it lies within MAX_SPAN_S of `median_s` (then its
    ends say so): no row is far, and none goes back."""
    if median_s is None or raw.size == 0 or bool(np.any(raw[1:] < raw[:-1])):
        return False
    return median_s - MAX_SPAN_S <= float(raw[0]) and float(raw[-1]) <= median_s + MAX_SPAN_S


def _skip_bad_rows(
    df: pl.DataFrame,
    path: LogFile,
    ctx: ReaderContext,
    mapping: dict[str, str],
    offset: int,
    arrival_kind: str = "",
) -> pl.DataFrame:
    """Drop rows whose timestamp or token counts did not parse; record why, where and what
    was expected."""
    if "__line" not in df.columns:
        df = df.with_row_index("__line").with_columns(pl.col("__line").cast(pl.Int64) + offset)
    time = f"bad or missing timestamp ({mapping.get('arrival', 'drawn')})"
    if arrival_kind in EXPECTED_TIME:
        time += f": {EXPECTED_TIME[arrival_kind]}"
    reason = (
        pl.when(pl.col("arrival_s").is_null())
        .then(pl.lit(time))
        .when(pl.col("input_tokens").is_null())
        .then(pl.lit(f"bad or missing input tokens ({mapping['input']}): {EXPECTED_TOKENS}"))
        .when(pl.col("output_tokens").is_null())
        .then(pl.lit(f"bad or missing output tokens ({mapping['output']}): {EXPECTED_TOKENS}"))
    )
    bad = df.filter(reason.is_not_null()).select("__line", reason.alias("why"))
    counts = bad.group_by("why").len()
    examples = [f"{path}:{line}: {why}" for line, why in bad.head(5).iter_rows()]
    ctx.skips.add_counts(dict(zip(counts["why"], counts["len"], strict=True)), examples)
    return df.filter(reason.is_null())


def _line_offset(kind: str, spec: TableSpec, names: list[str]) -> int:
    """What to add to a 0-based row number to get its file line (CSV header, 1-based rows)."""
    if "__line" in names:
        return 0
    return spec.header_lines + 1 if kind == "csv" else 1


def _backwards(
    raw: np.ndarray, lines: np.ndarray | None, line_offset: int
) -> tuple[int, int | None]:
    """How often the timestamp goes down, and the file line of the first time."""
    if raw.size < 2:
        return 0, None
    down = np.flatnonzero(raw[1:] < raw[:-1])
    if down.size == 0:
        return 0, None
    if lines is not None:
        return int(down.size), int(lines[down[0] + 1])
    return int(down.size), int(down[0] + 1) + line_offset


def _azure_spec(path: LogFile, ctx: ReaderContext, names: list[str] | None = None) -> TableSpec:
    return TableSpec(
        "azure",
        {"arrival": "TIMESTAMP", "input": "ContextTokens", "output": "GeneratedTokens"},
        time_kind="datetime",
    )


def _burstgpt_spec(path: LogFile, ctx: ReaderContext, names: list[str] | None = None) -> TableSpec:
    mapping = {
        "arrival": "Timestamp",
        "input": "Request tokens",
        "output": "Response tokens",
        "model": "Model",
    }
    if names is None:
        with plain_file(path) as plain:
            names = scan_table(plain, SkipLog(), path)[0].collect_schema().names()
    if "Session ID" in names:
        mapping["session"] = "Session ID"
    return TableSpec(
        "burstgpt", mapping, time_kind="numeric", check_units=False, zero_output_failed=True
    )


def _generic_spec(path: LogFile, ctx: ReaderContext, names: list[str] | None = None) -> TableSpec:
    if names is None:
        with plain_file(path) as plain:
            lf, _ = scan_table(plain, SkipLog(), path)
            try:
                names = lf.collect_schema().names()
            except pl.exceptions.PolarsError as err:
                raise InputError(f"{path}: cannot read as a table ({first_line(err)})") from err
    return TableSpec("table", guess_mapping(list(names), ctx.columns), time_kind="auto")


# The tabular reader kinds and how each maps its columns (read whole or in chunks), from the
# file's column names (read from the file when not given).
TABLE_SPECS = {"azure": _azure_spec, "burstgpt": _burstgpt_spec, "table": _generic_spec}


@register_reader("azure")
def read_azure(path: LogFile, ctx: ReaderContext) -> FileFrame:
    """Azure LLM inference traces: TIMESTAMP (2023: 7 fractional digits; 2024: mixed, +00:00)."""
    return read_table(path, ctx, _azure_spec(path, ctx))


@register_reader("burstgpt")
def read_burstgpt(path: LogFile, ctx: ReaderContext) -> FileFrame:
    """BurstGPT v1/v2, read by column name; 0 response tokens marks a failed request."""
    return read_table(path, ctx, _burstgpt_spec(path, ctx))


@register_reader("table")
def read_generic_table(path: LogFile, ctx: ReaderContext) -> FileFrame:
    """A generic CSV, Parquet or JSONL table; columns by --columns or by common names."""
    return read_table(path, ctx, _generic_spec(path, ctx))
