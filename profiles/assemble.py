"""The profile builder's toolbox: a table already read into a Profile (`profile_from_result`,
`body_from_frame`, `wrap_profile`), prefix groups and hashes (`profiles.build` is the entry
point; the streamed path uses the same toolbox)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from contracts import __version__
from contracts.errors import InputError
from profiles.arrivals import arrival_stats
from profiles.lengths import length_stats_all
from profiles.model import Chunked, Lengths, Prefix, Profile, ProfileBody, Source
from profiles.observed import observed_from_frame
from profiles.prefix import prefix_stats
from profiles.readers import ReadResult
from profiles.sessions import session_stats

MAX_GROUPS = 50


GROUPABLE = ("model", "tenant", "session_id")


def body_from_frame(
    frame: pl.DataFrame,
    *,
    start_epoch_s: float | None,
    block_tokens: int,
    cache_tokens: list[int] | None,
    seed: int,
    hashes_from: str | None = None,
) -> ProfileBody:
    """Statistics of one canonical frame (sorted by arrival); InputError if it has no rows.

    Arrivals, sessions and prefix reuse run on worker threads next to the length statistics:
    numpy and polars release the GIL in their heavy loops, so a 2-core machine overlaps them.
    """
    if frame.height == 0:
        raise InputError("no usable rows to profile")
    with ThreadPoolExecutor(max_workers=3) as pool:
        arrivals_job = pool.submit(arrival_stats, frame["arrival_s"].to_numpy(), start_epoch_s)
        sessions_job = pool.submit(session_stats, frame)
        prefix_job = pool.submit(prefix_of, frame, block_tokens, cache_tokens, hashes_from)
        ok_share, lengths = _lengths(frame, seed)
        return ProfileBody(
            arrivals=arrivals_job.result(),
            lengths=lengths,
            prefix=prefix_job.result(),
            sessions=sessions_job.result(),
            ok_share=ok_share,
            requests=frame.height,
            observed=observed_from_frame(frame),
        )


def _lengths(frame: pl.DataFrame, seed: int) -> tuple[float | None, Lengths]:
    """Share of ok requests, and length statistics of the ok ones."""
    ok_share = None
    lengths_frame = frame
    if "ok" in frame.columns:
        ok_mask = frame["ok"].fill_null(True)
        ok_share = float(ok_mask.cast(pl.Float64).mean() or 0.0)  # type: ignore[arg-type]
        lengths_frame = frame.filter(ok_mask)
        if lengths_frame.height == 0:
            lengths_frame = frame  # every request failed: describe what was asked for
    inputs = lengths_frame["input_tokens"].to_numpy()
    outputs = lengths_frame["output_tokens"].to_numpy()
    lengths = length_stats_all(inputs, outputs, seed).model_copy(
        update={"requests": lengths_frame.height}
    )
    return ok_share, lengths


def hashed_arrays(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows with block hashes as profiles.prefix takes them: every hash back to back
    (uint64), blocks per request and the prompt tokens each request's hashes cover."""
    hashed = frame.select("block_hashes", "hash_tokens").filter(
        pl.col("block_hashes").is_not_null()
    )
    flat = (
        hashed["block_hashes"].explode(empty_as_null=False).to_numpy().astype(np.uint64, copy=False)
    )
    lengths = hashed["block_hashes"].list.len().to_numpy().astype(np.int64)
    hash_tokens = hashed["hash_tokens"].fill_null(0).to_numpy().astype(np.int64)
    return flat, lengths, hash_tokens


def prefix_of(
    frame: pl.DataFrame, block_tokens: int, cache_tokens: list[int] | None, hashes_from: str | None
) -> Prefix:
    """Prefix-reuse statistics of a frame (unavailable when it has no block hashes)."""
    cached = inputs = None
    if "cached_tokens" in frame.columns:
        cached = frame["cached_tokens"].fill_null(-1).to_numpy()
        inputs = frame["input_tokens"].to_numpy()
    if "block_hashes" not in frame.columns:
        p = prefix_stats(
            np.zeros(0, dtype=np.uint64),
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            block_tokens,
            None,
            cached,
            inputs,
        )
        return p.model_copy(update={"available": False})
    flat, lengths, hash_tokens = hashed_arrays(frame)
    p = prefix_stats(flat, lengths, hash_tokens, block_tokens, cache_tokens, cached, inputs)
    return p.model_copy(
        update={
            "hashes_from": hashes_from,
            "requests": lengths.size,
            "hashed_tokens": int(hash_tokens.sum()),
        }
    )


def profile_from_result(
    result: ReadResult,
    *,
    group_by: str | None = None,
    cache_tokens: list[int] | None = None,
    seed: int = 0,
    now: datetime | None = None,
) -> Profile:
    """The Profile of a ReadResult, with per-group bodies when `group_by` names a column."""
    frame = result.frame
    start = result.first_timestamp.timestamp() if result.first_timestamp else None
    hashes_from = None
    if result.has_hashes:
        # Only OpenAI-style logs carry prompt text; other sources bring their own block ids.
        hashes_from = "prompt text" if result.format == "openai-jsonl" else "hash_ids"
    common = {
        "start_epoch_s": start,
        "block_tokens": result.block_tokens,
        "cache_tokens": cache_tokens,
        "seed": seed,
        "hashes_from": hashes_from,
    }
    body = body_from_frame(frame, **common)  # type: ignore[arg-type]
    warnings = list(result.warnings)
    groups: dict[str, ProfileBody] = {}
    if group_by is not None:
        if group_by not in frame.columns:
            have = [c for c in frame.columns if c in GROUPABLE or c not in _CANONICAL_NUMERIC]
            raise InputError(
                f"--group-by {group_by!r}: this log has no such column; groupable columns "
                f"here: {', '.join(have) or 'none'}"
            )
        key = pl.col(group_by).cast(pl.String).fill_null("(none)")
        sizes = (
            frame.group_by(key.alias("__g")).len().sort(["len", "__g"], descending=[True, False])
        )
        if sizes.height > MAX_GROUPS:
            warnings.append(
                f"--group-by {group_by}: {sizes.height} groups; profiled the {MAX_GROUPS} largest"
            )
        for name in sizes["__g"].head(MAX_GROUPS).to_list():
            sub = frame.filter(key == name)
            groups[str(name)] = body_from_frame(sub, **common)  # type: ignore[arg-type]
    return wrap_profile(result, body, groups, group_by, warnings, frame.height, now)


def wrap_profile(
    result: ReadResult,
    body: ProfileBody,
    groups: dict[str, ProfileBody],
    group_by: str | None,
    warnings: list[str],
    rows: int,
    now: datetime | None = None,
    chunked: Chunked | None = None,
) -> Profile:
    """The Profile of statistics computed from `result`'s logs (`rows` requests kept)."""
    source = Source(
        files=result.files,
        format=result.format,
        rows=rows,
        rows_skipped=result.rows_skipped,
        skip_reasons=result.skip_reasons,
        skip_examples=result.skip_examples,
        tokens_estimated=result.tokens_estimated,
        tokenizer=result.tokenizer,
        warnings=warnings,
        first_timestamp=result.first_timestamp.isoformat() if result.first_timestamp else None,
        digest=result.digest,
        read_in_chunks=chunked,
    )
    return Profile(
        **body.model_dump(),
        name=Path(result.files[0]).name.split(".")[0],
        created_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        capplan_version=__version__,
        source=source,
        group_by=group_by,
        groups=groups,
    )


_CANONICAL_NUMERIC = (
    "arrival_s",
    "input_tokens",
    "output_tokens",
    "ok",
    "block_hashes",
    "hash_tokens",
    "cached_tokens",
)
