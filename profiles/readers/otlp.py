"""Reader of OpenTelemetry GenAI traces (OTLP JSON): one request per GenAI span.

Takes the OpenTelemetry Collector's file exporter output (one `{"resourceSpans": [...]}`
object a line) and a single exported document (Jaeger's `{"result": {"resourceSpans": ...}}`,
Tempo's `{"batches": [...]}`, or plain OTLP JSON, pretty-printed or not; read whole). The
file exporter's output streams: one line at a time, the kept spans turned into columns
every CHUNK_ROWS rows, so memory grows with the requests' columns, not the file. A span
is a request when it carries `gen_ai.operation.name` or `gen_ai.usage.*` token counts:

- input / output tokens: `gen_ai.usage.input_tokens` / `output_tokens` (the semantic
  conventions), else `prompt_tokens` / `completion_tokens` (vLLM's `llm_request` span);
- arrival: the span's `startTimeUnixNano`; model: `gen_ai.request.model`, else
  `gen_ai.response.model`; session: `gen_ai.conversation.id` or `session.id`;
- ok: false where the span's status code is ERROR (2);
- observed latencies (seconds): `gen_ai.latency.time_to_first_token` (ttft_s) and
  `gen_ai.latency.time_in_queue` (queue_s) where vLLM sets them, `gen_ai.latency.e2e` else
  the span's duration (e2e_s), kept as extra columns for the profile's `observed` section.

Spans that are not GenAI spans (HTTP, database, tool calls), GenAI operations that generate
nothing (embeddings, tools, agents), and a GenAI span inside another GenAI span of the same
trace (one request seen by the gateway and by the engine: the outer one is kept) are skipped
and counted with their reason. Spans come in export order, not arrival order: the frame is
sorted by arrival.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from profiles.digest import LogFile
from profiles.readers.base import (
    LONG_LINE_REASON,
    MAX_TOKENS,
    FileFrame,
    ReaderContext,
    SkipLog,
    open_bytes,
    parse_json_line,
    read_lines,
    register_reader,
    shown,
)
from profiles.readers.timeunits import FAR_REASON, far_from_median

GENERATING = ("chat", "text_completion", "generate_content", "completion", "generate")
_INPUT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_OUTPUT_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model")
_SESSION_KEYS = ("gen_ai.conversation.id", "session.id")
# The span attributes that carry observed latencies, in seconds (vLLM's names); their
# columns (ttft_s, queue_s, e2e_s) are profiles.observed's LATENCY_COLUMNS.
_TTFT = "gen_ai.latency.time_to_first_token"
_QUEUE = "gen_ai.latency.time_in_queue"
_E2E = "gen_ai.latency.e2e"
NOT_GENAI = "not a GenAI span (no gen_ai.operation.name or gen_ai.usage tokens)"
NESTED = "GenAI span inside another GenAI span of the trace (the outer one is the request)"
_STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR")


class _SpanError(ValueError):
    """A reason to skip one GenAI span."""


def is_otlp(obj: dict[str, Any]) -> bool:
    """Whether a JSON object is an OTLP traces document (any of the shapes this reads)."""
    result = obj.get("result")
    return (
        "resourceSpans" in obj
        or "batches" in obj
        or (isinstance(result, dict) and "resourceSpans" in result)
    )


def looks_otlp(head: str) -> bool:
    """Whether the start of a file that is one JSON document (pretty-printed) is OTLP traces."""
    start = head.lstrip()[:4096]
    return start.startswith("{") and any(
        f'"{k}"' in start for k in ("resourceSpans", "batches", "scopeSpans")
    )


def attributes(items: Any) -> dict[str, Any]:
    """OTLP's key/value attribute list as a dict of plain values (intValue strings as int)."""
    out: dict[str, Any] = {}
    if not isinstance(items, list):
        return out
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _value(item.get("value"))
    return out


def _value(value: Any) -> Any:
    if not isinstance(value, dict) or not value:
        return None
    kind, raw = next(iter(value.items()))
    if kind == "intValue":
        try:
            return int(raw)
        except (TypeError, ValueError):
            return None
    if kind == "doubleValue":
        try:
            return float(raw)
        except (TypeError, ValueError):
            return None
    if kind == "arrayValue" and isinstance(raw, dict):
        return [_value(v) for v in raw.get("values", [])]
    return raw


def _documents(path: LogFile, skips: SkipLog) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, OTLP document) for each line of a file exporter's output, or (1, the document)
    of a single pretty-printed export; lines that are not OTLP documents are skipped (a file
    whose first line is cut off is read line by line, that line skipped)."""
    if not _first_line_parses(path):
        whole = _whole_document(path)
        if whole is not None:
            yield 1, whole
            return
    for lineno, line in read_lines(path):
        if line is None:
            skips.skip(str(path), lineno, LONG_LINE_REASON)
            continue
        if not line.strip():
            continue
        obj, reason, detail = parse_json_line(line)
        if reason:
            skips.skip(str(path), lineno, reason, detail)
        elif not isinstance(obj, dict) or not is_otlp(obj):
            skips.skip(str(path), lineno, "not an OTLP traces object")
        else:
            yield lineno, obj


def _first_line_parses(path: LogFile) -> bool:
    """Whether the first non-blank line is a whole JSON value (else: one pretty-printed
    document, or a first line too long to be one)."""
    for _, line in read_lines(path):
        if line is None:
            return True  # one line past the cap: a file exporter's, skipped and counted
        if line.strip():
            return not parse_json_line(line)[1]
    return True


def _whole_document(path: LogFile) -> dict[str, Any] | None:
    """The file as one OTLP document, or None where it is not one."""
    with open_bytes(path) as fh:
        text = fh.read().decode("utf-8", errors="replace").lstrip("\ufeff")
    obj, reason, _ = parse_json_line(text)
    return obj if not reason and isinstance(obj, dict) and is_otlp(obj) else None


def _spans(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every span of an OTLP document, whichever exporter's shape it has."""
    result = doc.get("result")
    groups = doc.get("resourceSpans") or doc.get("batches")
    if groups is None and isinstance(result, dict):
        groups = result.get("resourceSpans")
    for rs in groups if isinstance(groups, list) else ():
        if not isinstance(rs, dict):
            continue
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        for ss in scopes if isinstance(scopes, list) else ():
            spans = ss.get("spans") if isinstance(ss, dict) else None
            for span in spans if isinstance(spans, list) else ():
                if isinstance(span, dict):
                    yield span


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attrs[k] for k in keys if attrs.get(k) is not None), None)


def _count(attrs: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    value = _first(attrs, keys)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _SpanError(f"{keys[0]} is not a number ({shown(value)})")
    if not 0 <= value <= MAX_TOKENS or value != int(value):
        raise _SpanError(
            f"{keys[0]} is not a whole number from 0 to {MAX_TOKENS:,} ({shown(value)})"
        )
    return int(value)


def _nanos(span: dict[str, Any], key: str) -> int | None:
    raw = span.get(key)
    try:
        return int(raw) if raw is not None and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        return None


def _seconds(attrs: dict[str, Any], key: str) -> float | None:
    value = attrs.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if np.isfinite(value) and value >= 0 else None


def _is_genai(attrs: dict[str, Any]) -> bool:
    return "gen_ai.operation.name" in attrs or any(k in attrs for k in _INPUT_KEYS + _OUTPUT_KEYS)


def span_row(span: dict[str, Any], attrs: dict[str, Any]) -> dict[str, Any]:
    """The request of one GenAI span, as canonical values; _SpanError for a bad one."""
    op = attrs.get("gen_ai.operation.name")
    if op is not None and str(op) not in GENERATING:
        raise _SpanError(f"gen_ai operation {op!r} generates no tokens")
    start = _nanos(span, "startTimeUnixNano")
    if start is None or start <= 0:
        raise _SpanError("startTimeUnixNano is missing or not a time")
    status = span.get("status")
    ok = not isinstance(status, dict) or status.get("code") not in _STATUS_ERROR
    n_in, n_out = _count(attrs, _INPUT_KEYS), _count(attrs, _OUTPUT_KEYS)
    if n_in is None:
        raise _SpanError("no gen_ai.usage.input_tokens (nor prompt_tokens)")
    if n_out is None:
        if ok:
            raise _SpanError("no gen_ai.usage.output_tokens (nor completion_tokens)")
        n_out = 0  # a failed request that generated nothing
    end = _nanos(span, "endTimeUnixNano")
    e2e = _seconds(attrs, _E2E)
    if e2e is None and end is not None and end >= start:
        e2e = (end - start) / 1e9
    model, session = _first(attrs, _MODEL_KEYS), _first(attrs, _SESSION_KEYS)
    return {
        "arrival_s": start / 1e9,
        "input_tokens": n_in,
        "output_tokens": n_out,
        "model": None if model is None else str(model),
        "session_id": None if session is None else str(session),
        "ok": ok,
        "ttft_s": _seconds(attrs, _TTFT),
        "queue_s": _seconds(attrs, _QUEUE),
        "e2e_s": e2e,
    }


_COLUMNS: dict[str, pl.DataType] = {
    "arrival_s": pl.Float64(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "session_id": pl.String(),
    "model": pl.String(),
    "ok": pl.Boolean(),
    "ttft_s": pl.Float64(),
    "queue_s": pl.Float64(),
    "e2e_s": pl.Float64(),
}


# Where each kept span came from: its line (for skip reports), trace, span and parent ids.
_WHERE: dict[str, pl.DataType] = {
    "line": pl.Int64(),
    "trace": pl.String(),
    "span": pl.String(),
    "parent": pl.String(),
}
_LINKS: dict[str, pl.DataType] = {"trace": pl.String(), "span": pl.String(), "parent": pl.String()}
CHUNK_ROWS = 65_536  # rows (and span links) kept as Python values before they become columns
MAX_DEPTH = 256  # ancestors followed from a GenAI span (deeper: taken as outermost)


class _Chunks:
    """Columns gathered row by row and turned into a polars frame every CHUNK_ROWS rows, so
    that what a reader keeps per span is its columns' bytes, not a Python object each (a
    dict per request cost about 850 bytes of heap; the file itself is read a line at a
    time)."""

    def __init__(self, schema: dict[str, pl.DataType]) -> None:
        self._schema = schema
        self._open: dict[str, list[Any]] = {k: [] for k in schema}
        self._frames: list[pl.DataFrame] = []

    def add(self, values: dict[str, Any]) -> None:
        for key, column in self._open.items():
            column.append(values[key])
        if len(next(iter(self._open.values()))) >= CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        self._frames.append(
            pl.DataFrame({k: pl.Series(k, v, dtype=self._schema[k]) for k, v in self._open.items()})
        )
        self._open = {k: [] for k in self._schema}

    def frame(self) -> pl.DataFrame:
        self._flush()
        return pl.concat(self._frames, how="vertical", rechunk=True)


@register_reader("otlp")
def read_otlp(path: LogFile, ctx: ReaderContext) -> FileFrame:
    """OpenTelemetry GenAI spans (OTLP JSON) -> one request per span, sorted by arrival.
    A file exporter's output is read a line (one OTLP document) at a time."""
    rows = _Chunks({**_COLUMNS, **_WHERE})
    links = _Chunks(_LINKS)  # (trace, span) -> parent, of every span
    for lineno, doc in _documents(path, ctx.skips):
        for span in _spans(doc):
            trace, span_id = str(span.get("traceId") or ""), str(span.get("spanId") or "")
            parent = str(span.get("parentSpanId") or "")
            if span_id:
                links.add({"trace": trace, "span": span_id, "parent": parent})
            attrs = attributes(span.get("attributes"))
            if not _is_genai(attrs):
                ctx.skips.skip(str(path), lineno, NOT_GENAI, str(span.get("name", "")))
                continue
            try:
                row = span_row(span, attrs)
            except _SpanError as err:
                ctx.skips.skip(str(path), lineno, "bad GenAI span", str(err))
                continue
            rows.add({**row, "line": lineno, "trace": trace, "span": span_id, "parent": parent})
    frame = rows.frame()
    nested = _nested(frame, links.frame())
    for line in frame.filter(nested)["line"].to_list():
        ctx.skips.skip(str(path), line, NESTED)
    return _frame(frame.filter(~nested), path, ctx)


def _nested(rows: pl.DataFrame, links: pl.DataFrame) -> pl.Series:
    """Whether each row's span has a GenAI span among its ancestors (through spans of any
    kind, followed by their parent ids within the trace; a span's own id or a loop of
    ancestors ends the walk): those are skipped as NESTED, the outermost one is the request."""
    genai = (
        rows.filter(pl.col("span") != "")
        .select("trace", "span")
        .unique()
        .with_columns(pl.lit(True).alias("genai"))
    )
    parents = links.unique(subset=["trace", "span"], keep="last", maintain_order=True)
    walk = rows.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("i"),
        "trace",
        pl.col("span").alias("own"),
        pl.col("parent").alias("up"),
    )
    found: list[pl.Series] = []
    for _ in range(MAX_DEPTH):
        walk = walk.filter((pl.col("up") != "") & (pl.col("up") != pl.col("own")))
        if walk.is_empty():
            break
        step = walk.join(genai, left_on=["trace", "up"], right_on=["trace", "span"], how="left")
        found.append(step.filter(pl.col("genai").is_not_null())["i"])
        walk = (
            step.filter(pl.col("genai").is_null())
            .join(parents, left_on=["trace", "up"], right_on=["trace", "span"], how="inner")
            .select("i", "trace", "own", pl.col("parent").alias("up"))
        )
    hit = pl.concat(found) if found else pl.Series("i", [], dtype=pl.Int64)
    return pl.int_range(rows.height, dtype=pl.Int64, eager=True).is_in(hit.implode())


def _frame(frame: pl.DataFrame, path: LogFile, ctx: ReaderContext) -> FileFrame:
    seconds = frame["arrival_s"].to_numpy()
    far = far_from_median(seconds)
    if far.any():
        lines = frame["line"].to_numpy()
        for i in np.flatnonzero(far):
            ctx.skips.skip(str(path), int(lines[int(i)]), FAR_REASON)
        frame = frame.filter(pl.Series(~far))
    frame = frame.select(list(_COLUMNS)).sort("arrival_s", maintain_order=True)
    # Optional columns no span filled are dropped, so the profile says "not available".
    keep = [
        c
        for c in frame.columns
        if c in ("arrival_s", "input_tokens", "output_tokens") or frame[c].null_count() < len(frame)
    ]
    return FileFrame(frame.select(keep), absolute_time=True)
