"""A log profiled in chunks (bounded memory) equals the same log profiled in memory: every
statistic but the two that `source.read_in_chunks.estimated` names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from contracts.errors import InputError
from profiles.build import build_profile
from profiles.fold import RANK_SAMPLE_PAIRS
from profiles.model import Profile
from testkit.logs import build_openai_log

SKIP_KEYS = {"created_at", "read_in_chunks", "sampler"}


def _same(a: Any, b: Any, path: str = "") -> None:
    """Equal, floats to rounding (the folds sum in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            if k not in SKIP_KEYS:
                _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), path
    else:
        assert a == b, path


def _log(path: Path, rows: int, days: float, seed: int = 3) -> pl.DataFrame:
    """A log over `days` with a daily cycle, sessions (some missing), failures and a few bad
    rows; written as Parquet in row groups smaller than the chunks, CSV or JSON lines."""
    rng = np.random.default_rng(seed)
    span = days * 86400
    u = np.sort(rng.random(rows))
    prompt = rng.lognormal(6.0, 1.0, rows)
    t = 1_700_000_000.0 + span * (u + 0.08 * np.sin(2 * np.pi * u * days) / (2 * np.pi * days))
    frame = pl.DataFrame(
        {
            "ts": np.sort(t),
            "prompt": prompt.astype(np.int64),
            "completion": (rng.lognormal(4.5, 0.9, rows) * (prompt / 400) ** 0.3).astype(np.int64),
            "conv": pl.Series(rng.integers(0, rows // 4, rows)).cast(pl.String),
            "ok": rng.random(rows) > 0.03,
        }
    ).with_columns(
        pl.when(pl.int_range(pl.len()) % 997 == 5)
        .then(None)
        .otherwise(pl.col("conv"))
        .alias("conv"),
        pl.when(pl.int_range(pl.len()) % 4999 == 7)
        .then(-1)
        .otherwise(pl.col("prompt"))
        .alias("prompt"),
    )
    if path.suffix == ".csv":
        frame.write_csv(path)
    elif path.suffix == ".jsonl":
        frame.write_ndjson(path)
    else:
        frame.write_parquet(path, row_group_size=7_000)
    return frame


COLUMNS = "arrival=ts,input=prompt,output=completion,session=conv,ok=ok"


def _both(path: Path, chunk_rows: int) -> tuple[Profile, Profile]:
    # A JSON object with a "prompt" key would pass for an OpenAI-style request log.
    fmt = "table" if path.suffix == ".jsonl" else "auto"
    whole = build_profile([str(path)], fmt=fmt, columns=COLUMNS)
    chunked = build_profile([str(path)], fmt=fmt, columns=COLUMNS, chunk_rows=chunk_rows)
    assert whole.source.read_in_chunks is None
    assert chunked.source.read_in_chunks is not None
    return whole, chunked


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_chunked_profile_equals_the_in_memory_one(tmp_path: Path, suffix: str) -> None:
    log = tmp_path / f"log{suffix}"
    _log(log, 120_000, days=8.3)
    whole, chunked = _both(log, chunk_rows=25_000)
    info = chunked.source.read_in_chunks
    assert info is not None and info.chunks >= 5
    # 120 k pairs fit the rank sample: the correlation is the whole log's, not an estimate.
    assert RANK_SAMPLE_PAIRS > 120_000 and "lengths.io_rank_correlation" not in info.estimated
    assert set(info.estimated) == {"lengths.sampler"}
    # The multi-day shapes, the skipped rows and the sampled sessions are all there to compare.
    assert whole.arrivals.weekday and whole.arrivals.clock_hours and whole.sessions.available
    assert whole.source.rows_skipped == chunked.source.rows_skipped > 0
    assert whole.sessions.sample_share == 1.0
    _same(chunked.model_dump(), whole.model_dump())
    pairs = chunked.lengths.sampler.pairs
    assert len(pairs) == 2000 and len(set(pairs)) > 1500


def test_chunked_sessions_sample_and_gamma_match_when_thinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the session-sample and MLE-thinning thresholds (lowered here) the chunked path
    keeps the same hash sample of sessions and the same thinned gaps."""
    import profiles.arrivals as arrivals
    import profiles.fold as fold
    import profiles.sessions as sessions

    monkeypatch.setattr(sessions, "SAMPLE_ABOVE_ROWS", 9_000)
    monkeypatch.setattr(arrivals, "MLE_MAX_GAPS", 7_000)
    monkeypatch.setattr(fold, "MLE_MAX_GAPS", 7_000)
    monkeypatch.setattr(fold, "RANK_SAMPLE_PAIRS", 20_000)
    log = tmp_path / "log.parquet"
    _log(log, 60_000, days=1.2)
    whole, chunked = _both(log, chunk_rows=11_000)
    assert whole.sessions.sample_share < 1 / 4
    info = chunked.source.read_in_chunks
    assert info is not None
    assert set(info.estimated) == {"lengths.sampler", "lengths.io_rank_correlation"}
    rho_whole, rho_chunked = whole.lengths.io_rank_correlation, chunked.lengths.io_rank_correlation
    assert rho_whole is not None and rho_chunked is not None
    assert abs(rho_chunked - rho_whole) < 4 / 20_000**0.5  # four standard errors
    chunked.lengths.io_rank_correlation = rho_whole
    _same(chunked.model_dump(), whole.model_dump())


def test_times_going_back_across_chunks_fall_back_to_a_whole_read(tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    frame = _log(log, 30_000, days=0.5)
    frame.reverse().write_parquet(log)
    p = build_profile([str(log)], columns=COLUMNS, chunk_rows=10_000)
    assert p.source.read_in_chunks is None  # read whole: the log had to be sorted
    assert any("go backwards" in w for w in p.source.warnings)


def test_chunked_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("ts,prompt,completion\nx,1,2\ny,3,4\n")
    cols = "arrival=ts,input=prompt,output=completion"
    with pytest.raises(InputError, match="no usable rows"):
        build_profile([str(log)], columns=cols, chunk_rows=1)
    with pytest.raises(InputError, match="chunk-rows"):
        build_profile([str(log)], chunk_rows=0)
    log.write_text("ts,prompt,completion\n1,1,2\n2,3,4\n")
    with pytest.raises(InputError, match="--group-by 'model': this log has no such column"):
        build_profile([str(log)], columns=cols, chunk_rows=1, group_by="model")


def test_cli_chunk_rows(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from capplan.cli import app
    from profiles.model import load_profile

    log = tmp_path / "log.parquet"
    _log(log, 5_000, days=0.2)
    out = tmp_path / "p.json"
    args = ["profile", str(log), "--columns", COLUMNS, "-o", str(out), "-q"]
    result = CliRunner().invoke(app, [*args, "--chunk-rows", "1000"])
    assert result.exit_code == 0, result.output
    info = load_profile(out).source.read_in_chunks
    assert info is not None and info.chunks == 5 and info.chunk_rows == 1000
    result = CliRunner().invoke(app, [*args, "--chunk-rows", "0"])
    assert result.exit_code == 2 and "--chunk-rows 0: expected a whole number >= 1" in result.output


def test_sorted_bin_counts_by_search_and_by_bincount_agree() -> None:
    from profiles.arrivals import sorted_bin_counts

    rng = np.random.default_rng(1)
    for scale, offset in ((100.0, 0.0), (1e6, 0.0), (1e5, -1_700_000_000.25)):
        t = np.sort(rng.random(2_000) * scale)  # dense bins, sparse bins, epoch minutes
        width = 60.0 if offset else 1.0
        k0, counts = sorted_bin_counts(t, width, offset)
        want = np.bincount(np.floor((t - offset) / width).astype(np.int64) - k0)
        assert counts.sum() == t.size and counts.tolist() == want.tolist()
        # chunks binned apart add up to the whole
        parts = [sorted_bin_counts(c, width, offset) for c in np.array_split(t, 7)]
        total = np.zeros(counts.size, dtype=np.int64)
        for k, c in parts:
            total[k - k0 : k - k0 + c.size] += c
        assert total.tolist() == counts.tolist()


def test_a_csv_polars_cannot_stream_is_read_whole_line_by_line(tmp_path: Path) -> None:
    rows = ["ts,prompt,completion"] + [
        f"{1_700_000_000 + i},{100 + i % 50},{10 + i % 7}" for i in range(3000)
    ]
    rows[1500] = '1700001499,"12,5'  # an unclosed quote: polars stops there
    log = tmp_path / "broken.csv"
    log.write_text("\n".join(rows) + "\n")
    p = build_profile(
        [str(log)], columns="arrival=ts,input=prompt,output=completion", chunk_rows=500
    )
    assert p.source.read_in_chunks is None
    assert p.source.rows == 2999 and p.source.skip_examples == [
        f"{log}:1501: malformed CSV line: unexpected end of data"
    ]


def _mooncake(path: Path, rows: int, seed: int = 5) -> None:
    """A Mooncake trace (ms timestamps, 512-token blocks from a few shared prefixes) with a
    malformed line, a bad field and a timestamp far from the rest."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(40.0, rows)).astype(np.int64)
    lines = []
    for i in range(rows):
        shared = [int(x) for x in range(1000 * (i % 7), 1000 * (i % 7) + rng.integers(1, 6))]
        own = [int(x) for x in rng.integers(10**6, 10**9, rng.integers(0, 4))]
        ids = shared + own
        record = {
            "timestamp": int(t[i]),
            "input_length": 512 * len(ids) - int(rng.integers(0, 512)),
            "output_length": int(rng.integers(1, 400)),
            "hash_ids": ids,
        }
        lines.append(json.dumps(record))
    lines[100] = '{"timestamp": 5, "input_length": '  # malformed JSON
    lines[2000] = json.dumps({"timestamp": 9, "input_length": -3, "output_length": 1})
    lines[3000] = json.dumps({"timestamp": 10**14, "input_length": 3, "output_length": 1})
    path.write_text("\n".join(lines) + "\n")


def test_chunked_mooncake_profile_equals_the_in_memory_one(tmp_path: Path) -> None:
    log = tmp_path / "trace.jsonl"
    _mooncake(log, 6000)
    whole = build_profile([str(log)])
    chunked = build_profile([str(log)], chunk_rows=1000)
    info = chunked.source.read_in_chunks
    assert whole.source.format == "mooncake" and info is not None and info.chunks == 6
    assert whole.prefix.available and whole.prefix.top_prefixes
    assert whole.source.rows_skipped == 3 and chunked.source.skip_examples
    _same(chunked.model_dump(), whole.model_dump())


def test_chunked_mooncake_published_trace(shared_data: Path) -> None:
    log = shared_data / "mooncake_synthetic_trace.jsonl"
    whole = build_profile([str(log)])
    chunked = build_profile([str(log)], chunk_rows=1000)
    assert chunked.source.read_in_chunks is not None
    _same(chunked.model_dump(), whole.model_dump())


def test_a_jsonl_column_that_appears_late_makes_a_whole_read(tmp_path: Path) -> None:
    """The mapping is guessed from the first batch of lines; a later line bringing a column
    the guess would have taken (here a session id) sends the log to the whole reader."""
    rows = [{"ts": 1_700_000_000 + i, "input": 100 + i % 9, "output": 20} for i in range(3000)]
    for i, row in enumerate(rows[1500:]):
        row["session_id"] = f"s{i % 40}"
    log = tmp_path / "late.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = build_profile([str(log)], chunk_rows=1000)
    assert p.source.read_in_chunks is None and p.sessions.available
    # a late column the mapping does not take changes nothing: read in chunks
    for row in rows[1500:]:
        row["note"] = row.pop("session_id")
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = build_profile([str(log)], chunk_rows=1000)
    assert p.source.read_in_chunks is not None and p.source.rows == 3000


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_chunked_group_by_equals_the_in_memory_one(tmp_path: Path, suffix: str) -> None:
    """Each --group-by value's body folds apart: a table column (three tenants with other
    traffic each, one of them null in places) and a canonical one (model)."""
    log = tmp_path / f"log{suffix}"
    frame = _log(tmp_path / "base.parquet", 40_000, days=1.5)
    rng = np.random.default_rng(8)
    tenant = rng.choice(["acme", "globex", "initech"], frame.height, p=[0.6, 0.3, 0.1])
    frame = frame.with_columns(
        pl.Series("team", tenant).scatter(np.arange(0, frame.height, 501), None),
        pl.Series("model", rng.choice(["small", "large"], frame.height)),
    )
    frame.write_csv(log) if suffix == ".csv" else frame.write_parquet(log, row_group_size=7_000)
    for group_by, columns in (("team", COLUMNS), ("model", COLUMNS + ",model=model")):
        whole = build_profile([str(log)], columns=columns, group_by=group_by)
        chunked = build_profile([str(log)], columns=columns, group_by=group_by, chunk_rows=9_000)
        assert chunked.source.read_in_chunks is not None and whole.source.read_in_chunks is None
        assert len(whole.groups) == (4 if group_by == "team" else 2)
        assert list(chunked.groups) == list(whole.groups)  # the same order: largest first
        _same(chunked.model_dump(), whole.model_dump())


def test_group_by_with_many_values_reads_the_log_whole(tmp_path: Path) -> None:
    import profiles.stream as stream

    log = tmp_path / "log.parquet"
    frame = _log(tmp_path / "base.parquet", 6_000, days=0.2)
    frame.with_columns((pl.int_range(pl.len()) % 300).cast(pl.String).alias("team")).write_parquet(
        log
    )
    assert stream.GROUP_FOLDS < 300
    p = build_profile([str(log)], columns=COLUMNS, group_by="team", chunk_rows=1_000)
    assert p.source.read_in_chunks is None and len(p.groups) == 50
    assert any("300 groups; profiled the 50 largest" in w for w in p.source.warnings)


def _openai(folder: Path, n: int) -> Path:
    """An OpenAI-style log (build_openai_log: three shared system prompts, two models, seven
    users as sessions) with sessions missing in places, failures by status code, server-
    reported cached tokens on most rows, a row without usage (counted from its text) and
    bad lines: malformed JSON, a negative count, a relative time among epoch times and a
    time far from the rest."""
    path, _, _ = build_openai_log(folder, n=n, seed=4)
    objs = [json.loads(line) for line in path.read_text().splitlines()]
    for i, obj in enumerate(objs):
        usage = obj["response"]["usage"]
        if i % 5 == 0:
            del usage["prompt_tokens_details"]
        else:
            usage["prompt_tokens_details"]["cached_tokens"] = (i * 37) % usage["prompt_tokens"]
        if i % 11 == 0:
            del obj["request"]["user"]
        if i % 13 == 0:
            obj["status_code"] = 500 if i % 2 else 429
    del objs[77]["response"]["usage"]
    objs[900]["response"]["usage"]["prompt_tokens"] = -3
    objs[1300]["timestamp"] = 5
    objs[1700]["timestamp"] = 1_700_000_000 + 10**8
    lines = [json.dumps(o) for o in objs]
    lines[400] = '{"timestamp": 1700000200, "request": {'
    path.write_text("\n".join(lines) + "\n")
    return path


def test_chunked_openai_log_equals_the_in_memory_one(tmp_path: Path) -> None:
    log = _openai(tmp_path, 2400)
    whole = build_profile([str(log)], group_by="model")
    chunked = build_profile([str(log)], group_by="model", chunk_rows=500)
    info = chunked.source.read_in_chunks
    assert whole.source.read_in_chunks is None  # under STREAM_ABOVE_BYTES: read whole
    assert chunked.source.format == "openai-jsonl" and info is not None and info.chunks == 5
    assert set(info.estimated) == {"lengths.sampler"}  # each model's requests fit its sampler
    # Everything to compare is there: skips of each kind, failures, sessions, prefix reuse
    # from the prompt text, the server's cached tokens, estimated counts, two models.
    assert whole.source.rows_skipped == 4 and len(whole.source.skip_reasons) == 3
    assert whole.source.tokens_estimated and whole.source.tokenizer
    assert whole.ok_share is not None and 0.9 < whole.ok_share < 0.95
    assert whole.sessions.available and whole.prefix.top_prefixes
    assert whole.prefix.hashes_from == "prompt text" and whole.prefix.ideal_hit_ratio
    assert whole.prefix.reported_cached_token_ratio
    assert list(whole.groups) == ["m1", "m2"] and list(chunked.groups) == ["m1", "m2"]
    _same(chunked.model_dump(), whole.model_dump())


def test_chunked_openai_log_with_values_that_start_late(tmp_path: Path) -> None:
    """Sessions and cached tokens only after the first chunk: the later chunks' values are
    kept, as the whole reader keeps them. A --group-by column the first chunk lacks sends
    the log to the whole reader."""
    path, _, _ = build_openai_log(tmp_path, n=900, seed=6)
    objs = [json.loads(line) for line in path.read_text().splitlines()]
    for obj in objs[:400]:
        del obj["request"]["user"], obj["request"]["model"]
        del obj["response"]["usage"]["prompt_tokens_details"]
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    whole = build_profile([str(path)])
    chunked = build_profile([str(path)], chunk_rows=300)
    assert chunked.source.read_in_chunks is not None
    assert whole.sessions.available and whole.prefix.reported_cached_token_ratio == 0.0
    _same(chunked.model_dump(), whole.model_dump())
    grouped = build_profile([str(path)], chunk_rows=300, group_by="model")
    assert grouped.source.read_in_chunks is None and list(grouped.groups) == ["(none)", "m1", "m2"]


def test_a_large_openai_log_is_chunked_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import profiles.stream as stream

    path, _, _ = build_openai_log(tmp_path, n=300, seed=2)
    assert build_profile([str(path)]).source.read_in_chunks is None
    monkeypatch.setattr(stream, "STREAM_ABOVE_BYTES", path.stat().st_size - 1)
    info = build_profile([str(path)]).source.read_in_chunks
    assert info is not None and info.chunks == 1 and info.chunk_rows == stream.TEXT_CHUNK_ROWS
