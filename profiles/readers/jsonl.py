"""Readers for JSON-lines request logs: Mooncake traces and OpenAI-style request logs.

Each line is one request object. Prompt text in OpenAI logs is read only to count tokens
(where the log has no usage) and to hash prompt blocks; it is dropped right after.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from contracts.errors import InputError
from profiles.digest import LogFile
from profiles.readers.base import (
    CANONICAL_COLUMNS,
    MAX_TOKENS,
    FileFrame,
    ReaderContext,
    json_objects,
    register_reader,
    shown,
)
from profiles.readers.timeunits import (
    FAR_REASON,
    UNIT_SECONDS,
    far_from_median,
    numeric_unit,
    typical,
    unit_warnings,
)
from profiles.tokenize import Tokenizer, chained_block_hashes

MOONCAKE_BLOCK_TOKENS = 512
_TIME_KEYS = ("timestamp", "time", "ts", "created_at", "request_time", "start_time", "created")
_SESSION_KEYS = ("session_id", "conversation_id", "session", "user")


class _RowError(ValueError):
    """A reason to skip one line."""


MAX_EPOCH_S = 4.1e9  # about the year 2100


def _int_count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _RowError(f"{what} is not a number ({shown(value)})")
    if not 0 <= value <= MAX_TOKENS or value != int(value):
        raise _RowError(f"{what} is not a whole number from 0 to {MAX_TOKENS:,} ({shown(value)})")
    return int(value)


def _backwards(times: np.ndarray, lines: list[int]) -> tuple[int, int | None]:
    if times.size < 2:
        return 0, None
    down = np.flatnonzero(times[1:] < times[:-1])
    return int(down.size), (lines[int(down[0]) + 1] if down.size else None)


@register_reader("mooncake")
def read_mooncake(path: LogFile, ctx: ReaderContext) -> FileFrame:
    """Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)."""
    return next(mooncake_chunks(path, ctx, None))


def mooncake_chunks(
    path: LogFile, ctx: ReaderContext, chunk_rows: int | None
) -> Iterator[FileFrame]:
    """A Mooncake trace as frames of `chunk_rows` requests (one frame when None), in file
    order. The timestamps' unit and the reference for far rows come from the first frame."""
    ctx.block_tokens = MOONCAKE_BLOCK_TOKENS
    frames = _MooncakeFrames(path, ctx)
    any_line = False
    rows: list[_MooncakeRow] = []
    for lineno, obj in json_objects(path, ctx.skips):
        any_line = True
        try:
            rows.append(_mooncake_row(obj, lineno))
        except _RowError as err:
            ctx.skips.skip(str(path), lineno, "bad field", str(err))
            continue
        if chunk_rows is not None and len(rows) >= chunk_rows:
            yield frames.of(rows)
            rows = []
    if not any_line and ctx.skips.total == 0:
        raise InputError(f"{path}: empty file")
    if rows or frames.unit is None:
        yield frames.of(rows)


_MooncakeRow = tuple[float, int, int, list[int], int]  # timestamp, input, output, ids, line


class _MooncakeFrames:
    """Canonical frames of parsed Mooncake rows; the first one settles the timestamps' unit
    and the far-row reference (the median) for the rest."""

    def __init__(self, path: LogFile, ctx: ReaderContext) -> None:
        self.path, self.ctx = path, ctx
        self.unit: str | None = None
        self.absolute = False
        self.median_s: float | None = None

    def of(self, rows: list[_MooncakeRow]) -> FileFrame:
        raw = np.asarray([r[0] for r in rows], dtype=np.float64)
        if self.unit is None:
            self.unit, self.absolute = numeric_unit(typical(raw), self.ctx.time_unit, "ms")
            self.ctx.warnings.extend(unit_warnings(raw, self.unit, self.absolute, str(self.path)))
        seconds = raw * UNIT_SECONDS[self.unit]
        far = far_from_median(seconds, self.median_s)
        if far.any():
            for i in np.flatnonzero(far):
                self.ctx.skips.skip(str(self.path), rows[i][4], FAR_REASON)
            rows = [r for r, f in zip(rows, far, strict=True) if not f]
            seconds = seconds[~far]
        if self.median_s is None:
            self.median_s = typical(seconds)
        inputs = pl.Series([r[1] for r in rows], dtype=pl.Int64)
        frame = pl.DataFrame(
            {
                "arrival_s": seconds,
                "input_tokens": inputs,
                "output_tokens": pl.Series([r[2] for r in rows], dtype=pl.Int64),
                "block_hashes": pl.Series([r[3] for r in rows], dtype=pl.List(pl.UInt64)),
                "hash_tokens": inputs,
            }
        )
        steps, first = _backwards(seconds, [r[4] for r in rows])
        return FileFrame(frame, self.absolute, steps, first)


def _mooncake_row(obj: dict[str, Any], lineno: int) -> _MooncakeRow:
    """(timestamp, input, output, hash ids, line) of one request; _RowError for a bad one."""
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        raise _RowError(f"timestamp is missing or not a number ({shown(ts)})")
    n_in = _int_count(obj.get("input_length"), "input_length")
    n_out = _int_count(obj.get("output_length"), "output_length")
    ids = obj.get("hash_ids", [])
    if not isinstance(ids, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 1 << 64 for h in ids
    ):
        raise _RowError("hash_ids is not a list of whole numbers from 0 to 2^64-1")
    return float(ts), n_in, n_out, ids, lineno


def _seconds(value: Any) -> tuple[float, bool]:
    """(seconds, absolute) from an epoch number in s/ms/us/ns or an ISO-8601 string."""
    if isinstance(value, bool):
        raise _RowError(f"timestamp is not a time ({shown(value)})")
    if isinstance(value, int | float):
        unit, absolute = numeric_unit(float(value), "auto")
        seconds = float(value) * UNIT_SECONDS[unit]
        if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_EPOCH_S:
            raise _RowError(f"timestamp {shown(value)} is out of range")
        return seconds, absolute
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text), float(text) >= 1e9
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as err:
            raise _RowError(f"timestamp {shown(value)} is not ISO-8601 or epoch") from err
        if dt.tzinfo is None:
            from datetime import UTC

            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp(), True
    raise _RowError(f"timestamp is missing ({shown(value)})")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(x for x in parts if isinstance(x, str))
    return ""


class _PromptEncoder:
    """Token ids of a request's prompt, memoising repeated message texts (system prompts)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tok = tokenizer
        self._memo: dict[str, list[int]] = {}

    def _encode(self, text: str) -> list[int]:
        ids = self._memo.get(text)
        if ids is None:
            ids = self.tok.encode(text)
            if len(self._memo) > 20000:
                self._memo.clear()
            self._memo[text] = ids
        return ids

    def prompt_ids(self, body: dict[str, Any]) -> list[int] | None:
        messages = body.get("messages")
        if isinstance(messages, list):
            ids: list[int] = []
            for m in messages:
                if not isinstance(m, dict):
                    continue
                # One marker token per message role, as chat templates add role tokens.
                ids.append(zlib.crc32(f"<|{m.get('role', '')}|>".encode()))
                ids.extend(self._encode(_content_text(m.get("content"))))
            return ids
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            return self._encode(prompt)
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            return [i for p in prompt for i in self._encode(p)]
        if isinstance(prompt, list) and all(isinstance(p, int) for p in prompt):
            return [int(p) for p in prompt]
        return None


def _response_text(resp: dict[str, Any]) -> str | None:
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    texts = []
    for c in choices:
        if not isinstance(c, dict):
            continue
        msg = _dict(c.get("message"))
        text = msg.get("content") if msg else c.get("text")
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts) if texts else None


@register_reader("openai-jsonl")
def read_openai(path: LogFile, ctx: ReaderContext) -> FileFrame:
    """OpenAI-style request logs: timestamp, request body, response usage, one object a line."""
    return next(openai_chunks(path, ctx, None))


def openai_chunks(path: LogFile, ctx: ReaderContext, chunk_rows: int | None) -> Iterator[FileFrame]:
    """An OpenAI-style request log as frames of `chunk_rows` requests (one frame when None),
    in file order; each frame holds its requests' values and block hashes, nothing more.

    Read whole (one frame), the file's majority settles whether timestamps are epoch or
    relative times (the other rows are skipped as corrupt), rows far from the median of all
    times are skipped, and optional columns no row fills are dropped. In chunks, the first
    frame with a usable row settles the first two for the rest: its majority and its median
    are the file's (so a file whose later rows disagree with its first rows skips those
    rather than its first ones), and the relative-time unit warnings look at it alone. A
    later frame keeps the first one's optional columns (null where it fills none) and adds
    those it fills itself, so no value is dropped; a consumer that needs one set of columns
    (a --group-by column) takes the first frame's. The skip counts are the same; the first
    few skip examples come chunk by chunk (read whole, every unparsable line comes before
    the timestamps skipped).
    """
    enc = _PromptEncoder(ctx.tokenizer)
    frames = _OpenAIFrames(path, ctx)
    cols: dict[str, list[Any]] = {k: [] for k in (*CANONICAL_COLUMNS, "absolute", "line")}
    rows = 0
    any_line = False
    for lineno, obj in json_objects(path, ctx.skips):
        any_line = True
        try:
            row = _openai_row(obj, enc, ctx)
        except _RowError as err:
            ctx.skips.skip(str(path), lineno, "bad request record", str(err))
            continue
        row["line"] = lineno
        for k, v in row.items():
            cols[k].append(v)
        rows += 1
        if chunk_rows is not None and rows >= chunk_rows:
            yield frames.of(cols)
            cols = {k: [] for k in cols}
            rows = 0
    if not any_line and ctx.skips.total == 0:
        raise InputError(f"{path}: empty file")
    if rows or frames.columns is None:
        yield frames.of(cols)


class _OpenAIFrames:
    """Canonical frames of parsed OpenAI-style rows (columns of values); the first one with a
    usable row settles epoch against relative times, the far-row reference (the median) and
    the optional columns for the rest."""

    def __init__(self, path: LogFile, ctx: ReaderContext) -> None:
        self.path, self.ctx = path, ctx
        self.absolute: bool | None = None
        self.median_s: float | None = None
        self.columns: list[str] | None = None

    def of(self, cols: dict[str, list[Any]]) -> FileFrame:
        flags = cols["absolute"]
        absolute = self.absolute
        if absolute is None:
            absolute = sum(flags) * 2 >= len(flags)
        keep = [f == absolute for f in flags]
        if not all(keep):
            # A few relative times among epoch times (or the reverse) are corrupt rows.
            why = (
                "timestamp is not an epoch time like the rest of the file"
                if absolute
                else "timestamp is an epoch time among relative times"
            )
            for ok_row, line in zip(keep, cols["line"], strict=True):
                if not ok_row:
                    self.ctx.skips.skip(str(self.path), line, "bad request record", why)
            cols = {
                k: [v for v, ok_row in zip(vs, keep, strict=True) if ok_row]
                for k, vs in cols.items()
            }
        seconds = np.asarray(cols["arrival_s"], dtype=np.float64)
        far = far_from_median(seconds, self.median_s)
        if far.any():
            for i in np.flatnonzero(far):
                self.ctx.skips.skip(str(self.path), cols["line"][i], FAR_REASON)
            cols = {k: [v for v, f in zip(vs, far, strict=True) if not f] for k, vs in cols.items()}
            seconds = seconds[~far]
        frame = pl.DataFrame(
            {k: pl.Series(cols[k], dtype=dtype) for k, dtype in CANONICAL_COLUMNS.items()}
        )
        # Drop optional columns the log never filled, so the profile says "not available".
        filled = [
            c
            for c in frame.columns
            if c in ("arrival_s", "input_tokens", "output_tokens")
            or frame[c].null_count() < frame.height
            or c in (self.columns or ())
        ]
        frame = frame.select(filled)
        if self.columns is None and frame.height:
            self.absolute, self.median_s, self.columns = absolute, typical(seconds), filled
            if not absolute:
                self.ctx.warnings.extend(unit_warnings(seconds, "s", False, str(self.path)))
        steps, first = _backwards(seconds, cols["line"])
        return FileFrame(frame, absolute, steps, first)


def _openai_row(obj: dict[str, Any], enc: _PromptEncoder, ctx: ReaderContext) -> dict[str, Any]:
    req = _dict(obj.get("request")) or _dict(obj.get("body"))
    if "body" in req and isinstance(req["body"], dict):
        req = req["body"]
    if not req and ("messages" in obj or "prompt" in obj):
        req = obj
    resp = _dict(obj.get("response"))
    if "body" in resp and isinstance(resp["body"], dict):
        resp = resp["body"]
    usage = _dict(resp.get("usage")) or _dict(obj.get("usage"))

    stamp = next((obj[k] for k in _TIME_KEYS if obj.get(k) is not None), None)
    if stamp is None:
        stamp = req.get("created", resp.get("created"))
    arrival, absolute = _seconds(stamp)

    status = obj.get("status_code", obj.get("status", resp.get("status_code")))
    ok = not obj.get("error") and not resp.get("error")
    if isinstance(status, int) and not isinstance(status, bool):
        ok = ok and 200 <= status < 300

    ids = enc.prompt_ids(req)
    if ids is not None:
        ctx.tokenizer_used = True
    if "prompt_tokens" in usage:
        n_in = _int_count(usage["prompt_tokens"], "usage.prompt_tokens")
    elif ids is not None:
        n_in = len(ids)
        ctx.tokens_estimated = True
    else:
        raise _RowError("no usage.prompt_tokens and no messages or prompt to count")
    if "completion_tokens" in usage:
        n_out = _int_count(usage["completion_tokens"], "usage.completion_tokens")
    else:
        text = _response_text(resp)
        if text is not None:
            n_out = enc.tok.count(text)
            ctx.tokens_estimated = True
        elif not ok:
            n_out = 0
        else:
            raise _RowError("no usage.completion_tokens and no response text to count")
    cached = _dict(usage.get("prompt_tokens_details")).get("cached_tokens")
    meta = _dict(req.get("metadata")) or _dict(obj.get("metadata"))
    session = next(
        (src[k] for src in (obj, meta, req) for k in _SESSION_KEYS if src.get(k) is not None),
        None,
    )
    tenant = obj.get("tenant", meta.get("tenant"))
    model = req.get("model", resp.get("model", obj.get("model")))
    return {
        "arrival_s": arrival,
        "absolute": absolute,
        "input_tokens": n_in,
        "output_tokens": n_out,
        "session_id": None if session is None else str(session),
        "model": None if model is None else str(model),
        "tenant": None if tenant is None else str(tenant),
        "ok": ok,
        "block_hashes": None if ids is None else chained_block_hashes(ids, ctx.block_tokens),
        "hash_tokens": None if ids is None else len(ids),
        "cached_tokens": _int_count(cached, "cached_tokens") if cached is not None else None,
    }
