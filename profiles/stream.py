"""Profiling a large log in bounded memory: read it in chunks of rows, fold each one.

`profile_in_chunks` reads Azure, BurstGPT and generic tables (CSV, Parquet, JSONL),
Mooncake traces and OpenAI-style request logs a chunk at a time through the same row checks
as the in-memory reader and folds each chunk into profiles.fold; memory is then one chunk
plus counts that grow with the log's span (requests per second) and its largest token count,
not with its rows, plus, for a log with block hashes (Mooncake, or prompt text), its
hashes: every one up to 16 Mi of them (the exact prefix statistics), bounded past that
(profiles.prefix_bounded). The profile equals the in-memory one except where
`source.read_in_chunks.estimated` says otherwise (with `bounds` where sampled), and except
that the file-wide choices (epoch or relative times, the far-row reference) are the first
chunk's (see the chunk readers).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import polars as pl

from contracts.errors import InputError
from profiles.assemble import GROUPABLE, MAX_GROUPS, prefix_of, wrap_profile
from profiles.digest import LogFile
from profiles.fold import ArrivalFold, LengthFold, SessionFold
from profiles.model import Bound, Chunked, Profile, ProfileBody
from profiles.readers import expand_paths, format_of, no_usable_rows, reader_context
from profiles.readers.base import (
    ArrivalDraw,
    FileFrame,
    ReaderContext,
    ReadResult,
    files_digest,
    reading,
)
from profiles.readers.chunks import (
    SESSION_HASH,
    SESSION_SEEN,
    SESSION_ZEROS,
    BrokenTable,
    read_table_chunks,
    table_rows,
    with_session_hashes,
)
from profiles.readers.jsonl import mooncake_chunks, openai_chunks
from profiles.readers.tabular import TABLE_SPECS
from profiles.tokenize import Tokenizer

if TYPE_CHECKING:
    from profiles.prefix_bounded import PrefixFold

STREAM_ABOVE_ROWS = 4_000_000  # Parquet logs with more rows are read in chunks
STREAM_ABOVE_BYTES = 256 << 20  # other tabular files this large on disk are read in chunks
CHUNK_ROWS = 1_000_000  # about 50 MB of canonical columns per chunk
# An OpenAI-style log's chunk is parsed into Python lists first (about 1.8 KB a request with
# its block hashes, measured on 200k requests of 1.3 KB of JSON each): about 90 MB a chunk.
TEXT_CHUNK_ROWS = 50_000
T = TypeVar("T")
CHUNKED_KINDS = (*TABLE_SPECS, "mooncake", "openai-jsonl")  # reader kinds read in chunks

__all__ = [
    "CHUNK_ROWS",
    "STREAM_ABOVE_BYTES",
    "STREAM_ABOVE_ROWS",
    "TEXT_CHUNK_ROWS",
    "profile_in_chunks",
]


_END = object()


def _prefetched(items: Iterator[T]) -> Iterator[T]:
    """`items`, each next one read on a worker thread while the caller folds this one (polars
    and numpy release the GIL in their heavy loops, so reading and folding overlap)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(next, items, _END)
        while True:
            item = ahead.result()
            if item is _END:
                return
            ahead = pool.submit(next, items, _END)
            yield item  # type: ignore[misc]


class _WholeRead(Exception):
    """Only a whole read profiles this log as the in-memory profiler does: a chunk starts
    before the previous one ended (a whole-log sort orders it), or --group-by names a column
    the chunks lack or has more than GROUP_FOLDS values."""


GROUP_FOLDS = 4 * MAX_GROUPS  # most --group-by values folded apart before a whole read


def profile_in_chunks(
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
    now: datetime | None = None,
    phase_s: dict[str, float] | None = None,
    draw: ArrivalDraw | None = None,
) -> Profile | None:
    """The profile of tabular logs, Mooncake traces and OpenAI-style logs read in chunks of
    `chunk_rows` rows (with a body per `group_by` value, as the in-memory profiler's), or None
    where the in-memory profiler should read them: another format, small (when `chunk_rows`
    is None), times that go back across chunks, or a `group_by` column with more than
    GROUP_FOLDS values (or `session_id`, or one the first chunk lacks).

    Raises InputError as the in-memory profiler does (bad options, unreadable files, no
    usable rows). `phase_s`, when given, receives this thread's CPU seconds in each phase
    (taking the next chunk, each fold, finishing; bench/profile_speed.py --breakdown).
    """
    extra = (group_by,) if group_by is not None and group_by not in GROUPABLE else ()
    ctx = reader_context(fmt, columns, tokenizer, block_tokens, time_unit, extra, draw)
    files = expand_paths(paths)
    for p in files:
        if p.stat().st_size == 0:
            raise InputError(f"{p}: empty file")
    kind = format_of(files, fmt)
    if kind not in CHUNKED_KINDS or group_by == "session_id":
        return None
    rows = [table_rows(p) for p in files]
    expected = sum(r for r in rows if r is not None) if all(r is not None for r in rows) else None
    if chunk_rows is None:
        large = expected is not None and expected > STREAM_ABOVE_ROWS
        if not large and sum(p.stat().st_size for p in files) <= STREAM_ABOVE_BYTES:
            return None
        chunk_rows = TEXT_CHUNK_ROWS if kind == "openai-jsonl" else CHUNK_ROWS
    if chunk_rows < 1:
        raise InputError(f"--chunk-rows must be at least 1 (got {chunk_rows})")
    with ThreadPoolExecutor(max_workers=1) as pool:
        digest = pool.submit(files_digest, files)
        try:
            phases = phase_s if phase_s is not None else {}
            folded = _Folds(seed, expected, group_by, phases, (ctx, cache_tokens))
            for p in files:
                folded.read_file(p, kind, ctx, chunk_rows)
        except (_WholeRead, BrokenTable):
            return None
        with folded.timed("sha256 (waiting for it)"):
            hexdigest = digest.result()
        with folded.timed("finish"):
            return folded.profile(files, kind, ctx, hexdigest, cache_tokens, chunk_rows, now)


class _BodyFold:
    """The folds of one profile body (the whole log's, or one --group-by value's)."""

    def __init__(
        self,
        seed: int,
        start_epoch_s: float | None,
        expected_gaps: int | None,
        prefix: tuple[ReaderContext, list[int] | None],
    ) -> None:
        self.seed = seed
        self.arrivals = ArrivalFold(start_epoch_s, expected_gaps)
        self.lengths = LengthFold(seed)
        self.all_lengths: LengthFold | None = None  # every request, when the log marks failures
        self.sessions = SessionFold()
        self.rows = self.ok_rows = 0
        # Sums of usage cached_tokens and of input tokens over the rows that report it: the
        # server-reported cached-token ratio.
        self.cached = [0, 0]  # cached tokens, input tokens
        self.prefix_options = prefix  # the block size is the reader's once it has read
        self.prefix: PrefixFold | None = None

    def add(self, t: np.ndarray, frame: pl.DataFrame, timed: _Timer) -> None:
        """Fold a chunk: its arrivals `t` (s from the log's first) and canonical `frame`."""
        with timed("fold arrivals"):
            self.arrivals.add(t)
        with timed("fold lengths"):
            ins = frame["input_tokens"].to_numpy()
            outs = frame["output_tokens"].to_numpy()
            if "ok" in frame.columns:
                ok = frame["ok"].fill_null(True).to_numpy()
                self.ok_rows += int(ok.sum())
                self.lengths.add(ins[ok], outs[ok])
                self.all_lengths = self.all_lengths or LengthFold(self.seed)
                self.all_lengths.add(ins, outs)
            else:
                self.lengths.add(ins, outs)
            if "cached_tokens" in frame.columns:
                has = frame["cached_tokens"].is_not_null().to_numpy()
                self.cached[0] += int(frame["cached_tokens"].sum())
                self.cached[1] += int(ins[has].sum())
        with timed("fold sessions"):
            if SESSION_HASH in frame.columns:
                ids = frame.select(SESSION_HASH, SESSION_ZEROS)
                self.sessions.add(ids, int(frame[SESSION_SEEN].sum()), t, ins)
            else:
                self.sessions.add(None, 0, t, ins)
        if "block_hashes" in frame.columns:
            with timed("fold prefix reuse"):
                if self.prefix is None:
                    from profiles.prefix_bounded import PrefixFold  # only logs with hashes

                    ctx, cache_tokens = self.prefix_options
                    self.prefix = PrefixFold(ctx.block_tokens, cache_tokens)
                self.prefix.add(frame)
        self.rows += frame.height

    def finish(
        self, schema: pl.DataFrame, kind: str, ctx: ReaderContext, cache_tokens: list[int] | None
    ) -> tuple[ProfileBody, dict[str, str], dict[str, Bound]]:
        """The body, what in it differs from the in-memory profiler's (key -> how), and the
        bounds of what is sampled."""
        # The sessions' sorts run on another thread while this one finishes the rest (numpy
        # releases the GIL in them; the read is over, so a core is free): 0.04 s less wall
        # time at 10 M rows on 2 cores.
        with ThreadPoolExecutor(max_workers=1) as pool:
            sessions = pool.submit(self.sessions.finish)
            estimated: dict[str, str] = {}
            bounds: dict[str, Bound] = {}
            arrivals, note = self.arrivals.finish()
            if note:
                estimated["arrivals.gamma_shape.mle"] = note
            ok_share = None
            fold = self.lengths
            if self.all_lengths is not None:
                ok_share = self.ok_rows / self.rows
                if self.ok_rows == 0:
                    fold = self.all_lengths  # every request failed: describe what was asked for
            lengths, note = fold.finish()
            if note:
                estimated["lengths.io_rank_correlation"] = note
            if fold.n > len(lengths.sampler.pairs):
                estimated["lengths.sampler"] = (
                    "another uniform random sample of the requests than the in-memory profiler's "
                    "(the smallest of a uniform random key per request, drawn with the seed)"
                )
            if self.prefix is not None:
                hashes_from = "prompt text" if kind == "openai-jsonl" else "hash_ids"
                prefix, notes, bounds = self.prefix.finish(hashes_from)
                estimated.update(notes)
            else:
                prefix = prefix_of(schema, ctx.block_tokens, cache_tokens, None)
            cached, inputs = self.cached
            if inputs > 0:  # as prefix_stats reports it from the whole frame (no row: no inputs)
                prefix = prefix.model_copy(update={"reported_cached_token_ratio": cached / inputs})
            body = ProfileBody(
                arrivals=arrivals,
                lengths=lengths,
                prefix=prefix,
                sessions=sessions.result(),
                ok_share=ok_share,
                requests=self.rows,
            )
        return body, estimated, bounds


class _Timer(Protocol):
    def __call__(self, phase: str) -> AbstractContextManager[None]: ...


class _Folds:
    """Every statistic's fold, fed one canonical chunk after another."""

    def __init__(
        self,
        seed: int,
        expected_rows: int | None,
        group_by: str | None,
        phase_s: dict[str, float],
        prefix: tuple[ReaderContext, list[int] | None],
    ) -> None:
        self.phase_s = phase_s
        self.prefix = prefix  # what the prefix folds need: the reader's context, cache sizes
        self.seed = seed
        self.expected_gaps = expected_rows - 1 if expected_rows else None
        self.group_by = group_by
        self.body: _BodyFold | None = None
        self.groups: dict[str, _BodyFold] = {}
        self.t0 = 0.0
        self.start_epoch_s: float | None = None
        self.absolute: bool | None = None
        self.last_raw = -np.inf
        self.rows = self.chunks = 0
        self.schema: pl.DataFrame | None = None

    def read_file(self, path: LogFile, kind: str, ctx: ReaderContext, chunk_rows: int) -> None:
        steps, first_line = 0, None
        with reading(path):
            if kind == "mooncake":
                parts = mooncake_chunks(path, ctx, chunk_rows)
            elif kind == "openai-jsonl":
                parts = _session_hashed(openai_chunks(path, ctx, chunk_rows))
            else:
                parts = read_table_chunks(path, ctx, kind, chunk_rows)
            chunks = _prefetched(parts)
            while True:
                with self.timed("take the next chunk"):
                    part = next(chunks, None)
                if part is None:
                    break
                if self.absolute is None:
                    self.absolute = part.absolute_time
                elif self.absolute != part.absolute_time:
                    raise InputError(
                        "some files have wall-clock timestamps and others relative times"
                    )
                frame = part.frame
                if part.backwards_steps:
                    steps += part.backwards_steps
                    first_line = first_line or part.first_backwards_line
                    frame = frame.sort("arrival_s", maintain_order=True)
                self._add(frame)
        if steps:
            ctx.warnings.append(
                f"{path}: timestamps go backwards {steps} time(s) (first at line "
                f"{first_line}); requests were sorted by arrival"
            )

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.thread_time()  # CPU time of this thread: the other threads' work and
        try:  # a busy machine's waits do not count
            yield
        finally:
            self.phase_s[phase] = self.phase_s.get(phase, 0.0) + time.thread_time() - t0

    def _add(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        first = float(frame["arrival_s"][0])
        if first < self.last_raw:
            raise _WholeRead
        if self.body is None:
            if self.group_by is not None and self.group_by not in frame.columns:
                raise _WholeRead  # the whole reader says which columns it could group by
            self.t0 = first
            self.start_epoch_s = (
                datetime.fromtimestamp(first, tz=UTC).timestamp() if self.absolute else None
            )
            self.body = _BodyFold(self.seed, self.start_epoch_s, self.expected_gaps, self.prefix)
            self.schema = frame.head(0)
        raw = frame["arrival_s"].to_numpy()
        self.last_raw = float(raw[-1])
        t = raw - self.t0
        self.body.add(t, frame, self.timed)
        if self.group_by is not None:
            self._add_groups(t, frame, self.group_by)
        self.rows += frame.height
        self.chunks += 1

    def _add_groups(self, t: np.ndarray, frame: pl.DataFrame, column: str) -> None:
        """Fold each --group-by value's rows of the chunk into its own body."""
        key = frame[column].cast(pl.String).fill_null("(none)")
        with_t = frame.with_columns(key.alias(_GROUP), pl.Series(_T, t))
        for (name,), part in with_t.group_by(_GROUP, maintain_order=True):
            fold = self.groups.get(str(name))
            if fold is None:
                if len(self.groups) >= GROUP_FOLDS:
                    raise _WholeRead
                fold = _BodyFold(self.seed, self.start_epoch_s, None, self.prefix)
                self.groups[str(name)] = fold
            fold.add(part[_T].to_numpy(), part, self.timed)

    def profile(
        self,
        files: list[LogFile],
        kind: str,
        ctx: ReaderContext,
        digest: str,
        cache_tokens: list[int] | None,
        chunk_rows: int,
        now: datetime | None,
    ) -> Profile:
        if self.body is None or self.schema is None:
            raise no_usable_rows(files, ctx.skips)
        body, estimated, bounds = self.body.finish(self.schema, kind, ctx, cache_tokens)
        warnings = list(ctx.warnings)
        groups: dict[str, ProfileBody] = {}
        if self.group_by is not None:
            # The largest groups first, ties by name: the in-memory profiler's order.
            ranked = sorted(self.groups.items(), key=lambda g: (-g[1].rows, g[0]))
            if len(ranked) > MAX_GROUPS:
                warnings.append(
                    f"--group-by {self.group_by}: {len(ranked)} groups; profiled the "
                    f"{MAX_GROUPS} largest"
                )
            for name, fold in ranked[:MAX_GROUPS]:
                groups[name], notes, more = fold.finish(self.schema, kind, ctx, cache_tokens)
                estimated.update({f"groups.{name}.{k}": v for k, v in notes.items()})
                bounds.update({f"groups.{name}.{k}": v for k, v in more.items()})
        result = ReadResult(
            frame=self.schema,
            format=kind,
            files=[str(p) for p in files],
            rows_skipped=ctx.skips.total,
            skip_reasons=dict(ctx.skips.reasons),
            skip_examples=list(ctx.skips.examples),
            tokens_estimated=ctx.tokens_estimated,
            tokenizer=ctx.tokenizer.name if ctx.tokens_estimated or ctx.tokenizer_used else None,
            warnings=ctx.warnings,
            first_timestamp=datetime.fromtimestamp(self.t0, tz=UTC) if self.absolute else None,
            block_tokens=ctx.block_tokens,
            digest=digest,
        )
        chunked = Chunked(
            chunks=self.chunks, chunk_rows=chunk_rows, estimated=estimated, bounds=bounds
        )
        return wrap_profile(result, body, groups, self.group_by, warnings, self.rows, now, chunked)


def _session_hashed(parts: Iterator[FileFrame]) -> Iterator[FileFrame]:
    """`parts` with their session ids hashed as the table chunks' are (on the reading thread)."""
    for part in parts:
        frame = with_session_hashes(part.frame.lazy()).collect()
        yield FileFrame(frame, part.absolute_time, part.backwards_steps, part.first_backwards_line)


_GROUP, _T = "__group", "__t"  # columns added to a chunk to split it by group
