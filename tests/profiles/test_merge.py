"""Merged partial profiles equal the whole-log profile: exactly for exact statistics, within
the written bound for the rest (a log split by time, profiled in parts, then merged)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.build import build_profile
from profiles.merge import merge_profiles
from profiles.model import Profile, load_profile, save_profile
from testkit.logs import build_openai_log

runner = CliRunner()


def _at(profile: Profile, key: str) -> Any:
    """The value at a merge key path such as 'lengths.input.p50' or 'prefix.lru_hit_ratio[4096]'."""
    obj: Any = profile
    for part in key.split("."):
        m = re.fullmatch(r"(\w+)\[(\d+)\]", part)
        if m:
            points = getattr(obj, m.group(1))
            return next(p.hit_ratio for p in points if p.cache_tokens == int(m.group(2)))
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def _same(a: Any, b: Any) -> None:
    if hasattr(a, "model_dump"):
        a, b = a.model_dump(), b.model_dump()
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, float):
        # Offsets come from first_timestamp, written to the microsecond.
        assert a == pytest.approx(b, rel=1e-6, abs=1e-9)
    else:
        assert a == b


def _check_against_whole(merged: Profile, whole: Profile) -> None:
    info = merged.merge
    assert info is not None
    for key in info.exact:
        _same(_at(merged, key), _at(whole, key))
    for key, bound in info.bounds.items():
        value = _at(whole, key)
        assert bound.low - 1e-9 <= value <= bound.high + 1e-9, (key, value, bound)


def _split_csv(src: Path, folder: Path, cut: str) -> list[Path]:
    """Two CSV shards: rows before the timestamp `cut`, and from it on."""
    head, *rows = src.read_text().splitlines(keepends=True)
    parts = [[r for r in rows if r[:19] < cut], [r for r in rows if r[:19] >= cut]]
    paths = []
    for i, part in enumerate(parts):
        assert part
        path = folder / f"shard{i}.csv"
        path.write_text(head + "".join(part))
        paths.append(path)
    return paths


def test_azure_conv_split_by_time_merges_to_the_whole(shared_data: Path, tmp_path: Path) -> None:
    log = shared_data / "AzureLLMInferenceTrace_conv.csv"
    whole = build_profile([str(log)])
    shards = _split_csv(log, tmp_path, "2023-11-16 18:45:00")
    # Through JSON on disk, as a user would merge day files.
    paths = []
    for i, shard in enumerate(shards):
        save_profile(build_profile([str(shard)]), tmp_path / f"day-{i}.json")
        paths.append(str(tmp_path / f"day-{i}.json"))
    res = runner.invoke(
        app, ["profile", "--merge", *reversed(paths), "-o", str(tmp_path / "q.json"), "-q"]
    )
    assert res.exit_code == 0, res.output
    merged = load_profile(tmp_path / "q.json")
    assert merged.merge is not None and merged.merge.shards == paths  # put in time order
    assert "first_timestamp" in merged.merge.timeline
    _check_against_whole(merged, whole)
    for key in (
        "arrivals.interarrival_cv",
        "arrivals.mean_rate_rps",
        "lengths.input.histogram",
        "lengths.output.mean",
        "lengths.classes",
        "arrivals.gamma_shape.mle",
        "source.rows",
    ):
        assert key in merged.merge.exact
    for side in ("input", "output"):
        for q in ("p50", "p90", "p95", "p99"):
            assert f"lengths.{side}.{q}" in merged.merge.bounds
            exact = getattr(getattr(whole.lengths, side), q)
            assert getattr(getattr(merged.lengths, side), q) == pytest.approx(exact, rel=0.01)
    assert merged.source.rows == whole.source.rows == 19366
    assert merged.source.first_timestamp == whole.source.first_timestamp
    assert len(merged.lengths.sampler.pairs) == 2000
    assert merged.lengths.io_rank_correlation == pytest.approx(
        whole.lengths.io_rank_correlation, abs=0.1
    )


def _window_rates(csv: Path, window_s: int) -> np.ndarray:
    """Requests per second in each full `window_s` window of the log's own grid (from its first
    request), read straight from its timestamps with numpy, not with capplan's profiler."""
    stamps = [line.split(",")[0] for line in csv.read_text().splitlines()[1:]]
    t = np.array(stamps, dtype="datetime64[us]").astype(np.int64) / 1e6
    t = np.sort(t) - t.min()
    full = int(t[-1] // window_s)
    return np.bincount((t[t < full * window_s] // window_s).astype(np.int64), minlength=full) / (
        window_s
    )


def test_merged_window_rate_percentiles_are_those_of_the_pooled_windows(
    shared_data: Path, tmp_path: Path
) -> None:
    """A quiet first shard and a busy second one: the merged 60 s window-rate percentiles are
    those of both shards' windows pooled (numpy over the raw timestamps), so p100 is the busy
    shard's peak and p99, the planning peak, is not pulled down by the quiet shard (averaging
    the shards' percentiles gave p100 7.84 against a peak of 8.42, and p99 7.77)."""
    log = shared_data / "AzureLLMInferenceTrace_conv.csv"
    shards = _split_csv(log, tmp_path, "2023-11-16 18:45:00")
    parts = [build_profile([str(s)]) for s in shards]
    merged = merge_profiles(parts, [str(s) for s in shards])
    truth = np.percentile(np.concatenate([_window_rates(s, 60) for s in shards]), np.arange(101))
    got = merged.arrivals.window_rate_percentiles["60s"]
    assert got[100] == pytest.approx(truth[100]) == merged.arrivals.peak_rate_rps["60s"]
    for q in (50, 90, 95, 99):
        assert got[q] == pytest.approx(truth[q], rel=0.01), q
    # The busy shard's own p99 is a floor the merged p99 may not fall below by much.
    busy = max(p.arrivals.window_rate_percentiles["60s"][99] for p in parts)
    assert got[99] >= 0.99 * busy


def test_prefix_reuse_bounds_hold_for_a_split_text_log(tmp_path: Path) -> None:
    log, _, _ = build_openai_log(tmp_path, n=240, seed=4)
    lines = log.read_text().splitlines(keepends=True)
    whole = build_profile([str(log)], cache_tokens=[4096, 16384])
    shards = []
    for i, part in enumerate((lines[:100], lines[100:])):
        path = tmp_path / f"part{i}.jsonl"
        path.write_text("".join(part))
        shards.append(build_profile([str(path)], cache_tokens=[4096, 16384]))
    merged = merge_profiles(shards, ["a", "b"])
    _check_against_whole(merged, whole)
    info = merged.merge
    assert info is not None
    assert {"prefix.ideal_hit_ratio", "prefix.lru_hit_ratio[4096]"} <= info.bounds.keys()
    assert merged.prefix.hashed_tokens == whole.prefix.hashed_tokens
    # Reuse across the join makes the whole log's ratio higher than the shards' own.
    assert (whole.prefix.ideal_hit_ratio or 0.0) > info.bounds["prefix.ideal_hit_ratio"].low


def test_overlapping_or_preset_shards_fail_cleanly(shared_data: Path, tmp_path: Path) -> None:
    log = str(shared_data / "AzureLLMInferenceTrace_conv.csv")
    save_profile(build_profile([log]), tmp_path / "a.json")
    (tmp_path / "b.json").write_text((tmp_path / "a.json").read_text())
    res = runner.invoke(
        app, ["profile", "--merge", str(tmp_path / "*.json"), "-o", str(tmp_path / "q.json")]
    )
    assert res.exit_code == 2 and "must not overlap" in res.output, res.output
    res = runner.invoke(app, ["profile", "--preset", "chat", "-o", str(tmp_path / "c.json")])
    assert res.exit_code == 0
    res = runner.invoke(
        app, ["profile", "--merge", str(tmp_path / "c.json"), "-o", str(tmp_path / "q.json")]
    )
    assert res.exit_code == 2 and "preset" in res.output and "Traceback" not in res.output
    assert json.loads((tmp_path / "a.json").read_text())["lengths"]["input"]["sketch"]["counts"]
